//! Drivers: the IO-free protocol roles run over real IO.
//!
//! One tokio task per node, named `tally-<role>-<id>`, owns the node's state machine and
//! is the only code that calls it. The task waits on the node's [`Transport`] inbox, its
//! next tick and the role's own channels (write completions of a storage node, client
//! requests of an engine); after every input it performs the state machine's actions in
//! the order they were produced, exactly as the simulator does, but over QUIC and
//! RocksDB instead of simulated links and disks. Ticks follow the machine's timers
//! ([`NextTick`]) and its inputs, not a fixed period, so an idle node sleeps.
//!
//! ```text
//!   inbox (QUIC) ──┐                       ┌─> Transport::send
//!   next tick   ───┼─> state machine ──────┼─> JournalMetalogStore::persist (awaited: durable first)
//!   role channel ──┘   take_actions()      ├─> ControllerStore::persist (awaited: durable first)
//!                                          ├─> GroupCommit::submit ──callback──> role channel
//!                                          └─> spawn_blocking(read/reclaim/discard)
//! ```
//!
//! **Architecture Invariant:** drivers decide nothing about the protocol. They move
//! messages and bytes and report completions back; every decision is the state
//! machine's, so the simulator tests the same decisions.
//!
//! Time: `now` is microseconds since a per-process monotonic epoch ([`now_us`]). An
//! incarnation is unique per node start ([`new_incarnation`]), so the controller tells
//! a restarted node from its predecessor.
//!
//! Threads: the node tasks of a process run on a thread of their own (`NodeThread`: a
//! runtime of one worker, `tally-nodes`), in the in-process cluster (`node_thread`, on by
//! default) and for the log roles of a `tally node`, not on the runtime of the HTTP
//! servers, invocations and benchmark loops that call them: there, a node's input waited
//! behind every client task that was ready, where the kernel now runs the nodes' thread,
//! which sleeps more than it runs, first. Dropping a `NodeThread` waits for the tasks it
//! still runs, as dropping a runtime does.
//!
//! Ticks: a task sleeps until its machine's `NextTick`, or ticks right after an input
//! (which may have started a timer), at most once a millisecond. An idle node wakes only
//! for heartbeats, and the keep-alives that repair lost progress reports and tail pushes
//! ride along. The simulator ticks its nodes by the same rule.
//!
//! Batches: a sequencer's task takes every input waiting in its inbox (up to
//! `INPUTS_PER_BATCH_MAX`) between `Sequencer::begin_batch` and `end_batch`, then performs
//! their actions, with every metalog write they produced persisted by one
//! `MetalogStore::persist` (a batch, atomic) at the place of the first: the sends before it
//! (a primary's new entry to its backups) overlap the fsync, and every later action
//! (acknowledgements, pushes, seal answers) follows it. The persist runs on
//! `spawn_blocking` and finishes before the next action. A storage node's writes go through
//! group commit and come back as `on_written`, every completion waiting handed over in one
//! call, so that one progress report covers them. An engine takes its calls as `(Request,
//! position, reply)`, every call waiting (up to `CALLS_PER_BATCH_MAX`) before it acts, so
//! that the records of one batch reach each replica in one `Replicate`.
//!
//! Reads in place: an engine's task holds its engine under a lock, taken only while it
//! hands the engine one input and takes its actions. An `EngineLink` (the request channel
//! and that lock) lets a client in the same process ask `Engine::read_now` first, which
//! answers a read of a cached record at a position the index has reached (or attaches aux
//! data there) without a channel, a task switch or a wakeup; any other request goes
//! through the channel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tally_log_core::tier::{
    AggregatorConfig, AggregatorNode, AggregatorStats, IndexNode, IndexNodeAction, IndexNodeConfig, IndexNodeReport,
};
use tally_log_core::{
    meta_reply, stored_entries_messages, BookId, Configuration, Context, Controller, ControllerAction, ControllerConfig, Engine,
    EngineAction, EngineConfig, Error, LogId, Message, MetalogMode, MetalogPosition, Micros, NextTick, NodeId, OpId, Reply,
    Request, Result, Role, SeqNum, Sequencer, SequencerAction, SequencerConfig, StorageAction, StorageConfig, StorageNode,
    StoredData, Tag,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn, Instrument};

use crate::net::Transport;
use crate::store::{ControllerStore, GroupCommit, GroupCommitConfig, JournalMetalogStore, MetalogStore, RecordStore};
use crate::trace::{EngineTraces, SpanRef, SpanSinks, StorageTraces};

mod aggregator;
mod index;
mod storage;

pub use aggregator::{spawn_aggregator, AggregatorProbe, AggregatorReport};
pub use index::{spawn_index, IndexProbe};
pub use storage::{spawn_storage, StorageStores};

/// How soon a node ticks after an input, and the shortest time between two ticks.
/// State machines keep their own, longer timers; a tick gives them the chance to act.
const TICK: Duration = Duration::from_millis(1);

/// Inputs a sequencer takes before it performs their actions (see `run_sequencer`).
const INPUTS_PER_BATCH_MAX: usize = 256;

/// Calls an engine's task hands its engine before it performs their actions.
const CALLS_PER_BATCH_MAX: usize = 64;

/// Microseconds since this process's monotonic epoch (the first call).
pub fn now_us() -> Micros {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as Micros
}

/// A value unique to this start of a node: nanoseconds since the UNIX epoch, made
/// strictly increasing within the process so two nodes started in the same
/// nanosecond (or a restart within one clock tick) still differ.
pub fn new_incarnation() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    let mut prev = LAST.load(Ordering::Relaxed);
    loop {
        let next = wall.max(prev + 1);
        match LAST.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(p) => prev = p,
        }
    }
}

/// Runs a store's blocking persist on the blocking pool and waits for it, so the
/// node's later actions happen after the write is durable.
async fn durably(what: &'static str, persist: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
    tokio::task::spawn_blocking(persist).await.map_err(|e| Error::Storage(format!("{what} task failed: {e}")))?
}

/// When a node's task next ticks its state machine: right after an input (which may
/// have started a timer), or within [`TICK`] of it if the last tick was less than
/// that ago; otherwise when the machine's last [`NextTick`] said. A busy node ticks
/// every millisecond; an idle one wakes only for its timers (a heartbeat, every 100 ms
/// by default) and its inputs, never on a fixed period.
struct Ticks {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    last: tokio::time::Instant,
}

impl Ticks {
    fn new() -> Ticks {
        let now = tokio::time::Instant::now();
        Ticks { sleep: Box::pin(tokio::time::sleep_until(now)), last: now }
    }

    /// An input arrived; true if the machine should tick now, with it.
    #[must_use]
    fn input(&mut self) -> bool {
        let soon = self.last + TICK;
        if tokio::time::Instant::now() >= soon {
            return true;
        }
        if self.sleep.deadline() > soon {
            self.sleep.as_mut().reset(soon);
        }
        false
    }

    /// The machine ticked and said when it needs the next one.
    fn ticked(&mut self, next: NextTick) {
        self.last = tokio::time::Instant::now();
        let wait = Duration::from_micros(next.due().saturating_sub(now_us())).max(TICK);
        self.sleep.as_mut().reset(self.last + wait);
    }
}

/// A thread of the nodes' own: a tokio runtime of one worker, named `tally-nodes`, that
/// runs the node tasks spawned while it is entered ([`NodeThread::enter`]), and their
/// reads and persists on its blocking pool.
///
/// A process that also runs clients of its nodes (HTTP connections, invocations, a
/// benchmark's closed loops) would otherwise queue every node's input behind whatever
/// client tasks are ready on the same workers: with 64 appending clients on this 2-core
/// machine a record waited ~200 µs to reach its last storage node and ~90 µs for the
/// sequencer to see its progress, a quarter of its latency. On a thread of their own the
/// nodes wait for the kernel's scheduler instead, which runs a thread that has slept
/// before one that has not, and a node waits behind other nodes only.
///
/// Dropping it drops the tasks that still run there and waits for its blocking tasks
/// (a persist, a read) to end, as dropping the caller's runtime would: a process that
/// exits right after must not find one of them still using a store.
pub struct NodeThread {
    runtime: Option<tokio::runtime::Runtime>,
}

/// The name of a [`NodeThread`]'s worker (and of its blocking pool's threads).
const NODE_THREAD_NAME: &str = "tally-nodes";

impl NodeThread {
    pub fn start() -> Result<NodeThread> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(NODE_THREAD_NAME)
            .enable_all()
            .build()
            .map_err(|e| Error::Storage(format!("cannot start the nodes' thread: {e}")))?;
        Ok(NodeThread { runtime: Some(runtime) })
    }

    /// While the guard lives, `spawn_*` start their tasks on this thread. Not to be held
    /// across an await.
    pub fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.runtime.as_ref().expect("the runtime lives until drop").enter()
    }
}

impl Drop for NodeThread {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else { return };
        if std::thread::current().name() == Some(NODE_THREAD_NAME) {
            // Dropped by one of its own tasks: waiting would wait for this very thread.
            runtime.shutdown_background();
            return;
        }
        if tokio::runtime::Handle::try_current().is_err() {
            drop(runtime);
            return;
        }
        // tokio refuses to block in an async context, so the wait happens on a thread
        // of its own; blocking the caller's thread meanwhile is the point.
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("tally-nodes-stop".into())
                .spawn_scoped(s, move || drop(runtime))
                .expect("a thread to stop the nodes' runtime on");
        });
    }
}

fn task_name(role: &str, id: NodeId) -> String {
    format!("tally-{role}-{}", id.0)
}

/// Spawns a node task. tokio names tasks only with its unstable API, so the name goes
/// into the task's tracing span instead.
fn spawn_node<F>(role: &'static str, id: NodeId, fut: F) -> JoinHandle<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let name = task_name(role, id);
    tokio::spawn(fut.instrument(tracing::info_span!("node", task = %name)))
}

// ---------------------------------------------------------------------------------------
// Sequencer

/// Starts a sequencer recovered from `store`.
///
/// Task `tally-sequencer-<id>`: cancelled (aborted, or the runtime stops), the node
/// stops between two awaits; a persist already handed to the blocking pool still
/// completes, which is harmless because the state machine never saw its outcome. On an
/// error (the metalog store fails) it logs and stops the node: acting on a write that
/// may not be durable would break the quorum's promise.
pub fn spawn_sequencer(
    id: NodeId,
    controllers: Vec<NodeId>,
    cfg: SequencerConfig,
    store: Arc<JournalMetalogStore>,
    transport: Transport,
    inbox: mpsc::Receiver<(NodeId, Message)>,
) -> Result<JoinHandle<()>> {
    let incarnation = new_incarnation();
    let (mode, sync_every) = (cfg.metalog, Duration::from_micros(cfg.unsynced_max_us.max(1)));
    let mut node = Sequencer::recover(id, controllers, incarnation, cfg, store.load()?);
    if store.lost_unsynced() {
        node.lost_unsynced_writes();
    }
    info!(%id, incarnation, ?mode, "sequencer started");
    let syncs = store.clone();
    Ok(spawn_node("sequencer", id, async move {
        // A replicated metalog's entries are synced in the background.
        let background = async move {
            loop {
                tokio::time::sleep(sync_every).await;
                let store = syncs.clone();
                durably("metalog sync", move || store.sync()).await?;
            }
        };
        let run = run_sequencer(node, mode, store, transport, inbox);
        let stopped = match mode {
            MetalogMode::Synced => run.await,
            MetalogMode::Replicated => tokio::select! { r = run => r, r = background => r },
        };
        if let Err(e) = stopped {
            error!(%id, error = %e, "sequencer stopped");
        }
    }))
}

async fn run_sequencer(
    mut node: Sequencer,
    mode: MetalogMode,
    store: Arc<JournalMetalogStore>,
    transport: Transport,
    mut inbox: mpsc::Receiver<(NodeId, Message)>,
) -> Result<()> {
    let mut ticks = Ticks::new();
    loop {
        tokio::select! {
            m = inbox.recv() => match m {
                Some((from, msg)) => {
                    // And whatever else waits, as one batch: one entry per metalog for
                    // all the progress it reports, and one sync for all it persists. A
                    // primary of quorum one commits each entry as it issues it, so one
                    // input at a time would give one entry, and one sync, per report.
                    node.begin_batch();
                    node.on_message(now_us(), from, msg);
                    for _ in 1..INPUTS_PER_BATCH_MAX {
                        let Ok((from, msg)) = inbox.try_recv() else { break };
                        node.on_message(now_us(), from, msg);
                    }
                    if ticks.input() {
                        ticks.ticked(node.on_tick(now_us()));
                    }
                    node.end_batch(now_us());
                }
                None => return Ok(()),
            },
            _ = &mut ticks.sleep => ticks.ticked(node.on_tick(now_us())),
        }
        let actions = node.take_actions();
        // Every write of the batch is persisted, in order, where its first write stands:
        // the actions before it (a primary's sends of a new entry to its backups) go
        // first, so the fsyncs overlap; every later one announces a write (acks, pushes)
        // and follows the sync. Persisting a write earlier than its place only makes
        // it durable sooner.
        let mut writes: Vec<_> =
            actions.iter().filter_map(|a| if let SequencerAction::Persist(w) = a { Some(w.clone()) } else { None }).collect();
        for action in actions {
            match action {
                SequencerAction::Send(to, msg) => transport.send(to, msg),
                SequencerAction::Persist(_) if writes.is_empty() => {}
                SequencerAction::Persist(_) => {
                    let (store, writes) = (store.clone(), std::mem::take(&mut writes));
                    match mode.syncs(&writes) {
                        true => durably("metalog persist", move || store.persist(&writes)).await?,
                        // A write to the kernel's memory: as quick in place as on the pool.
                        false => store.write_unsynced(&writes)?,
                    }
                }
                SequencerAction::Committed(entry) => {
                    debug!(term = entry.term.0, log = entry.log.0, index = entry.index, "entry committed")
                }
                SequencerAction::NeedsNewTerm { term, log } => {
                    warn!(term = term.0, log = log.0, "log needs a new term: position space exhausted")
                }
                SequencerAction::SendStored { to, term, log, from, end, gap } => {
                    let (store, transport) = (store.clone(), transport.clone());
                    // Task sequencer.read_entries: ends after sending; cancelled or
                    // failed, the follower or backup asks again.
                    tokio::spawn(async move {
                        let read = tokio::task::spawn_blocking(move || store.read_entries(term, log, from, end)).await;
                        let read = read.unwrap_or_else(|e| Err(Error::Storage(format!("read task failed: {e}"))));
                        for msg in stored_entries_messages(term, log, from, end, gap, read) {
                            transport.send(to, msg);
                        }
                    });
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Engine

/// A client request to an engine: the request, the caller's metalog position for the
/// book's log, and where the outcome goes (with the position the caller moves to).
/// A request to an engine: the caller's context goes along, since only the engine
/// knows which log the book is in; the reply names that log and the position in it
/// the caller has now seen.
pub struct EngineCall {
    pub request: Request,
    pub context: Context,
    pub reply: oneshot::Sender<(Result<Reply>, LogId, MetalogPosition)>,
    /// The caller's span, if it traces the call (`trace.rs`).
    pub trace: Option<SpanRef>,
}

/// What an engine driver publishes about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStatus {
    /// Physical logs of the configuration the engine has, `None` before it has one.
    pub n_logs: Option<u8>,
    /// The engines of its current term: the live members, as the controller sees them.
    pub engines: Vec<NodeId>,
}

/// Limits of an engine driver.
#[derive(Clone, Debug)]
pub struct EngineDriverConfig {
    /// Client requests waiting for the engine task.
    pub requests_queue_max: usize,
    /// Requests the engine works on at once; more fail with `Unavailable`.
    pub ops_inflight_max: usize,
    /// Test hook: the engine learns of metalog entries (pushed or fetched), and of
    /// decided updates in partial mode, this long after they arrive, as an engine on a
    /// slow link or a busy machine would (0 in production).
    pub metalog_delay_ms: u64,
    /// Where the spans of traced calls go, once set.
    pub spans: SpanSinks,
}

impl Default for EngineDriverConfig {
    fn default() -> Self {
        EngineDriverConfig {
            requests_queue_max: 4096,
            ops_inflight_max: 200_000,
            metalog_delay_ms: 0,
            spans: SpanSinks::default(),
        }
    }
}

/// How clients in the engine's process reach it: its task's request channel, and the
/// engine itself, for the reads it answers in place. Cheap to clone.
#[derive(Clone)]
pub struct EngineLink {
    calls: mpsc::Sender<EngineCall>,
    engine: Arc<Mutex<Engine>>,
}

impl std::fmt::Debug for EngineLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineLink").finish_non_exhaustive()
    }
}

impl EngineLink {
    /// Hands a request to the engine's task.
    pub(crate) async fn call(&self, call: EngineCall) -> Result<()> {
        self.calls.send(call).await.map_err(|_| Error::Stopped)
    }

    /// The engine's answer to a read it can give at once ([`Engine::read_now`]): the
    /// index has reached the caller's position and the record is cached (or the request
    /// attaches aux data, which the engine keeps in that cache). The lock is
    /// the one the engine's task holds while it handles an input, so the answer is
    /// the one the task would give; no channel, task switch or wakeup.
    pub(crate) fn read_now(&self, context: &Context, request: &Request) -> Option<(Result<Reply>, LogId, MetalogPosition)> {
        if self.calls.is_closed() {
            return None;
        }
        // A poisoned lock means the task panicked; the channel then says Stopped.
        self.engine.lock().ok()?.read_now(context, request)
    }

    /// [`Engine::read_prev_seqnum_now`] under the engine's lock, as [`EngineLink::read_now`].
    pub(crate) fn read_prev_seqnum_now(
        &self,
        context: &Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> Option<(Option<SeqNum>, LogId, MetalogPosition)> {
        if self.calls.is_closed() {
            return None;
        }
        self.engine.lock().ok()?.read_prev_seqnum_now(context, book, tag, max)
    }

    /// Partial mode: reads per path so far, and the bytes of each log's local index.
    /// `None` in complete mode.
    pub fn partial_stats(&self) -> Option<PartialReport> {
        let engine = self.engine.lock().ok()?;
        let reads = engine.partial_stats()?;
        let local_bytes = (0..engine.n_logs().unwrap_or(0)).filter_map(|l| engine.local_index_bytes(LogId(l))).collect();
        Some(PartialReport { reads, local_bytes })
    }
}

/// What an engine in partial mode reports for `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct PartialReport {
    pub reads: tally_log_core::PartialStats,
    /// Per physical log: the local index's suffix, tag cache and popularity cache bytes.
    pub local_bytes: Vec<(usize, usize, usize)>,
}

/// Handles to a running engine.
pub struct EngineHandle {
    pub link: EngineLink,
    pub status: watch::Receiver<EngineStatus>,
    pub task: JoinHandle<()>,
}

/// Starts an engine.
///
/// Task `tally-engine-<id>`: cancelled, the node stops and every caller waiting on it
/// gets [`Error::Stopped`] (its oneshot is dropped); an append in flight may still be
/// ordered. Engines have no IO errors of their own: the task ends only when its inbox
/// or its request channel closes.
pub fn spawn_engine(
    id: NodeId,
    controllers: Vec<NodeId>,
    cfg: EngineConfig,
    driver: EngineDriverConfig,
    transport: Transport,
    inbox: mpsc::Receiver<(NodeId, Message)>,
) -> EngineHandle {
    let incarnation = new_incarnation();
    let engine = Arc::new(Mutex::new(Engine::new(id, controllers, incarnation, cfg)));
    let (calls, calls_rx) = mpsc::channel(driver.requests_queue_max);
    let (status_tx, status) = watch::channel(EngineStatus::default());
    info!(%id, incarnation, "engine started");
    let task = spawn_node("engine", id, run_engine(engine.clone(), driver, transport, inbox, calls_rx, status_tx));
    EngineHandle { link: EngineLink { calls, engine }, status, task }
}

/// The engine's task. It holds the engine's lock while it hands the engine an input
/// and takes its actions, never across an await.
async fn run_engine(
    engine: Arc<Mutex<Engine>>,
    driver: EngineDriverConfig,
    transport: Transport,
    mut inbox: mpsc::Receiver<(NodeId, Message)>,
    mut calls: mpsc::Receiver<EngineCall>,
    status: watch::Sender<EngineStatus>,
) {
    let mut ticks = Ticks::new();
    let mut traces = EngineTraces::new(driver.spans.clone());
    let mut ops: HashMap<OpId, oneshot::Sender<(Result<Reply>, LogId, MetalogPosition)>> = HashMap::new();
    let mut next_op: OpId = 1;
    let delay = Duration::from_millis(driver.metalog_delay_ms);
    let mut delayed: std::collections::VecDeque<(tokio::time::Instant, NodeId, Message)> = Default::default();
    /// One input for the engine, taken while the lock is not held.
    enum Input {
        Message(NodeId, Message),
        /// Delayed metalog messages now due (`metalog_delay_ms`).
        Messages(Vec<(NodeId, Message)>),
        /// A call and the others waiting behind it: their appends leave in one
        /// message per replica (`Engine::take_actions`).
        Submit(Vec<(OpId, EngineCall)>),
        Tick,
    }
    // Takes `call` unless too many are in flight (it is answered then).
    let mut admit = |call: EngineCall, ops: &HashMap<OpId, _>, taken: &mut Vec<(OpId, EngineCall)>| {
        if ops.len() + taken.len() >= driver.ops_inflight_max {
            let e = Error::Unavailable(format!("{} requests in flight", ops.len() + taken.len()));
            let _ = call.reply.send((Err(e), LogId(0), MetalogPosition::ZERO));
            return;
        }
        next_op += 1;
        taken.push((next_op - 1, call));
    };
    loop {
        let next_due = delayed.front().map(|d| d.0);
        let input = tokio::select! {
            m = inbox.recv() => match m {
                // In partial mode the decided updates are the index: delayed alike.
                Some((
                    from,
                    msg @ (Message::MetalogPush { .. }
                    | Message::MetalogEntries { .. }
                    | Message::UpdatePush { .. }
                    | Message::UpdateFetched { .. }),
                )) if !delay.is_zero() => {
                    delayed.push_back((tokio::time::Instant::now() + delay, from, msg));
                    continue;
                }
                Some((from, msg)) => Input::Message(from, msg),
                None => return,
            },
            _ = tokio::time::sleep_until(next_due.unwrap_or_else(tokio::time::Instant::now)), if next_due.is_some() => {
                let mut due = Vec::new();
                while delayed.front().is_some_and(|d| d.0 <= tokio::time::Instant::now()) {
                    let (_, from, msg) = delayed.pop_front().expect("a due message");
                    due.push((from, msg));
                }
                Input::Messages(due)
            }
            c = calls.recv() => match c {
                Some(call) => {
                    let mut taken = Vec::new();
                    admit(call, &ops, &mut taken);
                    while taken.len() < CALLS_PER_BATCH_MAX {
                        let Ok(call) = calls.try_recv() else { break };
                        admit(call, &ops, &mut taken);
                    }
                    if taken.is_empty() {
                        continue;
                    }
                    Input::Submit(taken)
                }
                None => return,
            },
            _ = &mut ticks.sleep => Input::Tick,
        };
        let actions = {
            let tick = matches!(input, Input::Tick);
            let mut node = engine.lock().expect("only the engine's task panics under its lock");
            match input {
                Input::Message(from, msg) => node.on_message(now_us(), from, msg),
                Input::Messages(msgs) => msgs.into_iter().for_each(|(from, msg)| node.on_message(now_us(), from, msg)),
                Input::Submit(calls) => {
                    for (op, call) in calls {
                        ops.insert(op, call.reply);
                        traces.submitted(op, &call.request, call.trace);
                        node.submit(now_us(), op, &call.context, call.request);
                    }
                }
                Input::Tick => {}
            }
            if tick || ticks.input() {
                ticks.ticked(node.on_tick(now_us()));
            }
            let (n_logs, engines) = (node.n_logs(), node.engines());
            status.send_if_modified(|s| {
                let changed = s.n_logs != n_logs || s.engines.as_slice() != engines;
                if changed {
                    *s = EngineStatus { n_logs, engines: engines.to_vec() };
                }
                changed
            });
            node.take_actions()
        };
        let mut actions = actions;
        traces.acting(&mut actions);
        for action in actions {
            match action {
                EngineAction::Send(to, msg) => transport.send(to, msg),
                EngineAction::Complete { op, result, log, position } => {
                    if let Some(reply) = ops.remove(&op) {
                        // The caller may have stopped waiting; the outcome is moot then.
                        let _ = reply.send((result, log, position));
                    }
                }
                EngineAction::Assigned { .. } | EngineAction::Indexed { .. } => {}
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Controller

/// What the control plane tells a running controller: the members registered so far,
/// and how many physical logs the cluster should have (0: as configured).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlInput {
    pub members: Vec<(NodeId, Role)>,
    pub n_logs: u8,
}

/// Handles to a running controller.
pub struct ControllerHandle {
    /// The configuration last installed, `None` before the first term.
    pub installed: watch::Receiver<Option<Arc<Configuration>>>,
    pub task: JoinHandle<()>,
}

/// Starts the controller of the cluster `roster`, resumed from the configuration in
/// `store` if there is one. Fails when the store cannot be read or holds a
/// configuration of another cluster. `input`, when given, adds the nodes that
/// register later (a cluster's membership is dynamic; a dev cluster's is `roster`)
/// and asks for physical logs to be added.
///
/// Task `tally-controller-<id>`: cancelled, the cluster keeps its current term but
/// can no longer reconfigure; a persist already handed to the blocking pool still
/// completes, and a restarted controller resumes from it (its nodes never heard of
/// it, which is harmless: the restarted controller seals that term first). On an
/// error (the store fails) it logs and stops: sending a configuration that may not
/// be durable could let a restart install a term twice.
pub fn spawn_controller(
    id: NodeId,
    cfg: ControllerConfig,
    roster: &[(NodeId, Role)],
    store: Arc<dyn ControllerStore>,
    transport: Transport,
    inbox: mpsc::Receiver<(NodeId, Message)>,
    input: Option<watch::Receiver<ControlInput>>,
) -> Result<ControllerHandle> {
    let stored = store.load()?;
    let resumed = stored.as_ref().map(|c| c.current().term.0);
    let node = Controller::recover(id, cfg, roster, stored)?;
    let (installed_tx, installed) = watch::channel(None);
    info!(%id, nodes = roster.len(), ?resumed, "controller started");
    let task = spawn_node("controller", id, async move {
        if let Err(e) = run_controller(node, store, transport, inbox, input, installed_tx).await {
            error!(%id, error = %e, "controller stopped");
        }
    });
    Ok(ControllerHandle { installed, task })
}

async fn run_controller(
    mut node: Controller,
    store: Arc<dyn ControllerStore>,
    transport: Transport,
    mut inbox: mpsc::Receiver<(NodeId, Message)>,
    mut input: Option<watch::Receiver<ControlInput>>,
    installed: watch::Sender<Option<Arc<Configuration>>>,
) -> Result<()> {
    let mut ticks = Ticks::new();
    // `changed` marks the input seen, so its arm sets this rather than the loop
    // asking the receiver.
    let mut members_changed = true;
    loop {
        if let Some(m) = input.as_mut().filter(|_| members_changed) {
            members_changed = false;
            let input = m.borrow_and_update().clone();
            for &(n, role) in &input.members {
                if !node.add_member(n, role) {
                    warn!(%n, ?role, "a member registered with a role other than the one this controller knows");
                }
            }
            // Fewer logs than the cluster has: a stale setting (a restart of an
            // in-process cluster built for fewer); logs are never removed.
            if input.n_logs > node.n_logs() {
                if let Err(e) = node.set_n_logs(input.n_logs) {
                    warn!(error = %e, "the physical logs asked for are refused");
                }
            }
        }
        let member_change = async {
            match input.as_mut() {
                Some(m) => {
                    if m.changed().await.is_err() {
                        std::future::pending::<()>().await
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            m = inbox.recv() => match m {
                Some((from, msg)) => {
                    node.on_message(now_us(), from, msg);
                    if ticks.input() {
                        ticks.ticked(node.on_tick(now_us()));
                    }
                }
                None => return Ok(()),
            },
            _ = &mut ticks.sleep => ticks.ticked(node.on_tick(now_us())),
            _ = member_change => {
                members_changed = true;
                // The top of the loop hands the change over; tick right after.
                ticks.sleep.as_mut().reset(tokio::time::Instant::now());
                continue;
            }
        }
        for action in node.take_actions() {
            match action {
                ControllerAction::Send(to, msg) => transport.send(to, msg),
                ControllerAction::Persist(config) => {
                    // The sends that follow announce this configuration: it must be
                    // durable first, so the task waits for the fsync.
                    let store = store.clone();
                    durably("configuration persist", move || store.persist(&config)).await?;
                }
                ControllerAction::Installed(config) => {
                    let current = config.current();
                    info!(
                        term = current.term.0,
                        engines = current.engines.len(),
                        storage = current.storage.len(),
                        "configuration installed"
                    );
                    installed.send_replace(Some(config));
                }
            }
        }
    }
}
