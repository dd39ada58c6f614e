//! `tally node`: one process of a cluster, running the roles its configuration names
//! (controller, sequencer, storage, function = engine + runtime, gateway), each role of
//! the shared log on its own QUIC endpoint with its own node id, all under one
//! certificate of the cluster's CA that names those ids.
//!
//! The process finds the rest of the cluster through etcd (`tally-control`): each role
//! registers its id, role and address under a lease, and a watch of the members keeps
//! every endpoint's address book current, so a node restarted elsewhere is found again.
//! A controller role campaigns for leadership; the leader resumes from the
//! configuration stored in etcd and persists every new one with a compare-and-swap, so
//! two controllers can never install different next terms. A standby takes over when
//! the leader's lease expires.
//!
//! ```text
//!  node.toml ─► Node::start ─► etcd: settings, members/<id> (lease), leader, config (CAS)
//!                 │
//!                 ├─ controller role: campaign ─► leader: spawn_controller(store = etcd CAS,
//!                 │                                 members from the watch) until the lease is lost
//!                 ├─ sequencer role: JournalMetalogStore under data_dir/sequencer-<id>
//!                 ├─ storage role:   JournalStore under data_dir/storage-<id>
//!                 └─ function role:  engine + Runtime (state under data_dir/function-<id>) + HTTP
//! ```
//!
//! The controller's store is `EtcdConfigStore`, the `ControllerStore` whose persist is
//! etcd's compare-and-swap, so that a failed CAS stops that controller before it announces
//! anything; the leader is fed the registered members, and reads the settings' `n_logs`
//! every second (`tally cluster grow` raises it). The log roles run on one `NodeThread`. A
//! function role's state store must be shared by every function node (PostgreSQL), or one
//! node's writes would be invisible to another's reads; its exactly-once background work is
//! for the books it owns among the engines of the current term (`TermPeers`).
//! `partition_file`, a test hook of `node.toml`, drops the process's QUIC messages while
//! the file exists (`runtime/tally/tests/cluster/main.rs` partitions a minority with it).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{bail, Context as _};
use tally_control::{ControlPlane, Member, MemberRole, Revision, Settings};
use tally_durable::Peers;
use tally_logsvc::driver::{self, ControlInput, EngineDriverConfig, EngineStatus, NodeThread, StorageStores};
use tally_logsvc::net::{Certs, LocalNet, NetConfig, Transport};
use tally_logsvc::store::{
    cold_index, open_record_store, ControllerStore, FsyncPolicy, GroupCommitConfig, JournalMetalogStore, RecordStoreKind,
};
use tally_logsvc::tier::IndexNodeConfig;
use tally_logsvc::{
    BookId, Configuration, ControllerConfig, EngineConfig, LogClient, Message, NodeId, Role, SequencerConfig, StorageConfig,
};
use tally_runtime::runtime::Runtime;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::MissedTickBehavior;
use tracing::{debug, error, info, warn, Instrument};

use crate::gateway;
use crate::proxy;

mod config;
mod metrics;

pub use config::{ControllerRole, FunctionRole, GatewayRole, LogRole, NodeConfig};

/// A registration lease outlives a missed keep-alive or two; a process killed outright
/// disappears from the members after this long.
const MEMBER_TTL_S: i64 = 3;
/// The leader's lease: a standby takes over at most this long after the leader died.
const LEADER_TTL_S: i64 = 2;
/// How long the leader keeps trying to store a configuration while etcd is unreachable.
const PERSIST_RETRY: Duration = Duration::from_secs(5);
/// How long a starting node waits for etcd to answer.
const ETCD_WAIT: Duration = Duration::from_secs(30);

/// The configuration store of the leading controller: etcd, written with a
/// compare-and-swap against the revision this controller loaded or wrote last, so a
/// controller that lost its leadership without noticing cannot overwrite its
/// successor's term. Called on the blocking pool (the driver's `durably`).
struct EtcdConfigStore {
    plane: ControlPlane,
    runtime: tokio::runtime::Handle,
    loaded: Option<Configuration>,
    revision: Mutex<Revision>,
}

impl ControllerStore for EtcdConfigStore {
    /// A transient failure (etcd unreachable, or a write whose outcome is unknown) is
    /// resolved by reading the key back: the configuration is there (the write went
    /// through), the key is as loaded (try again), or another controller wrote (fail).
    fn persist(&self, config: &Configuration) -> tally_logsvc::Result<()> {
        let mut revision = self.revision.lock().unwrap_or_else(PoisonError::into_inner);
        let fail = |e: tally_control::Error| tally_logsvc::Error::Storage(format!("storing the configuration in etcd: {e}"));
        let deadline = std::time::Instant::now() + PERSIST_RETRY;
        loop {
            let e = match self.runtime.block_on(self.plane.cas_config(*revision, config)) {
                Ok(written) => {
                    *revision = written;
                    return Ok(());
                }
                Err(e) if e.is_transient() && std::time::Instant::now() < deadline => e,
                Err(e) => return Err(fail(e)),
            };
            tracing::debug!(error = %e, "storing the configuration; reading it back");
            std::thread::sleep(Duration::from_millis(100));
            match self.runtime.block_on(self.plane.load_config()) {
                Ok(Some((stored, r))) if stored == *config => {
                    *revision = r;
                    return Ok(());
                }
                Ok(Some((_, r))) if r != *revision => return Err(fail(tally_control::Error::Superseded)),
                Ok(_) | Err(_) => {}
            }
        }
    }

    fn load(&self) -> tally_logsvc::Result<Option<Configuration>> {
        Ok(self.loaded.clone())
    }
}

fn log_role(role: MemberRole) -> Option<Role> {
    match role {
        MemberRole::Sequencer => Some(Role::Sequencer),
        MemberRole::Storage => Some(Role::Storage),
        MemberRole::Engine => Some(Role::Engine),
        MemberRole::Index => Some(Role::Index),
        MemberRole::Aggregator => Some(Role::Aggregator),
        MemberRole::Controller | MemberRole::Gateway => None,
    }
}

/// The nodes a controller manages: the registered members of the log's roles, and
/// every node a stored configuration names (a node that is down now is still a member
/// the next term leaves out).
fn roster(members: &BTreeMap<NodeId, Member>, stored: Option<&Configuration>) -> Vec<(NodeId, Role)> {
    let mut roster: BTreeMap<NodeId, Role> = members.values().filter_map(|m| log_role(m.role).map(|r| (m.id, r))).collect();
    for t in stored.iter().flat_map(|c| &c.terms) {
        for l in &t.logs {
            roster.entry_or(l.sequencers.iter().map(|&n| (n, Role::Sequencer)));
            roster.entry_or(l.shards.iter().flat_map(|s| s.replicas.iter().map(|&n| (n, Role::Storage))));
            roster.entry_or(l.shards.iter().map(|s| (s.engine, Role::Engine)));
        }
    }
    let tier = stored.and_then(|c| c.tier.as_ref());
    roster.entry_or(tier.into_iter().flat_map(|t| t.nodes()).map(|n| (n, Role::Index)));
    roster.entry_or(tier.into_iter().flat_map(|t| t.aggregators.iter()).map(|&n| (n, Role::Aggregator)));
    roster.into_iter().collect()
}

trait EntryOr {
    fn entry_or(&mut self, nodes: impl Iterator<Item = (NodeId, Role)>);
}

impl EntryOr for BTreeMap<NodeId, Role> {
    fn entry_or(&mut self, nodes: impl Iterator<Item = (NodeId, Role)>) {
        for (n, r) in nodes {
            self.entry(n).or_insert(r);
        }
    }
}

/// A running node process.
pub struct Node {
    pub config: NodeConfig,
    /// The function role's runtime and HTTP address, once it serves.
    pub function: Option<(Arc<Runtime>, SocketAddr)>,
    /// The gateway role's HTTP address, once it serves.
    pub gateway: Option<SocketAddr>,
    plane: ControlPlane,
    registrations: Vec<tally_control::Registration>,
    tasks: Vec<JoinHandle<()>>,
    /// The log roles' tasks among them, which end only when the role stopped.
    roles: Vec<(MemberRole, AbortHandle)>,
    transports: Vec<Transport>,
    http_stop: Vec<oneshot::Sender<()>>,
    /// Where the sequencer, storage and engine roles run, away from the HTTP servers
    /// and invocations (the controller role stays with its etcd client). Declared last:
    /// dropped after everything that refers to its tasks.
    thread: NodeThread,
}

impl Node {
    pub async fn start(config: NodeConfig) -> anyhow::Result<Node> {
        config.validate()?;
        std::fs::create_dir_all(&config.data_dir).with_context(|| format!("creating {}", config.data_dir.display()))?;
        let certs = Certs::load(&config.certs).context("loading the node's certificate")?;
        let plane = connect(&config).await?;
        let members = plane.watch_members().await.context("watching the cluster's members")?;
        check_not_registered(&config, &members.borrow())?;

        // Bind every endpoint first and learn every peer's address, so no role's first
        // messages go nowhere.
        let mut bound = Vec::new();
        for (id, role, port) in config.log_roles() {
            let listen: SocketAddr = format!("{}:{port}", config.host)
                .parse()
                .with_context(|| format!("`host` {} and port {port} make no socket address", config.host))?;
            let (t, inbox) = Transport::bind(id, listen, &certs, NetConfig::default())
                .await
                .with_context(|| format!("binding the {role:?} endpoint of node {id}"))?;
            bound.push((id, role, t, inbox));
        }
        let transports: Vec<Transport> = bound.iter().map(|(_, _, t, _)| t.clone()).collect();
        // This process's roles talk to each other without QUIC.
        let local = LocalNet::new();
        for t in &transports {
            t.join_local(&local);
        }
        let mut tasks = vec![spawn_address_book(members.clone(), transports.clone())];
        let mut roles = Vec::new();
        if let Some(file) = config.partition_file.clone() {
            tasks.push(spawn_partition_hook(file, transports.clone()));
        }

        let controllers: Vec<NodeId> = config.controllers.iter().map(|&c| NodeId(c)).collect();
        let mut engine = None;
        let mut probes = metrics::Probes::default();
        let index_resident = usize::try_from(config.node_limits.index_resident_bytes).unwrap_or(usize::MAX);
        let thread = NodeThread::start()?;
        // Every log role of the process hands its spans here (`[observe]`): to the
        // function role's exporter, or to one of their own without a function role.
        let spans = tally_logsvc::trace::SpanSinks::default();
        for (id, role, t, inbox) in bound {
            let dir = |what: &str| config.data_dir.join(format!("{what}-{}", id.0));
            match role {
                MemberRole::Controller => {
                    let c = config.controller.clone().expect("a controller role");
                    let settings = Settings {
                        n_logs: c.n_logs,
                        n_meta: c.n_meta,
                        n_data: c.n_data,
                        failure_timeout_ms: c.failure_timeout_ms,
                        index: c.index,
                        metalog: c.metalog,
                    };
                    let stored = plane.init_settings(&settings).await.context("storing the cluster's settings")?;
                    if stored != settings {
                        warn!(?stored, ?settings, "this controller's settings differ from the cluster's; using the cluster's");
                    }
                    let peers = controllers.iter().copied().filter(|&p| p != id).collect();
                    tasks.push(spawn_controller_role(id, stored, peers, plane.clone(), members.clone(), t, inbox));
                }
                MemberRole::Sequencer => {
                    let store = Arc::new(JournalMetalogStore::open(&dir("sequencer"))?);
                    let metalog = stored_settings(&plane).await?.metalog;
                    let cfg = SequencerConfig { metalog, ..SequencerConfig::default() };
                    let _entered = thread.enter();
                    let task = driver::spawn_sequencer(id, controllers.clone(), cfg, store, t, inbox)?;
                    roles.push((role, task.abort_handle()));
                    tasks.push(task);
                }
                MemberRole::Storage => {
                    let records = open_record_store(&dir("storage"), RecordStoreKind::default(), FsyncPolicy::default())?;
                    let stores = StorageStores { records, group_commit: GroupCommitConfig::default(), spans: spans.clone() };
                    let cfg =
                        StorageConfig { cold_index: Some(cold_index(dir("cold"), index_resident)), ..StorageConfig::default() };
                    let _entered = thread.enter();
                    let task = driver::spawn_storage(id, controllers.clone(), cfg, stores, t, inbox)?;
                    roles.push((role, task.abort_handle()));
                    tasks.push(task);
                }
                MemberRole::Engine => {
                    let delay = config.function.as_ref().map_or(0, |f| f.metalog_delay_ms);
                    let driver_config =
                        EngineDriverConfig { metalog_delay_ms: delay, spans: spans.clone(), ..EngineDriverConfig::default() };
                    let local = config.function.as_ref().and_then(|f| f.local_index).unwrap_or_default();
                    let cfg = EngineConfig {
                        cold_index: Some(cold_index(dir("cold"), index_resident)),
                        local_index: crate::dev::local_bounds(&local),
                        ..EngineConfig::default()
                    };
                    let _entered = thread.enter();
                    let handle = driver::spawn_engine(id, controllers.clone(), cfg, driver_config, t, inbox);
                    engine = Some(handle);
                }
                MemberRole::Aggregator => {
                    let _entered = thread.enter();
                    let (task, probe) = driver::spawn_aggregator(id, controllers.clone(), Default::default(), t, inbox);
                    roles.push((role, task.abort_handle()));
                    tasks.push(task);
                    probes.aggregators.push(probe);
                }
                MemberRole::Index => {
                    let _entered = thread.enter();
                    let (task, probe) = driver::spawn_index(id, controllers.clone(), IndexNodeConfig::default(), t, inbox);
                    roles.push((role, task.abort_handle()));
                    tasks.push(task);
                    probes.index.push(probe);
                }
                MemberRole::Gateway => unreachable!("gateways have no log endpoint"),
            }
        }

        let mut registrations = Vec::new();
        for ((id, role, _), t) in config.log_roles().into_iter().zip(&transports) {
            let http = match role {
                MemberRole::Engine => config.function.as_ref().map(|f| f.http.clone()),
                _ => None,
            };
            let member = Member {
                id,
                role,
                addr: t.local_addr().to_string(),
                http,
                process: config.name.clone(),
                pid: std::process::id(),
                incarnation: driver::new_incarnation(),
            };
            registrations.push(plane.register(member, MEMBER_TTL_S).await.context("registering with etcd")?);
        }

        let mut node = Node {
            config,
            function: None,
            gateway: None,
            plane,
            registrations,
            tasks,
            roles,
            transports,
            http_stop: Vec::new(),
            thread,
        };
        if let Some(handle) = engine {
            let f = node.config.function.clone().expect("a function role");
            let mut status = handle.status.clone();
            node.roles.push((MemberRole::Engine, handle.task.abort_handle()));
            node.tasks.push(handle.task);
            info!(id = f.id, "waiting for the cluster's first configuration");
            while status.borrow_and_update().n_logs.is_none() {
                status.changed().await.context("the engine stopped")?;
            }
            let runtime_config = node.config.runtime_config(&f);
            let listener = tokio::net::TcpListener::bind(&runtime_config.listen)
                .await
                .with_context(|| format!("listening on {}", runtime_config.listen))?;
            let addr = listener.local_addr()?;
            let log = LogClient::user(handle.link.clone());
            let platform = LogClient::platform(handle.link);
            let peers = Arc::new(TermPeers { me: NodeId(f.id), status: handle.status.clone() });
            let runtime = Runtime::start(runtime_config, log, platform.clone(), peers).await.context("starting the runtime")?;
            if let Some(exporter) = &runtime.observer.spans {
                spans.set(exporter.clone());
            }
            let (access, _) = crate::auth::guard::start(runtime.clone(), platform, false).await.context("reading the tokens")?;
            node.serve(listener, gateway::router(runtime.clone(), access))?;
            node.function = Some((runtime, addr));
        }
        if let (None, Some(endpoint)) = (&node.function, node.config.observe.otlp_endpoint.as_deref()) {
            let observer = tally_host::observe::Observer::start(Some(endpoint), Default::default());
            if let Some(exporter) = observer.spans {
                spans.set(exporter);
            }
        }
        if let Some(addr) = node.config.metrics.clone() {
            let (listener, _) = proxy::listen(&addr).await?;
            let file = node.config.metrics_token_file.as_ref().context("`metrics` without `metrics_token_file`")?;
            let token = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            anyhow::ensure!(!token.trim().is_empty(), "{} is empty: a metrics token is a secret", file.display());
            node.serve(listener, metrics::router(probes, token.trim().to_string()))?;
        }
        if let Some(g) = node.config.gateway.clone() {
            let (listener, addr) = proxy::listen(&g.http).await?;
            let trust = node.config.tls_ca_file.as_deref().map(crate::tls::client_config).transpose()?;
            let gw = proxy::Gateway::start(node.plane.clone(), trust).await?;
            node.serve(listener, proxy::router(gw))?;
            let member = Member {
                id: NodeId(g.id),
                role: MemberRole::Gateway,
                addr: String::new(),
                http: Some(addr.to_string()),
                process: node.config.name.clone(),
                pid: std::process::id(),
                incarnation: driver::new_incarnation(),
            };
            node.registrations.push(node.plane.register(member, MEMBER_TTL_S).await.context("registering with etcd")?);
            node.gateway = Some(addr);
        }
        info!(name = %node.config.name, "node started");
        Ok(node)
    }

    /// Serves `app` on `listener` until the node shuts down.
    /// Over TLS with the process's certificate if it has one.
    fn serve(&mut self, listener: tokio::net::TcpListener, app: axum::Router) -> anyhow::Result<()> {
        let (stop, stopped) = oneshot::channel::<()>();
        let stopped = async {
            let _ = stopped.await;
        };
        let tls = match (&self.config.tls_cert_file, &self.config.tls_key_file) {
            (Some(cert), Some(key)) => Some(crate::tls::server_config(cert, key)?),
            _ => None,
        };
        self.tasks.push(match tls {
            Some(tls) => {
                let listener = crate::tls::TlsListener::new(listener, tls)?;
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stopped).await {
                        error!(error = %e, "the https server stopped");
                    }
                })
            }
            None => tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stopped).await {
                    error!(error = %e, "the http server stopped");
                }
            }),
        });
        self.http_stop.push(stop);
        Ok(())
    }

    /// Resolves when one of the node's tasks ended by itself: a role stopped (its store
    /// failed, or it found the log shorter than what it applied, as a power loss of a
    /// majority of a replicated metalog's sequencers leaves it) and the process should
    /// exit, to be restarted over its data, rather than go on without it.
    pub async fn role_stopped(&self) -> MemberRole {
        loop {
            if let Some((role, _)) = self.roles.iter().find(|(_, task)| task.is_finished()) {
                return *role;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops the roles and takes this node's members out of etcd at once (a killed
    /// process leaves them to expire instead).
    pub async fn shutdown(self) {
        if let Some((runtime, _)) = &self.function {
            runtime.stop();
        }
        for stop in self.http_stop {
            let _ = stop.send(());
        }
        for r in self.registrations {
            if let Err(e) = r.revoke().await {
                warn!(error = %e, "revoking a registration");
            }
        }
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        for t in &self.transports {
            t.shutdown().await;
        }
        // Stops what the roles left running there (reads, persists).
        drop(self.thread);
        drop(self.plane);
        info!("node stopped");
    }
}

/// Connects to etcd, waiting for it up to [`ETCD_WAIT`]: nodes and etcd may start
/// together.
async fn connect(config: &NodeConfig) -> anyhow::Result<ControlPlane> {
    let deadline = tokio::time::Instant::now() + ETCD_WAIT;
    // Over TLS (`https://` endpoints, as `tally cluster init` writes them), the node's
    // certificate is its client certificate.
    let tls = match config.etcd.iter().any(|e| e.starts_with("https://")) {
        true => Some(crate::cluster::etcd_tls(&config.certs)?),
        false => None,
    };
    loop {
        match ControlPlane::connect_with(&config.etcd, &config.cluster, tls.as_ref()).await {
            Ok(plane) => return Ok(plane),
            Err(e) if e.is_transient() && tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "etcd is not reachable yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e).context(format!("connecting to etcd at {}", config.etcd.join(","))),
        }
    }
}

/// Refuses to start a role whose id a live member of another process holds, or whose
/// address another member registered: two processes with one id would split a node.
fn check_not_registered(config: &NodeConfig, members: &BTreeMap<NodeId, Member>) -> anyhow::Result<()> {
    let gateway = config.gateway.as_ref().map(|g| (NodeId(g.id), MemberRole::Gateway, 0));
    for (id, role, port) in config.log_roles().into_iter().chain(gateway) {
        if let Some(m) = members.get(&id).filter(|m| m.process != config.name) {
            bail!("node id {} ({role:?}) is registered by process {} (pid {}) at {}", id.0, m.process, m.pid, m.addr);
        }
        let addr = format!("{}:{port}", config.host);
        if let Some(m) = members.values().find(|m| port != 0 && m.addr == addr && m.process != config.name) {
            bail!("address {addr} is registered by node {} of process {}", m.id.0, m.process);
        }
    }
    Ok(())
}

/// Keeps every endpoint of this process told where every member is.
/// Cuts the log roles off from every other node while `file` exists (a test hook).
fn spawn_partition_hook(file: PathBuf, transports: Vec<Transport>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut cut = false;
        loop {
            let now = file.exists();
            if now != cut {
                cut = now;
                warn!(file = %file.display(), cut, "test hook: this node's messages to other nodes are {}", if cut { "dropped" } else { "sent again" });
                for t in &transports {
                    t.set_partitioned(cut);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

fn spawn_address_book(mut members: watch::Receiver<BTreeMap<NodeId, Member>>, transports: Vec<Transport>) -> JoinHandle<()> {
    tokio::spawn(
        async move {
            let mut known: BTreeMap<NodeId, SocketAddr> = BTreeMap::new();
            loop {
                let current: Vec<(NodeId, SocketAddr)> =
                    members.borrow_and_update().values().filter_map(|m| Some((m.id, m.addr.parse().ok()?))).collect();
                for (id, addr) in current {
                    if known.insert(id, addr) != Some(addr) {
                        for t in &transports {
                            t.set_peer(id, addr);
                        }
                    }
                }
                if members.changed().await.is_err() {
                    return;
                }
            }
        }
        .instrument(tracing::info_span!("task", name = "address-book")),
    )
}

/// Which books' background work is this function node's: the books whose owner among
/// the engines of the current term (the live ones: the controller seals a dead node out
/// within its failure timeout) is this node's engine.
struct TermPeers {
    me: NodeId,
    status: watch::Receiver<EngineStatus>,
}

impl Peers for TermPeers {
    fn owns(&self, book: BookId) -> bool {
        let members: Vec<u64> = self.status.borrow().engines.iter().map(|n| u64::from(n.0)).collect();
        tally_durable::owner(book, &members) == Some(u64::from(self.me.0))
    }
}

/// The inbox of the controller this process runs while it leads; `None` while it
/// stands by.
type Leading = Mutex<Option<mpsc::Sender<(NodeId, Message)>>>;

/// The controller role: campaigns, and while it leads runs the controller over the
/// configuration stored in etcd. Messages that arrive while it does not lead are
/// dropped (the nodes send heartbeats to every controller).
fn spawn_controller_role(
    id: NodeId,
    settings: Settings,
    peers: Vec<NodeId>,
    plane: ControlPlane,
    members: watch::Receiver<BTreeMap<NodeId, Member>>,
    transport: Transport,
    mut inbox: mpsc::Receiver<(NodeId, Message)>,
) -> JoinHandle<()> {
    tokio::spawn(
        async move {
            // The current leadership's inbox; None while standing by.
            let leading: Arc<Leading> = Arc::default();
            let pump = {
                let leading = leading.clone();
                tokio::spawn(async move {
                    while let Some(m) = inbox.recv().await {
                        let to = leading.lock().unwrap_or_else(PoisonError::into_inner).clone();
                        if let Some(to) = to {
                            let _ = to.try_send(m);
                        }
                    }
                })
            };
            loop {
                if let Err(e) = lead_once(id, &settings, &peers, &plane, &members, &transport, &leading).await {
                    warn!(%id, error = %e, "controller leadership ended");
                }
                *leading.lock().unwrap_or_else(PoisonError::into_inner) = None;
                tokio::time::sleep(Duration::from_millis(200)).await;
                if pump.is_finished() {
                    return;
                }
            }
        }
        .instrument(tracing::info_span!("task", name = "controller-role", %id)),
    )
}

/// The cluster's settings, once a controller stored them (the first controller to start
/// does; a process with a controller role starts it first).
async fn stored_settings(plane: &ControlPlane) -> anyhow::Result<Settings> {
    let mut waited = false;
    loop {
        if let Some(settings) = plane.settings().await.context("reading the cluster's settings")? {
            return Ok(settings);
        }
        if !waited {
            info!("waiting for a controller to store the cluster's settings");
            waited = true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn lead_once(
    id: NodeId,
    settings: &Settings,
    peers: &[NodeId],
    plane: &ControlPlane,
    members: &watch::Receiver<BTreeMap<NodeId, Member>>,
    transport: &Transport,
    leading: &Leading,
) -> anyhow::Result<()> {
    let leadership = plane.campaign(id, LEADER_TTL_S).await?;
    info!(%id, "leading the cluster's controllers");
    let (stored, revision) = match plane.load_config().await? {
        Some((c, r)) => (Some(c), r),
        None => (None, Revision::ABSENT),
    };
    let roster = roster(&members.borrow(), stored.as_ref());
    let ccfg = ControllerConfig {
        n_logs: settings.n_logs,
        n_meta: settings.n_meta,
        n_data: settings.n_data,
        failure_timeout_us: settings.failure_timeout_ms * 1_000,
        tier: settings.index.map(|i| (i.shards, i.replicas)),
        peers: peers.to_vec(),
        ..ControllerConfig::default()
    };
    let store = Arc::new(EtcdConfigStore {
        plane: plane.clone(),
        runtime: tokio::runtime::Handle::current(),
        loaded: stored,
        revision: Mutex::new(revision),
    });
    let (tx, rx) = mpsc::channel(NetConfig::default().inbox_max);
    *leading.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
    let input = control_feed(members.clone(), plane.clone());
    let mut handle = driver::spawn_controller(id, ccfg, &roster, store, transport.clone(), rx, Some(input))?;
    let mut lost = leadership.lost();
    let lost = async move {
        // The guard `wait_for` returns is not `Send`: drop it here.
        let _ = lost.wait_for(|l| *l).await.map(|_| ());
    };
    tokio::select! {
        _ = lost => {
            handle.task.abort();
            let _ = (&mut handle.task).await;
            bail!("the leader's lease was lost")
        }
        _ = &mut handle.task => {
            // The controller stops on a failed persist: another controller wrote a
            // configuration (the CAS failed), or etcd is unreachable.
            leadership.resign().await?;
            bail!("the controller stopped")
        }
    }
}

/// What the leading controller is told: (id, role) of every registered sequencer,
/// storage node and engine, as they come and go, and the physical logs the stored
/// settings ask for (`tally cluster grow` raises them), read every second.
fn control_feed(mut members: watch::Receiver<BTreeMap<NodeId, Member>>, plane: ControlPlane) -> watch::Receiver<ControlInput> {
    let (tx, rx) = watch::channel(ControlInput::default());
    tokio::spawn(async move {
        let mut settings = tokio::time::interval(Duration::from_secs(1));
        settings.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut n_logs = 0;
        loop {
            let roster: Vec<(NodeId, Role)> =
                members.borrow_and_update().values().filter_map(|m| log_role(m.role).map(|r| (m.id, r))).collect();
            tx.send_if_modified(|input| {
                let changed = input.members != roster || input.n_logs != n_logs;
                *input = ControlInput { members: roster, n_logs };
                changed
            });
            tokio::select! {
                changed = members.changed() => if changed.is_err() { return },
                _ = settings.tick() => match plane.settings().await {
                    Ok(Some(s)) => n_logs = s.n_logs,
                    Ok(None) => {}
                    Err(e) => debug!(error = %e, "reading the cluster's settings"),
                },
                _ = tx.closed() => return,
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
cluster = "c"
name = "n"
etcd = ["http://127.0.0.1:2379"]
data_dir = "/tmp/x"
certs = "/tmp/x/certs"
host = "127.0.0.1"
controllers = [1]
"#;

    #[test]
    fn configs_naming_unknown_roles_or_duplicates_are_refused() {
        let parse = |extra: &str| -> anyhow::Result<NodeConfig> {
            let c: NodeConfig = toml::from_str(&format!("{MINIMAL}{extra}"))?;
            c.validate()?;
            Ok(c)
        };
        let err = |extra: &str| parse(extra).unwrap_err().to_string();
        assert!(err("").contains("at least one role"));
        assert!(err("[scheduler]\nid = 3\nport = 1\n").contains("unknown field `scheduler`"), "{}", err("[scheduler]\n"));
        assert!(
            err("[storage]\nid = 3\nport = 7000\n[sequencer]\nid = 3\nport = 7001\n").contains("node id 3 is given to two roles")
        );
        assert!(
            err("[storage]\nid = 3\nport = 7000\n[sequencer]\nid = 4\nport = 7000\n").contains("port 7000 is given to two roles")
        );
        assert!(err("[controller]\nid = 2\nport = 7000\n").contains("not in `controllers`"));
        assert!(err("[storage]\nid = 3\nport = 7000\nrole = \"x\"\n").contains("unknown field `role`"));
        let ok = parse("[storage]\nid = 3\nport = 7000\n[controller]\nid = 1\nport = 7001\n").unwrap();
        assert_eq!(ok.log_roles().len(), 2);
    }

    #[test]
    fn a_controller_taking_over_counts_the_stored_index_nodes_that_are_down() {
        // Index node 8 died (its lease expired); the stored configuration names it.
        let stored = Configuration {
            n_logs: 1,
            controller: NodeId(1),
            terms: vec![],
            indexers: vec![vec![]],
            tier: Some(tally_logsvc::TierLayout { shards: vec![vec![NodeId(8), NodeId(9)]], aggregators: vec![] }),
        };
        let live = Member {
            id: NodeId(9),
            role: MemberRole::Index,
            addr: "127.0.0.1:7000".into(),
            http: None,
            process: "p".into(),
            pid: 1,
            incarnation: 1,
        };
        let members = BTreeMap::from([(live.id, live)]);
        assert_eq!(roster(&members, Some(&stored)), vec![(NodeId(8), Role::Index), (NodeId(9), Role::Index)]);
    }

    #[test]
    fn a_process_refuses_ids_and_addresses_another_process_registered() {
        let c: NodeConfig = toml::from_str(&format!("{MINIMAL}[storage]\nid = 3\nport = 7000\n")).unwrap();
        let member = |id: u32, addr: &str, process: &str| Member {
            id: NodeId(id),
            role: MemberRole::Storage,
            addr: addr.into(),
            http: None,
            process: process.into(),
            pid: 1,
            incarnation: 1,
        };
        let members = |m: Member| BTreeMap::from([(m.id, m)]);
        assert!(check_not_registered(&c, &members(member(3, "127.0.0.1:7000", "n"))).is_ok(), "its own earlier run");
        let e = check_not_registered(&c, &members(member(3, "127.0.0.1:9", "other"))).unwrap_err().to_string();
        assert!(e.contains("node id 3 (Storage) is registered by process other"), "{e}");
        let e = check_not_registered(&c, &members(member(4, "127.0.0.1:7000", "other"))).unwrap_err().to_string();
        assert!(e.contains("address 127.0.0.1:7000 is registered by node 4"), "{e}");
    }
}
