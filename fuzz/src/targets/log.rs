//! The shared log's bytes from the network and the disk: QUIC frames and hellos, a
//! record's metadata in every store, the journals' segments, the RocksDB metalog's
//! keys, the controller's file, and what the control plane keeps in etcd.

use std::sync::Arc;

use bytes::Bytes;
use tally_control::fuzzing as control;
use tally_control::{Member, MemberRole, Settings};
use tally_logsvc::fuzzing as log;
use tally_logsvc::store::MetalogWrite;
use tally_logsvc::{
    BookId, Cond, Configuration, Context, LogId, LogRecord, LogTermConfig, Message, MetalogEntry, MetalogPosition, NodeId,
    Record, RecordMeta, Reply, Request, SealedTail, SeqNum, ShardConfig, ShardId, StoredRead, Tag, Term, TermConfig, TrimCommand,
    WIRE_VERSION,
};

use super::{fields, join, pick, picked, text};
use crate::Target;

/// The frame limit the frames target reads with (a node's default is larger; a small
/// one makes frames over it cheap to try).
const FRAME_LIMIT: usize = 1 << 20;

fn meta(book: u64, tags: &[u64]) -> RecordMeta {
    RecordMeta::plain(BookId(book), tags.iter().copied().map(Tag).collect())
}

fn metas() -> Vec<RecordMeta> {
    vec![
        meta(0, &[]),
        meta(7, &[3, Tag::platform(1).0]),
        RecordMeta { cond: Some(Cond { tag: Tag(3), position: 9 }), ..meta(u64::MAX, &[3]) },
        RecordMeta { unchanged: vec![Cond { tag: Tag(4), position: 2 }; 3], ..meta(1 << 63, &[1, 2, 3]) },
    ]
}

fn entry(index: u64) -> MetalogEntry {
    MetalogEntry {
        term: Term(2),
        log: LogId(1),
        index,
        start_position: index.wrapping_add(100),
        prev_cut: vec![1, 2],
        cut: vec![3, 4],
        trims: vec![TrimCommand { book: BookId(7), tag: Tag(3), seqnum: SeqNum(9), origin: Some((NodeId(1), 4)) }],
        version: 0,
    }
}

fn configuration() -> Configuration {
    let log = |log: u8| LogTermConfig {
        log: LogId(log),
        sequencers: vec![NodeId(1), NodeId(2), NodeId(3)],
        shards: vec![ShardConfig {
            shard: ShardId(u32::from(log)),
            engine: NodeId(4),
            incarnation: 9,
            replicas: vec![NodeId(5)],
            since: 0,
            until: None,
        }],
    };
    let term = |term: u16, sealed| TermConfig {
        term: Term(term),
        logs: vec![log(0), log(1)],
        engines: vec![NodeId(4)],
        storage: vec![NodeId(5)],
        sealed,
        version: 0,
    };
    Configuration {
        n_logs: 2,
        controller: NodeId(0),
        terms: vec![term(1, Some(vec![SealedTail { len: 3, last: Some(entry(2)) }])), term(2, None)],
        indexers: vec![vec![NodeId(4)], vec![]],
        tier: None,
    }
}

fn messages() -> Vec<Message> {
    let record = Record { meta: metas()[2].clone(), data: Bytes::from_static(b"payload") };
    let seqnum = SeqNum::new(Term(1), LogId(0), 9);
    let position = MetalogPosition::new(Term(1), 4);
    let append = Request::Append {
        book: BookId(7),
        tags: vec![Tag(3)],
        data: Bytes::from_static(b"d"),
        cond: Some(Cond { tag: Tag(3), position: 0 }),
        unchanged: vec![],
    };
    let read = LogRecord { seqnum, tags: vec![Tag(3)], data: Bytes::from_static(b"d"), aux: Some(Bytes::from_static(b"x")) };
    vec![
        Message::Heartbeat { incarnation: 42, term: Term(3), version: 0 },
        Message::Replicate { shard: ShardId(9), records: vec![(0, record.clone()), (1, record.clone())], traces: Vec::new() },
        Message::MetaReply { req: 1, shard: ShardId(2), from: 5, metas: metas() },
        Message::RecordReply { req: 5, seqnum, read: StoredRead::Found(record) },
        Message::Progress { term: Term(1), log: LogId(0), held: vec![(0, 4)], stored: vec![(0, 3)] },
        Message::ReplicateEntry { entry: entry(0), committed_len: 1, spare: true },
        Message::MetalogEntries { term: Term(2), log: LogId(1), entries: vec![entry(0), entry(1)] },
        Message::Forward { req: 3, incarnation: 1, log: LogId(0), position, request: append },
        Message::ForwardReply { req: 3, incarnation: 1, result: Ok(Reply::Read(Some(read))), position },
        Message::ForwardReply { req: 4, incarnation: 1, result: Err(tally_logsvc::Error::Timeout(5)), position },
        Message::NewConfig { config: Arc::new(configuration()) },
        Message::Sealed {
            term: Term(2),
            log: LogId(1),
            len: 2,
            last: Some(entry(1)),
            prev: Some(Box::new(entry(0))),
            committed_len: 1,
            amnesiac: false,
        },
        Message::Probed { shard: ShardId(1), cut: u64::MAX, durable: true },
    ]
}

pub const FRAMES: Target = Target {
    name: "frames",
    what: "QUIC streams: the hello, then length-prefixed, versioned frames of bincode Messages (logsvc net/frame.rs)",
    seeds: frames_seeds,
    dictionary: &[b"TLY1", &[WIRE_VERSION], &[0, 0, 0, 0, WIRE_VERSION], &[0xfd], &[0xfe], &[0xfb]],
    run: frames,
};

fn frames_seeds() -> Vec<Vec<u8>> {
    let encoded: Vec<Vec<u8>> = messages().iter().map(|m| log::encode_frame(m, FRAME_LIMIT).expect("encodes")).collect();
    let mut seeds: Vec<Vec<u8>> = encoded.iter().map(|f| picked(0, f)).collect();
    seeds.push(picked(0, &encoded.concat()));
    seeds.push(picked(1, &log::hello(NodeId(0xdead_beef))));
    seeds
}

fn frames(data: &[u8]) -> bool {
    let Some((which, stream)) = pick(data, 2) else { return false };
    if which == 1 {
        return match log::read_hello(stream) {
            Ok(node) => {
                assert_eq!(log::hello(node), stream[..9], "a hello read back");
                true
            }
            Err(_) => false,
        };
    }
    let (messages, end) = log::read_frames(stream, FRAME_LIMIT);
    for msg in &messages {
        // A message read from a frame under the limit fits one again, and reads back.
        let frame = log::encode_frame(msg, FRAME_LIMIT).unwrap_or_else(|e| panic!("{msg:?} read but not written: {e}"));
        let (again, end) = log::read_frames(&frame, FRAME_LIMIT);
        assert_eq!((&again[..], end), (std::slice::from_ref(msg), None), "a frame written from a read message");
    }
    // The first frame's length is checked before anything is read or allocated.
    if messages.is_empty() && stream.len() >= 5 && stream[4] == WIRE_VERSION {
        let len = u32::from_be_bytes([stream[0], stream[1], stream[2], stream[3]]);
        if len as usize > FRAME_LIMIT {
            assert!(end.as_deref().is_some_and(|e| e.contains("exceeds the limit")), "a frame of {len} bytes: {end:?}");
        }
    }
    !messages.is_empty()
}

pub const RECORD_META: Target = Target {
    name: "record_meta",
    what: "a record's metadata on disk: bincode in both encodings, a RocksStore's flag and value, a JournalStore's \
           slot and value, record keys (logsvc store/codec.rs, rocks.rs, journal_records/)",
    seeds: record_meta_seeds,
    dictionary: &[&[0], &[1], &[2], &[0xfb], &[0xfc], &[0xfd]],
    run: record_meta,
};

fn record_meta_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for m in metas() {
        seeds.push(picked(0, &log::encode_record_meta(&m).expect("encodes")));
        seeds.push(picked(1, &log::rocks_meta_value(&m, true).expect("encodes")));
        seeds.push(picked(1, &log::rocks_meta_value(&m, false).expect("encodes")));
        seeds.push(picked(2, &log::journal_meta_value(&m, Some((1, 24, 7))).expect("encodes")));
        seeds.push(picked(2, &log::journal_meta_value(&m, None).expect("encodes")));
    }
    // Metadata as stores wrote it before conditions on unchanged streams.
    let v1 = log::encode_record_meta(&metas()[2]).expect("encodes");
    seeds.push(picked(0, &v1[..v1.len() - 1]));
    for location in [(0, 0), (7, 9), (u32::MAX, u64::MAX)] {
        let key = log::record_key(tally_logsvc::Location { shard: ShardId(location.0), local_id: location.1 });
        seeds.push(picked(3, &key));
    }
    seeds
}

fn record_meta(data: &[u8]) -> bool {
    let Some((which, bytes)) = pick(data, 4) else { return false };
    match which {
        0 => log::decode_record_meta(bytes).map(|m| {
            let again = log::encode_record_meta(&m).expect("decoded metadata encodes");
            assert_eq!(log::decode_record_meta(&again).expect("re-encoded metadata decodes"), m);
        }),
        1 => log::decode_rocks_meta_value(bytes).map(|(m, has_data)| {
            let again = log::rocks_meta_value(&m, has_data).expect("decoded metadata encodes");
            assert_eq!(log::decode_rocks_meta_value(&again).expect("re-encoded value decodes"), (m, has_data));
        }),
        2 => log::decode_journal_meta_value(bytes).map(|(m, slot)| {
            let again = log::journal_meta_value(&m, slot).expect("decoded metadata encodes");
            let back = log::decode_journal_meta_value(&again).expect("re-encoded value decodes");
            // A reclaimed record's slot is not read back: only its flag says anything.
            assert_eq!(back, (m, slot), "a journal's metadata value read back");
        }),
        _ => log::decode_location(bytes).map(|location| assert_eq!(log::record_key(location), bytes)),
    }
    .is_ok()
}

pub const RECORD_JOURNAL: Target = Target {
    name: "record_journal",
    what: "a JournalStore's segment as an open replays it: header, checksummed frames, ops; a torn or corrupt \
           segment is detected (logsvc store/journal_records/)",
    seeds: record_journal_seeds,
    dictionary: &[b"tally-records-j1", &[1], &[2], &[3]],
    run: record_journal,
};

fn record_journal_seeds() -> Vec<Vec<u8>> {
    let record = |m: usize, data: &'static [u8]| Record { meta: metas()[m].clone(), data: Bytes::from_static(data) };
    let at = |shard: u32, local_id: u64| tally_logsvc::Location { shard: ShardId(shard), local_id };
    let batches = [
        vec![(at(0, 0), record(0, b"first")), (at(0, 1), record(1, b""))],
        vec![(at(1, 0), record(2, b"second batch")), (at(0, 1), record(3, b"overwritten"))],
    ];
    let mut seeds = Vec::new();
    for (writes, reclaims) in [(&batches[..1], &[][..]), (&batches[..], &[at(0, 0)][..])] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let segment = log::record_segment(dir.path(), writes, reclaims, 1024).expect("a journal");
        let end = segment.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        // The preallocated zeros after the frames, some of them.
        seeds.push(segment[..(end + 32).min(segment.len())].to_vec());
    }
    seeds
}

fn record_journal(data: &[u8]) -> bool {
    match log::read_record_segment(data) {
        Ok((_, ops, end)) => {
            assert!(end as usize <= data.len(), "frames end at {end}, past the segment's {} bytes", data.len());
            for op in ops {
                if let log::JournalOp::Write { meta, data: range, .. } = op {
                    assert!(range.end <= end, "a record's data at {range:?}, past the frames' end {end}");
                    // Replay keeps the metadata as it is; a read decodes it later.
                    let _ = log::decode_record_meta(&meta);
                }
            }
            true
        }
        Err(_) => false,
    }
}

pub const METALOG_JOURNAL: Target = Target {
    name: "metalog_journal",
    what: "a JournalMetalogStore's segment as an open scans it: frames of metalog writes in order, a torn last \
           frame told from corruption (logsvc store/journal.rs)",
    seeds: metalog_journal_seeds,
    dictionary: &[b"tally-metalog-j1", &[0, 0, 0, 0], &[0xff, 0xff, 0xff, 0xff]],
    run: metalog_journal,
};

fn metalog_journal_seeds() -> Vec<Vec<u8>> {
    let (term, log_id) = (Term(2), LogId(1));
    let batches = [
        vec![MetalogWrite::Lead { term, log: log_id }, MetalogWrite::Entry(entry(0))],
        vec![MetalogWrite::Entry(entry(1)), MetalogWrite::Entry(entry(2))],
        vec![MetalogWrite::Truncate { term, log: log_id, len: 1 }, MetalogWrite::Seal { term, log: log_id }],
        vec![MetalogWrite::Entry(MetalogEntry { term: Term(3), log: LogId(0), ..entry(0) })],
    ];
    let mut seeds = Vec::new();
    for n in [1, batches.len()] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let segment = log::metalog_segment(dir.path(), &batches[..n], 2048).expect("a journal");
        let end = segment.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        seeds.push(segment[..(end + 32).min(segment.len())].to_vec());
    }
    seeds
}

fn metalog_journal(data: &[u8]) -> bool {
    let last = log::read_metalog_segment(data, true);
    let earlier = log::read_metalog_segment(data, false);
    if let (Ok(a), Ok(b)) = (&last, &earlier) {
        assert_eq!(a, b, "a segment read the same as the last one and as an earlier one");
    }
    // Only the last segment may end in a torn frame: what an earlier one accepts, the
    // last one accepts too.
    assert!(earlier.is_err() || last.is_ok(), "accepted as an earlier segment only: {last:?}");
    last.is_ok()
}

pub const METALOG_ENTRIES: Target = Target {
    name: "metalog_entries",
    what: "a RocksMetalogStore's entries and seal keys, and the controller's configuration file (logsvc \
           store/rocks.rs, store/file.rs)",
    seeds: metalog_entries_seeds,
    dictionary: &[b"tally-configuration-v1\n", b"L", &[0xfb], &[0xfc], &[0xfd]],
    run: metalog_entries,
};

fn metalog_entries_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for e in [entry(0), entry(u64::MAX), MetalogEntry { trims: vec![], prev_cut: vec![], cut: vec![], ..entry(3) }] {
        let (key, value) = log::rocks_metalog_entry(&e).expect("encodes");
        seeds.push(picked(0, &join(&[&key, &value])));
    }
    for lead in [false, true] {
        seeds.push(picked(1, &log::rocks_seal_key(Term(u16::MAX), LogId(3), lead)));
    }
    seeds.push(picked(2, &log::configuration_file(&configuration()).expect("encodes")));
    seeds
}

fn metalog_entries(data: &[u8]) -> bool {
    let Some((which, bytes)) = pick(data, 3) else { return false };
    match which {
        0 => {
            let [key, value] = fields(bytes);
            log::decode_rocks_metalog_entry(key, value).is_ok_and(|e| {
                let (key, value) = log::rocks_metalog_entry(&e).expect("a decoded entry encodes");
                assert_eq!(log::decode_rocks_metalog_entry(&key, &value).expect("reads back"), e);
                true
            })
        }
        1 => log::decode_rocks_seal_key(bytes).is_ok_and(|write| {
            let again = match write {
                MetalogWrite::Seal { term, log: l } => log::rocks_seal_key(term, l, false),
                MetalogWrite::Lead { term, log: l } => log::rocks_seal_key(term, l, true),
                other => panic!("a seal key read as {other:?}"),
            };
            assert_eq!(again, bytes, "a seal key written from what it read");
            true
        }),
        _ => log::decode_configuration_file(bytes).is_ok_and(|c| {
            let again = log::configuration_file(&c).expect("a decoded configuration encodes");
            assert_eq!(log::decode_configuration_file(&again).expect("reads back"), c);
            true
        }),
    }
}

pub const ETCD_VALUES: Target = Target {
    name: "etcd_values",
    what: "what the control plane reads back from etcd: the configuration (format byte, bincode), the settings \
           (JSON), a member under its key (JSON), the leader's id (logsvc/control plane.rs, members.rs, election.rs)",
    seeds: etcd_values_seeds,
    dictionary: &[b"/tally/c/members/", b"\"n_logs\"", b"\"id\"", b"\"role\"", b"\"engine\"", b"null", b"{", b"}", b","],
    run: etcd_values,
};

const CLUSTER: &str = "c";

fn member() -> Member {
    Member {
        id: NodeId(7),
        role: MemberRole::Engine,
        addr: "127.0.0.1:7000".into(),
        http: Some("127.0.0.1:8080".into()),
        process: "node-a".into(),
        pid: 4242,
        incarnation: 3,
    }
}

fn etcd_values_seeds() -> Vec<Vec<u8>> {
    let settings =
        Settings { n_logs: 2, n_meta: 3, n_data: 2, failure_timeout_ms: 1_000, index: None, metalog: Default::default() };
    let m = member();
    vec![
        picked(0, &control::encode_config(&configuration()).expect("encodes")),
        picked(1, &control::encode_settings(&settings)),
        picked(2, &join(&[&control::member_key(CLUSTER, m.id), &control::encode_member(&m)])),
        picked(3, &control::encode_leader(NodeId(u32::MAX))),
    ]
}

fn etcd_values(data: &[u8]) -> bool {
    let Some((which, bytes)) = pick(data, 4) else { return false };
    match which {
        0 => control::decode_config(bytes).is_ok_and(|c| {
            assert!(!c.terms.is_empty(), "a configuration without a term read");
            let again = control::encode_config(&c).expect("a decoded configuration encodes");
            assert_eq!(again, bytes, "bincode of fixed-width integers has one encoding");
            true
        }),
        1 => control::decode_settings(bytes).is_ok_and(|s| {
            assert_eq!(control::decode_settings(&control::encode_settings(&s)).expect("reads back"), s);
            true
        }),
        2 => {
            let [key, value] = fields(bytes);
            control::decode_member(CLUSTER, key, value).is_ok_and(|m| {
                assert_eq!(control::member_key(CLUSTER, m.id), key, "a member under another id's key: {}", text(key));
                let again = control::encode_member(&m);
                assert_eq!(control::decode_member(CLUSTER, key, &again).expect("reads back"), m);
                true
            })
        }
        _ => control::decode_leader(bytes).is_ok_and(|id| {
            assert_eq!(control::decode_leader(&control::encode_leader(id)).ok(), Some(id), "a leader id read back");
            true
        }),
    }
}

/// A context of `positions`, as the engines and the gateway carry it.
pub fn context(positions: &[(u16, u64)]) -> Context {
    Context::from_positions(positions.iter().map(|&(term, index)| MetalogPosition::new(Term(term), index)).collect())
}
