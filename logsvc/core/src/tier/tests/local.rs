//! The local index: the tag cache, the popularity cache, and the read path.

use super::*;

/// A tag cache fed by the decided updates of a random log, from a random start, with
/// tiny bounds: every answer it gives is the reference's at its position; it stays
/// within its bound.
fn run_tag_cache(seed: u64) -> (u64, u64) {
    let mut rng = Rng(seed);
    let mut reference_index = Index::new();
    let mut table = StreamTable::default();
    let bounds = TagBounds { cache_bytes: 600 + rng.below(4_000) as usize, stream_bytes: 150 + rng.below(200) as usize };
    let start = rng.below(20);
    let mut cache: Option<TagCache> = None;
    let mut position = 0u64;
    let (mut hits, mut reads) = (0, 0);
    for k in 0..80 {
        let at = MetalogPosition::new(Term(1), k + 1);
        let mut update = DecidedUpdate {
            log: LogId(0),
            prev: MetalogPosition::new(Term(1), k),
            position: at,
            start: seq(position),
            runs: vec![],
            records: vec![],
            trims: vec![],
        };
        for _ in 0..rng.below(5) {
            let seqnum = seq(position);
            let location = Location { shard: ShardId(0), local_id: position };
            position += 1;
            let meta = random_meta(&mut rng, &reference_index);
            reference_index.apply_record(seqnum, location, &meta);
            let (joined, failed) = match table.decide(seqnum, &meta) {
                Decision::Placed(joined) => (Some(joined), None),
                Decision::Failed { cond, holder } => (None, Some((cond, holder))),
            };
            update.runs.push((ShardId((location.local_id % 3) as u32), 1));
            update.records.push(UpdateRecord { seqnum, book: meta.book, tags: meta.tags.clone(), joined, failed });
        }
        for _ in 0..if rng.chance(30) { 1 + rng.below(2) } else { 0 } {
            let (book, tag, point) = random_trim(&mut rng, position);
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
            let read = random_read(&mut rng, position);
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
    for seed in seeds(400) {
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
            let (book, tag, point) = random_trim(&mut rng, position);
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
            let read = random_read(&mut rng, position);
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
    for seed in seeds(300) {
        let (h, k) = run_popularity(seed);
        hits += h;
        kept += k;
    }
    assert!(hits > 2_000 && kept > 5_000, "{hits} hits, {kept} kept");
}

/// The read path of a function node in partial mode, end to end on random logs: index
/// shards apply whole entries and push decided updates; a local index with tiny bounds,
/// started at a random entry and lagging behind, answers what it can; the rest goes to
/// the shards through the aggregator as of Q = max(p, the node's position), and the
/// answer is remembered. Every answer equals the reference's at the position it
/// completes at, which is at least the caller's.
#[test]
fn reads_on_every_path_are_the_logs_at_a_position_at_least_the_callers() {
    let shard_ids = [ShardId(10), ShardId(11), ShardId(12)];
    let mut paths = [0u64; 3];
    for seed in seeds(150) {
        let mut rng = Rng(seed);
        let s_n = 1 + (seed % 3) as usize;
        let mut shards: Vec<IndexShard> = (0..s_n).map(|s| IndexShard::new(s, s_n, 8)).collect();
        let mut aggregator = Aggregator::new(s_n, 1_000);
        let mut reference_index = Index::new();
        let mut history: Vec<Applied> = Vec::new();
        let bounds = LocalBounds {
            suffix_bytes: 256 + rng.below(400) as usize,
            tag_cache_bytes: 500 + rng.below(3_000) as usize,
            tag_bytes_max: 150 + rng.below(200) as usize,
            popularity_bytes: 160 * rng.below(20) as usize,
        };
        let start = rng.below(10);
        let mut local: Option<LocalIndex> = None;
        let mut pending: std::collections::VecDeque<DecidedUpdate> = Default::default();
        let mut cut = [0u64; 3];
        let mut position = 0u64;
        for k in 0..60u64 {
            let (entry, metas) = random_entry(&mut rng, k, position, &mut cut, &reference_index);
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
                let read = random_read(&mut rng, position);
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

/// Decided updates lost, duplicated and reordered on their way: the feed applies them
/// in order, fetches the missing ones from the index node's update log, and starts its
/// local index again when they are gone; every local answer is the log's at the local
/// index's position.
#[test]
fn a_feed_survives_lost_duplicated_and_reordered_updates() {
    let shard_ids = [ShardId(10), ShardId(11)];
    let (mut restarts, mut hits) = (0, 0);
    for seed in seeds(120) {
        let mut rng = Rng(seed);
        let mut shard = IndexShard::new(0, 1, 1_000);
        let mut kept = UpdateLog::new(200 + rng.below(3_000) as usize);
        let mut reference_index = Index::new();
        let mut history: Vec<Applied> = Vec::new();
        let mut feed = UpdateFeed::new(LogId(0), LocalBounds::default(), MetalogPosition::ZERO, seq(0));
        let mut in_flight: Vec<DecidedUpdate> = Vec::new();
        let mut cut = [0u64; 2];
        let mut position = 0u64;
        for k in 0..80u64 {
            let (entry, metas) = random_entry(&mut rng, k, position, &mut cut, &reference_index);
            let (decisions, update) = shard.apply_entry(&entry, &shard_ids, &metas);
            position += entry.record_count();
            let records: Vec<_> =
                decisions.iter().zip(metas.iter().flatten()).map(|((s, l, _), m)| (*s, *l, m.clone())).collect();
            for (s, l, m) in &records {
                reference_index.apply_record(*s, *l, m);
            }
            for &(b, t, p) in &update.trims {
                reference_index.apply_trim(b, t, p);
            }
            history.push((update.position, records, update.trims.clone()));
            kept.push(update.clone());
            // The network: most arrive, some twice, some late, some never.
            match rng.below(10) {
                0..=5 => in_flight.push(update),
                6 => {
                    in_flight.push(update.clone());
                    in_flight.push(update);
                }
                7 | 8 => in_flight.insert(0, update),
                _ => {}
            }
            let now = MetalogPosition::new(Term(1), k + 1);
            let delivered: Vec<DecidedUpdate> = in_flight.drain(..in_flight.len().min(1 + rng.below(3) as usize)).collect();
            for u in delivered {
                let mut need = feed.offer(u);
                while let FeedNeed::Fetch(after) = need {
                    match kept.since(after, 8) {
                        Since::Updates(us) if !us.is_empty() => {
                            need = FeedNeed::Nothing;
                            for u in us {
                                need = feed.offer(u);
                            }
                        }
                        Since::Updates(_) => break,
                        Since::Gone => {
                            feed.restart(now, seq(position));
                            need = FeedNeed::Nothing;
                        }
                    }
                }
            }
            let at = feed.index.position();
            for _ in 0..4 {
                let read = random_read(&mut rng, position);
                if let LocalRead::Hit { found, at: done, path: LocalPath::TagCache } =
                    feed.index.read((read.book, read.tag, read.bound, read.next), at)
                {
                    hits += 1;
                    assert_eq!(done, at);
                    let want = reference_at(&history, at, read);
                    assert_eq!(found, want, "seed {seed}: {read:?} at {at}");
                }
            }
        }
        restarts += feed.restarts;
    }
    assert!(restarts > 20 && hits > 1_000, "{restarts} restarts, {hits} hits");
}

#[test]
fn an_answer_older_than_the_local_index_is_not_kept() {
    // A tier answer as of Q arrives after the local index applied a later entry whose
    // trim killed the record: kept, it would answer at L with a dead record.
    let (book, tag) = (BookId(1), Tag(5));
    let mut local = LocalIndex::new(LocalBounds::default(), MetalogPosition::new(Term(1), 0), seq(0));
    let trim = DecidedUpdate {
        log: LogId(0),
        prev: MetalogPosition::new(Term(1), 0),
        position: MetalogPosition::new(Term(1), 1),
        start: seq(0),
        runs: vec![],
        records: vec![],
        trims: vec![(book, Tag::ALL, seq(100))],
    };
    local.apply(&trim);
    let read = (book, tag, SeqNum::MIN, true);
    let stale = MetalogPosition::new(Term(1), 0);
    local.remember(read, seq(0), ShardId(3), stale, seq(0));
    assert_eq!(local.read(read, stale), LocalRead::Miss, "an answer as of a passed position is not kept");
    // One as of L is kept, and a later trim drops it.
    let at = local.position();
    local.remember(read, seq(0), ShardId(3), at, seq(0));
    assert!(matches!(local.read(read, at), LocalRead::Hit { path: LocalPath::Popularity, .. }));
}
