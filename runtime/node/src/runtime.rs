//! The runtime: one node's functions (registry, wasmtime host) and its exactly-once core
//! (`tally_durable::Durable`), which runs every invocation's attempts.
//!
//! [`Runtime::start`] opens the state store (`tally-state`), builds the core's `Parts`
//! (`env.rs`: the platform `LogClient` as `Log`; `tally-host`'s `Tokio` as `Clock` and
//! `Spawn` and its `HostFunctions` as `Functions`) and starts `Durable` with its background
//! work. [`Runtime::stop`] ends that work, and the registry's refresh, at their next turn;
//! a dev node or `tally node` calls it before its log shuts down, even if something still
//! holds the runtime. Invocations go straight to the core.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tally_durable::{
    Durable, InvocationKey, InvocationStatus, Invocations, InvokeRequest, Libraries, NodeBounds, Parts, Peers, Schedules,
    StateStore, Tables, TagKey,
};
use tally_host::observe::{Observer, TimedLog, TimedStore};
use tally_host::{DeploySpec, HostFunctions, LogStore, Metrics, Registry, SecretsKey, Tokio, VersionInfo, WasmHost};
use tally_logsvc::{BookId, Context, LogClient};
use tally_state::{PgStateStore, RocksStateStore};
use tracing::Instrument;

use crate::config::{Config, Limits, Protocol, StoreKind};
use crate::error::{Result, RuntimeError};

/// How often the registry replays manifests appended by other nodes.
const REGISTRY_POLL: Duration = Duration::from_secs(1);

pub struct Runtime {
    pub config: Config,
    pub registry: Arc<Registry>,
    pub metrics: Arc<Metrics>,
    /// What this node's guests printed (`tally logs`).
    pub logs: Arc<LogStore>,
    /// What the node measures of executions: the gateway makes each request's probe.
    pub observer: Observer,
    log: LogClient,
    durable: Arc<Durable>,
    /// Set by [`Runtime::stop`]: the registry refresh ends at its next turn.
    stopped: AtomicBool,
}

/// A fresh secret for the cluster's tag key (used only if the cluster has none yet).
fn random_key() -> std::io::Result<TagKey> {
    let mut bytes = [0u8; TagKey::BYTES];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(TagKey::new(bytes))
}

impl Runtime {
    /// `/metrics` lines of the log's index in partial mode (none in complete mode).
    pub fn index_metrics(&self) -> String {
        use std::fmt::Write as _;
        let Some(report) = self.log.partial_stats() else { return String::new() };
        let (stats, logs) = (report.reads, report.local_bytes);
        let mut out = String::new();
        out += "# HELP tally_index_reads_total Reads of the log by the path that answered them (partial mode).\n";
        out += "# TYPE tally_index_reads_total counter\n";
        for (path, n) in [("tag_cache", stats.tag_hits), ("popularity", stats.popularity_hits), ("tier", stats.tier_reads)] {
            let _ = writeln!(out, "tally_index_reads_total{{path=\"{path}\"}} {n}");
        }
        out += "# HELP tally_index_tier_exact_total Tier reads answered by the shard that holds the bound, the record sent by storage (type 2).\n";
        out += "# TYPE tally_index_tier_exact_total counter\n";
        let _ = writeln!(out, "tally_index_tier_exact_total {}", stats.exact_reads);
        out += "# HELP tally_index_holder_lookups_total Failed conditions whose holder the index tier looked up.\n";
        out += "# TYPE tally_index_holder_lookups_total counter\n";
        let _ = writeln!(out, "tally_index_holder_lookups_total {}", stats.holder_lookups);
        out += "# HELP tally_index_local_restarts_total Local indexes started again, empty (decided updates were gone).\n";
        out += "# TYPE tally_index_local_restarts_total counter\n";
        let _ = writeln!(out, "tally_index_local_restarts_total {}", stats.local_restarts);
        out += "# HELP tally_index_local_bytes Bytes of this node's local index, per physical log and structure.\n";
        out += "# TYPE tally_index_local_bytes gauge\n";
        for (log, (suffix, tags, popularity)) in logs.iter().enumerate() {
            for (structure, bytes) in [("suffix", suffix), ("tag_cache", tags), ("popularity", popularity)] {
                let _ = writeln!(out, "tally_index_local_bytes{{log=\"{log}\",structure=\"{structure}\"}} {bytes}");
            }
        }
        out
    }

    /// A runtime over the engine of this node: `log` for guests, `platform` for the
    /// registry and the exactly-once core; `peers` says which books' background work
    /// (recovery, GC, `auto`, switches) is this node's. Replays the registry before it
    /// returns.
    pub async fn start(
        config: Config,
        log: LogClient,
        platform: LogClient,
        peers: Arc<dyn Peers>,
    ) -> anyhow::Result<Arc<Runtime>> {
        config.validate()?;
        let metrics = Arc::new(Metrics::default());
        let host = Arc::new(WasmHost::new(
            &config.node,
            config.artifacts_dir.clone().unwrap_or_else(|| config.data_dir.join("artifacts")),
            metrics.clone(),
        )?);
        let secrets =
            SecretsKey::load_or_create(&config.secrets_key_file.clone().unwrap_or_else(|| config.data_dir.join("secrets.key")))?;
        let registry = Arc::new(Registry::new(platform.clone(), host.clone(), Some(secrets)));
        registry.sync().await?;
        let store: Arc<dyn StateStore> = match config.state.store {
            StoreKind::Rocksdb => Arc::new(RocksStateStore::open(config.data_dir.join("state"))?),
            StoreKind::Postgres => Arc::new(PgStateStore::connect(&config.state.postgres).await?),
        };
        let logs = Arc::new(LogStore::new(config.node.logs_bytes_max as usize));
        let functions =
            HostFunctions { registry: registry.clone(), host, metrics: metrics.clone(), log: log.clone(), logs: logs.clone() };
        let observer = Observer::start(config.observe.otlp_endpoint.as_deref(), metrics.parts.clone());
        let parts = Parts {
            log: Arc::new(TimedLog(Arc::new(platform))),
            store: Arc::new(TimedStore(store)),
            clock: Arc::new(Tokio),
            spawn: Arc::new(Tokio),
            functions: Arc::new(functions),
            peers,
            observe: Arc::new(observer.clone()),
            tag_key: random_key()?,
            id_prefix: RandomState::new().hash_one(Instant::now()),
        };
        let bounds = NodeBounds { call_depth_max: config.node.call_depth_max, invocations_kept: config.node.invocations_kept };
        let durable = Durable::start(parts, config.state.clone(), bounds).await?;
        durable.start_background();
        let rt = Arc::new(Runtime { config, registry, metrics, logs, observer, log, durable, stopped: AtomicBool::new(false) });
        // Deploys made through other nodes show up here within REGISTRY_POLL; a name this
        // node has never seen is looked up at once (see `Registry::lookup`). The task
        // ends with the runtime; cancelling it loses nothing.
        let weak = Arc::downgrade(&rt);
        tokio::spawn(
            async move {
                let mut tick = tokio::time::interval(REGISTRY_POLL);
                loop {
                    tick.tick().await;
                    let Some(rt) = weak.upgrade().filter(|rt| !rt.stopped.load(Ordering::Acquire)) else { return };
                    if let Err(e) = rt.registry.sync().await {
                        tracing::warn!("registry refresh: {e}");
                    }
                }
            }
            .instrument(tracing::info_span!("task", name = "registry-refresh")),
        );
        Ok(rt)
    }

    /// Ends the runtime's background work (the registry refresh, and the exactly-once
    /// core's recovery scan, `auto` and switch resumption) at its next turn, though the
    /// runtime is still referenced: called before its log shuts down.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.durable.stop();
    }

    /// The cluster's schedules.
    pub fn schedules(&self) -> Schedules<'_> {
        self.durable.schedules()
    }

    /// Invocations by ID: listings, cancellation, promise completion.
    pub fn invocations(&self) -> Invocations<'_> {
        self.durable.invocations()
    }

    /// The tables' protocols and switches.
    pub fn tables(&self) -> Tables<'_> {
        self.durable.tables()
    }

    /// The state of objects, queues and locks.
    pub fn libraries(&self) -> Libraries<'_> {
        self.durable.libraries()
    }

    /// The exactly-once layer itself, for tests and benchmarks that look inside it.
    pub fn durable(&self) -> &Arc<Durable> {
        &self.durable
    }

    /// The user log client of this node (the gateway's book listing uses it).
    pub fn log(&self) -> &LogClient {
        &self.log
    }

    /// Deploys with `limits` and the protocols of `tables`, sending no requests out.
    pub async fn deploy(
        &self,
        name: &str,
        component: Bytes,
        limits: Limits,
        tables: BTreeMap<String, Protocol>,
    ) -> Result<VersionInfo> {
        self.deploy_with(name, component, DeploySpec { limits, tables, ..DeploySpec::default() }).await
    }

    /// Deploys `component` as the next version of `name`, as `spec` says.
    pub async fn deploy_with(&self, name: &str, component: Bytes, spec: DeploySpec) -> Result<VersionInfo> {
        let limit = self.config.node.component_bytes_max;
        if component.len() as u64 > limit {
            return Err(RuntimeError::TooLarge { what: "the component", size: Some(component.len() as u64), limit });
        }
        self.config.check_limits(&spec.limits).map_err(RuntimeError::InvalidArgument)?;
        let info = self.registry.deploy(name, component, spec).await?;
        self.metrics.deployed();
        Ok(info)
    }

    /// Invokes `function` on `book` from outside (the gateway).
    pub async fn invoke(self: &Arc<Self>, function: &str, book: BookId, input: Bytes) -> Result<Vec<u8>> {
        self.invoke_with(function, book, input, InvokeOptions::default()).await
    }

    /// Invokes with options: an idempotency key makes the invocation exactly-once
    /// across client retries (a retry gets the logged result without a second run).
    pub async fn invoke_with(
        self: &Arc<Self>,
        function: &str,
        book: BookId,
        input: Bytes,
        opts: InvokeOptions,
    ) -> Result<Vec<u8>> {
        self.invoke_at(function, book, input, opts, Context::new()).await.0
    }

    /// [`Runtime::invoke_with`] from the client's `position` (what its earlier
    /// invocations reached, on any node), also returning where this one got to.
    pub async fn invoke_at(
        self: &Arc<Self>,
        function: &str,
        book: BookId,
        input: Bytes,
        opts: InvokeOptions,
        position: Context,
    ) -> (Result<Vec<u8>>, Context) {
        let req = InvokeRequest {
            function: function.to_string(),
            book,
            input,
            idempotency_key: opts.idempotency_key,
            retry_key: opts.retry_key,
            crash_after: opts.crash_after,
            position,
            delay_ms: opts.delay_ms,
            key: opts.key,
        };
        self.durable.invoke_at(req).await
    }

    /// Starts an exactly-once invocation in the background; returns its ID once its
    /// Init record is logged (see `Durable::invoke_async`).
    #[allow(clippy::too_many_arguments)]
    pub async fn invoke_async(
        &self,
        ctx: &mut Context,
        function: String,
        book: BookId,
        input: Bytes,
        idempotency_key: Option<String>,
        delay_ms: u64,
        key: Option<InvocationKey>,
    ) -> Result<String> {
        Ok(self.durable.invoke_async(ctx, function, book, input, idempotency_key, delay_ms, key).await?.to_string())
    }

    /// The status of an invocation started on `book`, read at least at `ctx`.
    pub async fn invocation(&self, ctx: &mut Context, book: BookId, id: &str) -> Result<InvocationStatus> {
        self.durable.invocation(ctx, book, id).await
    }
}

/// Options of an invocation from outside.
#[derive(Clone, Debug, Default)]
pub struct InvokeOptions {
    /// The client's key for the invocation (the `Idempotency-Key` header).
    pub idempotency_key: Option<String>,
    /// A gateway's key for an invocation it may retry elsewhere (`Tally-Retry-Key`; see
    /// `InvokeRequest::retry_key`).
    pub retry_key: Option<String>,
    /// Test hook: stop the invocation after this many effects (`Tally-Crash-After`).
    pub crash_after: Option<u64>,
    /// Milliseconds to wait before the guest runs (`?delay_ms=`; 0: none).
    pub delay_ms: u64,
    /// The key the invocation is addressed to (`?key=`, `&shared=true`).
    pub key: Option<InvocationKey>,
}
