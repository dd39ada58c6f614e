//! The index shards and the aggregator.

use super::*;

/// One random log of `entries` entries against `shards` index shards: returns how many
/// placements failed and how many of them named a holder through a lookup.
fn run(seed: u64, shards: usize, entries: u64, dead_keep: usize) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut reference_index = Index::new();
    let mut tier_shards: Vec<IndexShard> = (0..shards).map(|s| IndexShard::new(s, shards, dead_keep)).collect();
    let mut position = 0u64;
    // Reads asked at each position, with the reference's answers then.
    let mut asked: Vec<(MetalogPosition, Read, Option<Found>)> = Vec::new();
    let (mut failed, mut looked_up) = (0, 0);
    for k in 0..entries {
        let at = MetalogPosition::new(Term(1), k + 1);
        for _ in 0..rng.below(5) {
            let seqnum = seq(position);
            let location = Location { shard: ShardId(0), local_id: position };
            position += 1;
            let meta = random_meta(&mut rng, &reference_index);
            let want = reference_index.apply_record(seqnum, location, &meta);
            let decisions: Vec<Decision> =
                tier_shards.iter_mut().map(|s| s.apply_record(LogId(0), k, at, seqnum, location, &meta)).collect();
            assert!(decisions.windows(2).all(|w| w[0] == w[1]), "seed {seed}: shards disagree: {decisions:?}");
            let got = match &decisions[0] {
                Decision::Placed(_) => Placement::Placed,
                Decision::Failed { cond, holder } => {
                    failed += 1;
                    let holder = match holder {
                        Holder::None => None,
                        Holder::Known(s) => Some(*s),
                        Holder::Lookup => {
                            looked_up += 1;
                            let named: Vec<SeqNum> = tier_shards
                                .iter()
                                .filter_map(|s| s.postings.holder(meta.book, cond.tag, cond.position, seqnum, at))
                                .collect();
                            assert!(named.len() <= 1, "seed {seed}: several holders {named:?}");
                            named.first().copied()
                        }
                    };
                    Placement::CondFailed { holder }
                }
            };
            assert_eq!(got, want, "seed {seed}, record {seqnum:?} {meta:?}");
        }
        for _ in 0..if rng.chance(30) { 1 + rng.below(2) } else { 0 } {
            let (book, tag, point) = random_trim(&mut rng, position);
            reference_index.apply_trim(book, tag, point);
            for s in &mut tier_shards {
                s.apply_trim(LogId(0), at, book, tag, point);
            }
        }
        for s in &mut tier_shards {
            s.end_entry(LogId(0), at);
            assert_eq!(s.postings.held(), s.postings.walk(), "seed {seed}: the counts follow the rows");
        }
        if k == entries / 2 {
            // Halfway, every shard is a copy of itself in small pieces (a replica that
            // took another's place): the copies decide and answer alike from here on.
            let max = 1 + rng.below(4) as usize;
            for s in &mut tier_shards {
                *s = IndexShard::import(s.shard, s.shards, dead_keep, s.export(max));
            }
        }
        for _ in 0..6 {
            let read = random_read(&mut rng, position);
            asked.push((at, read, reference(&reference_index, read)));
        }
        // Some earlier reads again, as of their positions, if the shards still answer
        // as of them (the purges keep `dead_keep` entries).
        let floor = tier_shards.iter().map(|s| s.postings.floor(LogId(0))).max().expect("shards");
        for _ in 0..4 {
            let (q, read, want) = asked[rng.below(asked.len() as u64) as usize];
            if q >= floor {
                assert_eq!(tier(&tier_shards, read, q), want, "seed {seed}: {read:?} as of {q} (now {at})");
            }
        }
    }
    let floor = tier_shards.iter().map(|s| s.postings.floor(LogId(0))).max().expect("shards");
    for (q, read, want) in asked.into_iter().filter(|(q, ..)| *q >= floor) {
        assert_eq!(tier(&tier_shards, read, q), want, "seed {seed}: {read:?} as of {q}");
    }
    (failed, looked_up)
}

#[test]
fn shards_decide_and_answer_as_the_reference_index_at_every_position() {
    let (mut failed, mut looked_up) = (0, 0);
    for seed in seeds(300) {
        // Some keep every posting that left, some purge them after a few entries.
        let dead_keep = if seed % 2 == 0 { 1_000_000 } else { 1 + (seed % 7) as usize };
        let (f, l) = run(seed, 1 + (seed % 3) as usize, 60, dead_keep);
        failed += f;
        looked_up += l;
    }
    // The logs exercise what they are for.
    assert!(failed > 500 && looked_up > 100, "{failed} failed placements, {looked_up} holder lookups");
}

#[test]
fn a_posting_that_left_its_row_is_kept_for_dead_keep_entries_then_the_floor_rises() {
    let mut shard = IndexShard::new(0, 1, 4);
    let meta = RecordMeta { book: BookId(1), tags: vec![Tag(1)], cond: None, unchanged: vec![] };
    let loc = |p| Location { shard: ShardId(0), local_id: p };
    let at = |k: u64| MetalogPosition::new(Term(1), k);
    shard.apply_record(LogId(0), 0, at(1), seq(0), loc(0), &meta);
    shard.end_entry(LogId(0), at(1));
    shard.apply_trim(LogId(0), at(2), BookId(1), Tag(1), seq(1));
    shard.end_entry(LogId(0), at(2));
    let read = |s: &IndexShard, q| s.postings.read_next(BookId(1), Tag(1), SeqNum::MIN, q).map(|f| f.seqnum);
    assert_eq!(read(&shard, at(1)), Some(seq(0)));
    assert_eq!(read(&shard, at(2)), None);
    for k in 3..12 {
        shard.end_entry(LogId(0), at(k));
    }
    assert!(shard.postings.floor(LogId(0)) >= at(2), "{}", shard.postings.floor(LogId(0)));
    assert_eq!(read(&shard, at(1)), None, "gone: a lookup this old gets TooOld");
}

/// Lookups through the aggregator, as of earlier positions, on shards that keep what
/// left their rows for only a few entries: each completes at a position at least the
/// asked one, with the reference's answer there (rebuilt from the log's prefix).
#[test]
fn lookups_through_the_aggregator_complete_at_or_after_their_position_with_the_answer_there() {
    type Op = (u64, Option<(SeqNum, Location, RecordMeta)>, Option<(BookId, Tag, SeqNum)>);
    let (mut restarts, mut exact) = (0, 0);
    for seed in seeds(200) {
        let mut rng = Rng(seed);
        let shards_n = 1 + (seed % 3) as usize;
        let mut reference_index = Index::new();
        let mut shards: Vec<IndexShard> = (0..shards_n).map(|s| IndexShard::new(s, shards_n, 3)).collect();
        let mut aggregator = Aggregator::new(shards_n, 1_000);
        // The log so far: (entry, record or trim).
        let mut log: Vec<Op> = Vec::new();
        let reference_at = |log: &[Op], q: MetalogPosition, read: Read| {
            let mut index = Index::new();
            for (k, record, trim) in log {
                if MetalogPosition::new(Term(1), k + 1) > q {
                    break;
                }
                if let Some((s, l, m)) = record {
                    index.apply_record(*s, *l, m);
                }
                if let Some((b, t, p)) = trim {
                    index.apply_trim(*b, *t, *p);
                }
            }
            reference(&index, read)
        };
        let mut position = 0u64;
        for k in 0..60 {
            let at = MetalogPosition::new(Term(1), k + 1);
            for _ in 0..rng.below(5) {
                let seqnum = seq(position);
                let location = Location { shard: ShardId(0), local_id: position };
                position += 1;
                let meta = random_meta(&mut rng, &reference_index);
                reference_index.apply_record(seqnum, location, &meta);
                for s in &mut shards {
                    s.apply_record(LogId(0), k, at, seqnum, location, &meta);
                }
                log.push((k, Some((seqnum, location, meta)), None));
            }
            for _ in 0..if rng.chance(40) { 1 + rng.below(2) } else { 0 } {
                let (book, tag, point) = random_trim(&mut rng, position);
                reference_index.apply_trim(book, tag, point);
                for s in &mut shards {
                    s.apply_trim(LogId(0), at, book, tag, point);
                }
                log.push((k, None, Some((book, tag, point))));
            }
            for s in &mut shards {
                s.end_entry(LogId(0), at);
            }
            // A lookup as of an earlier position (or a later one: it is held).
            let read = random_read(&mut rng, position);
            let asked = MetalogPosition::new(Term(1), 1 + rng.below(k + 1));
            let mut out = Vec::new();
            aggregator.start(0, k, (read.book, read.tag, read.bound, read.next), asked, &mut out);
            let mut completed = None;
            while let Some(action) = out.pop() {
                match action {
                    AggregatorAction::Ask { lookup, round, shard, read, q, .. } => {
                        let answer = shards[shard].lookup(LogId(0), read, q).expect("every entry before q is applied");
                        exact += u64::from(matches!(answer, ShardAnswer::Exact(_)));
                        aggregator.answer(0, lookup, round, shard, answer, &mut out);
                    }
                    AggregatorAction::Read { found, q, .. } => completed = Some((Some(found), q)),
                    AggregatorAction::None { q, .. } => completed = Some((None, q)),
                    AggregatorAction::Done { q, .. } => completed = Some((Some(tier(&shards, read, q).expect("exact")), q)),
                }
            }
            let (got, q) = completed.expect("the lookup completed");
            assert!(q >= asked, "seed {seed}: completed at {q}, asked at {asked}");
            assert_eq!(got, reference_at(&log, q, read), "seed {seed}: {read:?} asked at {asked}, completed at {q}");
        }
        restarts += aggregator.restarts;
    }
    assert!(restarts > 100 && exact > 100, "{restarts} restarts, {exact} exact answers");
}

#[test]
fn an_entry_applied_whole_gives_its_decisions_and_its_decided_update() {
    use crate::message::TrimCommand;
    let mut shard = IndexShard::new(0, 1, 16);
    let meta = |tags: &[u64], cond: Option<(u64, u64)>| RecordMeta {
        book: BookId(1),
        tags: tags.iter().map(|&t| Tag(t)).collect(),
        cond: cond.map(|(tag, position)| Cond { tag: Tag(tag), position }),
        unchanged: vec![],
    };
    let entry = MetalogEntry {
        term: Term(1),
        log: LogId(0),
        index: 0,
        start_position: 0,
        prev_cut: vec![0, 5, 0],
        cut: vec![2, 5, 1],
        trims: vec![TrimCommand { book: BookId(1), tag: Tag(7), seqnum: seq(1), origin: None }],
        version: 0,
    };
    let metas = vec![vec![meta(&[7], Some((7, 0))), meta(&[7], Some((7, 0)))], vec![meta(&[], None)]];
    let (decisions, update) = shard.apply_entry(&entry, &[ShardId(10), ShardId(11), ShardId(12)], &metas);
    let locations: Vec<Location> = decisions.iter().map(|d| d.1).collect();
    assert_eq!(
        locations,
        vec![
            Location { shard: ShardId(10), local_id: 0 },
            Location { shard: ShardId(10), local_id: 1 },
            Location { shard: ShardId(12), local_id: 0 },
        ]
    );
    assert!(matches!(decisions[1].2, Decision::Failed { holder: Holder::Known(s), .. } if s == seq(0)));
    assert_eq!((update.start, update.runs.clone()), (seq(0), vec![(ShardId(10), 2), (ShardId(12), 1)]));
    assert_eq!(update.records.iter().map(|r| r.joined.is_some()).collect::<Vec<_>>(), vec![true, false, true]);
    assert_eq!(update.trims, vec![(BookId(1), Tag(7), seq(1))]);
    let first = update.records[0].joined.as_ref().expect("placed");
    assert_eq!(first[1], Joined { tag: Tag(7), offset: 0, in_row: true, first: true });
    assert_eq!(shard.postings.read_next(BookId(1), Tag(7), SeqNum::MIN, update.position), None, "trimmed in its entry");
    assert_eq!(shard.postings.applied(LogId(0)), update.position);
}

/// An event of the moved book's history: its log, the position after its entry, and
/// a record or a trim.
type MovedEvent = (LogId, MetalogPosition, Option<(SeqNum, Location, RecordMeta)>, Option<(Tag, SeqNum)>);

/// A book moved to a log added in term 2 (no state travels between index nodes): its
/// trims, ordered in the new log, reach its postings from the old one; lookups as of
/// positions of the new log answer as the reference does for the book's whole history;
/// the old log's purges never drop what left in the new log's entries.
#[test]
fn a_moved_books_old_postings_answer_with_its_new_logs_trims() {
    for seed in seeds(100) {
        let mut rng = Rng(seed);
        let s_n = 1 + (seed % 2) as usize;
        let mut shards: Vec<IndexShard> = (0..s_n).map(|s| IndexShard::new(s, s_n, 4)).collect();
        let all = streams();
        let book = BookId(1);
        // The moved book's history: (log, position after its entry, record or trim).
        let mut history: Vec<MovedEvent> = Vec::new();
        let mut reference_index = Index::new();
        let entry = |shards: &mut Vec<IndexShard>,
                     history: &mut Vec<_>,
                     reference_index: &mut Index,
                     log: LogId,
                     term: u16,
                     k: u64,
                     positions: &mut u64,
                     rng: &mut Rng| {
            let at = MetalogPosition::new(Term(term), k + 1);
            for _ in 0..rng.below(4) {
                let seqnum = SeqNum::new(Term(term), log, *positions);
                let location = Location { shard: ShardId(u32::from(log.0)), local_id: *positions };
                *positions += 1;
                // Log 0 holds the book in term 1 only; another book keeps log 0 busy.
                let this = if log == LogId(1) || term == 1 { book } else { BookId(2) };
                let mut meta = random_meta(rng, reference_index);
                meta.book = this;
                if this == book {
                    reference_index.apply_record(seqnum, location, &meta);
                    history.push((log, at, Some((seqnum, location, meta.clone())), None));
                }
                for s in shards.iter_mut() {
                    s.apply_record(log, k, at, seqnum, location, &meta);
                }
            }
            if rng.chance(40) && (log == LogId(1) || term == 1) {
                let tag = if rng.chance(25) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
                let point = SeqNum::new(Term(term), log, rng.below(*positions + 3));
                reference_index.apply_trim(book, tag, point);
                history.push((log, at, None, Some((tag, point))));
                for s in shards.iter_mut() {
                    s.apply_trim(log, at, book, tag, point);
                }
            }
            for s in shards.iter_mut() {
                s.end_entry(log, at);
            }
            at
        };
        let (mut p0, mut p1) = (0u64, 0u64);
        for k in 0..15 {
            entry(&mut shards, &mut history, &mut reference_index, LogId(0), 1, k, &mut p0, &mut rng);
        }
        // Term 2: log 0 goes on without the book, ten entries ahead of log 1, and purges
        // what left its rows in its own entries only.
        let p_before = p0;
        p0 = 0;
        for k in 0..10 {
            entry(&mut shards, &mut history, &mut reference_index, LogId(0), 2, k, &mut p0, &mut rng);
        }
        for k in 0..20 {
            entry(&mut shards, &mut history, &mut reference_index, LogId(0), 2, k + 10, &mut p0, &mut rng);
            entry(&mut shards, &mut history, &mut reference_index, LogId(1), 2, k, &mut p1, &mut rng);
            for _ in 0..4 {
                let tag = if rng.chance(20) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
                let bound = if rng.chance(50) {
                    SeqNum::new(Term(1), LogId(0), rng.below(p_before + 2))
                } else {
                    SeqNum::new(Term(2), LogId(1), rng.below(p1 + 2))
                };
                let read = Read { book, tag, bound, next: rng.chance(50) };
                // As of a recent position of log 1, within dead_keep.
                let q = MetalogPosition::new(Term(2), (k + 1).saturating_sub(rng.below(3)).max(1));
                let mut index = Index::new();
                for (log, pos, record, trim) in &history {
                    if *log == LogId(1) && *pos > q {
                        break;
                    }
                    if let Some((s, l, m)) = record {
                        index.apply_record(*s, *l, m);
                    }
                    if let Some((t, p)) = trim {
                        index.apply_trim(book, *t, *p);
                    }
                }
                let answers: Vec<Option<Found>> = shards
                    .iter()
                    .map(|s| match s.lookup(LogId(1), (read.book, read.tag, read.bound, read.next), q).expect("applied") {
                        ShardAnswer::Exact(f) => Some(f),
                        ShardAnswer::Closest(f) => f,
                        ShardAnswer::TooOld(floor) => panic!("seed {seed}: too old at {q}, floor {floor}"),
                    })
                    .collect();
                let got = if read.next {
                    answers.into_iter().flatten().min_by_key(|f| f.seqnum)
                } else {
                    answers.into_iter().flatten().max_by_key(|f| f.seqnum)
                };
                assert_eq!(got, reference(&index, read), "seed {seed}: {read:?} as of {q}");
            }
        }
    }
}
