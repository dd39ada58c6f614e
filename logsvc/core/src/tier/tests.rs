//! The index shards against the reference index (`index.rs`), on random logs with
//! conditions on tags and marks, trims ahead of the tail and trims of marks: every
//! placement and holder as it decides them, every read as of every earlier position as
//! it answered then.

use super::*;
use crate::index::{Found, Index, Placement};
use crate::message::Cond;
use crate::types::{ShardId, Term};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const BOOKS: [u64; 3] = [1, 2, 3];

fn streams() -> Vec<Tag> {
    let mark = |n: u64| Tag(Tag::MARK_BITS | n);
    vec![Tag(1), Tag(2), Tag(3), mark(1), mark(2)]
}

fn seq(position: u64) -> SeqNum {
    SeqNum::new(Term(1), LogId(0), position)
}

/// A read asked of the shards and of the reference.
#[derive(Clone, Copy, Debug)]
struct Read {
    book: BookId,
    tag: Tag,
    bound: SeqNum,
    next: bool,
}

fn reference(index: &Index, r: Read) -> Option<Found> {
    if r.next {
        index.read_next(r.book, r.tag, r.bound)
    } else {
        index.read_prev(r.book, r.tag, r.bound)
    }
}

/// The tier's answer: the smallest of the shards' next records, the largest of their
/// previous ones.
fn tier(shards: &[IndexShard], r: Read, q: MetalogPosition) -> Option<Found> {
    let answers = shards.iter().filter_map(|s| {
        if r.next {
            s.postings.read_next(r.book, r.tag, r.bound, q)
        } else {
            s.postings.read_prev(r.book, r.tag, r.bound, q)
        }
    });
    if r.next {
        answers.min_by_key(|f| f.seqnum)
    } else {
        answers.max_by_key(|f| f.seqnum)
    }
}

fn random_meta(rng: &mut Rng, index: &Index) -> RecordMeta {
    let all = streams();
    let book = BookId(BOOKS[rng.below(3) as usize]);
    let tags: Vec<Tag> = (0..rng.below(4)).map(|_| all[rng.below(all.len() as u64) as usize]).collect();
    let cond_on = |rng: &mut Rng| {
        let tag = if rng.chance(5) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
        let count = index.next_offset(book, tag);
        // Mostly right, sometimes behind (a lost race) or ahead.
        let position = match rng.below(10) {
            0..=5 => count,
            6..=8 => count.saturating_sub(1 + rng.below(4)),
            _ => count + 1,
        };
        Cond { tag, position }
    };
    let cond = rng.chance(40).then(|| cond_on(rng));
    let unchanged = (0..if rng.chance(20) { 1 + rng.below(3) } else { 0 }).map(|_| cond_on(rng)).collect();
    RecordMeta { book, tags, cond, unchanged }
}

/// One random log of `entries` entries against `shards` index shards: returns how many
/// placements failed and how many of them named a holder through a lookup.
fn run(seed: u64, shards: usize, entries: u64) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut reference_index = Index::new();
    let mut tier_shards: Vec<IndexShard> = (0..shards).map(|s| IndexShard::new(s, shards, 1_000_000)).collect();
    let all = streams();
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
            let book = BookId(BOOKS[rng.below(3) as usize]);
            let tag = if rng.chance(25) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
            // Mostly behind the tail, sometimes ahead of it.
            let point = seq(rng.below(position + 4));
            reference_index.apply_trim(book, tag, point);
            for s in &mut tier_shards {
                s.apply_trim(LogId(0), at, book, tag, point);
            }
        }
        for s in &mut tier_shards {
            s.end_entry(LogId(0), at);
        }
        for _ in 0..6 {
            let tag = if rng.chance(20) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
            let read = Read {
                book: BookId(BOOKS[rng.below(3) as usize]),
                tag,
                bound: seq(rng.below(position + 2)),
                next: rng.chance(50),
            };
            asked.push((at, read, reference(&reference_index, read)));
        }
        // Some earlier reads again, as of their positions.
        for _ in 0..4 {
            let (q, read, want) = asked[rng.below(asked.len() as u64) as usize];
            assert_eq!(tier(&tier_shards, read, q), want, "seed {seed}: {read:?} as of {q} (now {at})");
        }
    }
    for (q, read, want) in asked {
        assert_eq!(tier(&tier_shards, read, q), want, "seed {seed}: {read:?} as of {q}");
    }
    (failed, looked_up)
}

#[test]
fn shards_decide_and_answer_as_the_reference_index_at_every_position() {
    let (mut failed, mut looked_up) = (0, 0);
    for seed in 0..300 {
        let (f, l) = run(seed, 1 + (seed % 3) as usize, 60);
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

/// A tag cache fed by the decided updates of a random log, from a random start, with
/// tiny bounds: every answer it gives is the reference's at its position; it stays
/// within its bound.
fn run_tag_cache(seed: u64) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut reference_index = Index::new();
    let mut table = StreamTable::default();
    let all = streams();
    let bounds = TagBounds { cache_bytes: 400 + rng.below(4_000) as usize, stream_bytes: 100 + rng.below(200) as usize };
    let start = rng.below(20);
    let mut cache: Option<TagCache> = None;
    let mut position = 0u64;
    let (mut hits, mut reads) = (0, 0);
    for k in 0..80 {
        let at = MetalogPosition::new(Term(1), k + 1);
        let mut update =
            DecidedUpdate { log: LogId(0), position: at, start: seq(position), runs: vec![], records: vec![], trims: vec![] };
        for _ in 0..rng.below(5) {
            let seqnum = seq(position);
            let location = Location { shard: ShardId(0), local_id: position };
            position += 1;
            let meta = random_meta(&mut rng, &reference_index);
            reference_index.apply_record(seqnum, location, &meta);
            let joined = match table.decide(seqnum, &meta) {
                Decision::Placed(joined) => Some(joined),
                Decision::Failed { .. } => None,
            };
            update.runs.push((ShardId((location.local_id % 3) as u32), 1));
            update.records.push(UpdateRecord { seqnum, book: meta.book, tags: meta.tags.clone(), joined });
        }
        for _ in 0..if rng.chance(30) { 1 + rng.below(2) } else { 0 } {
            let book = BookId(BOOKS[rng.below(3) as usize]);
            let tag = if rng.chance(25) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
            let point = seq(rng.below(position + 4));
            reference_index.apply_trim(book, tag, point);
            table.trim(book, tag, point);
            update.trims.push((book, tag, point));
        }
        match &mut cache {
            // The node starts here: its cache is empty, W the next seqnum.
            None if k == start => cache = Some(TagCache::new(bounds, at, seq(position))),
            None => continue,
            Some(c) => c.apply(&update, &update.shards().map(|s| s.0 as u16).collect::<Vec<_>>()),
        }
        let c = cache.as_mut().expect("started");
        assert!(c.bytes() <= bounds.cache_bytes, "seed {seed}: {} bytes of {bounds:?}", c.bytes());
        for _ in 0..8 {
            let tag = if rng.chance(20) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
            let read = Read {
                book: BookId(BOOKS[rng.below(3) as usize]),
                tag,
                bound: seq(rng.below(position + 2)),
                next: rng.chance(50),
            };
            let local = if read.next {
                c.read_next(read.book, read.tag, read.bound)
            } else {
                c.read_prev(read.book, read.tag, read.bound)
            };
            reads += 1;
            if let Local::Hit(got) = local {
                hits += 1;
                let want = reference(&reference_index, read).map(|f| (f.seqnum, (f.location.local_id % 3) as u16));
                assert_eq!(got, want, "seed {seed}: {read:?} at {at}, W {:?}", c.watermark());
            }
        }
    }
    (hits, reads)
}

#[test]
fn a_tag_cache_answers_only_what_the_reference_answers_at_its_position() {
    let (mut hits, mut reads) = (0, 0);
    for seed in 0..400 {
        let (h, r) = run_tag_cache(seed);
        hits += h;
        reads += r;
    }
    assert!(hits * 10 > reads, "{hits} hits of {reads} reads");
}

/// The popularity cache keeps the tier's answers of a random log as it goes on; every
/// answer it gives later is the reference's at the position it completes at.
fn run_popularity(seed: u64) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut reference_index = Index::new();
    let mut shards: Vec<IndexShard> = (0..2).map(|s| IndexShard::new(s, 2, 1_000_000)).collect();
    let mut cache = PopularityCache::new(160 * (1 + rng.below(40) as usize), MetalogPosition::ZERO);
    let all = streams();
    let mut asked: Vec<ReadKey> = Vec::new();
    let mut position = 0u64;
    let (mut hits, mut kept) = (0, 0);
    for k in 0..80 {
        let at = MetalogPosition::new(Term(1), k + 1);
        for _ in 0..rng.below(5) {
            let seqnum = seq(position);
            let location = Location { shard: ShardId(position as u32 % 3), local_id: position };
            position += 1;
            let meta = random_meta(&mut rng, &reference_index);
            reference_index.apply_record(seqnum, location, &meta);
            for s in &mut shards {
                s.apply_record(LogId(0), k, at, seqnum, location, &meta);
            }
        }
        for _ in 0..if rng.chance(30) { 1 + rng.below(2) } else { 0 } {
            let book = BookId(BOOKS[rng.below(3) as usize]);
            let tag = if rng.chance(25) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
            let point = seq(rng.below(position + 4));
            reference_index.apply_trim(book, tag, point);
            for s in &mut shards {
                s.apply_trim(LogId(0), at, book, tag, point);
            }
            cache.trim(book, tag, point);
        }
        for s in &mut shards {
            s.end_entry(LogId(0), at);
        }
        cache.advance(at);
        // New reads to the tier, kept when they may be.
        for _ in 0..3 {
            let tag = if rng.chance(20) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
            let read = Read {
                book: BookId(BOOKS[rng.below(3) as usize]),
                tag,
                bound: seq(rng.below(position + 2)),
                next: rng.chance(50),
            };
            if let Some(found) = tier(&shards, read, at) {
                cache.insert(
                    (read.book, read.tag, read.bound, read.next),
                    found.seqnum,
                    found.location.shard.0 as u16,
                    at,
                    seq(position),
                );
                asked.push((read.book, read.tag, read.bound, read.next));
                kept += 1;
            }
        }
        // Earlier ones again.
        for _ in 0..4 {
            let Some(&key) = asked.get(rng.below(asked.len() as u64) as usize) else { break };
            if let Some(hit) = cache.get(key) {
                hits += 1;
                assert_eq!(hit.position, at, "the cache follows every update here");
                let read = Read { book: key.0, tag: key.1, bound: key.2, next: key.3 };
                let want = reference(&reference_index, read).expect("a kept answer is found");
                assert_eq!((hit.seqnum, hit.shard), (want.seqnum, want.location.shard.0 as u16), "seed {seed}: {read:?} at {at}");
            }
        }
        assert!(cache.bytes() <= 160 * 41, "bounded");
    }
    (hits, kept)
}

#[test]
fn the_popularity_cache_keeps_only_answers_later_records_cannot_change() {
    let (mut hits, mut kept) = (0, 0);
    for seed in 0..300 {
        let (h, k) = run_popularity(seed);
        hits += h;
        kept += k;
    }
    assert!(hits > 2_000 && kept > 5_000, "{hits} hits, {kept} kept");
}

/// Lookups through the aggregator, as of earlier positions, on shards that keep what
/// left their rows for only a few entries: each completes at a position at least the
/// asked one, with the reference's answer there (rebuilt from the log's prefix).
#[test]
fn lookups_through_the_aggregator_complete_at_or_after_their_position_with_the_answer_there() {
    type Op = (u64, Option<(SeqNum, Location, RecordMeta)>, Option<(BookId, Tag, SeqNum)>);
    let (mut restarts, mut exact) = (0, 0);
    for seed in 0..200 {
        let mut rng = Rng(seed);
        let shards_n = 1 + (seed % 3) as usize;
        let mut reference_index = Index::new();
        let mut shards: Vec<IndexShard> = (0..shards_n).map(|s| IndexShard::new(s, shards_n, 3)).collect();
        let mut aggregator = Aggregator::new(shards_n, 1_000);
        let all = streams();
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
                let book = BookId(BOOKS[rng.below(3) as usize]);
                let tag = if rng.chance(25) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
                let point = seq(rng.below(position + 4));
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
            let tag = if rng.chance(20) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
            let read = Read {
                book: BookId(BOOKS[rng.below(3) as usize]),
                tag,
                bound: seq(rng.below(position + 2)),
                next: rng.chance(50),
            };
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

/// The read path of a function node in partial mode, end to end on random logs: index
/// shards apply whole entries and push decided updates; a local index with tiny bounds,
/// started at a random entry and lagging behind, answers what it can; the rest goes to
/// the shards through the aggregator as of Q = max(p, the node's position), and the
/// answer is remembered. Every answer equals the reference's at the position it
/// completes at, which is at least the caller's.
#[test]
fn reads_on_every_path_are_the_logs_at_a_position_at_least_the_callers() {
    type Applied = (MetalogPosition, Vec<(SeqNum, Location, RecordMeta)>, Vec<(BookId, Tag, SeqNum)>);
    let shard_ids = [ShardId(10), ShardId(11), ShardId(12)];
    let mut paths = [0u64; 3];
    for seed in 0..150 {
        let mut rng = Rng(seed);
        let s_n = 1 + (seed % 3) as usize;
        let mut shards: Vec<IndexShard> = (0..s_n).map(|s| IndexShard::new(s, s_n, 8)).collect();
        let mut aggregator = Aggregator::new(s_n, 1_000);
        let mut reference_index = Index::new();
        let mut history: Vec<Applied> = Vec::new();
        let reference_at = |history: &[Applied], q: MetalogPosition, read: Read| {
            let mut index = Index::new();
            for (at, records, trims) in history.iter().take_while(|h| h.0 <= q) {
                let _ = at;
                for (s, l, m) in records {
                    index.apply_record(*s, *l, m);
                }
                for &(b, t, p) in trims {
                    index.apply_trim(b, t, p);
                }
            }
            reference(&index, read).map(|f| (f.seqnum, f.location.shard))
        };
        let bounds = LocalBounds {
            suffix_bytes: 256 + rng.below(400) as usize,
            tag_cache_bytes: 300 + rng.below(3_000) as usize,
            tag_bytes_max: 100 + rng.below(200) as usize,
            popularity_bytes: 160 * rng.below(20) as usize,
        };
        let start = rng.below(10);
        let mut local: Option<LocalIndex> = None;
        let mut pending: std::collections::VecDeque<DecidedUpdate> = Default::default();
        let mut cut = [0u64; 3];
        let mut position = 0u64;
        let all = streams();
        for k in 0..60u64 {
            let prev_cut = cut.to_vec();
            let mut metas = Vec::new();
            for c in cut.iter_mut() {
                let n = if rng.chance(40) { 0 } else { rng.below(3) };
                *c += n;
                if n > 0 {
                    metas.push((0..n).map(|_| random_meta(&mut rng, &reference_index)).collect::<Vec<_>>());
                }
            }
            let trims: Vec<crate::message::TrimCommand> = (0..if rng.chance(30) { 1 + rng.below(2) } else { 0 })
                .map(|_| crate::message::TrimCommand {
                    book: BookId(BOOKS[rng.below(3) as usize]),
                    tag: if rng.chance(25) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] },
                    seqnum: seq(rng.below(position + 4)),
                    origin: None,
                })
                .collect();
            let entry = MetalogEntry {
                term: Term(1),
                log: LogId(0),
                index: k,
                start_position: position,
                prev_cut,
                cut: cut.to_vec(),
                trims,
            };
            let mut update = None;
            for s in &mut shards {
                let (decisions, u) = s.apply_entry(&entry, &shard_ids, &metas);
                if update.is_none() {
                    let records = decisions
                        .iter()
                        .zip(metas.iter().flatten())
                        .map(|((seqnum, location, _), meta)| (*seqnum, *location, meta.clone()))
                        .collect::<Vec<_>>();
                    for (seqnum, location, meta) in &records {
                        reference_index.apply_record(*seqnum, *location, meta);
                    }
                    for t in &u.trims {
                        reference_index.apply_trim(t.0, t.1, t.2);
                    }
                    history.push((u.position, records, u.trims.clone()));
                    update = Some(u);
                }
            }
            let update = update.expect("one shard at least");
            position += entry.record_count();
            let now = update.position;
            match &mut local {
                None if k == start => local = Some(LocalIndex::new(bounds, now, seq(position))),
                None => continue,
                Some(_) => pending.push_back(update),
            }
            let l = local.as_mut().expect("started");
            // The updates arrive late, sometimes.
            while pending.len() > rng.below(3) as usize {
                l.apply(&pending.pop_front().expect("not empty"));
            }
            for _ in 0..6 {
                let tag = if rng.chance(20) { Tag::ALL } else { all[rng.below(all.len() as u64) as usize] };
                let read = Read {
                    book: BookId(BOOKS[rng.below(3) as usize]),
                    tag,
                    bound: seq(rng.below(position + 2)),
                    next: rng.chance(50),
                };
                let key = (read.book, read.tag, read.bound, read.next);
                // The caller's position: anything the log reached since the node started.
                let p = MetalogPosition::new(Term(1), start + 1 + rng.below(k - start + 1));
                let (got, at) = match l.read(key, p) {
                    LocalRead::Hit { found, at, path } => {
                        paths[usize::from(path == LocalPath::Popularity)] += 1;
                        (found, at)
                    }
                    LocalRead::Wait | LocalRead::Miss => {
                        paths[2] += 1;
                        let q = p.max(now);
                        let mut out = Vec::new();
                        aggregator.start(0, k, key, q, &mut out);
                        let mut answer = None;
                        while let Some(action) = out.pop() {
                            match action {
                                AggregatorAction::Ask { lookup, round, shard, read, q, .. } => {
                                    let a = shards[shard].lookup(LogId(0), read, q).expect("applied");
                                    aggregator.answer(0, lookup, round, shard, a, &mut out);
                                }
                                AggregatorAction::Read { found, q, .. } => answer = Some((Some(found), q)),
                                AggregatorAction::None { q, .. } => answer = Some((None, q)),
                                AggregatorAction::Done { q, .. } => answer = Some((tier(&shards, read, q), q)),
                            }
                        }
                        let (found, q) = answer.expect("completed");
                        if let Some(f) = found {
                            let next_after = history.iter().take_while(|h| h.0 <= q).flat_map(|h| h.1.last()).last();
                            let next_after = next_after.map_or(seq(0), |r| SeqNum(r.0 .0 + 1));
                            l.remember(key, f.seqnum, f.location.shard, q, next_after);
                        }
                        (found.map(|f| (f.seqnum, f.location.shard)), q)
                    }
                };
                assert!(at >= p, "seed {seed}: completed at {at} below the caller's {p}");
                assert_eq!(got, reference_at(&history, at, read), "seed {seed}: {read:?} for a caller at {p}, completed at {at}");
            }
            let (suffix, tags, popularity) = l.bytes();
            assert!(
                suffix <= bounds.suffix_bytes && tags <= bounds.tag_cache_bytes && popularity <= bounds.popularity_bytes,
                "seed {seed}: {:?} of {bounds:?}",
                (suffix, tags, popularity)
            );
        }
    }
    assert!(paths.iter().all(|&n| n > 100), "tag cache, popularity, tier: {paths:?}");
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
    for seed in 0..100 {
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
