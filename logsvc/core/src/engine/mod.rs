//! The LogBook engine, co-located with functions: the append path, the index, the
//! record cache and read consistency.
//!
//! Appends: the engine numbers its records with a dense local id in its own shard of
//! the book's physical log, sends each to every replica of the shard, and resends
//! until a metalog entry orders it. The entry gives the seqnum. A plain append
//! completes as soon as the committed entry arrives; a conditional append completes
//! when the index has applied the entry and decided the condition.
//!
//! Index: entries are applied strictly in metalog order. For each entry the engine
//! collects the metadata (book, tags, condition) of every record in the entry's delta:
//! its own records it knows, the others it fetches from a replica of their shard.
//!
//! Consistency: every request carries the caller's metalog position for the log; a
//! read waits until the index has applied at least that position, and every
//! completion returns the position the caller has now seen (the index position for
//! reads, the ordering entry for appends and trims). A child passes its parent's.
//!
//! Aux data: a request to attach aux data waits like a read and is accepted only for a
//! record live in the caller's book at that index position. Aux data is returned with
//! the record to every reader of the book, so accepting it for another book's record
//! or for a seqnum that holds no record would let one book's caller poison another's
//! reads.
//!
//! Terms: when the follower passes the end of a sealed term, the engine knows exactly
//! which of its records the term ordered; the rest are appended again in its shard of
//! the new term.
//!
//! Start: an engine starts from nothing and replays the metalog from the first term.
//! It serves reads only once its index holds every term sealed before its first
//! configuration (the read floor), so an engine that restarted, or a whole cluster
//! that did, never shows a caller with a fresh context an older log than the one
//! acknowledged before the restart.
//!
//! Added logs: when the controller adds a physical log, the books that move to it
//! append there from the new term on; their earlier records stay in their old log.
//! An indexer of the new log first takes over the index state of those books, as of
//! the end of the term before, from indexers of the old logs (`IndexExport`), and
//! applies nothing of the new log until it has: offsets, trims and conditions then
//! continue exactly as if the book had never moved. A caller whose context names a
//! term this engine has no configuration for waits for it, so its book is never
//! routed to the log it left after it wrote to the new one.
//!
//! Index replicas: when the configuration names the engines that hold a log's index
//! (Boki §4.1), the others still append to the log and follow its metalog, which
//! completes their plain appends, but send every other request of that log (reads,
//! conditional appends, trims, aux data) to an indexer and relay its answer. Reads are
//! idempotent and are resent to the next indexer when one is silent; the others are
//! sent once and time out if lost. An indexer whose configuration maps the book to
//! another log refuses the request without effect (`Error::Moved`): when its
//! configuration is the later one, the forwarder waits for it and routes the request
//! again there; when it is the earlier one, the forwarder sends it once more later.
//!
//! `Configuration::indexers` names the indexers of each log, fixed for the cluster's life
//! (empty: every engine). An indexer deduplicates forwarded requests by (engine,
//! incarnation, request id), and remembers a bounded number of them after they completed.
//!
//! More on added logs: a term may have more physical logs than the one before, never fewer
//! (`Configuration::added_at`). The export goes in book order, a bounded number of seqnums
//! a message (`Index::export`, `Index::import`). An indexer of an old log answers only once
//! it holds every term before the added one; since no later entry of the old log touches a
//! moved book, any later answer is the same, so an engine that restarts long after the move
//! imports again. Reads of an added log wait for its first term (its read floor), so a
//! fresh context never sees a moved book empty. The engine, not the client, decides a
//! book's log: the client hands it the whole `Context` and learns the log from the
//! completion. Reads queued for a moved book start again in its new log; a conditional
//! append that a term ended unordered, whose book moved to a log this engine does not
//! index, fails with `Unavailable` (it was never ordered, so nothing is lost).
//!
//! Reads in place: `Engine::read_now` answers a read whose position the index has reached
//! and whose record is cached, with the answer a submitted read would get, so that a driver
//! can serve it without a channel, a task switch or a wakeup (see `tally-logsvc`'s driver).
//! The simulator answers half its reads that way, checked by the same oracle.
//!
//! Invariants (asserted): the index applies each entry once, in order; an append
//! completes at most once, with the seqnum the metalog gave its record.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

mod partial;

pub use partial::PartialStats;

use crate::assembly::{Assembling, Assembly};
use crate::cache::RecordCache;
use crate::config::Configuration;
use crate::context::Context;
use crate::error::Error;
use crate::follower::{Follower, FollowerConfig};
use crate::index::{BookState, ColdIndex, Found, Index, Placement};
use crate::message::{
    LogRecord, Message, MetalogEntry, Record, RecordMeta, Reply, Request, StoredRead, TrimCommand, UNCHANGED_MAX,
};
use crate::tier::LocalBounds;
use crate::types::{
    book_to_log, BookId, LocalId, Location, LogId, MetalogPosition, Micros, NextTick, NodeId, SeqNum, ShardId, Tag, Term,
};

#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub record_bytes_max: usize,
    pub tags_max: usize,
    pub cache_bytes_max: usize,
    /// Resend an unordered record to its replicas after this long.
    pub retransmit_us: Micros,
    /// Ask another replica for metadata or a record after this long.
    pub fetch_retry_us: Micros,
    /// A request not completed by then fails with `Timeout` (an append may still land).
    pub op_timeout_us: Micros,
    /// Appends not yet ordered; more are refused with `Unavailable`.
    pub pending_appends_max: usize,
    pub heartbeat_interval_us: Micros,
    pub follower: FollowerConfig,
    /// Where the index spills its cold chunks (in memory whole without).
    pub cold_index: Option<ColdIndex>,
    /// Partial mode: the local index's bounds (`None`: no local index; every read goes
    /// to the index tier).
    pub local_index: Option<LocalBounds>,
    /// Partial mode: how long a read waits for the local index to reach the caller's
    /// position before it goes to the tier.
    pub local_wait_us: Micros,
    /// Partial mode: ask other index replicas after this long without an answer.
    pub lookup_retry_us: Micros,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            record_bytes_max: 1 << 20,
            tags_max: 64,
            cache_bytes_max: 256 << 20,
            retransmit_us: 200_000,
            fetch_retry_us: 50_000,
            op_timeout_us: 10_000_000,
            pending_appends_max: 100_000,
            heartbeat_interval_us: 100_000,
            follower: FollowerConfig::default(),
            cold_index: None,
            local_index: Some(LocalBounds::default()),
            local_wait_us: 2_000,
            lookup_retry_us: 50_000,
        }
    }
}

pub type OpId = u64;

/// Ops started on behalf of another engine carry this bit; callers' op ids must not.
const REMOTE_OP: OpId = 1 << 63;

/// Forwarded requests that are not reads, remembered after completion so that a
/// duplicated message does not run one twice.
const FORWARDS_REMEMBERED: usize = 65_536;

/// Names a forwarded request: the forwarding engine, its incarnation, its request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ForwardKey {
    from: NodeId,
    incarnation: u64,
    req: u64,
}

/// How an index replica applied one record, for the simulator's oracle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedRecord {
    pub seqnum: SeqNum,
    pub location: Location,
    pub meta: RecordMeta,
    pub placement: Placement,
}

#[derive(Clone, Debug, PartialEq)]
pub enum EngineAction {
    Send(NodeId, Message),
    /// `position` is the position in `log` the caller has now seen.
    Complete {
        op: OpId,
        result: Result<Reply, Error>,
        log: LogId,
        position: MetalogPosition,
    },
    /// Observation: the engine put `op`'s record at `location` (again, after a term
    /// change). `op` is the engine's own for requests forwarded by another engine.
    Assigned {
        op: OpId,
        location: Location,
        record: Record,
    },
    /// Observation: the index applied an entry.
    Indexed {
        log: LogId,
        position: MetalogPosition,
        records: Vec<IndexedRecord>,
    },
}

struct PendingAppend {
    op: OpId,
    record: Record,
    position: MetalogPosition,
    sent_at: Micros,
    /// Set when the op has been completed (or timed out) but the record still waits.
    done: bool,
}

struct MyShard {
    term: Term,
    shard: ShardId,
    replicas: Vec<NodeId>,
    next_local_id: LocalId,
    pending: BTreeMap<LocalId, PendingAppend>,
}

/// An entry waiting for the metadata of its records, with the conditional appends of
/// ours in it: location -> op and the record's data, cached once the condition holds.
type Applying = Assembling<HashMap<Location, (OpId, Bytes)>>;

/// A request decided by the index once it has reached the caller's position: a read,
/// or aux data.
struct ReadOp {
    op: OpId,
    request: Request,
    /// The caller's position, then the position the read waits for.
    wait_for: MetalogPosition,
    deadline: Micros,
}

/// What the index and the cache answer a read with.
enum Lookup {
    /// No record, or a cached one.
    Done(Option<LogRecord>),
    /// A record to fetch from a storage node.
    Fetch(Found),
}

struct RecordFetch {
    op: OpId,
    log: LogId,
    request: Request,
    found: Found,
    position: MetalogPosition,
    replicas: Vec<NodeId>,
    turn: usize,
    sent_at: Micros,
    deadline: Micros,
    /// Aux data the index tier sent with the answer (partial mode).
    aux: Option<Bytes>,
}

/// A request of ours sent to an engine that holds the index of its log.
struct Forwarded {
    op: OpId,
    log: LogId,
    request: Request,
    position: MetalogPosition,
    indexers: Vec<NodeId>,
    turn: usize,
    sent_at: Micros,
    deadline: Micros,
    /// An indexer with an older configuration refused it without effect: it is sent
    /// once more when the next retransmission falls due (reads always are).
    again: bool,
}

impl Forwarded {
    fn resent(&self) -> bool {
        self.again || matches!(self.request, Request::ReadNext { .. } | Request::ReadPrev { .. })
    }
}

struct TrimOp {
    command: TrimCommand,
    log: LogId,
    /// The caller's position: the completion never moves it back.
    position: MetalogPosition,
    sent_at: Micros,
}

/// Index state of `log`'s books to take over before applying its first entry: the
/// log was added in `term`, and `sources` are the logs its books came from, the first
/// one being fetched now.
struct Import {
    term: Term,
    sources: VecDeque<LogId>,
    after: Option<BookId>,
    books: Vec<BookState>,
    /// The request whose answer is awaited, its indexer turn, and when it was sent.
    req: u64,
    turn: usize,
    sent_at: Option<Micros>,
}

/// Bytes of record data one `Replicate` carries at most when `take_actions` merges
/// records into it (a single larger record travels alone).
const REPLICATE_BYTES_MAX: usize = 4 << 20;

/// Seqnums an `IndexExported` carries at most (about 20 bytes each on the wire).
const EXPORT_WEIGHT_MAX: usize = 1 << 18;

#[derive(Default)]
struct EngineLog {
    index: Index,
    applied: MetalogPosition,
    /// Reads wait for this position at least: the start of the current term of the
    /// first configuration this engine received.
    read_floor: MetalogPosition,
    shard: Option<MyShard>,
    /// Shards of earlier terms with records not yet known to be ordered; their term's
    /// end tells which were, and the rest move to `shard`.
    retiring: Vec<MyShard>,
    waiting: Vec<ReadOp>,
    /// Set while this log's index waits for the state of the books that moved to it.
    import: Option<Import>,
}

/// A request whose caller saw a later term than this engine's configuration.
struct AwaitingConfig {
    op: OpId,
    context: Context,
    request: Request,
    deadline: Micros,
}

pub struct Engine {
    id: NodeId,
    /// Every controller of the cluster: heartbeats go to all of them, and whichever
    /// leads acts on them (a standby ignores them until it takes over).
    controllers: Vec<NodeId>,
    incarnation: u64,
    cfg: EngineConfig,
    config: Option<Arc<Configuration>>,
    follower: Follower,
    logs: Vec<EngineLog>,
    /// Replicas of every shard of every term.
    shard_replicas: HashMap<ShardId, Vec<NodeId>>,
    /// Appends waiting for this engine to have a shard (no configuration yet, or this
    /// engine is not in the current term).
    unassigned: VecDeque<(OpId, Record, MetalogPosition, Micros)>,
    awaiting_config: Vec<AwaitingConfig>,
    pending_count: usize,
    deadlines: BTreeMap<(Micros, OpId), ()>,
    appends_in_flight: HashMap<OpId, Micros>,
    assembly: Assembly<HashMap<Location, (OpId, Bytes)>>,
    record_fetches: BTreeMap<u64, RecordFetch>,
    trims: BTreeMap<OpId, TrimOp>,
    forwards: BTreeMap<u64, Forwarded>,
    /// Ops run for another engine, and the keys of those running or done.
    remote_ops: HashMap<OpId, ForwardKey>,
    remote_seen: HashSet<ForwardKey>,
    remote_done: VecDeque<ForwardKey>,
    next_remote_op: OpId,
    next_req: u64,
    cache: RecordCache,
    last_heartbeat: Option<Micros>,
    /// Set in partial mode (a configuration with an index tier).
    partial: Option<partial::Partial>,
    out: Vec<EngineAction>,
}

impl Engine {
    /// Reads answered per path in partial mode.
    pub fn partial_stats(&self) -> Option<PartialStats> {
        self.partial.as_ref().map(|p| p.stats)
    }

    /// Bytes of the local index of `log` in partial mode: suffix, tag cache,
    /// popularity cache.
    pub fn local_index_bytes(&self, log: LogId) -> Option<(usize, usize, usize)> {
        self.partial.as_ref().and_then(|p| p.local_bytes(log))
    }

    /// Chunks of index rows spilled to the cold store, over every log's index.
    pub fn chunks_spilled(&self) -> u64 {
        self.logs.iter().map(|l| l.index.chunks_spilled()).sum()
    }

    pub fn new(id: NodeId, controllers: Vec<NodeId>, incarnation: u64, cfg: EngineConfig) -> Engine {
        Engine {
            id,
            controllers,
            incarnation,
            follower: Follower::new(cfg.follower.clone()),
            cache: RecordCache::new(cfg.cache_bytes_max),
            cfg,
            config: None,
            logs: Vec::new(),
            shard_replicas: HashMap::new(),
            unassigned: VecDeque::new(),
            awaiting_config: Vec::new(),
            pending_count: 0,
            deadlines: BTreeMap::new(),
            appends_in_flight: HashMap::new(),
            assembly: Assembly::new(),
            record_fetches: BTreeMap::new(),
            trims: BTreeMap::new(),
            forwards: BTreeMap::new(),
            remote_ops: HashMap::new(),
            remote_seen: HashSet::new(),
            remote_done: VecDeque::new(),
            next_remote_op: 0,
            next_req: 0,
            last_heartbeat: None,
            partial: None,
            out: Vec::new(),
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Actions produced since the last call, in the order they must be performed,
    /// except that the records sent to one replica of one shard travel together: each
    /// `Replicate` carries every later one's records too, up to `REPLICATE_BYTES_MAX`
    /// of data (messages may arrive in any order anyway). A driver that hands the
    /// engine several appends before it takes the actions so sends one message, and its
    /// storage nodes write and sync them as one, for all of them.
    pub fn take_actions(&mut self) -> Vec<EngineAction> {
        let actions = std::mem::take(&mut self.out);
        let replicates = actions.iter().filter(|a| matches!(a, EngineAction::Send(_, Message::Replicate { .. }))).count();
        if replicates < 2 {
            return actions;
        }
        let mut out = Vec::with_capacity(actions.len());
        // Per (replica, shard): the message being filled, and its bytes of data.
        let mut filling: HashMap<(NodeId, ShardId), (usize, usize)> = HashMap::new();
        for action in actions {
            let EngineAction::Send(to, Message::Replicate { shard, records, .. }) = action else {
                out.push(action);
                continue;
            };
            for (local_id, record) in records {
                let len = record.data.len();
                match filling.get_mut(&(to, shard)) {
                    Some((i, bytes)) if *bytes + len <= REPLICATE_BYTES_MAX => {
                        let EngineAction::Send(_, Message::Replicate { records, .. }) = &mut out[*i] else {
                            unreachable!("filling names Replicate messages")
                        };
                        records.push((local_id, record));
                        *bytes += len;
                    }
                    _ => {
                        filling.insert((to, shard), (out.len(), len));
                        out.push(EngineAction::Send(
                            to,
                            Message::Replicate { shard, records: vec![(local_id, record)], traces: Vec::new() },
                        ));
                    }
                }
            }
        }
        out
    }

    /// The index position of `log` (for tests and metrics).
    pub fn applied(&self, log: LogId) -> MetalogPosition {
        self.logs.get(log.0 as usize).map_or(MetalogPosition::ZERO, |l| l.applied)
    }

    pub fn n_logs(&self) -> Option<u8> {
        self.config.as_ref().map(|c| c.n_logs)
    }

    /// The engines of the current term (none before a configuration).
    pub fn engines(&self) -> &[NodeId] {
        self.config.as_ref().map_or(&[], |c| &c.current().engines)
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        self.out.push(EngineAction::Send(to, msg));
    }

    fn complete(&mut self, op: OpId, result: Result<Reply, Error>, log: LogId, position: MetalogPosition) {
        if op & REMOTE_OP != 0 {
            let key = self.remote_ops.remove(&op).expect("a remote op completes once");
            if matches!(result, Ok(Reply::Read(_)) | Err(Error::Moved { .. })) {
                // A read may run again: its forwarder resends it when the reply is
                // lost. So may a request refused without effect.
                self.remote_seen.remove(&key);
            } else {
                self.remote_done.push_back(key);
                if self.remote_done.len() > FORWARDS_REMEMBERED {
                    let old = self.remote_done.pop_front().expect("not empty");
                    self.remote_seen.remove(&old);
                }
            }
            let (req, incarnation) = (key.req, key.incarnation);
            self.send(key.from, Message::ForwardReply { req, incarnation, result, position });
            return;
        }
        self.out.push(EngineAction::Complete { op, result, log, position });
    }

    /// Checks a request against the engine's limits. Reserved tags are the caller's
    /// business (the platform uses them); the client API refuses them from users.
    pub fn validate(&self, request: &Request) -> Result<(), Error> {
        if let Request::Append { tags, data, cond, unchanged, .. } = request {
            if data.len() > self.cfg.record_bytes_max {
                return Err(Error::TooLarge { what: "record".into(), size: data.len(), limit: self.cfg.record_bytes_max });
            }
            if tags.len() > self.cfg.tags_max {
                return Err(Error::InvalidArgument(format!("{} tags, at most {} allowed", tags.len(), self.cfg.tags_max)));
            }
            if cond.iter().chain(unchanged).any(|c| c.tag == Tag::ALL) {
                return Err(Error::InvalidArgument("a conditional append needs a tag other than 0".into()));
            }
            if unchanged.len() > UNCHANGED_MAX {
                let n = unchanged.len();
                return Err(Error::InvalidArgument(format!("{n} conditions on unchanged streams, at most {UNCHANGED_MAX}")));
            }
        }
        if let Request::SetAux { aux, .. } = request {
            if aux.len() > self.cfg.record_bytes_max {
                return Err(Error::TooLarge { what: "aux data".into(), size: aux.len(), limit: self.cfg.record_bytes_max });
            }
        }
        Ok(())
    }

    /// Starts a request on behalf of a caller whose view of the log is `context`.
    /// `op` names the request in the completion; it must be below 2^63.
    pub fn submit(&mut self, now: Micros, op: OpId, context: &Context, request: Request) {
        assert!(op & REMOTE_OP == 0, "op ids of callers are below 2^63");
        let Some(config) = self.config.clone() else {
            let e = Error::Unavailable("the engine has no configuration yet".into());
            self.complete(op, Err(e), LogId(0), MetalogPosition::ZERO);
            return;
        };
        // The caller saw a term this engine has not heard of: its book may have moved
        // to a log added there, so wait for that configuration before routing it.
        let current = config.current().term.0;
        if context.positions().iter().any(|p| p.term > current) {
            let deadline = now + self.cfg.op_timeout_us;
            self.deadlines.insert((deadline, op), ());
            self.awaiting_config.push(AwaitingConfig { op, context: context.clone(), request, deadline });
            return;
        }
        let log = config.log_of(request.book());
        self.start(now, op, log, context.position(log), request);
    }

    /// Starts a request of `log` (the book's log in this engine's configuration),
    /// whose caller has seen `log` up to `position`.
    fn start(&mut self, now: Micros, op: OpId, log: LogId, position: MetalogPosition, request: Request) {
        if let Err(e) = self.validate(&request) {
            self.complete(op, Err(e), log, position);
            return;
        }
        let Some(config) = self.config.clone() else {
            self.complete(op, Err(Error::Unavailable("the engine has no configuration yet".into())), log, position);
            return;
        };
        let here = config.log_of(request.book());
        if here != log {
            // Forwarded by an engine whose configuration maps the book elsewhere:
            // refused without effect, and the forwarder routes it again.
            let e = Error::Moved { book: request.book().0, log: here.0, term: config.current().term.0 };
            self.complete(op, Err(e), log, position);
            return;
        }
        let deadline = now + self.cfg.op_timeout_us;
        let indexed = config.indexes(log, self.id) || config.partial();
        let plain_append = matches!(&request, Request::Append { cond: None, unchanged, .. } if unchanged.is_empty());
        if !indexed && !plain_append {
            if op & REMOTE_OP != 0 {
                // Forwarded here by an engine with another configuration: never relay.
                let e = Error::Unavailable(format!("engine {} does not index log {}", self.id.0, log.0));
                self.complete(op, Err(e), log, position);
            } else {
                self.forward(now, op, log, position, request, deadline);
            }
            return;
        }
        match request {
            Request::Append { book, mut tags, data, cond, unchanged } => {
                if self.pending_count + self.unassigned.len() >= self.cfg.pending_appends_max {
                    self.complete(op, Err(Error::Unavailable("too many appends in flight".into())), log, position);
                    return;
                }
                tags.retain(|&t| t != Tag::ALL);
                if let Some(c) = cond {
                    tags.push(c.tag);
                }
                tags.sort_unstable();
                tags.dedup();
                let record = Record { meta: RecordMeta { book, tags, cond, unchanged }, data };
                self.deadlines.insert((deadline, op), ());
                self.appends_in_flight.insert(op, deadline);
                self.assign(now, log, op, record, position);
            }
            Request::Trim { book, tag, seqnum } => {
                let command = TrimCommand { book, tag, seqnum, origin: Some((self.id, op)) };
                self.deadlines.insert((deadline, op), ());
                self.trims.insert(op, TrimOp { command, log, position, sent_at: 0 });
                self.send_trim(now, op);
            }
            request @ (Request::ReadNext { .. } | Request::ReadPrev { .. } | Request::SetAux { .. }) => {
                self.deadlines.insert((deadline, op), ());
                let l = &mut self.logs[log.0 as usize];
                let wait_for = position.max(l.read_floor);
                l.waiting.push(ReadOp { op, request, wait_for, deadline });
                self.run_reads(now, log);
            }
        }
    }

    /// Gives a record a local id in this engine's current shard of `log` and sends it.
    fn assign(&mut self, now: Micros, log: LogId, op: OpId, record: Record, position: MetalogPosition) {
        let Some(shard) = self.logs.get_mut(log.0 as usize).and_then(|l| l.shard.as_mut()) else {
            self.unassigned.push_back((op, record, position, now));
            return;
        };
        let local_id = shard.next_local_id;
        shard.next_local_id += 1;
        let location = Location { shard: shard.shard, local_id };
        let replicas = shard.replicas.clone();
        let shard_id = shard.shard;
        shard.pending.insert(local_id, PendingAppend { op, record: record.clone(), position, sent_at: now, done: false });
        self.pending_count += 1;
        self.out.push(EngineAction::Assigned { op, location, record: record.clone() });
        for r in replicas {
            self.send(r, Message::Replicate { shard: shard_id, records: vec![(local_id, record.clone())], traces: Vec::new() });
        }
    }

    /// Sends a request of a log this engine does not index to an indexer of that log.
    fn forward(&mut self, now: Micros, op: OpId, log: LogId, position: MetalogPosition, request: Request, deadline: Micros) {
        let config = self.config.as_ref().expect("forwarding needs a configuration");
        let indexers = config.indexers_of(log);
        let req = self.next_req;
        self.next_req += 1;
        // Start with an indexer chosen by the engine id, to spread the forwarders.
        let turn = self.id.0 as usize;
        self.deadlines.insert((deadline, op), ());
        self.forwards.insert(req, Forwarded { op, log, request, position, indexers, turn, sent_at: 0, deadline, again: false });
        self.send_forward(now, req);
    }

    fn send_forward(&mut self, now: Micros, req: u64) {
        let Some(f) = self.forwards.get_mut(&req) else { return };
        f.sent_at = now;
        f.again = false;
        let to = f.indexers[f.turn % f.indexers.len()];
        f.turn += 1;
        let (log, position, request) = (f.log, f.position, f.request.clone());
        let incarnation = self.incarnation;
        self.send(to, Message::Forward { req, incarnation, log, position, request });
    }

    fn on_forward_reply(&mut self, now: Micros, req: u64, result: Result<Reply, Error>, position: MetalogPosition) {
        let Some(f) = self.forwards.get_mut(&req) else { return };
        if let Err(Error::Moved { term, .. }) = result {
            let current = self.config.as_ref().map_or(0, |c| c.current().term.0);
            let moved = self.config.as_ref().is_some_and(|c| c.log_of(f.request.book()) != f.log);
            if term <= current && !moved {
                // The indexer has not heard of this engine's configuration yet.
                f.again = true;
                f.sent_at = now;
                return;
            }
            // The book moved to a log added in the indexer's configuration: route the
            // request there, once this engine has that configuration, as if its
            // caller had seen that term.
            let f = self.forwards.remove(&req).expect("found");
            self.deadlines.remove(&(f.deadline, f.op));
            let mut context = Context::new();
            context.advance(f.log, MetalogPosition::new(Term(term), 0));
            self.submit(now, f.op, &context, f.request);
            return;
        }
        let Some(f) = self.forwards.remove(&req) else { return };
        self.deadlines.remove(&(f.deadline, f.op));
        self.complete(f.op, result, f.log, position);
    }

    fn send_trim(&mut self, now: Micros, op: OpId) {
        let Some(config) = self.config.clone() else { return };
        let Some(t) = self.trims.get_mut(&op) else { return };
        t.sent_at = now;
        let current = config.current();
        // A trim of a book that moved to an added log goes to that log's sequencer.
        t.log = config.log_of(t.command.book);
        let (log, command) = (t.log, t.command.clone());
        self.send(current.log(log).primary(), Message::TrimRequest { term: current.term, log, command });
    }

    pub fn on_tick(&mut self, now: Micros) -> NextTick {
        let mut next = NextTick::after(now);
        if self.last_heartbeat.is_none_or(|t| now >= t + self.cfg.heartbeat_interval_us) {
            self.last_heartbeat = Some(now);
            let term = self.config.as_ref().map_or(Term(0), |c| c.current().term);
            for c in self.controllers.clone() {
                self.send(c, Message::Heartbeat { incarnation: self.incarnation, term });
            }
        }
        next.at(now + self.cfg.heartbeat_interval_us);
        let Some(config) = self.config.clone() else { return next };
        let mut fetches = Vec::new();
        self.follower.on_tick(now, &config, &mut fetches, &mut next);
        for (to, m) in fetches {
            self.send(to, m);
        }
        // Resend unordered records.
        let retransmit = self.cfg.retransmit_us;
        let mut resend = Vec::new();
        for l in &mut self.logs {
            if let Some(s) = l.shard.as_mut() {
                let mut batch = Vec::new();
                for (&id, p) in s.pending.iter_mut() {
                    if now >= p.sent_at + retransmit {
                        p.sent_at = now;
                        batch.push((id, p.record.clone()));
                    }
                    next.at(p.sent_at + retransmit);
                }
                if !batch.is_empty() {
                    resend.push((s.shard, s.replicas.clone(), batch));
                }
            }
        }
        for (shard, replicas, records) in resend {
            for r in replicas {
                self.send(r, Message::Replicate { shard, records: records.clone(), traces: Vec::new() });
            }
        }
        // Retry metadata and record fetches, and trims.
        let retry = self.cfg.fetch_retry_us;
        for (to, msg) in self.assembly.retry(now, retry) {
            self.send(to, msg);
        }
        let stale: Vec<u64> = self.record_fetches.iter().filter(|(_, f)| now >= f.sent_at + retry).map(|(r, _)| *r).collect();
        for req in stale {
            self.send_record_fetch(now, req);
        }
        let stale: Vec<OpId> = self.trims.iter().filter(|(_, t)| now >= t.sent_at + retransmit).map(|(o, _)| *o).collect();
        for op in stale {
            self.send_trim(now, op);
        }
        for l in 0..self.logs.len() {
            if self.logs[l].import.as_ref().is_some_and(|i| i.sent_at.is_none_or(|t| now >= t + retransmit)) {
                self.send_import(now, LogId(l as u8));
            }
        }
        let stale: Vec<u64> =
            self.forwards.iter().filter(|(_, f)| f.resent() && now >= f.sent_at + retransmit).map(|(r, _)| *r).collect();
        for req in stale {
            self.send_forward(now, req);
        }
        self.partial_tick(now, &mut next);
        self.expire(now);
        // When the retries just made (or not yet due) fall due again.
        self.assembly.next_due(retry, &mut next);
        self.record_fetches.values().for_each(|f| next.at(f.sent_at + retry));
        self.trims.values().for_each(|t| next.at(t.sent_at + retransmit));
        for l in &self.logs {
            if let Some(i) = &l.import {
                next.at(i.sent_at.map_or(now, |t| t + retransmit));
            }
        }
        self.forwards.values().filter(|f| f.resent()).for_each(|f| next.at(f.sent_at + retransmit));
        if let Some((&(deadline, _), _)) = self.deadlines.first_key_value() {
            next.at(deadline);
        }
        next
    }

    fn expire(&mut self, now: Micros) {
        while let Some((&(deadline, op), _)) = self.deadlines.first_key_value() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            let ms = self.cfg.op_timeout_us / 1000;
            if self.appends_in_flight.remove(&op).is_some() {
                // The record stays pending: it may still be ordered, but nobody waits.
                for l in &mut self.logs {
                    if let Some(s) = l.shard.as_mut() {
                        for p in s.pending.values_mut().filter(|p| p.op == op) {
                            p.done = true;
                        }
                    }
                }
                self.complete(op, Err(Error::Timeout(ms)), LogId(0), MetalogPosition::ZERO);
            } else if self.trims.remove(&op).is_some() {
                self.complete(op, Err(Error::Timeout(ms)), LogId(0), MetalogPosition::ZERO);
            } else {
                if let Some(i) = self.awaiting_config.iter().position(|a| a.op == op) {
                    // No configuration with the caller's term came in a whole timeout:
                    // the position is not one this cluster gave out (a made-up one, or
                    // one kept from before its data was reset). Refused as bad input.
                    let a = self.awaiting_config.swap_remove(i);
                    let current = self.config.as_ref().map_or(0, |c| c.current().term.0);
                    let term = a.context.positions().iter().map(|p| p.term).max().unwrap_or(0);
                    let e = Error::InvalidArgument(format!(
                        "the caller's position names term {term}, and this cluster is at term {current}"
                    ));
                    self.complete(op, Err(e), LogId(0), MetalogPosition::ZERO);
                    continue;
                }
                let mut found = false;
                for l in &mut self.logs {
                    if let Some(i) = l.waiting.iter().position(|r| r.op == op) {
                        l.waiting.swap_remove(i);
                        found = true;
                    }
                }
                let fetch = self.record_fetches.iter().find(|(_, f)| f.op == op).map(|(r, _)| *r);
                if let Some(req) = fetch {
                    self.record_fetches.remove(&req);
                    found = true;
                }
                let forward = self.forwards.iter().find(|(_, f)| f.op == op).map(|(r, _)| *r);
                if let Some(req) = forward {
                    self.forwards.remove(&req);
                    found = true;
                }
                found |= self.partial_cancel(op);
                if found {
                    self.complete(op, Err(Error::Timeout(ms)), LogId(0), MetalogPosition::ZERO);
                }
            }
        }
    }

    pub fn on_message(&mut self, now: Micros, from: NodeId, msg: Message) {
        let mut msg = Some(msg);
        if self.partial.is_some() && self.partial_message(now, from, &mut msg) {
            return;
        }
        let Some(msg) = msg else { return };
        match msg {
            Message::NewConfig { config } => self.on_config(now, config),
            Message::MetalogPush { entry } => {
                let log = entry.log;
                self.follower.on_entry(entry);
                self.drain_metalog(now, log);
            }
            Message::MetalogEntries { log, entries, .. } => {
                for e in entries {
                    self.follower.on_entry(e);
                }
                self.drain_metalog(now, log);
            }
            Message::MetalogTail { term, log, committed_len } => self.follower.on_tail(term, log, committed_len),
            Message::MetaReply { req, shard, from: start, metas } => self.on_meta(now, req, shard, start, metas),
            // Retried with the next replica on the next tick.
            Message::MetaUnavailable { req } => self.assembly.unavailable(req),
            Message::RecordReply { req, seqnum, read } => self.on_record(now, req, seqnum, read),
            Message::Forward { req, incarnation, log, position, request } => {
                let key = ForwardKey { from, incarnation, req };
                if !self.remote_seen.insert(key) {
                    return; // running, or done and not a read: a duplicate
                }
                let op = REMOTE_OP | self.next_remote_op;
                self.next_remote_op += 1;
                self.remote_ops.insert(op, key);
                self.start(now, op, log, position, request);
            }
            Message::IndexExport { req, term, source, target, after } => {
                self.on_index_export(from, req, term, source, target, after)
            }
            Message::IndexExported { req, books, more } => self.on_index_exported(now, req, books, more),
            // A reply to an earlier incarnation names a request id that may be reused.
            Message::ForwardReply { req, incarnation, result, position } if incarnation == self.incarnation => {
                self.on_forward_reply(now, req, result, position)
            }
            _ => {}
        }
    }

    fn on_config(&mut self, now: Micros, config: Arc<Configuration>) {
        if self.config.as_ref().is_some_and(|c| c.current().term >= config.current().term) {
            self.send(config.controller, Message::ConfigAck { term: config.current().term });
            return;
        }
        let first = self.config.is_none();
        self.config = Some(config.clone());
        self.follower.on_config(&config);
        let known = self.logs.len();
        while self.logs.len() < config.n_logs as usize {
            self.logs.push(EngineLog { index: ColdIndex::index(self.cfg.cold_index.as_ref()), ..EngineLog::default() });
        }
        let first_floor = MetalogPosition::new(config.current().term, 0);
        for (i, l) in self.logs.iter_mut().enumerate().skip(known) {
            let log = LogId(i as u8);
            // Reads of a log wait for its first term at least (an added log's index is
            // empty before), and after a start for the term the engine started in.
            let added = config.first_term_of(log).expect("the configuration has its logs");
            l.read_floor = MetalogPosition::new(added, 0);
            if first {
                l.read_floor = l.read_floor.max(first_floor);
            }
            if let Some(term) = config.added_at(log).filter(|_| config.indexes(log, self.id) && !config.partial()) {
                let before = config.term(Term(term.0 - 1)).expect("the term before an added log's first").n_logs();
                let sources = (0..before).map(LogId).collect();
                let turn = self.id.0 as usize;
                l.import = Some(Import { term, sources, after: None, books: Vec::new(), req: 0, turn, sent_at: None });
            }
        }
        self.partial_on_config(&config);
        for t in &config.terms {
            for lc in &t.logs {
                for s in &lc.shards {
                    self.shard_replicas.insert(s.shard, s.replicas.clone());
                }
            }
        }
        let current = config.current();
        for lc in &current.logs {
            let l = &mut self.logs[lc.log.0 as usize];
            if let Some(old) = l.shard.take() {
                l.retiring.push(old);
            }
            // A shard made for an earlier incarnation of this engine is not ours: that
            // incarnation may have used its local ids.
            let incarnation = self.incarnation;
            l.shard = lc.shards.iter().find(|s| s.engine == self.id && s.incarnation == incarnation).map(|s| MyShard {
                term: current.term,
                shard: s.shard,
                replicas: s.replicas.clone(),
                next_local_id: 0,
                pending: BTreeMap::new(),
            });
        }
        self.send(config.controller, Message::ConfigAck { term: current.term });
        let waiting: Vec<_> = self.unassigned.drain(..).collect();
        for (op, record, position, _) in waiting {
            self.reassign(now, &config, op, record, position);
        }
        // Reads waiting for a book that moved to an added log start again there: the
        // log it left no longer sees its trims. The new log's index holds everything
        // the old one did of the book, so the caller's position there is no concern.
        for l in 0..self.logs.len() {
            let here = LogId(l as u8);
            let (stay, moved): (Vec<ReadOp>, Vec<ReadOp>) =
                self.logs[l].waiting.drain(..).partition(|r| config.log_of(r.request.book()) == here);
            self.logs[l].waiting = stay;
            for r in moved {
                self.deadlines.remove(&(r.deadline, r.op));
                self.start(now, r.op, config.log_of(r.request.book()), MetalogPosition::ZERO, r.request);
            }
        }
        for l in 0..config.n_logs {
            self.drain_metalog(now, LogId(l));
        }
        let trims: Vec<OpId> = self.trims.keys().copied().collect();
        for op in trims {
            self.send_trim(now, op);
        }
        for l in 0..config.n_logs {
            if self.logs[l as usize].import.as_ref().is_some_and(|i| i.sent_at.is_none()) {
                self.send_import(now, LogId(l));
            }
        }
        for a in std::mem::take(&mut self.awaiting_config) {
            self.deadlines.remove(&(a.deadline, a.op));
            self.submit(now, a.op, &a.context, a.request);
        }
    }

    /// Assigns a record again after its shard's term ended without ordering it, in its
    /// book's log of the configuration `config`.
    fn reassign(&mut self, now: Micros, config: &Configuration, op: OpId, record: Record, position: MetalogPosition) {
        let log = config.log_of(record.meta.book);
        if record.meta.is_conditional() && !config.indexes(log, self.id) && !config.partial() {
            // The book moved to a log this engine does not index, whose indexers
            // decide its conditions. The record was never ordered, so it can be dropped.
            if let Some(deadline) = self.appends_in_flight.remove(&op) {
                self.deadlines.remove(&(deadline, op));
                let e =
                    Error::Unavailable(format!("book {} moved to log {} (a log was added); retry", record.meta.book.0, log.0));
                self.complete(op, Err(e), log, position);
            }
            return;
        }
        self.assign(now, log, op, record, position);
    }

    /// Asks an indexer of the log being imported from for its next books, or takes them
    /// from this engine's own index when it is one and has applied far enough.
    fn send_import(&mut self, now: Micros, log: LogId) {
        let Some(config) = self.config.clone() else { return };
        let Some(im) = self.logs[log.0 as usize].import.as_mut() else { return };
        let Some(&source) = im.sources.front() else { return };
        let indexers = config.indexers_of(source);
        im.sent_at = Some(now);
        // A term installed while every engine was down names no engine to ask; the
        // tick asks again, by when a later term names some.
        let Some(&to) = indexers.get(im.turn % indexers.len().max(1)) else { return };
        im.turn += 1;
        let (term, after) = (im.term, im.after);
        let req = self.next_req;
        self.next_req += 1;
        im.req = req;
        if to == self.id {
            if let Some((books, more)) = self.export(term, source, log, after) {
                self.on_index_exported(now, req, books, more);
            }
            return;
        }
        self.send(to, Message::IndexExport { req, term, source, target: log, after });
    }

    /// The state of the books that moved from `source` to `target` in `term`, from
    /// the first after `after`; `None` until this engine's index of `source` holds
    /// every term before `term`.
    fn export(&self, term: Term, source: LogId, target: LogId, after: Option<BookId>) -> Option<(Vec<BookState>, bool)> {
        let config = self.config.as_ref()?;
        let before = config.term(Term(term.0.checked_sub(1)?))?.n_logs();
        let now = config.term(term)?.n_logs();
        let l = self.logs.get(source.0 as usize)?;
        if !config.indexes(source, self.id) || l.applied < MetalogPosition::new(term, 0) || target.0 >= now {
            return None;
        }
        let moved = |b: BookId| book_to_log(b, before) == source && book_to_log(b, now) == target;
        Some(l.index.export(moved, after, EXPORT_WEIGHT_MAX))
    }

    fn on_index_export(&mut self, from: NodeId, req: u64, term: Term, source: LogId, target: LogId, after: Option<BookId>) {
        // Not there yet: the importer asks again, maybe another indexer.
        if let Some((books, more)) = self.export(term, source, target, after) {
            self.send(from, Message::IndexExported { req, books, more });
        }
    }

    fn on_index_exported(&mut self, now: Micros, req: u64, books: Vec<BookState>, more: bool) {
        let Some(log) = self.logs.iter().position(|l| l.import.as_ref().is_some_and(|i| i.req == req)) else { return };
        let l = &mut self.logs[log];
        let im = l.import.as_mut().expect("found above");
        im.after = books.last().map(|b| b.book).or(im.after);
        im.books.extend(books);
        im.turn = im.turn.saturating_sub(1); // the same indexer again for the rest
        if !more {
            im.sources.pop_front();
            im.after = None;
        }
        if !im.sources.is_empty() {
            self.send_import(now, LogId(log as u8));
            return;
        }
        let im = l.import.take().expect("found above");
        for b in im.books {
            l.index.import(b);
        }
        self.apply_ready(now, LogId(log as u8));
    }

    /// Takes the entries the follower can deliver for `log` and starts applying them.
    fn drain_metalog(&mut self, now: Micros, log: LogId) {
        let Some(config) = self.config.clone() else { return };
        if log.0 >= config.n_logs {
            return; // a log added in a term this engine has not heard of yet
        }
        let before = self.follower.delivered(log);
        let entries = self.follower.poll(&config, log);
        let mut next_term = before.term;
        for e in entries {
            while next_term < e.term.0 {
                self.end_term(now, log, Term(next_term));
                next_term += 1;
            }
            self.deliver(now, &config, e);
        }
        let after = self.follower.delivered(log);
        while next_term < after.term {
            self.end_term(now, log, Term(next_term));
            next_term += 1;
        }
        self.apply_ready(now, log);
    }

    /// The follower passed the end of sealed `term`: records of ours it did not order
    /// are appended again in our current shard.
    fn end_term(&mut self, now: Micros, log: LogId, term: Term) {
        let config = self.config.clone().expect("terms end under a configuration");
        let l = &mut self.logs[log.0 as usize];
        let (ended, kept): (Vec<MyShard>, Vec<MyShard>) = l.retiring.drain(..).partition(|s| s.term <= term);
        l.retiring = kept;
        for shard in ended {
            for (_, p) in shard.pending {
                self.pending_count -= 1;
                if p.done {
                    continue;
                }
                self.reassign(now, &config, p.op, p.record, p.position);
            }
        }
    }

    fn my_shard_mut(&mut self, log: LogId, shard: ShardId) -> Option<&mut MyShard> {
        let l = self.logs.get_mut(log.0 as usize)?;
        if l.shard.as_ref().is_some_and(|s| s.shard == shard) {
            return l.shard.as_mut();
        }
        l.retiring.iter_mut().find(|s| s.shard == shard)
    }

    /// A committed entry arrived in order: complete our plain appends, queue it for
    /// the index, and ask for the metadata we lack.
    fn deliver(&mut self, now: Micros, config: &Configuration, entry: MetalogEntry) {
        let log = entry.log;
        let lc = config.term(entry.term).expect("delivered entries belong to known terms").log(log).clone();
        let position = entry.position_after();
        let partial = config.partial();
        let indexed = config.indexes(log, self.id) && !partial;
        let mut runs = Vec::new();
        let mut conds = HashMap::new();
        // Partial mode: our conditional records, settled by the entry's decided update.
        let mut ours = Vec::new();
        let mut fetch = Vec::new();
        for (j, ids, start_position) in entry.runs() {
            let shard = lc.shards[j].shard;
            let first = Location { shard, local_id: ids.start };
            let count = ids.end - ids.start;
            let mine = self.my_shard_mut(log, shard).map(|s| {
                let mut metas = Vec::with_capacity(count as usize);
                let mut done = Vec::new();
                for (k, local_id) in ids.clone().enumerate() {
                    let p = s.pending.remove(&local_id).expect("an ordered record of ours is pending");
                    metas.push(p.record.meta.clone());
                    let seqnum = entry.seqnum_at(start_position + k as u64);
                    done.push((p, seqnum, Location { shard, local_id }));
                }
                (metas, done)
            });
            match mine {
                Some((metas, done)) => {
                    for (p, seqnum, location) in done {
                        self.pending_count -= 1;
                        // Readers of this engine are likely to want what it just wrote
                        // (a conditional record may yet lose, so it waits for a read).
                        if (indexed || partial) && !p.record.meta.is_conditional() {
                            let meta = &p.record.meta;
                            self.cache.put_record(seqnum, meta.book, meta.tags.clone(), p.record.data.clone());
                        }
                        if p.done {
                            continue;
                        }
                        if p.record.meta.is_conditional() && partial {
                            let meta = p.record.meta;
                            ours.push((seqnum, p.op, meta.book, meta.tags, p.record.data));
                        } else if p.record.meta.is_conditional() {
                            conds.insert(location, (p.op, p.record.data.clone()));
                        } else if self.appends_in_flight.remove(&p.op).is_some() {
                            self.complete(p.op, Ok(Reply::Appended(seqnum)), log, position);
                        }
                    }
                    runs.push((first, count, Some(metas)));
                }
                None => {
                    fetch.push((runs.len(), lc.shards[j].replicas.clone()));
                    runs.push((first, count, None));
                }
            }
        }
        if partial {
            let next = entry.seqnum_at(entry.start_position + entry.record_count());
            self.partial_delivered(now, log, position, next, ours);
        }
        if !indexed {
            // Conditional appends of this log went to an indexer (or, in partial mode,
            // wait for the entry's decided update).
            assert!(conds.is_empty(), "only indexers make conditional appends");
            let l = &mut self.logs[log.0 as usize];
            assert!(position > l.applied, "entries are delivered once, in order");
            l.applied = position;
            // Trims of ours land here only for a book that moved to this log.
            self.complete_trims(log, &entry.trims, position);
            return;
        }
        let sends = self.assembly.push(now, Applying { entry, runs, extra: conds }, fetch, &mut self.next_req);
        for (to, msg) in sends {
            self.send(to, msg);
        }
    }

    fn on_meta(&mut self, now: Micros, req: u64, shard: ShardId, start: LocalId, metas: Vec<RecordMeta>) {
        let (completed, more) = self.assembly.on_meta(now, req, shard, start, metas);
        if let Some((to, msg)) = more {
            self.send(to, msg);
        }
        if let Some(log) = completed {
            self.apply_ready(now, log);
        }
    }

    /// Applies, in order, every entry at the head of the queue whose metadata is complete.
    fn apply_ready(&mut self, now: Micros, log: LogId) {
        if self.logs[log.0 as usize].import.is_some() {
            return; // the index applies nothing before the moved books' state
        }
        while let Some(a) = self.assembly.pop_ready(log) {
            self.apply(a);
        }
        // With nothing left to apply, the index is exactly at the follower's position,
        // which after a sealed term is (next term, 0).
        let delivered = self.follower.delivered(log);
        let l = &mut self.logs[log.0 as usize];
        if self.assembly.is_empty(log) && delivered > l.applied {
            l.applied = delivered;
            self.partial_reached(now, log, delivered);
        }
        self.run_reads(now, log);
    }

    fn apply(&mut self, a: Applying) {
        let log = a.entry.log;
        let position = a.entry.position_after();
        let l = &mut self.logs[log.0 as usize];
        assert!(position > l.applied, "the index applies each entry once, in order");
        let mut records = Vec::new();
        let mut completions = Vec::new();
        // Conditional records of ours that won their offset: readers here are likely
        // to want them next (a step log, a write log).
        let mut placed = Vec::new();
        let mut position_in_run = a.entry.runs().map(|(_, _, p)| p);
        for (first, _, metas) in a.runs {
            let start = position_in_run.next().expect("runs match the entry");
            for (k, meta) in metas.expect("ready").into_iter().enumerate() {
                let seqnum = a.entry.seqnum_at(start + k as u64);
                let location = Location { shard: first.shard, local_id: first.local_id + k as u64 };
                let placement = l.index.apply_record(seqnum, location, &meta);
                if let Some((op, data)) = a.extra.get(&location) {
                    let result = match placement {
                        Placement::Placed => {
                            placed.push((seqnum, meta.book, meta.tags.clone(), data.clone()));
                            Ok(Reply::Appended(seqnum))
                        }
                        Placement::CondFailed { holder } => Err(Error::Conflict { holder }),
                    };
                    completions.push((*op, result));
                }
                records.push(IndexedRecord { seqnum, location, meta, placement });
            }
        }
        let mut died = Vec::new();
        for t in &a.entry.trims {
            died.extend(l.index.apply_trim(t.book, t.tag, t.seqnum));
        }
        l.applied = position;
        for (seqnum, book, tags, data) in placed {
            self.cache.put_record(seqnum, book, tags, data);
        }
        for (seqnum, _) in died {
            self.cache.remove(seqnum);
        }
        self.out.push(EngineAction::Indexed { log, position, records });
        for (op, result) in completions {
            if self.appends_in_flight.remove(&op).is_some() {
                self.complete(op, result, log, position);
            }
        }
        self.complete_trims(log, &a.entry.trims, position);
    }

    /// Completes the trims of ours among `trims`, which took effect at `position` of
    /// `log`.
    fn complete_trims(&mut self, log: LogId, trims: &[TrimCommand], position: MetalogPosition) {
        for command in trims {
            let Some((_, op)) = command.origin.filter(|o| o.0 == self.id) else { continue };
            // Op ids start again with every incarnation, and a restarted engine replays
            // the trims of its earlier ones: only the very command completes a trim. An
            // earlier incarnation's identical command did the same, but maybe at a
            // position behind the caller's.
            if self.trims.get(&op).is_some_and(|t| t.command == *command) {
                let t = self.trims.remove(&op).expect("checked");
                let position = if t.log == log { position.max(t.position) } else { position };
                self.complete(op, Ok(Reply::Trimmed), log, position);
            }
        }
    }

    /// Serves the reads (and aux data) of `log` whose position the index has reached.
    fn run_reads(&mut self, now: Micros, log: LogId) {
        if self.partial.is_some() {
            for r in std::mem::take(&mut self.logs[log.0 as usize].waiting) {
                self.partial_start(now, log, r);
            }
            return;
        }
        let l = &mut self.logs[log.0 as usize];
        let applied = l.applied;
        let (ready, waiting): (Vec<ReadOp>, Vec<ReadOp>) = l.waiting.drain(..).partition(|r| r.wait_for <= applied);
        l.waiting = waiting;
        for r in ready {
            match r.request {
                Request::SetAux { .. } => self.set_aux(log, r),
                _ => self.read(now, log, r),
            }
        }
    }

    /// Attaches aux data if its seqnum is a live record of the caller's book in the
    /// index, which has reached the caller's position; refuses it otherwise.
    fn set_aux(&mut self, log: LogId, r: ReadOp) {
        let Request::SetAux { book, seqnum, aux } = r.request else { unreachable!("set_aux takes aux data") };
        let l = &self.logs[log.0 as usize];
        let position = l.applied;
        let live = l.index.is_live(book, seqnum);
        self.deadlines.remove(&(r.deadline, r.op));
        if !live {
            let e = Error::InvalidArgument(format!("seqnum {seqnum} is not a live record of book {}", book.0));
            self.complete(r.op, Err(e), log, position);
            return;
        }
        let attached = self.cache.put_aux(seqnum, book, aux);
        assert!(attached, "the cache holds {seqnum}, a live record of book {}, as another book's", book.0);
        self.complete(r.op, Ok(Reply::AuxSet), log, position);
    }

    /// Answers a read (`ReadNext` or `ReadPrev`) at once if it needs neither waiting
    /// nor IO: the book's log is indexed here, the index has reached the caller's
    /// position, and the record found (if any) is cached. The answer is the one
    /// [`Engine::submit`] would complete the read with; `None` means: submit it.
    ///
    /// It produces no actions, so a driver may call it from the caller's thread, under
    /// the lock it holds the engine with, instead of a round trip through its task.
    pub fn read_now(&mut self, context: &Context, request: &Request) -> Option<(Result<Reply, Error>, LogId, MetalogPosition)> {
        if !matches!(request, Request::ReadNext { .. } | Request::ReadPrev { .. }) {
            return None;
        }
        let config = self.config.as_ref()?;
        if context.positions().iter().any(|p| p.term > config.current().term.0) {
            return None;
        }
        let log = config.log_of(request.book());
        if config.partial() {
            let p = context.position(log).max(self.logs[log.0 as usize].read_floor);
            return self.partial_read_now(log, p, request);
        }
        if !config.indexes(log, self.id) {
            return None;
        }
        let l = &self.logs[log.0 as usize];
        if context.position(log).max(l.read_floor) > l.applied {
            return None;
        }
        let position = l.applied;
        match self.lookup(log, request) {
            Lookup::Done(record) => Some((Ok(Reply::Read(record)), log, position)),
            Lookup::Fetch(_) => None,
        }
    }

    /// What the index of `log` says of a read, and the record if there is none or it
    /// is cached.
    fn lookup(&mut self, log: LogId, request: &Request) -> Lookup {
        let l = &self.logs[log.0 as usize];
        let found = match *request {
            Request::ReadNext { book, tag, min } => l.index.read_next(book, tag, min),
            Request::ReadPrev { book, tag, max } => l.index.read_prev(book, tag, max),
            _ => unreachable!("lookup takes reads"),
        };
        let Some(found) = found else { return Lookup::Done(None) };
        if let Some(c) = self.cache.get(found.seqnum) {
            if let Some((tags, data)) = &c.record {
                let record = LogRecord { seqnum: found.seqnum, tags: tags.clone(), data: data.clone(), aux: c.aux.clone() };
                return Lookup::Done(Some(record));
            }
        }
        Lookup::Fetch(found)
    }

    fn read(&mut self, now: Micros, log: LogId, r: ReadOp) {
        let position = self.logs[log.0 as usize].applied;
        let found = match self.lookup(log, &r.request) {
            Lookup::Done(record) => {
                self.deadlines.remove(&(r.deadline, r.op));
                self.complete(r.op, Ok(Reply::Read(record)), log, position);
                return;
            }
            Lookup::Fetch(found) => found,
        };
        let replicas = self.shard_replicas.get(&found.location.shard).cloned().unwrap_or_default();
        if replicas.is_empty() {
            self.deadlines.remove(&(r.deadline, r.op));
            let e = Error::Unavailable(format!("no replicas known for {:?}", found.location.shard));
            self.complete(r.op, Err(e), log, position);
            return;
        }
        let req = self.next_req;
        self.next_req += 1;
        // Start with a replica chosen by the engine id, to spread reads over replicas.
        let turn = self.id.0 as usize;
        self.record_fetches.insert(
            req,
            RecordFetch {
                op: r.op,
                log,
                request: r.request,
                found,
                position,
                replicas,
                turn,
                sent_at: 0,
                deadline: r.deadline,
                aux: None,
            },
        );
        self.send_record_fetch(now, req);
    }

    fn send_record_fetch(&mut self, now: Micros, req: u64) {
        let Some(f) = self.record_fetches.get_mut(&req) else { return };
        f.sent_at = now;
        let to = f.replicas[f.turn % f.replicas.len()];
        f.turn += 1;
        let seqnum = f.found.seqnum;
        self.send(to, Message::ReadRecord { req, seqnum });
    }

    fn on_record(&mut self, now: Micros, req: u64, seqnum: SeqNum, read: StoredRead) {
        let Some(f) = self.record_fetches.get(&req) else { return };
        if f.found.seqnum != seqnum {
            return;
        }
        match read {
            StoredRead::Found(record) => {
                let f = self.record_fetches.remove(&req).expect("checked");
                self.cache.put_record(seqnum, record.meta.book, record.meta.tags.clone(), record.data.clone());
                let aux = f.aux.or_else(|| self.cache.get(seqnum).and_then(|c| c.aux.clone()));
                let out = LogRecord { seqnum, tags: record.meta.tags, data: record.data, aux };
                self.deadlines.remove(&(f.deadline, f.op));
                self.complete(f.op, Ok(Reply::Read(Some(out))), f.log, f.position);
            }
            StoredRead::Missing => {
                // The replica has not applied the entry yet, or lost the record: the
                // next tick asks another one.
                let _ = now;
            }
            StoredRead::Reclaimed => {
                // A trim the index has not applied yet removed the record: read again
                // once the index has moved past the position this read saw.
                let f = self.record_fetches.remove(&req).expect("checked");
                let log = f.log;
                if self.config.as_ref().is_some_and(|c| c.log_of(f.request.book()) != log) {
                    // The book moved to an added log, where the trim was ordered.
                    self.deadlines.remove(&(f.deadline, f.op));
                    let e = Error::Unavailable(format!("book {} moved to another log; read again", f.request.book().0));
                    self.complete(f.op, Err(e), log, f.position);
                    return;
                }
                let wait_for = MetalogPosition { term: f.position.term, index: f.position.index + 1 };
                self.logs[log.0 as usize].waiting.push(ReadOp { op: f.op, request: f.request, wait_for, deadline: f.deadline });
                self.run_reads(now, log);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LogTermConfig, ShardConfig, TermConfig};
    use crate::types::BookId;

    const CONTROLLER: NodeId = NodeId(0);
    const SEQUENCER: NodeId = NodeId(1);
    const STORAGE: NodeId = NodeId(2);
    const ENGINE: NodeId = NodeId(3);

    /// One engine indexing the one log of a one-term cluster, fed metalog entries by
    /// hand: each entry orders the engine's next record.
    struct Harness {
        engine: Engine,
        /// The next entry's index, which is also its first record's position and local id.
        next: u64,
    }

    impl Harness {
        fn new() -> Harness {
            let shard = ShardConfig { shard: ShardId(0), engine: ENGINE, incarnation: 1, replicas: vec![STORAGE] };
            let term = TermConfig {
                term: Term(1),
                logs: vec![LogTermConfig { log: LogId(0), sequencers: vec![SEQUENCER], shards: vec![shard] }],
                engines: vec![ENGINE],
                storage: vec![STORAGE],
                sealed: None,
            };
            let config =
                Configuration { n_logs: 1, controller: CONTROLLER, terms: vec![term], indexers: vec![vec![]], tier: None };
            let mut engine = Engine::new(ENGINE, vec![CONTROLLER], 1, EngineConfig::default());
            engine.on_message(0, CONTROLLER, Message::NewConfig { config: Arc::new(config) });
            engine.take_actions();
            Harness { engine, next: 0 }
        }

        /// The seqnum the next ordered record gets.
        fn next_seqnum(&self) -> SeqNum {
            SeqNum::new(Term(1), LogId(0), self.next)
        }

        /// Orders the engine's next record with the next metalog entry.
        fn order_next(&mut self) {
            let n = self.next;
            self.next += 1;
            let entry = MetalogEntry::nth_of_one_shard(n);
            self.engine.on_message(0, SEQUENCER, Message::MetalogPush { entry });
        }

        /// Submits a request; returns every completion the engine made since.
        fn submit(&mut self, op: OpId, position: MetalogPosition, request: Request) -> Vec<(OpId, Result<Reply, Error>)> {
            self.engine.submit(0, op, &Context::from_positions(vec![position]), request);
            self.completions()
        }

        fn completions(&mut self) -> Vec<(OpId, Result<Reply, Error>)> {
            let actions = self.engine.take_actions().into_iter();
            actions
                .filter_map(|a| if let EngineAction::Complete { op, result, .. } = a { Some((op, result)) } else { None })
                .collect()
        }

        /// Appends a plain record and orders it; returns its seqnum.
        fn append(&mut self, op: OpId, book: BookId) -> SeqNum {
            let request =
                Request::Append { book, tags: vec![Tag(1)], data: Bytes::from_static(b"data"), cond: None, unchanged: vec![] };
            assert_eq!(self.submit(op, MetalogPosition::ZERO, request), vec![]);
            let seqnum = self.next_seqnum();
            self.order_next();
            assert_eq!(self.completions(), vec![(op, Ok(Reply::Appended(seqnum)))]);
            seqnum
        }

        /// The position after every entry ordered so far.
        fn position(&self) -> MetalogPosition {
            MetalogPosition::new(Term(1), self.next)
        }

        fn read_tail(&mut self, op: OpId, book: BookId) -> Option<LogRecord> {
            let read = Request::ReadPrev { book, tag: Tag::ALL, max: SeqNum::MAX };
            match self.submit(op, self.position(), read).as_slice() {
                [(o, Ok(Reply::Read(r)))] if *o == op => r.clone(),
                other => panic!("read of book {book:?}: {other:?}"),
            }
        }
    }

    fn set_aux(book: u64, seqnum: SeqNum, aux: &'static [u8]) -> Request {
        Request::SetAux { book: BookId(book), seqnum, aux: Bytes::from_static(aux) }
    }

    #[test]
    fn a_read_is_answered_in_place_only_when_it_needs_no_wait_and_no_fetch() {
        let mut h = Harness::new();
        let seqnum = h.append(1, BookId(2));
        let reached = Context::from_positions(vec![h.position()]);
        let read = Request::ReadNext { book: BookId(2), tag: Tag(1), min: SeqNum::MIN };
        let (got, log, position) = h.engine.read_now(&reached, &read).expect("reached and cached");
        let Ok(Reply::Read(Some(record))) = got else { panic!("read {got:?}") };
        assert_eq!((record.seqnum, &record.data[..], log, position), (seqnum, &b"data"[..], LogId(0), h.position()));
        let empty = Request::ReadPrev { book: BookId(3), tag: Tag::ALL, max: SeqNum::MAX };
        assert_eq!(h.engine.read_now(&reached, &empty).map(|d| d.0), Some(Ok(Reply::Read(None))), "nothing there");
        assert!(h.engine.take_actions().is_empty(), "an answer in place acts on nothing");

        let ahead = Context::from_positions(vec![MetalogPosition::new(Term(1), h.next + 1)]);
        assert!(h.engine.read_now(&ahead, &read).is_none(), "a position the index has not reached waits");
        assert!(h.engine.read_now(&reached, &set_aux(2, seqnum, b"a")).is_none(), "aux data is not a read");
        h.engine.cache.remove(seqnum);
        assert!(h.engine.read_now(&reached, &read).is_none(), "a record not cached is fetched");
        assert_eq!(h.submit(2, h.position(), read), vec![], "submitted, it waits for the storage node");
    }

    #[test]
    fn appends_taken_together_reach_each_replica_in_one_message() {
        let mut h = Harness::new();
        let append = |n: usize| Request::Append {
            book: BookId(1),
            tags: vec![],
            data: Bytes::from(vec![7; n]),
            cond: None,
            unchanged: vec![],
        };
        let replicates = |actions: Vec<EngineAction>| -> Vec<Vec<LocalId>> {
            actions
                .into_iter()
                .filter_map(|a| match a {
                    EngineAction::Send(STORAGE, Message::Replicate { records, .. }) => {
                        Some(records.into_iter().map(|r| r.0).collect())
                    }
                    _ => None,
                })
                .collect()
        };
        for op in 1..=3 {
            h.engine.submit(0, op, &Context::new(), append(10));
        }
        assert_eq!(replicates(h.engine.take_actions()), vec![vec![0, 1, 2]]);
        // Up to a bound of data: a record that does not fit starts the next message,
        // which later records join.
        let big = EngineConfig::default().record_bytes_max;
        assert_eq!(REPLICATE_BYTES_MAX / big, 4);
        for op in 4..=8 {
            h.engine.submit(0, op, &Context::new(), append(big));
        }
        h.engine.submit(0, 9, &Context::new(), append(10));
        assert_eq!(replicates(h.engine.take_actions()), vec![vec![3, 4, 5, 6], vec![7, 8]]);
    }

    #[test]
    fn aux_data_is_accepted_only_for_a_live_record_of_the_callers_book() {
        let mut h = Harness::new();
        let theirs = h.append(1, BookId(9));
        let mine = h.append(2, BookId(1));
        let never = SeqNum::new(Term(1), LogId(0), 1_000);
        for (op, seqnum, what) in [(3, theirs, "another book's live record"), (4, never, "a seqnum never written")] {
            let done = h.submit(op, h.position(), set_aux(1, seqnum, b"poison"));
            assert!(matches!(done.as_slice(), [(o, Err(Error::InvalidArgument(_)))] if *o == op), "aux on {what}: {done:?}");
        }
        assert_eq!(h.read_tail(5, BookId(9)).map(|r| r.aux), Some(None), "book 9's record carries no aux data of book 1");

        assert_eq!(h.submit(6, h.position(), set_aux(1, mine, b"view")), vec![(6, Ok(Reply::AuxSet))]);
        let read = h.read_tail(7, BookId(1)).expect("book 1's record");
        assert_eq!((read.seqnum, read.aux), (mine, Some(Bytes::from_static(b"view"))));
    }

    #[test]
    fn a_caller_that_saw_a_later_term_waits_for_that_configuration() {
        // The caller's context comes from an engine that has term 2, in which a second
        // log was added: its book may have moved there, so this engine, still in term
        // 1, must not answer from log 0 (it would miss the caller's own writes).
        let mut h = Harness::new();
        h.append(1, BookId(3));
        let ctx = Context::from_positions(vec![h.position(), MetalogPosition::new(Term(2), 1)]);
        let read = Request::ReadPrev { book: BookId(3), tag: Tag::ALL, max: SeqNum::MAX };
        h.engine.submit(0, 2, &ctx, read);
        assert_eq!(h.completions(), vec![], "the read waits for term 2");
        h.engine.on_tick(EngineConfig::default().op_timeout_us);
        let done = h.completions();
        // A term that never came in a whole timeout was not given out by this cluster:
        // bad input, not a slow log (the gateway answers 400, not 504).
        assert!(matches!(done.as_slice(), [(2, Err(Error::InvalidArgument(m)))] if m.contains("term 2")), "{done:?}");
    }

    #[test]
    fn aux_data_waits_for_the_callers_position_like_a_read() {
        // A caller that saw a record appended elsewhere sets aux data on it before this
        // engine's index has applied it: the request waits instead of failing.
        let mut h = Harness::new();
        let append =
            Request::Append { book: BookId(4), tags: vec![], data: Bytes::from_static(b"data"), cond: None, unchanged: vec![] };
        assert_eq!(h.submit(1, MetalogPosition::ZERO, append), vec![]);
        let seqnum = h.next_seqnum();
        let after = MetalogPosition::new(Term(1), h.next + 1);
        assert_eq!(h.submit(2, after, set_aux(4, seqnum, b"view")), vec![], "the index has not applied the record yet");
        h.order_next();
        let mut done = h.completions();
        done.sort_by_key(|(op, _)| *op);
        assert_eq!(done, vec![(1, Ok(Reply::Appended(seqnum))), (2, Ok(Reply::AuxSet))]);
        assert_eq!(h.read_tail(3, BookId(4)).and_then(|r| r.aux), Some(Bytes::from_static(b"view")));
    }
}
