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
        let shard =
            ShardConfig { shard: ShardId(0), engine: ENGINE, incarnation: 1, replicas: vec![STORAGE], since: 0, until: None };
        let term = TermConfig {
            term: Term(1),
            logs: vec![LogTermConfig { log: LogId(0), sequencers: vec![SEQUENCER], shards: vec![shard] }],
            engines: vec![ENGINE],
            storage: vec![STORAGE],
            sealed: None,
            version: 0,
        };
        let config = Configuration { n_logs: 1, controller: CONTROLLER, terms: vec![term], indexers: vec![vec![]], tier: None };
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
    assert!(h.engine.read_now(&ahead, &set_aux(2, seqnum, b"a")).is_none(), "aux data waits for the position too");
    let attached = h.engine.read_now(&reached, &set_aux(2, seqnum, b"a")).map(|d| d.0);
    assert_eq!(attached, Some(Ok(Reply::AuxSet)), "aux data is attached in place");
    let Some((Ok(Reply::Read(Some(record))), ..)) = h.engine.read_now(&reached, &read) else { panic!("read") };
    assert_eq!(record.aux.as_deref(), Some(&b"a"[..]), "and read with the record");
    let other_book = h.engine.read_now(&reached, &set_aux(3, seqnum, b"b")).map(|d| d.0);
    assert!(matches!(other_book, Some(Err(Error::InvalidArgument(_)))), "another book's record refuses it: {other_book:?}");
    let big = Bytes::from(vec![0u8; EngineConfig::default().record_bytes_max + 1]);
    let oversized = Request::SetAux { book: BookId(2), seqnum, aux: big };
    assert!(h.engine.read_now(&reached, &oversized).is_none(), "oversized aux data is left to submit, which refuses it");
    assert!(h.engine.take_actions().is_empty(), "attaching in place acts on nothing");
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
