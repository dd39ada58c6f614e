//! Records, metalog entries, the LogBook requests and replies, and the wire messages
//! between roles. Requests live here rather than in the engine because they are wire
//! values: the client sends them, and engines forward them to each other.
//!
//! Every message crosses QUIC as one frame: `u32` length, `u8` wire version, then the
//! bincode body (see `net::frame` in `tally-logsvc`). The state machines exchange these
//! values directly, so the simulator and the drivers run the same protocol code.
//!
//! Conditions: a record's metadata may name the offset at which it must land in one of its
//! streams (`cond`), and up to `UNCHANGED_MAX` streams it does not join that must hold
//! exactly so many records (`unchanged`: "nothing joined them since I counted"); the record
//! is placed only if all hold, as every index replica decides alike (`index.rs`). Stores
//! still read the metadata they wrote before `unchanged` existed (`RecordMetaV1`).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::config::Configuration;
use crate::error::Error;
use crate::index::{BookState, Found};
use crate::tier::{DecidedUpdate, ShardAnswer};
use crate::types::{BookId, LocalId, LogId, MetalogPosition, NodeId, SeqNum, ShardId, Tag, Term};

/// Version of the wire format; a peer speaking another version is disconnected.
pub const WIRE_VERSION: u8 = 13;

/// A condition of a conditional append (Halfmoon `logCondAppend`): the stream `tag` of
/// the record's book must hold exactly `position` records (trimmed ones included) when
/// the record is ordered. As [`RecordMeta::cond`] `tag` is one of the record's tags, so
/// the record lands at offset `position`; as one of [`RecordMeta::unchanged`] it is not,
/// and the condition says that nothing joined that stream since the caller looked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cond {
    pub tag: Tag,
    pub position: u64,
}

/// What indexers need to place a record: its book, its tags (sorted, without
/// duplicates, never [`Tag::ALL`]) and its conditions. A record with conditions is
/// placed only if all of them hold; otherwise it is in no stream.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecordMeta {
    pub book: BookId,
    pub tags: Vec<Tag>,
    pub cond: Option<Cond>,
    /// Streams of the book that the record does not join and that must hold exactly
    /// so many records, at most [`UNCHANGED_MAX`] (the exactly-once layer's first record
    /// of an invocation: no table it used switched protocol since it looked).
    pub unchanged: Vec<Cond>,
}

/// The most [`RecordMeta::unchanged`] conditions one record carries.
pub const UNCHANGED_MAX: usize = 16;

impl RecordMeta {
    /// A record that carries no condition.
    pub fn plain(book: BookId, tags: Vec<Tag>) -> RecordMeta {
        RecordMeta { book, tags, cond: None, unchanged: Vec::new() }
    }

    pub fn is_conditional(&self) -> bool {
        self.cond.is_some() || !self.unchanged.is_empty()
    }
}

/// [`RecordMeta`] as stores wrote it before conditions on unchanged streams (a value
/// of theirs ends where `unchanged` would begin): read, never written.
#[derive(Deserialize)]
pub struct RecordMetaV1 {
    pub book: BookId,
    pub tags: Vec<Tag>,
    pub cond: Option<Cond>,
}

impl From<RecordMetaV1> for RecordMeta {
    fn from(v: RecordMetaV1) -> RecordMeta {
        RecordMeta { book: v.book, tags: v.tags, cond: v.cond, unchanged: Vec::new() }
    }
}

/// A record as the appending engine replicates it to storage nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub meta: RecordMeta,
    pub data: Bytes,
}

/// A span of a caller's trace (W3C trace and span IDs) that the log work for one record
/// nests under: what the appending engine's driver sends with the record so that the
/// storage nodes' spans join the caller's trace. Observability only: no state machine
/// reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpanRef {
    pub trace: [u8; 16],
    pub span: [u8; 8],
}

/// A trim command as it travels in the metalog: every record of `book` that carries
/// `tag` (or every record, for [`Tag::ALL`]) with a seqnum below `seqnum` leaves that
/// stream. `origin` lets the requesting engine recognise its command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimCommand {
    pub book: BookId,
    pub tag: Tag,
    pub seqnum: SeqNum,
    pub origin: Option<(NodeId, u64)>,
}

/// One entry of a physical log's metalog in one term.
///
/// The records between `prev_cut` and `cut` (for every shard `j`, local ids
/// `prev_cut[j]..cut[j]`), ordered by (shard, local id), take the positions starting at
/// `start_position`. Then the trim commands apply, in order.
///
/// `version` is the version of the term's configuration in effect at this entry:
/// shard `j` is ordered here only if `shards[j]` is open at it
/// ([`crate::ShardConfig::open_at`]). A primary issues an entry, empty if need be, as
/// soon as it learns of a later version, so every node applies it at one position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetalogEntry {
    pub term: Term,
    pub log: LogId,
    pub index: u64,
    pub start_position: u64,
    pub prev_cut: Vec<LocalId>,
    pub cut: Vec<LocalId>,
    pub trims: Vec<TrimCommand>,
    pub version: u32,
}

impl MetalogEntry {
    /// The position after this entry: the version of an index that has applied it.
    pub fn position_after(&self) -> MetalogPosition {
        MetalogPosition::new(self.term, self.index + 1)
    }

    pub fn record_count(&self) -> u64 {
        self.cut.iter().zip(&self.prev_cut).map(|(c, p)| c - p).sum()
    }

    /// The non-empty runs of this entry, in order: shard index, local ids, and the
    /// position of the run's first record.
    pub fn runs(&self) -> impl Iterator<Item = (usize, Range<LocalId>, u64)> + '_ {
        let mut position = self.start_position;
        self.cut.iter().zip(&self.prev_cut).enumerate().filter_map(move |(j, (&c, &p))| {
            let run = (j, p..c, position);
            position += c - p;
            (c > p).then_some(run)
        })
    }

    pub fn seqnum_at(&self, position: u64) -> SeqNum {
        SeqNum::new(self.term, self.log, position)
    }

    /// For tests: entry `i` of term 1's metalog of log 0, ordering one record of the
    /// only shard.
    #[cfg(test)]
    pub(crate) fn nth_of_one_shard(i: u64) -> MetalogEntry {
        MetalogEntry {
            term: Term(1),
            log: LogId(0),
            index: i,
            start_position: i,
            prev_cut: vec![i],
            cut: vec![i + 1],
            trims: vec![],
            version: 0,
        }
    }
}

/// A record as a read returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    pub seqnum: SeqNum,
    pub tags: Vec<Tag>,
    pub data: Bytes,
    pub aux: Option<Bytes>,
}

/// A LogBook call, as a caller submits it to an engine and as an engine forwards it to
/// an indexer of the book's log ([`Message::Forward`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// `unchanged`: see [`RecordMeta::unchanged`].
    Append {
        book: BookId,
        tags: Vec<Tag>,
        data: Bytes,
        cond: Option<Cond>,
        unchanged: Vec<Cond>,
    },
    ReadNext {
        book: BookId,
        tag: Tag,
        min: SeqNum,
    },
    ReadPrev {
        book: BookId,
        tag: Tag,
        max: SeqNum,
    },
    Trim {
        book: BookId,
        tag: Tag,
        seqnum: SeqNum,
    },
    SetAux {
        book: BookId,
        seqnum: SeqNum,
        aux: Bytes,
    },
}

impl Request {
    pub fn book(&self) -> BookId {
        match self {
            Request::Append { book, .. }
            | Request::ReadNext { book, .. }
            | Request::ReadPrev { book, .. }
            | Request::Trim { book, .. }
            | Request::SetAux { book, .. } => *book,
        }
    }
}

/// The answer to a [`Request`] that succeeded, one variant per kind of request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    Appended(SeqNum),
    Read(Option<LogRecord>),
    Trimmed,
    AuxSet,
}

/// What a storage node answers for a read by seqnum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredRead {
    Found(Record),
    /// Ordered once, but trimmed and reclaimed since.
    Reclaimed,
    /// This node does not (yet) know the record.
    Missing,
}

/// Every message between roles. Variants are grouped by who sends them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Message {
    // Engine -> storage node.
    /// Records of one shard for the replicas to persist. Idempotent. `traces`: the
    /// traced ones' spans (the engine's driver fills them in, the storage node's driver
    /// takes them out; the state machines send and read none).
    Replicate {
        shard: ShardId,
        records: Vec<(LocalId, Record)>,
        traces: Vec<(LocalId, SpanRef)>,
    },
    /// Metadata of local ids `from..to` of `shard`, to build an index.
    FetchMeta {
        req: u64,
        shard: ShardId,
        from: LocalId,
        to: LocalId,
    },
    /// Read one ordered record.
    ReadRecord {
        req: u64,
        seqnum: SeqNum,
    },
    /// Index node -> storage node: read one ordered record and answer `reply_to` (a
    /// function node's tier lookup `req`) with a `RecordReply`.
    ReadRecordFor {
        req: u64,
        seqnum: SeqNum,
        reply_to: NodeId,
    },

    // Storage node -> engine.
    MetaReply {
        req: u64,
        shard: ShardId,
        from: LocalId,
        metas: Vec<RecordMeta>,
    },
    /// The replica does not hold all the asked records; ask another one.
    MetaUnavailable {
        req: u64,
    },
    RecordReply {
        req: u64,
        seqnum: SeqNum,
        read: StoredRead,
    },

    // Storage node -> primary sequencer.
    /// Prefixes of each shard this node replicates, as (shard index in the term's log
    /// config, local ids): `held`, received and being written (the primary may order
    /// them), and `stored`, durable (the primary commits what they cover).
    Progress {
        term: Term,
        log: LogId,
        held: Vec<(u32, LocalId)>,
        stored: Vec<(u32, LocalId)>,
    },

    // Primary -> backup sequencers.
    ReplicateEntry {
        entry: MetalogEntry,
        committed_len: u64,
        /// The primary's quorum does not wait for this backup: it may persist (and
        /// acknowledge) the entry later, with others (`SequencerConfig::spare_persist_us`).
        spare: bool,
    },
    Committed {
        term: Term,
        log: LogId,
        len: u64,
    },
    // Backup -> primary.
    EntryAck {
        term: Term,
        log: LogId,
        len: u64,
    },
    /// The backup lacks entries before the one sent; it holds `len`.
    EntryGap {
        term: Term,
        log: LogId,
        len: u64,
    },
    /// The backup has promised the controller to reject entries of this term.
    EntryRejected {
        term: Term,
        log: LogId,
    },

    // Sequencer -> subscribers (engines, storage nodes).
    MetalogPush {
        entry: MetalogEntry,
    },
    /// Sent when idle, so a subscriber that lost a push notices.
    MetalogTail {
        term: Term,
        log: LogId,
        committed_len: u64,
    },
    // Subscriber -> any sequencer replica of the term.
    MetalogFetch {
        term: Term,
        log: LogId,
        from: u64,
    },
    MetalogEntries {
        term: Term,
        log: LogId,
        entries: Vec<MetalogEntry>,
    },

    // Engine -> primary sequencer.
    TrimRequest {
        term: Term,
        log: LogId,
        command: TrimCommand,
    },

    // Engine -> an engine holding the index of the request's log, and back. `position`
    // is the caller's metalog position in `log`, then the position the caller moves
    // to. The reply names the forwarder's incarnation: request ids start again with
    // every incarnation, so a reply to the previous one must not complete a new request.
    Forward {
        req: u64,
        incarnation: u64,
        log: LogId,
        position: MetalogPosition,
        request: Request,
    },
    ForwardReply {
        req: u64,
        incarnation: u64,
        result: Result<Reply, Error>,
        position: MetalogPosition,
    },

    // Indexer of a log added in `term` -> an indexer of `source`, and back: the index
    // state, as of the end of the term before, of the books that moved from `source`
    // to `target` in `term`, in book order from the first after `after`. An indexer
    // that has not applied that far does not answer. `more`: books are left.
    IndexExport {
        req: u64,
        term: Term,
        source: LogId,
        target: LogId,
        after: Option<BookId>,
    },
    IndexExported {
        req: u64,
        books: Vec<BookState>,
        more: bool,
    },

    // The index tier (partial mode). Index node -> function nodes: an entry decided.
    UpdatePush {
        update: DecidedUpdate,
    },
    // Function node -> any index node, and back: the decided updates of `log` after
    // `after` (`None`: some are no longer kept; the local index starts again).
    UpdateFetch {
        req: u64,
        log: LogId,
        after: MetalogPosition,
    },
    UpdateFetched {
        req: u64,
        log: LogId,
        updates: Option<Vec<DecidedUpdate>>,
    },
    // Function node -> a replica of index shard `shard`, and back: the shard's closest
    // record of (book, tag) from `bound` (forward when `next`), as of `q` of `log`, with
    // the aux data it keeps for it. Held until the shard has applied `log` before `q`.
    // With `fetch`, a shard that holds the bound itself (`ShardAnswer::Exact`) also
    // asks a replica of the record's storage shard to send it to the caller
    // (`ReadRecordFor`, the thesis's type 2: one hop fewer than reading it after).
    TierLookup {
        req: u64,
        round: u32,
        shard: u16,
        log: LogId,
        book: BookId,
        tag: Tag,
        bound: SeqNum,
        next: bool,
        q: MetalogPosition,
        fetch: bool,
        /// The aggregator that gathers the shards' answers (`TierAnswerFor`); `None`:
        /// the caller does (`TierAnswer`).
        aggregator: Option<NodeId>,
    },
    // A replica of index shard `shard` -> the aggregator a lookup named: its answer to
    // `caller`'s lookup `req`, with what the aggregator needs to combine the `shards`
    // answers and send the read (`next`, `q`, `fetch`).
    TierAnswerFor {
        caller: NodeId,
        req: u64,
        round: u32,
        shard: u16,
        shards: u16,
        next: bool,
        q: MetalogPosition,
        fetch: bool,
        answer: ShardAnswer,
        aux: Option<Bytes>,
    },
    // Aggregator -> the caller: the lookup's answer as of `q` (`found`, with its aux
    // data), and whether storage was asked to send the record (`sent`, as type 2).
    TierDone {
        req: u64,
        round: u32,
        found: Option<Found>,
        q: MetalogPosition,
        aux: Option<Bytes>,
        sent: bool,
    },
    // Aggregator -> the caller: a shard answers nothing older than `floor`; ask again,
    // as of it, in a new round.
    TierRestart {
        req: u64,
        round: u32,
        floor: MetalogPosition,
    },
    TierAnswer {
        req: u64,
        round: u32,
        shard: u16,
        answer: ShardAnswer,
        aux: Option<Bytes>,
    },
    // Function node -> a replica of every index shard, and back: the record at `offset`
    // of (book, tag) just before `before`, a record of the entry of `log` ending at `at`
    // (a failed condition's holder).
    HolderLookup {
        req: u64,
        shard: u16,
        log: LogId,
        book: BookId,
        tag: Tag,
        offset: u64,
        before: SeqNum,
        at: MetalogPosition,
    },
    HolderAnswer {
        req: u64,
        shard: u16,
        holder: Option<SeqNum>,
    },
    // Function node -> every replica of every index shard, and back: aux data for a
    // record, kept by the shard that holds it live in `book` at `q` (`kept`).
    TierSetAux {
        req: u64,
        shard: u16,
        log: LogId,
        book: BookId,
        seqnum: SeqNum,
        aux: Bytes,
        q: MetalogPosition,
    },
    TierAuxSet {
        req: u64,
        shard: u16,
        kept: bool,
    },
    /// A tier request refused (sent to a node that is not that shard's replica, or
    /// naming a log or position the node cannot answer for).
    TierRefused {
        req: u64,
        error: Error,
    },
    /// Index node -> a replica of its shard: piece `piece` of the replica's state
    /// (a node that takes a place in the tier, or starts again, copies it rather than
    /// replaying the log).
    ShardCopy {
        req: u64,
        shard: u16,
        piece: u32,
    },
    /// The replica's state as of `at` (per log), in `pieces` pieces; `None`: it has no
    /// state of that shard to give.
    ShardCopied {
        req: u64,
        piece: u32,
        copy: Option<(Vec<MetalogPosition>, u32, crate::tier::ShardPiece)>,
    },

    // Every node -> controller.
    /// `term` and `version`: the configuration the node has (its stamp).
    Heartbeat {
        incarnation: u64,
        term: Term,
        version: u32,
    },
    ConfigAck {
        term: Term,
        version: u32,
    },
    // Controller -> nodes.
    NewConfig {
        config: Arc<Configuration>,
    },
    Seal {
        term: Term,
        log: LogId,
    },
    // Sequencer -> controller.
    /// The replica's tail of a sealed metalog: its length, its last entry and the one
    /// before, and how much of it the replica knows to be committed.
    Sealed {
        term: Term,
        log: LogId,
        len: u64,
        last: Option<MetalogEntry>,
        /// Boxed: a `Message` is as large as its largest variant.
        prev: Option<Box<MetalogEntry>>,
        committed_len: u64,
        /// The replica may have lost entries of this metalog it acknowledged (it lost
        /// power holding unsynced ones): its tail does not count towards the quorum.
        amnesiac: bool,
    },
    // Controller -> storage node, while it seals a term.
    /// Whether records `..cut` of `shard` are durable here: answered once they are,
    /// or at once when some are not here at all.
    Probe {
        shard: ShardId,
        cut: LocalId,
    },
    // Storage node -> controller.
    Probed {
        shard: ShardId,
        cut: LocalId,
        durable: bool,
    },
}

impl Message {
    /// A node's heartbeat, stamped with the configuration it has.
    pub fn heartbeat(incarnation: u64, config: Option<&Configuration>) -> Message {
        let (term, version) = config.map_or((Term(0), 0), |c| c.stamp());
        Message::Heartbeat { incarnation, term, version }
    }

    /// A node's acknowledgement of `config` (or of the later one it has).
    pub fn config_ack(config: &Configuration) -> Message {
        let (term, version) = config.stamp();
        Message::ConfigAck { term, version }
    }

    /// A stable name for tracing and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Replicate { .. } => "replicate",
            Message::FetchMeta { .. } => "fetch_meta",
            Message::ReadRecord { .. } => "read_record",
            Message::ReadRecordFor { .. } => "read_record_for",
            Message::MetaReply { .. } => "meta_reply",
            Message::MetaUnavailable { .. } => "meta_unavailable",
            Message::RecordReply { .. } => "record_reply",
            Message::Progress { .. } => "progress",
            Message::ReplicateEntry { .. } => "replicate_entry",
            Message::Committed { .. } => "committed",
            Message::EntryAck { .. } => "entry_ack",
            Message::EntryGap { .. } => "entry_gap",
            Message::EntryRejected { .. } => "entry_rejected",
            Message::MetalogPush { .. } => "metalog_push",
            Message::MetalogTail { .. } => "metalog_tail",
            Message::MetalogFetch { .. } => "metalog_fetch",
            Message::MetalogEntries { .. } => "metalog_entries",
            Message::TrimRequest { .. } => "trim_request",
            Message::Forward { .. } => "forward",
            Message::ForwardReply { .. } => "forward_reply",
            Message::IndexExport { .. } => "index_export",
            Message::IndexExported { .. } => "index_exported",
            Message::UpdatePush { .. } => "update_push",
            Message::UpdateFetch { .. } => "update_fetch",
            Message::UpdateFetched { .. } => "update_fetched",
            Message::TierLookup { .. } => "tier_lookup",
            Message::TierAnswer { .. } => "tier_answer",
            Message::TierAnswerFor { .. } => "tier_answer_for",
            Message::TierDone { .. } => "tier_done",
            Message::TierRestart { .. } => "tier_restart",
            Message::HolderLookup { .. } => "holder_lookup",
            Message::HolderAnswer { .. } => "holder_answer",
            Message::TierSetAux { .. } => "tier_set_aux",
            Message::TierAuxSet { .. } => "tier_aux_set",
            Message::TierRefused { .. } => "tier_refused",
            Message::ShardCopy { .. } => "shard_copy",
            Message::ShardCopied { .. } => "shard_copied",
            Message::Heartbeat { .. } => "heartbeat",
            Message::ConfigAck { .. } => "config_ack",
            Message::NewConfig { .. } => "new_config",
            Message::Seal { .. } => "seal",
            Message::Sealed { .. } => "sealed",
            Message::Probe { .. } => "probe",
            Message::Probed { .. } => "probed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(prev: &[u64], cut: &[u64], start: u64) -> MetalogEntry {
        MetalogEntry {
            term: Term(1),
            log: LogId(0),
            index: 0,
            start_position: start,
            prev_cut: prev.to_vec(),
            cut: cut.to_vec(),
            trims: vec![],
            version: 0,
        }
    }

    #[test]
    fn runs_order_records_by_shard_then_local_id() {
        let e = entry(&[2, 0, 5], &[4, 0, 6], 10);
        let runs: Vec<_> = e.runs().collect();
        assert_eq!(runs, vec![(0, 2..4, 10), (2, 5..6, 12)]);
        assert_eq!(e.record_count(), 3);
    }
}
