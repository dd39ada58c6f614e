//! An in-process loopback cluster: every role of the shared log in one process, each with
//! its own QUIC endpoint on 127.0.0.1 and its own directory. For tests and `tally dev`. By
//! default the nodes hand messages to each other in process (`LocalNet`, `local_delivery`)
//! and run on a thread of their own (`NodeThread`, `node_thread`); either can be turned
//! off, to keep every message on QUIC as between processes.
//!
//! ```text
//!   dir/
//!     certs/             the dev cluster's CA and leaf (Certs)
//!     controller/        FileControllerStore: the configuration installed last
//!     sequencer-<id>/    JournalMetalogStore
//!     storage-<id>/      JournalStore (or the RocksStore an earlier version left)
//!     cold/              the indexes' scratch files of cold chunks, unlinked at once
//! ```
//!
//! Node ids: the controller is 0, then sequencers, storage nodes and engines, counting
//! up from 1 in that order. The same builder counts give the same ids, so a build over
//! a directory an earlier build left (after [`Cluster::shutdown`], or a crash) resumes
//! that cluster: its controller seals the term it had stored and installs the next one,
//! and every book keeps its records and seqnums. Ports are new on every build; nodes
//! find each other through the builder's address book.
//!
//! [`Cluster::shutdown`] returns once every store is closed, so that the directory can be
//! opened again, and [`Cluster::add_logs`] asks the controller for more physical logs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tally_log_core::tier::{AggregatorConfig, IndexNodeConfig, IndexNodeReport};
use tally_log_core::{
    Configuration, ControllerConfig, EngineConfig, Error, Message, MetalogMode, NodeId, Result, Role, SequencerConfig,
    StorageConfig, Term,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::client::LogClient;
use crate::driver::{self, ControlInput, EngineDriverConfig, EngineHandle, NodeThread, StorageStores};
use crate::net::{Certs, LocalNet, NetConfig, Transport};
use crate::store::{
    cold_index, open_record_store, FileControllerStore, FsyncPolicy, GroupCommitConfig, JournalMetalogStore, RecordStore,
    RecordStoreKind, INDEX_RESIDENT_DEFAULT,
};

/// The controller's node id.
pub const CONTROLLER: NodeId = NodeId(0);

/// Polling period of the waits below; each has a deadline.
const POLL: Duration = Duration::from_millis(5);

/// How long a stopped node's store may stay in use (by reads and persists already on
/// the blocking pool) before a restart or shutdown gives up waiting for it.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a cluster is made of. Start from [`ClusterBuilder::new`] and change fields.
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    pub dir: PathBuf,
    pub sequencers: u32,
    pub storage_nodes: u32,
    pub engines: u32,
    pub n_logs: u8,
    pub n_meta: usize,
    pub n_data: usize,
    pub fsync: FsyncPolicy,
    pub record_store: RecordStoreKind,
    pub engine_config: EngineConfig,
    pub engine_driver: EngineDriverConfig,
    pub sequencer_config: SequencerConfig,
    pub storage_config: StorageConfig,
    pub group_commit: GroupCommitConfig,
    pub net: NetConfig,
    /// The controller declares a silent node down after this long.
    pub failure_timeout_us: u64,
    /// Engines holding each log's index; the others forward reads to them (`None`:
    /// every engine indexes every log).
    pub indexers_per_log: Option<usize>,
    /// Partial mode (INDILOG): index shards and replicas per shard, run as index nodes
    /// after the engines (`None`: complete mode, the default).
    pub tier: Option<(usize, usize)>,
    /// Partial mode: aggregator nodes (0: each engine aggregates its own lookups).
    pub aggregators: u32,
    pub index_config: IndexNodeConfig,
    /// `build` fails if the cluster is not serving by then.
    pub ready_timeout: Duration,
    /// The nodes, all in this process, send to each other through a [`LocalNet`]
    /// rather than QUIC (true by default; false keeps every message on QUIC, as
    /// between processes).
    pub local_delivery: bool,
    /// The nodes run on a thread of their own ([`NodeThread`]), not on the runtime that
    /// builds the cluster, where its clients run (true by default).
    pub node_thread: bool,
}

impl ClusterBuilder {
    pub fn new(dir: impl Into<PathBuf>) -> ClusterBuilder {
        let mut b = ClusterBuilder {
            dir: dir.into(),
            sequencers: 3,
            storage_nodes: 3,
            engines: 2,
            n_logs: 1,
            n_meta: 3,
            n_data: 3,
            fsync: FsyncPolicy::default(),
            record_store: RecordStoreKind::default(),
            engine_config: EngineConfig::default(),
            engine_driver: EngineDriverConfig::default(),
            sequencer_config: SequencerConfig::default(),
            storage_config: StorageConfig::default(),
            group_commit: GroupCommitConfig::default(),
            net: NetConfig::default(),
            failure_timeout_us: 1_000_000,
            indexers_per_log: None,
            tier: None,
            aggregators: 0,
            index_config: IndexNodeConfig::default(),
            ready_timeout: Duration::from_secs(15),
            local_delivery: true,
            node_thread: true,
        };
        b.index_resident_max(INDEX_RESIDENT_DEFAULT);
        b
    }

    /// Every node's indexes keep at most `bytes` of full chunks in memory each, and
    /// spill the rest to scratch files under the cluster's directory.
    pub fn index_resident_max(&mut self, bytes: usize) {
        let cold = Some(cold_index(self.dir.join("cold"), bytes));
        self.engine_config.cold_index = cold.clone();
        self.storage_config.cold_index = cold;
    }

    /// Starts every node and returns once the controller has installed a term and every
    /// engine has a configuration. Over a directory that holds a cluster (see the module
    /// documentation), the cluster resumes: the term installed is a new one, after
    /// every term the directory's cluster had.
    pub async fn build(self) -> Result<Cluster> {
        let checks = [
            (self.sequencers > 0, "at least one sequencer"),
            (self.storage_nodes > 0, "at least one storage node"),
            (self.engines > 0, "at least one engine"),
            (self.n_logs > 0, "at least one physical log"),
            (self.n_meta > 0 && self.n_data > 0, "n_meta and n_data must be positive"),
            (
                self.sequencer_config.metalog == MetalogMode::Synced || self.n_meta >= 3,
                "n_meta >= 3 for a replicated metalog (a majority must outlive a power loss)",
            ),
        ];
        if let Some((_, what)) = checks.iter().find(|(ok, _)| !ok) {
            return Err(Error::InvalidArgument(format!("a cluster needs {what}")));
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::Storage(format!("creating {}: {e}", self.dir.display())))?;
        let certs = Certs::load_or_generate(&self.dir.join("certs"))?;
        let localhost: SocketAddr = "127.0.0.1:0".parse().expect("a valid address");

        let mut roster = Vec::new();
        let mut next = 1;
        let index_nodes = self.tier.map_or(0, |(s, r)| (s * r) as u32);
        for (role, count) in [
            (Role::Sequencer, self.sequencers),
            (Role::Storage, self.storage_nodes),
            (Role::Engine, self.engines),
            (Role::Index, index_nodes),
            (Role::Aggregator, if self.tier.is_some() { self.aggregators } else { 0 }),
        ] {
            for _ in 0..count {
                roster.push((NodeId(next), role));
                next += 1;
            }
        }

        // Bind every endpoint first, so every address book is complete before any node
        // sends its first message.
        let local = self.local_delivery.then(LocalNet::new);
        let (ctl_transport, ctl_inbox) = Transport::bind(CONTROLLER, localhost, &certs, self.net.clone()).await?;
        let mut bound = Vec::new();
        for &(id, role) in &roster {
            let (t, inbox) = Transport::bind(id, localhost, &certs, self.net.clone()).await?;
            bound.push((id, role, t, inbox));
        }
        if let Some(net) = &local {
            for t in std::iter::once(&ctl_transport).chain(bound.iter().map(|(_, _, t, _)| t)) {
                t.join_local(net);
            }
        }
        let mut book = vec![(CONTROLLER, ctl_transport.local_addr())];
        book.extend(bound.iter().map(|(id, _, t, _)| (*id, t.local_addr())));
        for t in std::iter::once(&ctl_transport).chain(bound.iter().map(|(_, _, t, _)| t)) {
            for &(id, addr) in &book {
                t.set_peer(id, addr);
            }
        }

        let ccfg = ControllerConfig {
            n_logs: self.n_logs,
            n_meta: self.n_meta,
            n_data: self.n_data,
            failure_timeout_us: self.failure_timeout_us,
            indexers_per_log: self.indexers_per_log,
            tier: self.tier,
            ..ControllerConfig::default()
        };
        let controller_store = Arc::new(FileControllerStore::open(&self.dir.join("controller"))?);
        let controller_weak = Arc::downgrade(&controller_store);
        let (control, input) = watch::channel(ControlInput { members: roster.clone(), n_logs: self.n_logs });
        let thread = if self.node_thread { Some(NodeThread::start()?) } else { None };
        let controller = on_thread(&thread, || {
            driver::spawn_controller(CONTROLLER, ccfg, &roster, controller_store, ctl_transport.clone(), ctl_inbox, Some(input))
        })?;
        let mut cluster = Cluster {
            builder: self,
            certs,
            controller: NodeSlot { id: CONTROLLER, transport: Some(ctl_transport), task: Some(controller.task) },
            installed: controller.installed,
            control,
            controller_store: controller_weak,
            sequencers: Vec::new(),
            storage: Vec::new(),
            engines: Vec::new(),
            index_nodes: Vec::new(),
            aggregator_nodes: Vec::new(),
            aggregator_probes: Vec::new(),
            index_probes: Vec::new(),
            local,
            thread,
        };
        // A node that fails to start (a store that is locked by another process, or
        // damaged) fails the build; the nodes already running stop with it.
        if let Err(e) = cluster.start_nodes(bound).await {
            cluster.shutdown().await;
            return Err(e);
        }
        info!(dir = %cluster.builder.dir.display(), "cluster ready");
        Ok(cluster)
    }
}

type Bound = (NodeId, Role, Transport, mpsc::Receiver<(NodeId, Message)>);

struct NodeSlot {
    id: NodeId,
    transport: Option<Transport>,
    task: Option<JoinHandle<()>>,
}

impl NodeSlot {
    /// Stops the node's task and closes its endpoint.
    async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            // Resolves once the task's future (and what it owns) has been dropped.
            let _ = task.await;
        }
        if let Some(t) = self.transport.take() {
            t.shutdown().await;
        }
    }
}

struct SequencerSlot {
    node: NodeSlot,
    /// Lets a shutdown wait until the journal's lock is free (see `StorageSlot::store`).
    store: Weak<JournalMetalogStore>,
}

struct StorageSlot {
    node: NodeSlot,
    addr: SocketAddr,
    /// Lets a restart wait until every user of the old store (reads on the blocking
    /// pool) has let go of it, so RocksDB's lock is free.
    store: Weak<dyn RecordStore>,
}

struct EngineSlot {
    id: NodeId,
    transport: Transport,
    handle: EngineHandle,
    /// Killed ([`Cluster::kill_engine`]): its task is over.
    stopped: bool,
}

/// A running loopback cluster. Drop it only after [`Cluster::shutdown`], or its tasks
/// keep running until the runtime stops.
pub struct Cluster {
    builder: ClusterBuilder,
    certs: Certs,
    controller: NodeSlot,
    installed: watch::Receiver<Option<Arc<Configuration>>>,
    /// What the controller is told: the roster, and the physical logs asked for.
    control: watch::Sender<ControlInput>,
    /// Lets a shutdown wait for a persist still on the blocking pool, which a build
    /// over the same directory must not race.
    controller_store: Weak<FileControllerStore>,
    sequencers: Vec<SequencerSlot>,
    storage: Vec<StorageSlot>,
    engines: Vec<EngineSlot>,
    index_nodes: Vec<NodeSlot>,
    aggregator_nodes: Vec<NodeSlot>,
    aggregator_probes: Vec<driver::AggregatorProbe>,
    index_probes: Vec<driver::IndexProbe>,
    /// The nodes' in-process network, when `local_delivery` is on.
    local: Option<LocalNet>,
    /// Where the nodes run, when `node_thread` is on. Declared last: dropped after
    /// everything that refers to its tasks.
    thread: Option<NodeThread>,
}

/// Calls `spawn` with `thread` entered, so that the node tasks it starts run there.
fn on_thread<T>(thread: &Option<NodeThread>, spawn: impl FnOnce() -> T) -> T {
    let _entered = thread.as_ref().map(NodeThread::enter);
    spawn()
}

/// Waits until nothing holds `store` any more, so its directory can be opened again.
async fn wait_released<T: ?Sized>(store: &Weak<T>, deadline: Instant) -> Result<()> {
    while store.strong_count() > 0 {
        if Instant::now() >= deadline {
            return Err(Error::Timeout(RELEASE_TIMEOUT.as_millis() as u64));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

impl Cluster {
    fn node_dir(&self, role: &str, id: NodeId) -> PathBuf {
        self.builder.dir.join(format!("{role}-{}", id.0))
    }

    /// Starts every node of `bound` over its directory, then waits until the cluster
    /// serves.
    async fn start_nodes(&mut self, bound: Vec<Bound>) -> Result<()> {
        for (id, role, transport, inbox) in bound {
            match role {
                Role::Aggregator => {
                    let cfg = AggregatorConfig::default();
                    let (task, probe) =
                        on_thread(&self.thread, || driver::spawn_aggregator(id, vec![CONTROLLER], cfg, transport.clone(), inbox));
                    self.aggregator_nodes.push(NodeSlot { id, transport: Some(transport), task: Some(task) });
                    self.aggregator_probes.push(probe);
                }
                Role::Index => {
                    let cfg = self.builder.index_config.clone();
                    let (task, probe) =
                        on_thread(&self.thread, || driver::spawn_index(id, vec![CONTROLLER], cfg, transport.clone(), inbox));
                    self.index_nodes.push(NodeSlot { id, transport: Some(transport), task: Some(task) });
                    self.index_probes.push(probe);
                }
                Role::Sequencer => {
                    let store = Arc::new(JournalMetalogStore::open(&self.node_dir("sequencer", id))?);
                    let weak = Arc::downgrade(&store);
                    let cfg = self.builder.sequencer_config.clone();
                    let task = on_thread(&self.thread, || {
                        driver::spawn_sequencer(id, vec![CONTROLLER], cfg, store, transport.clone(), inbox)
                    })?;
                    self.sequencers
                        .push(SequencerSlot { node: NodeSlot { id, transport: Some(transport), task: Some(task) }, store: weak });
                }
                Role::Storage => {
                    let (task, store) = self.start_storage(id, transport.clone(), inbox)?;
                    let addr = transport.local_addr();
                    self.storage.push(StorageSlot {
                        node: NodeSlot { id, transport: Some(transport), task: Some(task) },
                        addr,
                        store,
                    });
                }
                Role::Engine => {
                    let handle = on_thread(&self.thread, || {
                        driver::spawn_engine(
                            id,
                            vec![CONTROLLER],
                            self.builder.engine_config.clone(),
                            self.builder.engine_driver.clone(),
                            transport.clone(),
                            inbox,
                        )
                    });
                    self.engines.push(EngineSlot { id, transport, handle, stopped: false });
                }
            }
        }
        let deadline = Instant::now() + self.builder.ready_timeout;
        self.wait_ready(deadline).await
    }

    fn start_storage(
        &self,
        id: NodeId,
        transport: Transport,
        inbox: mpsc::Receiver<(NodeId, Message)>,
    ) -> Result<(JoinHandle<()>, Weak<dyn RecordStore>)> {
        let records = open_record_store(&self.node_dir("storage", id), self.builder.record_store, self.builder.fsync)?;
        let weak = Arc::downgrade(&records);
        // One sink for the spans of every node in the process: the engines'.
        let spans = self.builder.engine_driver.spans.clone();
        let stores = StorageStores { records, group_commit: self.builder.group_commit.clone(), spans };
        let task = on_thread(&self.thread, || {
            driver::spawn_storage(id, vec![CONTROLLER], self.builder.storage_config.clone(), stores, transport, inbox)
        })?;
        Ok((task, weak))
    }

    async fn wait_ready(&self, deadline: Instant) -> Result<()> {
        let timeout = || Error::Timeout(self.builder.ready_timeout.as_millis() as u64);
        let mut installed = self.installed.clone();
        tokio::time::timeout_at(deadline, installed.wait_for(|c| c.is_some()))
            .await
            .map_err(|_| timeout())?
            .map_err(|_| Error::Stopped)?;
        for e in &self.engines {
            let mut status = e.handle.status.clone();
            tokio::time::timeout_at(deadline, status.wait_for(|s| s.n_logs.is_some()))
                .await
                .map_err(|_| timeout())?
                .map_err(|_| Error::Stopped)?;
        }
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.builder.dir
    }

    pub fn certs(&self) -> &Certs {
        &self.certs
    }

    /// Physical logs of the configuration installed last.
    pub fn n_logs(&self) -> u8 {
        self.installed.borrow().as_ref().map_or(self.builder.n_logs, |c| c.n_logs)
    }

    /// Asks the controller for `n` physical logs; the next term adds the missing ones.
    /// Returns once a configuration with them is installed.
    pub async fn add_logs(&mut self, n: u8) -> Result<Arc<Configuration>> {
        self.control.send_modify(|c| c.n_logs = n);
        let mut installed = self.installed.clone();
        let deadline = Instant::now() + self.builder.ready_timeout;
        let config = tokio::time::timeout_at(deadline, installed.wait_for(|c| c.as_ref().is_some_and(|c| c.n_logs >= n)))
            .await
            .map_err(|_| Error::Timeout(self.builder.ready_timeout.as_millis() as u64))?
            .map_err(|_| Error::Stopped)?;
        Ok(config.clone().expect("waited for it"))
    }

    /// Where every node of the cluster hands the spans of traced calls, once set.
    pub fn spans(&self) -> crate::trace::SpanSinks {
        self.builder.engine_driver.spans.clone()
    }

    /// A user client of engine `i`.
    pub fn client(&self, i: usize) -> LogClient {
        LogClient::user(self.engines[i].handle.link.clone())
    }

    /// A platform client of engine `i`, which may use reserved tags.
    pub fn platform_client(&self, i: usize) -> LogClient {
        LogClient::platform(self.engines[i].handle.link.clone())
    }

    pub fn engine_id(&self, i: usize) -> NodeId {
        self.engines[i].id
    }

    pub fn engine_addr(&self, i: usize) -> SocketAddr {
        self.engines[i].transport.local_addr()
    }

    pub fn storage_id(&self, i: usize) -> NodeId {
        self.storage[i].node.id
    }

    pub fn storage_addr(&self, i: usize) -> SocketAddr {
        self.storage[i].addr
    }

    /// The transport of storage node `i` while it runs, for its counters.
    pub fn storage_transport(&self, i: usize) -> Option<&Transport> {
        self.storage[i].node.transport.as_ref()
    }

    /// Every running index node's counters and sizes (partial mode).
    pub async fn index_reports(&self) -> Vec<IndexNodeReport> {
        let mut out = Vec::new();
        for p in &self.index_probes {
            out.extend(p.report().await);
        }
        out
    }

    /// Aggregator `i`'s counters (its last report, if stopped).
    pub fn aggregator_report(&self, i: usize) -> driver::AggregatorReport {
        self.aggregator_probes[i].report()
    }

    /// Stops aggregator `i` (partial mode) abruptly, as if its process died.
    pub async fn kill_aggregator(&mut self, i: usize) {
        let slot = &mut self.aggregator_nodes[i];
        info!(id = %slot.id, "killing aggregator");
        slot.stop().await;
    }

    /// Stops index node `i` (partial mode) abruptly, as if its process died.
    pub async fn kill_index(&mut self, i: usize) {
        let slot = &mut self.index_nodes[i];
        info!(id = %slot.id, "killing index node");
        slot.stop().await;
    }

    /// An endpoint for node `id` on a new address, which it and every node learn.
    async fn bind_known(&self, id: NodeId) -> Result<(Transport, mpsc::Receiver<(NodeId, Message)>)> {
        let localhost = "127.0.0.1:0".parse().expect("a valid address");
        let (transport, inbox) = Transport::bind(id, localhost, &self.certs, self.builder.net.clone()).await?;
        if let Some(net) = &self.local {
            transport.join_local(net);
        }
        for (peer, addr) in self.address_book() {
            transport.set_peer(peer, addr);
        }
        for t in self.transports() {
            t.set_peer(id, transport.local_addr());
        }
        Ok((transport, inbox))
    }

    /// Starts index node `i` again, on a new address every node learns: it replays the
    /// metalog and fetches every record's metadata (an index node keeps no store).
    pub async fn restart_index(&mut self, i: usize) -> Result<()> {
        let id = self.index_nodes[i].id;
        if self.index_nodes[i].task.is_some() {
            return Err(Error::InvalidArgument(format!("index node {id} is running")));
        }
        let (transport, inbox) = self.bind_known(id).await?;
        let cfg = self.builder.index_config.clone();
        let (task, probe) = on_thread(&self.thread, || driver::spawn_index(id, vec![CONTROLLER], cfg, transport.clone(), inbox));
        self.index_nodes[i] = NodeSlot { id, transport: Some(transport), task: Some(task) };
        self.index_probes[i] = probe;
        info!(%id, "index node restarted");
        Ok(())
    }

    /// Starts a new engine, a function node that registers with the running cluster:
    /// the controller binds it in a new version of the current term (partial mode) or
    /// in a new term (complete mode). Returns its index for [`Cluster::client`].
    pub async fn add_engine(&mut self) -> Result<usize> {
        let id = NodeId(self.address_book().iter().map(|(n, _)| n.0).max().unwrap_or(0) + 1);
        let (transport, inbox) = self.bind_known(id).await?;
        let (cfg, driver) = (self.builder.engine_config.clone(), self.builder.engine_driver.clone());
        let handle =
            on_thread(&self.thread, || driver::spawn_engine(id, vec![CONTROLLER], cfg, driver, transport.clone(), inbox));
        self.engines.push(EngineSlot { id, transport, handle, stopped: false });
        self.control.send_modify(|c| c.members.push((id, Role::Engine)));
        info!(%id, "engine added");
        Ok(self.engines.len() - 1)
    }

    /// Stops engine `i` abruptly, as if its process died; the controller sees it fall
    /// silent after the failure timeout.
    pub async fn kill_engine(&mut self, i: usize) {
        let e = &mut self.engines[i];
        if std::mem::replace(&mut e.stopped, true) {
            return;
        }
        info!(id = %e.id, "killing engine");
        e.handle.task.abort();
        let _ = (&mut e.handle.task).await;
        e.transport.shutdown().await;
    }

    /// Waits until the controller has installed a configuration `done` accepts.
    pub async fn wait_for_config(&self, timeout: Duration, done: impl Fn(&Configuration) -> bool) -> Result<Arc<Configuration>> {
        let mut installed = self.installed.clone();
        let config = tokio::time::timeout(timeout, installed.wait_for(|c| c.as_ref().is_some_and(|c| done(c))))
            .await
            .map_err(|_| Error::Timeout(timeout.as_millis() as u64))?
            .map_err(|_| Error::Stopped)?;
        Ok(config.clone().expect("waited for a configuration"))
    }

    /// The configuration the controller installed last.
    pub fn configuration(&self) -> Option<Arc<Configuration>> {
        self.installed.borrow().clone()
    }

    /// Waits until the controller has installed `term` or a later one.
    pub async fn wait_for_term(&self, term: Term, timeout: Duration) -> Result<Arc<Configuration>> {
        self.wait_for_config(timeout, |c| c.current().term >= term).await
    }

    /// Stops storage node `i` abruptly: its task is aborted (unsynced writes are lost
    /// to the node, not to the disk) and its endpoint closed, as if the process died.
    pub async fn kill_storage(&mut self, i: usize) {
        let slot = &mut self.storage[i];
        info!(id = %slot.node.id, "killing storage node");
        slot.node.stop().await;
    }

    /// Restarts storage node `i` over its RocksDB directory with a new incarnation, on
    /// its old address if it is still free, else on a new one that every node learns.
    pub async fn restart_storage(&mut self, i: usize) -> Result<()> {
        let id = self.storage[i].node.id;
        if self.storage[i].node.task.is_some() {
            return Err(Error::InvalidArgument(format!("storage node {id} is running")));
        }
        let deadline = Instant::now() + RELEASE_TIMEOUT;
        wait_released(&self.storage[i].store, deadline).await?;
        let old = self.storage[i].addr;
        let bound = loop {
            match Transport::bind(id, old, &self.certs, self.builder.net.clone()).await {
                Ok(b) => break Some(b),
                Err(_) if Instant::now() < deadline => tokio::time::sleep(POLL).await,
                Err(_) => break None,
            }
        };
        let (transport, inbox) = match bound {
            Some(b) => b,
            None => {
                Transport::bind(id, "127.0.0.1:0".parse().expect("a valid address"), &self.certs, self.builder.net.clone())
                    .await?
            }
        };
        if let Some(net) = &self.local {
            transport.join_local(net);
        }
        let addr = transport.local_addr();
        for (peer, peer_addr) in self.address_book() {
            transport.set_peer(peer, peer_addr);
        }
        if addr != old {
            for t in self.transports() {
                t.set_peer(id, addr);
            }
        }
        let (task, store) = self.start_storage(id, transport.clone(), inbox)?;
        let slot = &mut self.storage[i];
        slot.node.transport = Some(transport);
        slot.node.task = Some(task);
        slot.addr = addr;
        slot.store = store;
        info!(%id, %addr, "storage node restarted");
        Ok(())
    }

    fn address_book(&self) -> Vec<(NodeId, SocketAddr)> {
        let mut book = Vec::new();
        for n in std::iter::once(&self.controller).chain(self.sequencers.iter().map(|s| &s.node)) {
            if let Some(t) = &n.transport {
                book.push((n.id, t.local_addr()));
            }
        }
        book.extend(self.storage.iter().map(|s| (s.node.id, s.addr)));
        book.extend(self.engines.iter().map(|e| (e.id, e.transport.local_addr())));
        let tier = self.index_nodes.iter().chain(&self.aggregator_nodes);
        book.extend(tier.filter_map(|n| Some((n.id, n.transport.as_ref()?.local_addr()))));
        book
    }

    fn transports(&self) -> Vec<&Transport> {
        let mut all: Vec<&Transport> = Vec::new();
        all.extend(
            std::iter::once(&self.controller).chain(self.sequencers.iter().map(|s| &s.node)).filter_map(|n| n.transport.as_ref()),
        );
        all.extend(self.storage.iter().filter_map(|s| s.node.transport.as_ref()));
        all.extend(self.engines.iter().map(|e| &e.transport));
        all.extend(self.index_nodes.iter().chain(&self.aggregator_nodes).filter_map(|n| n.transport.as_ref()));
        all
    }

    /// Stops every node, closes every endpoint and waits until every store is closed,
    /// so a build over the same directory can open them (RocksDB and the metalog
    /// journal lock their directories). Nodes stop abruptly, as in a crash: a build over the directory
    /// recovers whatever was durable.
    pub async fn shutdown(mut self) {
        // The controller first: it would otherwise see the others stop one by one and
        // reconfigure around them.
        self.controller.stop().await;
        for e in self.engines.iter_mut().filter(|e| !e.stopped) {
            e.handle.task.abort();
            let _ = (&mut e.handle.task).await;
            e.transport.shutdown().await;
        }
        for n in self.index_nodes.iter_mut().chain(&mut self.aggregator_nodes) {
            n.stop().await;
        }
        for s in &mut self.storage {
            s.node.stop().await;
        }
        for s in &mut self.sequencers {
            s.node.stop().await;
        }
        let deadline = Instant::now() + RELEASE_TIMEOUT;
        if let Err(e) = wait_released(&self.controller_store, deadline).await {
            warn!(error = %e, "the controller's store is still open");
        }
        for s in &self.sequencers {
            if let Err(e) = wait_released(&s.store, deadline).await {
                warn!(id = %s.node.id, error = %e, "a sequencer's metalog store is still open");
            }
        }
        for s in &self.storage {
            if let Err(e) = wait_released(&s.store, deadline).await {
                warn!(id = %s.node.id, error = %e, "a storage node's record store is still open");
            }
        }
        info!("cluster shut down");
    }
}
