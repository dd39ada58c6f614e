//! The function registry, kept in the shared log itself so that every node sees the
//! same versions in the same order.
//!
//! ```text
//!   system book REGISTRY_BOOK (a platform book: user clients cannot name it)
//!     untagged records     component chunks, CHUNK_BYTES each
//!     tag MANIFESTS        {"op":"deploy", name, sha256, size, chunks: [seqnum..], limits, config}
//!                          {"op":"config", name, set, unset}   settings (settings.rs)
//!                          {"op":"delete", name}
//!                          each with `by` (the token's ID) and its time: the audit listing
//! ```
//!
//! A deploy validates and compiles the component first (so a bad one is refused before
//! anything is written), appends its chunks, then its manifest. Versions are numbered
//! by the order of deploy manifests in the log (1, 2, ... per name, never reused), so
//! every node derives the same numbers. A node replays the manifests on start and
//! again whenever a name it does not know is asked for. A loaded version is shared by
//! `Arc`: a redeploy replaces the current version while invocations in flight finish
//! on the one they started with.
//!
//! `REGISTRY_BOOK` is `tally_durable::PLATFORM_BOOK`, and `MANIFESTS` one of its fixed
//! tags. A version is named for ever by its manifest's seqnum, which is what an Init record
//! carries: [`Registry::version`] loads any earlier version again (a bounded cache keeps
//! the last few) for re-executions of invocations that began on it. A current version that
//! cannot be loaded on this node is `function_unavailable` (transient), not
//! `function_not_found`. A client's position (`Tally-Position`) makes a lookup read the
//! manifests at least that far, so that a function deployed or redeployed through another
//! node is the one run.
//!
//! **Architecture Invariant:** manifests are read by nodes older than their writer. Unknown
//! fields and limits are ignored (`ManifestLimits` has defaults for all), unknown
//! operations are skipped (`Manifest::Unknown`): a new field needs a default, and a new
//! operation must not change the version numbering older nodes derive.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tally_durable::{Error as RuntimeError, Protocol, Result};
use tally_logsvc::{BookId, Context, LogClient, SeqNum, Tag};
use tokio::sync::Semaphore;

use crate::host::{Prepared, WasmHost};
use crate::limits::Limits;
use crate::outbound::{Destination, Outbound};
use crate::routes::Route;
use crate::settings::{Listing, SecretsKey, Setting, Settings, Stored, Values};

/// The registry's platform book (from the one allocator of platform books and tags).
pub const REGISTRY_BOOK: BookId = tally_durable::PLATFORM_BOOK;
const MANIFESTS: Tag = tally_durable::MANIFESTS;
/// Versions other than the current ones (re-executions of invocations that began on
/// them) kept loaded at once.
const OLD_VERSIONS_LOADED: usize = 32;
/// Syncs, spread over [`MISS_WAIT`], before a name is unknown.
const MISS_SYNCS: u32 = 4;
const MISS_WAIT: std::time::Duration = std::time::Duration::from_millis(200);
/// Component bytes per record (the engine's record limit is 1 MiB).
const CHUNK_BYTES: usize = 512 << 10;

/// A registry record. Readers ignore fields they do not know and skip operations they
/// do not know (`Unknown`), so a node reads what a newer node wrote: a new field must
/// have a default, and a new operation must not change what older nodes number.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Manifest {
    Deploy {
        name: String,
        sha256: String,
        size: u64,
        chunks: Vec<u64>,
        limits: ManifestLimits,
        /// Protocols of the state tables the function named at deploy.
        #[serde(default)]
        tables: BTreeMap<String, Protocol>,
        deployed_at_ms: u64,
        /// Where it may send requests (`outbound.rs`): origins, as deployed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outbound: Vec<String>,
        /// The routes of an HTTP function (`routes.rs`), as deployed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        routes: Vec<String>,
        /// Settings set with the deploy (secrets sealed).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        config: BTreeMap<String, Stored>,
        /// An HTTP function anyone may call, without a token.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        public: bool,
        /// The token that deployed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// A change of a function's settings, without a redeploy.
    Config {
        name: String,
        #[serde(default)]
        set: BTreeMap<String, Stored>,
        #[serde(default)]
        unset: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        #[serde(default)]
        at_ms: u64,
    },
    Delete {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        #[serde(default)]
        at_ms: u64,
    },
    /// An operation of a newer node.
    #[serde(other)]
    Unknown,
}

/// [`Limits`] as manifests carry them: unlike the configuration file, which refuses
/// keys it does not know, a manifest may carry limits a newer node added.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(default)]
struct ManifestLimits {
    memory_bytes: u64,
    timeout_ms: u64,
    request_bytes_max: u64,
    response_bytes_max: u64,
    concurrency_max: u32,
    retry_attempts: u32,
    retry_backoff_ms: u64,
    retry_backoff_max_ms: u64,
}

impl Default for ManifestLimits {
    fn default() -> Self {
        ManifestLimits::from(Limits::default())
    }
}

impl From<Limits> for ManifestLimits {
    fn from(l: Limits) -> Self {
        ManifestLimits {
            memory_bytes: l.memory_bytes,
            timeout_ms: l.timeout_ms,
            request_bytes_max: l.request_bytes_max,
            response_bytes_max: l.response_bytes_max,
            concurrency_max: l.concurrency_max,
            retry_attempts: l.retry_attempts,
            retry_backoff_ms: l.retry_backoff_ms,
            retry_backoff_max_ms: l.retry_backoff_max_ms,
        }
    }
}

impl From<ManifestLimits> for Limits {
    fn from(l: ManifestLimits) -> Self {
        Limits {
            memory_bytes: l.memory_bytes,
            timeout_ms: l.timeout_ms,
            request_bytes_max: l.request_bytes_max,
            response_bytes_max: l.response_bytes_max,
            concurrency_max: l.concurrency_max,
            retry_attempts: l.retry_attempts,
            retry_backoff_ms: l.retry_backoff_ms,
            retry_backoff_max_ms: l.retry_backoff_max_ms,
        }
    }
}

/// What a deploy sets besides the component.
#[derive(Clone, Debug, Default)]
pub struct DeploySpec {
    pub limits: Limits,
    /// Protocols of state tables the function names.
    pub tables: BTreeMap<String, Protocol>,
    /// Where it may send requests.
    pub outbound: Outbound,
    /// The routes of an HTTP function.
    pub routes: Vec<Route>,
    /// Settings to set (added to the function's current ones).
    pub settings: BTreeMap<String, Setting>,
    /// An HTTP function anyone may call, without a token.
    pub public: bool,
    /// Who deploys it (a token's ID), for the audit listing.
    pub by: Option<String>,
}

/// One change of the registry, as the audit listing shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    pub seqnum: u64,
    /// 0 for a change logged by a node that did not record the time.
    pub at_ms: u64,
    /// The token that made it (none for one made before tokens, or by the platform).
    pub by: Option<String>,
    /// `function.deploy`, `function.config` or `function.delete`.
    pub op: &'static str,
    pub function: String,
    /// The version a deploy made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// The settings a change set or unset (names only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<String>,
}

/// An allow-list as the API shows it: its destinations.
fn destinations<S: serde::Serializer>(outbound: &Arc<Outbound>, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(outbound.allowed.iter().map(ToString::to_string))
}

/// Routes as the API shows them.
fn routes<S: serde::Serializer>(routes: &Arc<Vec<Route>>, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(routes.iter().map(ToString::to_string))
}

/// One deployed version of a function, as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VersionInfo {
    pub version: u32,
    pub sha256: String,
    pub size_bytes: u64,
    pub limits: Limits,
    /// Protocols of the state tables named at deploy.
    pub tables: Arc<BTreeMap<String, Protocol>>,
    /// Where it may send requests.
    #[serde(serialize_with = "destinations")]
    pub outbound: Arc<Outbound>,
    /// The routes of an HTTP function.
    #[serde(serialize_with = "routes")]
    pub routes: Arc<Vec<Route>>,
    /// An HTTP function anyone may call, without a token.
    pub public: bool,
    pub deployed_at_ms: u64,
    /// The token that deployed it.
    pub deployed_by: Option<String>,
    /// Where the manifest is in the registry book.
    pub seqnum: u64,
    #[serde(skip)]
    chunks: Vec<u64>,
}

/// A function as the API shows it: its current version and its history.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionInfo {
    pub name: String,
    pub current: VersionInfo,
    pub versions: Vec<VersionInfo>,
}

/// A version ready to run.
pub struct Loaded {
    pub name: String,
    pub info: VersionInfo,
    pub pre: Prepared,
    /// Instances of this version that may run at once on this node.
    pub permits: Semaphore,
}

#[derive(Default)]
struct Entry {
    /// Every version ever deployed under the name, deleted ones included.
    versions: Vec<VersionInfo>,
    deleted: bool,
    loaded: Option<Arc<Loaded>>,
}

impl Entry {
    fn current(&self) -> Option<&VersionInfo> {
        if self.deleted {
            None
        } else {
            self.versions.last()
        }
    }
}

/// Where the replay of manifests stands.
struct Cursor {
    ctx: Context,
    next: SeqNum,
}

pub struct Registry {
    log: LogClient,
    host: Arc<WasmHost>,
    cursor: tokio::sync::Mutex<Cursor>,
    /// How far the last sync read: a copy of the cursor's context that a lookup checks
    /// without waiting for a sync in progress.
    synced: RwLock<Context>,
    functions: RwLock<BTreeMap<String, Entry>>,
    /// Components this node compiled for a deploy, so applying its own manifest does
    /// not read the chunks back.
    fresh: Mutex<HashMap<String, Prepared>>,
    /// Versions loaded by manifest seqnum, current ones and the last few old ones.
    by_seqnum: Mutex<LoadedVersions>,
    settings: Settings,
    /// Every change applied, in log order (the audit listing).
    changes: RwLock<Vec<Change>>,
}

/// Loaded versions by manifest seqnum, and the order they were loaded in (the oldest
/// are dropped past [`OLD_VERSIONS_LOADED`]).
#[derive(Default)]
struct LoadedVersions {
    by_seqnum: HashMap<u64, Arc<Loaded>>,
    order: std::collections::VecDeque<u64>,
}

/// Function names: 1 to 64 of `a-z 0-9 - _`, starting with a letter or digit.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name.as_bytes()[0].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(RuntimeError::InvalidArgument(format!(
            "invalid function name {name:?}: use 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit"
        )))
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Registry {
    /// A registry over the platform log client `log`; call [`Registry::sync`] to load.
    /// Secrets are sealed and opened with `secrets` (none: this node keeps no secrets).
    pub fn new(log: LogClient, host: Arc<WasmHost>, secrets: Option<SecretsKey>) -> Registry {
        Registry {
            log,
            host,
            cursor: tokio::sync::Mutex::new(Cursor { ctx: Context::new(), next: SeqNum::MIN }),
            synced: RwLock::new(Context::new()),
            functions: RwLock::new(BTreeMap::new()),
            fresh: Mutex::new(HashMap::new()),
            by_seqnum: Mutex::new(LoadedVersions::default()),
            settings: Settings::new(secrets),
            changes: RwLock::new(Vec::new()),
        }
    }

    /// Validates, compiles and stores a component as the next version of `name`.
    pub async fn deploy(&self, name: &str, bytes: Bytes, spec: DeploySpec) -> Result<VersionInfo> {
        let DeploySpec { limits, tables, outbound, routes, settings, public, by } = spec;
        check_name(name)?;
        let config = self.settings.seal(name, &settings, &[])?;
        if let Some((holder, route)) = self.claimed(name, &routes) {
            return Err(RuntimeError::Conflict(format!("the route {route} is {holder}'s")));
        }
        for table in tables.keys() {
            tally_durable::check_table(table).map_err(RuntimeError::InvalidArgument)?;
        }
        let sha256 = format!("{:x}", Sha256::digest(&bytes));
        let pre = self.host.prepare(&bytes, &sha256).await?;
        if (public || !routes.is_empty()) && !pre.is_http() {
            return Err(RuntimeError::InvalidArgument(
                "routes and public access are for HTTP functions (components that export wasi:http/incoming-handler)".into(),
            ));
        }
        self.fresh.lock().expect("not poisoned").insert(sha256.clone(), pre);
        let mut ctx = self.cursor.lock().await.ctx.clone();
        let mut chunks = Vec::new();
        for chunk in bytes.chunks(CHUNK_BYTES) {
            let s = self.log.append(&mut ctx, REGISTRY_BOOK, &[], bytes.slice_ref(chunk)).await?;
            chunks.push(s.0);
        }
        let manifest = Manifest::Deploy {
            name: name.to_string(),
            sha256,
            size: bytes.len() as u64,
            chunks,
            limits: limits.into(),
            tables,
            deployed_at_ms: now_ms(),
            outbound: outbound.allowed.iter().map(ToString::to_string).collect(),
            routes: routes.iter().map(ToString::to_string).collect(),
            config,
            public,
            by,
        };
        let at = self.append_manifest(&mut ctx, &manifest).await?;
        self.sync_with(&ctx).await?;
        let functions = self.functions.read().expect("not poisoned");
        let info = functions.get(name).and_then(|e| e.versions.iter().find(|v| v.seqnum == at.0));
        info.cloned().ok_or_else(|| RuntimeError::Internal(format!("the deploy of {name:?} at {at:?} was not applied")))
    }

    /// Deletes `name` (by token `by`); invocations in flight finish, new ones get
    /// not-found.
    pub async fn delete(&self, name: &str, by: Option<String>) -> Result<()> {
        if self.lookup(name).await.is_err() {
            return Err(RuntimeError::FunctionNotFound(name.to_string()));
        }
        let mut ctx = self.cursor.lock().await.ctx.clone();
        let manifest = Manifest::Delete { name: name.to_string(), by, at_ms: now_ms() };
        self.append_manifest(&mut ctx, &manifest).await?;
        self.sync_with(&ctx).await
    }

    /// Changes `name`'s settings: sets `set` (secrets sealed) and removes `unset`. The
    /// next invocation reads the new version; re-executions read what they read before.
    pub async fn configure(
        &self,
        name: &str,
        set: BTreeMap<String, Setting>,
        unset: Vec<String>,
        by: Option<String>,
    ) -> Result<Listing> {
        self.lookup(name).await?;
        let set = self.settings.seal(name, &set, &unset)?;
        let mut ctx = self.cursor.lock().await.ctx.clone();
        let manifest = Manifest::Config { name: name.to_string(), set, unset, by, at_ms: now_ms() };
        self.append_manifest(&mut ctx, &manifest).await?;
        self.sync_with(&ctx).await?;
        Ok(self.settings.list(name))
    }

    /// `name`'s current settings, secrets without their values.
    pub async fn settings(&self, name: &str) -> Result<Listing> {
        self.lookup(name).await?;
        Ok(self.settings.list(name))
    }

    /// The current version of `name`'s settings on this node (0: none).
    pub fn settings_version(&self, name: &str) -> u64 {
        self.settings.current(name)
    }

    /// Version `version` of `name`'s settings, reading the registry that far if this
    /// node has not yet.
    pub async fn settings_at(&self, name: &str, version: u64) -> Result<Arc<Values>> {
        if let Some(values) = self.settings.at(name, version) {
            return Ok(values);
        }
        self.sync().await?;
        self.settings.at(name, version).ok_or_else(|| {
            RuntimeError::Internal(format!("version {version} of the settings of {name:?} is not in the registry"))
        })
    }

    async fn append_manifest(&self, ctx: &mut Context, manifest: &Manifest) -> Result<SeqNum> {
        let body = serde_json::to_vec(manifest).map_err(|e| RuntimeError::Internal(e.to_string()))?;
        Ok(self.log.append(ctx, REGISTRY_BOOK, &[MANIFESTS], Bytes::from(body)).await?)
    }

    /// The current version of `name`, replaying the registry once if it is unknown here.
    /// A function whose current version could not be loaded on this node is
    /// unavailable here, not unknown.
    pub async fn lookup(&self, name: &str) -> Result<Arc<Loaded>> {
        self.lookup_at(name, &Context::new()).await
    }

    /// [`Registry::lookup`] as of at least `seen`, a client's position: a deploy the
    /// client saw (through any node) is found, and a version it saw replaced is not
    /// used.
    ///
    /// A name not known here is looked for a few times over [`MISS_WAIT`] before it is
    /// unknown: a deploy acknowledged through another node reaches this node's index a
    /// moment later (a client that must not wait at all sends the deploy's position).
    pub async fn lookup_at(&self, name: &str, seen: &Context) -> Result<Arc<Loaded>> {
        if !self.synced.read().expect("not poisoned").covers(seen) {
            self.sync_with(seen).await?;
        }
        if let Some(l) = self.loaded(name) {
            return Ok(l);
        }
        for attempt in 0..MISS_SYNCS {
            if attempt > 0 {
                tokio::time::sleep(MISS_WAIT / MISS_SYNCS).await;
            }
            self.sync().await?;
            if let Some(l) = self.loaded(name) {
                return Ok(l);
            }
        }
        let functions = self.functions.read().expect("not poisoned");
        match functions.get(name).and_then(Entry::current) {
            Some(v) => Err(RuntimeError::FunctionUnavailable(
                name.to_string(),
                format!("version {} could not be loaded on this node", v.version),
            )),
            None => Err(RuntimeError::FunctionNotFound(name.to_string())),
        }
    }

    /// The version of `name` whose manifest is at `seqnum`, current, replaced or deleted
    /// since: what a re-execution of an invocation that began on it runs. `None` if no
    /// such version was ever deployed.
    pub async fn version(&self, name: &str, seqnum: u64) -> Result<Option<Arc<Loaded>>> {
        if let Some(l) = self.by_seqnum.lock().expect("not poisoned").by_seqnum.get(&seqnum) {
            return Ok(Some(l.clone()));
        }
        if let Some(l) = self.loaded(name).filter(|l| l.info.seqnum == seqnum) {
            return Ok(Some(l));
        }
        let find = || {
            let functions = self.functions.read().expect("not poisoned");
            functions.get(name).and_then(|e| e.versions.iter().find(|v| v.seqnum == seqnum).cloned())
        };
        let info = match find() {
            Some(info) => info,
            None => {
                self.sync().await?;
                match find() {
                    Some(info) => info,
                    None => return Ok(None),
                }
            }
        };
        let mut ctx = self.cursor.lock().await.ctx.clone();
        let pre = self
            .load(&mut ctx, &info)
            .await
            .map_err(|e| RuntimeError::FunctionUnavailable(name.to_string(), format!("version {}: {e}", info.version)))?;
        let loaded =
            Arc::new(Loaded { name: name.to_string(), permits: Semaphore::new(info.limits.concurrency_max as usize), info, pre });
        let mut cache = self.by_seqnum.lock().expect("not poisoned");
        cache.by_seqnum.insert(seqnum, loaded.clone());
        cache.order.push_back(seqnum);
        while cache.order.len() > OLD_VERSIONS_LOADED {
            if let Some(old) = cache.order.pop_front() {
                cache.by_seqnum.remove(&old);
            }
        }
        Ok(Some(loaded))
    }

    fn loaded(&self, name: &str) -> Option<Arc<Loaded>> {
        let functions = self.functions.read().expect("not poisoned");
        functions.get(name).and_then(|e| e.loaded.clone())
    }

    /// A route of another live function that one of `routes` claims too.
    fn claimed(&self, name: &str, routes: &[Route]) -> Option<(String, Route)> {
        let functions = self.functions.read().expect("not poisoned");
        functions.iter().filter(|(n, _)| n.as_str() != name).find_map(|(n, e)| {
            let held = e.current()?.routes.iter().find(|held| routes.iter().any(|r| r.same_claim(held)))?;
            Some((n.clone(), held.clone()))
        })
    }

    /// The function whose route a request for `host` and `path` takes (`routes.rs`:
    /// the most specific, then the one deployed first), the route, and the path below it.
    pub fn route<'p>(&self, host: Option<&str>, path: &'p str) -> Option<(String, Route, &'p str)> {
        let functions = self.functions.read().expect("not poisoned");
        let matches = functions.iter().flat_map(|(name, e)| {
            let first = e.versions.first().map_or(0, |v| v.seqnum);
            let routes = e.current().map(|c| c.routes.clone()).unwrap_or_default();
            let found: Vec<_> =
                routes.iter().filter_map(|r| Some((r.rank(), first, name.clone(), r.clone(), r.matches(host, path)?))).collect();
            found
        });
        // The most specific; among equals, the function deployed first.
        let best = matches.max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))?;
        Some((best.2, best.3, best.4))
    }

    pub fn list(&self) -> Vec<FunctionInfo> {
        let functions = self.functions.read().expect("not poisoned");
        functions.iter().filter_map(|(name, e)| info(name, e)).collect()
    }

    pub fn inspect(&self, name: &str) -> Result<FunctionInfo> {
        let functions = self.functions.read().expect("not poisoned");
        functions.get(name).and_then(|e| info(name, e)).ok_or_else(|| RuntimeError::FunctionNotFound(name.to_string()))
    }

    /// Every change of the registry (deploys, settings, deletes), in log order.
    pub async fn changes(&self) -> Result<Vec<Change>> {
        self.sync().await?;
        Ok(self.changes.read().expect("not poisoned").clone())
    }

    /// How far in the log this node's registry has read.
    pub async fn position(&self) -> Context {
        self.synced.read().expect("not poisoned").clone()
    }

    /// Applies every manifest appended so far, and loads current versions.
    pub async fn sync(&self) -> Result<()> {
        self.sync_with(&Context::new()).await
    }

    /// Like [`Registry::sync`], reading from at least the log position of `seen`.
    async fn sync_with(&self, seen: &Context) -> Result<()> {
        let mut cursor = self.cursor.lock().await;
        // The client's position joins the shared cursor only once a read reached it: a
        // position the log refuses (a term it never had) or never reaches must not make
        // every later lookup on this node wait for it.
        let mut ctx = cursor.ctx.clone();
        ctx.merge(seen);
        loop {
            let next = cursor.next;
            let Some(record) = self.log.read_next(&mut ctx, REGISTRY_BOOK, MANIFESTS, next).await? else {
                break;
            };
            cursor.ctx.merge(&ctx);
            cursor.next = SeqNum(record.seqnum.0 + 1);
            match serde_json::from_slice::<Manifest>(&record.data) {
                Ok(m) => self.apply(record.seqnum, m),
                Err(e) => tracing::error!(seqnum = %record.seqnum, "skipping a malformed registry manifest: {e}"),
            }
        }
        cursor.ctx.merge(&ctx);
        self.load_current(&mut cursor.ctx).await;
        *self.synced.write().expect("not poisoned") = cursor.ctx.clone();
        Ok(())
    }

    fn apply(&self, seqnum: SeqNum, manifest: Manifest) {
        let mut functions = self.functions.write().expect("not poisoned");
        let change = |at_ms, by, op, function: &str, version, settings| Change {
            seqnum: seqnum.0,
            at_ms,
            by,
            op,
            function: function.to_string(),
            version,
            settings,
        };
        let mut changes = self.changes.write().expect("not poisoned");
        match manifest {
            Manifest::Deploy {
                name,
                sha256,
                size,
                chunks,
                limits,
                tables,
                deployed_at_ms,
                outbound,
                routes,
                config,
                public,
                by,
            } => {
                let keys = config.keys().cloned().collect();
                if !config.is_empty() {
                    self.settings.apply(&name, seqnum.0, config, &[]);
                }
                let routes = routes.iter().filter_map(|r| Route::parse(r).ok()).collect();
                // A destination this node cannot read (a newer syntax) allows nothing.
                let allowed = outbound.iter().filter_map(|d| Destination::parse(d).ok()).collect();
                let e = functions.entry(name.clone()).or_default();
                let version = e.versions.len() as u32 + 1;
                changes.push(change(deployed_at_ms, by.clone(), "function.deploy", &name, Some(version), keys));
                e.versions.push(VersionInfo {
                    version,
                    sha256,
                    size_bytes: size,
                    limits: limits.into(),
                    tables: Arc::new(tables),
                    outbound: Arc::new(Outbound { allowed }),
                    routes: Arc::new(routes),
                    public,
                    deployed_at_ms,
                    deployed_by: by,
                    seqnum: seqnum.0,
                    chunks,
                });
                e.deleted = false;
                e.loaded = None;
            }
            Manifest::Config { name, set, unset, by, at_ms } => {
                let keys = set.keys().chain(&unset).cloned().collect();
                changes.push(change(at_ms, by, "function.config", &name, None, keys));
                self.settings.apply(&name, seqnum.0, set, &unset);
            }
            Manifest::Delete { name, by, at_ms } => {
                changes.push(change(at_ms, by, "function.delete", &name, None, Vec::new()));
                self.settings.clear(&name, seqnum.0);
                if let Some(e) = functions.get_mut(&name) {
                    e.deleted = true;
                    e.loaded = None;
                }
            }
            Manifest::Unknown => tracing::warn!(%seqnum, "skipping a registry operation of a newer node"),
        }
    }

    /// Prepares every current version not loaded yet. A version that cannot be loaded
    /// (its chunks unreadable) stays unloaded and is retried on the next sync.
    async fn load_current(&self, ctx: &mut Context) {
        let todo: Vec<(String, VersionInfo)> = {
            let functions = self.functions.read().expect("not poisoned");
            functions
                .iter()
                .filter(|(_, e)| e.loaded.is_none())
                .filter_map(|(n, e)| e.current().map(|v| (n.clone(), v.clone())))
                .collect()
        };
        for (name, info) in todo {
            match self.load(ctx, &info).await {
                Ok(pre) => {
                    let loaded = Arc::new(Loaded {
                        name: name.clone(),
                        permits: Semaphore::new(info.limits.concurrency_max as usize),
                        info: info.clone(),
                        pre,
                    });
                    let mut functions = self.functions.write().expect("not poisoned");
                    if let Some(e) = functions.get_mut(&name) {
                        if e.current().is_some_and(|v| v.seqnum == info.seqnum) {
                            e.loaded = Some(loaded);
                        }
                    }
                }
                Err(e) => tracing::error!(function = %name, version = info.version, "cannot load: {e}"),
            }
        }
    }

    async fn load(&self, ctx: &mut Context, info: &VersionInfo) -> Result<Prepared> {
        if let Some(pre) = self.fresh.lock().expect("not poisoned").remove(&info.sha256) {
            return Ok(pre);
        }
        let mut bytes = Vec::with_capacity(info.size_bytes as usize);
        for &s in &info.chunks {
            let record = self.log.read_next(ctx, REGISTRY_BOOK, Tag::ALL, SeqNum(s)).await?;
            match record {
                Some(r) if r.seqnum.0 == s => bytes.extend_from_slice(&r.data),
                _ => return Err(RuntimeError::Internal(format!("chunk {s} of the component is missing"))),
            }
        }
        let sha256 = format!("{:x}", Sha256::digest(&bytes));
        if sha256 != info.sha256 {
            return Err(RuntimeError::Internal(format!("the component's hash is {sha256}, its manifest says {}", info.sha256)));
        }
        self.host.prepare(&bytes, &sha256).await
    }
}

/// A manifest as a sync reads it, encoded again (`None`: skipped as malformed): a fuzz
/// target's view of bytes from the log, which a newer node may have written.
#[doc(hidden)]
pub fn decode_manifest(bytes: &[u8]) -> Option<Vec<u8>> {
    let manifest: Manifest = serde_json::from_slice(bytes).ok()?;
    Some(serde_json::to_vec(&manifest).expect("a manifest encodes"))
}

fn info(name: &str, e: &Entry) -> Option<FunctionInfo> {
    e.current().map(|current| FunctionInfo { name: name.to_string(), current: current.clone(), versions: e.versions.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["hello", "a", "counter-2", "x_y", "9lives"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Hello", "-x", "a/b", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn manifests_are_tagged_json() {
        let m = Manifest::Delete { name: "f".into(), by: None, at_ms: 0 };
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"op":"delete","name":"f","at_ms":0}"#);
        // A manifest of a node older than tokens reads as one without a writer.
        assert!(matches!(
            serde_json::from_str::<Manifest>(r#"{"op":"delete","name":"f"}"#).unwrap(),
            Manifest::Delete { by: None, at_ms: 0, .. }
        ));
        assert!(REGISTRY_BOOK.is_reserved() && MANIFESTS.is_reserved());
    }

    #[test]
    fn manifests_of_a_newer_node_are_read() {
        // A deploy with a field and a limit this node does not know.
        let newer = r#"{"op":"deploy","name":"f","sha256":"ab","size":3,"chunks":[7],"limits":{"timeout_ms":5,"gpu":1},
            "tables":{},"deployed_at_ms":1,"region":"eu"}"#;
        match serde_json::from_str::<Manifest>(newer).unwrap() {
            Manifest::Deploy { limits, .. } => {
                assert_eq!(limits.timeout_ms, 5);
                assert_eq!(limits.memory_bytes, Limits::default().memory_bytes);
            }
            other => panic!("{other:?}"),
        }
        // An operation this node does not know is skipped, not an error.
        assert!(matches!(serde_json::from_str::<Manifest>(r#"{"op":"rename","from":"f","to":"g"}"#).unwrap(), Manifest::Unknown));
    }
}
