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
//! and whose record is cached (and attaches aux data there, in complete mode), with the
//! answer a submitted request would get, so that a driver can serve it without a channel,
//! a task switch or a wakeup (see `tally-logsvc`'s driver).
//! The simulator answers half its reads that way, checked by the same oracle.
//!
//! Invariants (asserted): the index applies each entry once, in order; an append
//! completes at most once, with the seqnum the metalog gave its record.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

mod apply;
mod config;
mod forward;
mod import;
mod lookup;
mod partial;
mod read;
mod tick;

pub use partial::PartialStats;

use crate::assembly::{Assembling, Assembly};
use crate::cache::RecordCache;
use crate::config::Configuration;
use crate::context::Context;
use crate::error::Error;
use crate::follower::{Followed, Follower, FollowerConfig};
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
    /// Closed by this version of `term`: its records not ordered by the entry that
    /// announces it never will be.
    closes: Option<u32>,
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

/// The first request id of `incarnation`: its bits turned so that incarnations counted
/// up (the simulator's) differ in the high half, with 2^63 ids of room.
fn first_req(incarnation: u64) -> u64 {
    incarnation.rotate_left(32) & (u64::MAX >> 1)
}

impl Engine {
    /// Reads answered per path in partial mode.
    pub fn partial_stats(&self) -> Option<PartialStats> {
        self.partial.as_ref().map(|p| PartialStats { tier_resends: p.aggregator.resends, ..p.stats })
    }

    /// The local index of `log` in partial mode, for checks.
    pub fn local_index(&self, log: LogId) -> Option<&crate::tier::LocalIndex> {
        self.partial.as_ref().and_then(|p| p.local(log))
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
            // Request ids of an incarnation start where no other's are: a reply or a
            // tier answer meant for the previous incarnation (a lookup an aggregator
            // still gathers) must not match a request of this one.
            next_req: first_req(incarnation),
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
        // Seeking its start, the engine could miss the entry ordering the record.
        let seeking = self.follower.seeking(log);
        let Some(shard) = self.logs.get_mut(log.0 as usize).and_then(|l| l.shard.as_mut()).filter(|_| !seeking) else {
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

    fn send_trim(&mut self, now: Micros, op: OpId) {
        let Some(config) = self.config.clone() else { return };
        let Some(t) = self.trims.get_mut(&op) else { return };
        t.sent_at = now;
        let current = config.current();
        // A trim of a book that moved to an added log goes to that log's sequencer.
        t.log = config.log_of(t.command.book);
        let (log, command) = (t.log, t.command.clone());
        if self.follower.seeking(log) {
            return; // it could be ordered before the start; sent again after it
        }
        self.send(current.log(log).primary(), Message::TrimRequest { term: current.term, log, command });
    }

    pub fn on_message(&mut self, now: Micros, from: NodeId, msg: Message) {
        let mut msg = Some(msg);
        if self.partial.is_some() && self.partial_message(now, from, &mut msg) {
            return;
        }
        let Some(msg) = msg else { return };
        let msg = match self.follower.on_message(msg) {
            Followed::Entries(log) => return self.drain_metalog(now, log),
            Followed::Tail => return,
            Followed::Other(msg) => msg,
        };
        match msg {
            Message::NewConfig { config } => self.on_config(now, config),
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
}

#[cfg(test)]
mod tests;
