//! One conformance suite per store trait, run against every implementation.
//!
//! Each suite function takes a `&dyn` store and checks one promise of the contract in
//! the documentation of the store traits. The macros
//! [`record_store_suite!`](crate::record_store_suite!),
//! [`metalog_store_suite!`](crate::metalog_store_suite!) and
//! [`controller_store_suite!`](crate::controller_store_suite!) run every function of a
//! suite as a test of its own against one implementation, so a new backend gets the
//! whole suite with one line and a new promise reaches every backend. The helpers
//! the suites use (the model, the record, entry and configuration makers) are public
//! too, for the tests specific to one implementation, such as durability across a
//! reopen.
//!
//! This module is compiled for the crate's own tests and, with the `testing` feature,
//! for the crates that implement the traits; it is never part of a node.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use bytes::Bytes;

use super::{ControllerStore, MetalogStore, MetalogWrite, RecordStore, RecoveredRecord, StoredData};
use crate::config::{Configuration, LogTermConfig, SealedTail, ShardConfig, TermConfig};
use crate::error::Error;
use crate::message::{Cond, MetalogEntry, Record, RecordMeta, TrimCommand};
use crate::types::{BookId, LocalId, Location, LogId, NodeId, SeqNum, ShardId, Tag, Term};

/// Why a suite function failed: the store returned an error, or broke a promise the
/// suite checks without panicking. The message says where.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Failure(String);

impl Failure {
    /// This failure, prefixed with where it happened.
    pub fn context(self, what: impl fmt::Display) -> Failure {
        Failure(format!("{what}: {}", self.0))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure(format!("the store failed: {e}"))
    }
}

pub type SuiteResult<T = ()> = std::result::Result<T, Failure>;

/// Fails the suite function with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($message:tt)+) => {
        if !$cond {
            return Err(Failure(format!($($message)+)));
        }
    };
}

/// A location of the suites' key space.
pub fn loc(shard: u32, local_id: LocalId) -> Location {
    Location { shard: ShardId(shard), local_id }
}

/// A record whose every field depends on its location and `version`, so a read of the
/// wrong location or of an overwritten version shows.
pub fn record(location: Location, version: u8) -> Record {
    let Location { shard: ShardId(shard), local_id } = location;
    let tags = vec![Tag(1 + local_id % 3), Tag::platform(u64::from(shard))];
    let cond = (local_id % 2 == 0).then_some(Cond { tag: tags[0], position: local_id });
    let unchanged = if local_id % 3 == 0 { vec![Cond { tag: Tag(7), position: local_id }] } else { Vec::new() };
    let meta = RecordMeta { book: BookId(u64::from(shard) * 1000 + u64::from(version)), tags, cond, unchanged };
    Record { meta, data: Bytes::from(format!("v{version} of {shard}/{local_id}")) }
}

/// The records of `locations`, all of one version.
pub fn records(locations: &[Location], version: u8) -> Vec<(Location, Record)> {
    locations.iter().map(|l| (*l, record(*l, version))).collect()
}

/// What a store should hold, applied by the same rules the contract states.
#[derive(Default)]
pub struct Model {
    held: BTreeMap<Location, StoredData>,
}

impl Model {
    pub fn write(&mut self, records: &[(Location, Record)]) {
        for (l, r) in records {
            self.held.insert(*l, StoredData::Record(r.clone()));
        }
    }

    pub fn reclaim(&mut self, locations: &[Location]) {
        for l in locations {
            if let Some(StoredData::Record(r)) = self.held.get(l) {
                let meta = r.meta.clone();
                self.held.insert(*l, StoredData::Reclaimed(meta));
            }
        }
    }

    pub fn discard(&mut self, shard: ShardId, from: LocalId) {
        self.held.retain(|l, _| l.shard != shard || l.local_id < from);
    }

    /// The metadata `read_metas` returns: up to the first local id not held.
    pub fn metas(&self, shard: ShardId, from: LocalId, to: LocalId) -> Vec<RecordMeta> {
        let mut metas = Vec::new();
        let mut next = from;
        for (l, data) in self.held.range(Location { shard, local_id: from }..) {
            if l.shard != shard || l.local_id != next || l.local_id >= to {
                break;
            }
            metas.push(match data {
                StoredData::Record(r) => r.meta.clone(),
                StoredData::Reclaimed(m) => m.clone(),
            });
            let Some(after) = next.checked_add(1) else { break };
            next = after;
        }
        metas
    }

    pub fn recovered(&self) -> Vec<RecoveredRecord> {
        let recovered = |(location, data): (&Location, &StoredData)| match data {
            StoredData::Record(r) => RecoveredRecord { location: *location, meta: r.meta.clone(), has_data: true },
            StoredData::Reclaimed(m) => RecoveredRecord { location: *location, meta: m.clone(), has_data: false },
        };
        self.held.iter().map(recovered).collect()
    }

    /// Checks every location the model holds, the `probes` (which it may not hold),
    /// and the whole of `recover`.
    pub fn check(&self, store: &dyn RecordStore, probes: &[Location]) -> SuiteResult {
        for l in self.held.keys().chain(probes) {
            assert_eq!(store.read(*l)?, self.held.get(l).cloned(), "read of {l:?}");
            // Ranges that start here: empty, short, across a gap, to the end of the
            // key space.
            for to in [l.local_id, l.local_id.saturating_add(1), l.local_id.saturating_add(3), LocalId::MAX] {
                let (shard, from) = (l.shard, l.local_id);
                assert_eq!(store.read_metas(shard, from, to)?, self.metas(shard, from, to), "metas of {shard:?} {from}..{to}");
            }
        }
        assert_eq!(store.recover()?, self.recovered(), "recover");
        Ok(())
    }
}

pub fn write_then_read(store: &dyn RecordStore) -> SuiteResult {
    let mut model = Model::default();
    let written = records(&[loc(1, 0), loc(1, 1), loc(2, 0)], 1);
    store.write(&written)?;
    model.write(&written);
    // Written records are readable at once, before any sync, and a sync changes nothing.
    model.check(store, &[])?;
    store.sync()?;
    model.check(store, &[])?;
    store.write(&[])?;
    model.check(store, &[])
}

pub fn read_of_missing_location_is_none(store: &dyn RecordStore) -> SuiteResult {
    assert_eq!(store.read(loc(0, 0))?, None);
    assert_eq!(store.recover()?, vec![]);
    store.write(&records(&[loc(5, 5)], 1))?;
    for neighbour in [loc(5, 4), loc(5, 6), loc(4, 5), loc(6, 5), loc(0, 0), loc(u32::MAX, LocalId::MAX)] {
        assert_eq!(store.read(neighbour)?, None, "{neighbour:?}");
    }
    Ok(())
}

pub fn overwrite_replaces_the_record(store: &dyn RecordStore) -> SuiteResult {
    let mut model = Model::default();
    for step in [
        records(&[loc(1, 0), loc(1, 1)], 1),
        records(&[loc(1, 1)], 2),
        // One batch that writes a location twice: the later record wins.
        vec![(loc(1, 0), record(loc(1, 0), 3)), (loc(1, 0), record(loc(1, 0), 4))],
    ] {
        store.write(&step)?;
        model.write(&step);
        model.check(store, &[])?;
    }
    // A record written again after its reclaim holds data again.
    store.reclaim(&[loc(1, 1)])?;
    model.reclaim(&[loc(1, 1)]);
    model.check(store, &[])?;
    let again = records(&[loc(1, 1)], 5);
    store.write(&again)?;
    model.write(&again);
    model.check(store, &[])
}

pub fn reclaim_keeps_meta_and_drops_data(store: &dyn RecordStore) -> SuiteResult {
    let mut model = Model::default();
    let written = records(&[loc(1, 0), loc(1, 1), loc(1, 2), loc(2, 1)], 1);
    store.write(&written)?;
    model.write(&written);
    // A missing location stays missing and a reclaimed one is reclaimed again harmlessly.
    for reclaimed in [vec![loc(1, 1), loc(2, 1), loc(7, 7)], vec![loc(1, 1)], vec![]] {
        store.reclaim(&reclaimed)?;
        model.reclaim(&reclaimed);
        model.check(store, &[loc(7, 7)])?;
    }
    assert_eq!(store.read(loc(1, 1))?, Some(StoredData::Reclaimed(record(loc(1, 1), 1).meta)));
    let has_data: Vec<(Location, bool)> = store.recover()?.iter().map(|r| (r.location, r.has_data)).collect();
    assert_eq!(has_data, vec![(loc(1, 0), true), (loc(1, 1), false), (loc(1, 2), true), (loc(2, 1), false)]);
    store.sync()?;
    model.check(store, &[])
}

pub fn discard_removes_only_the_shard_suffix(store: &dyn RecordStore) -> SuiteResult {
    let mut model = Model::default();
    let mut locations: Vec<Location> = (0..3).flat_map(|shard| (0..6).map(move |id| loc(shard, id))).collect();
    // The edges of the key space, where a range end computed as "next shard" or
    // "next id" would overflow.
    locations.extend([loc(1, LocalId::MAX), loc(u32::MAX, 0), loc(u32::MAX, LocalId::MAX)]);
    let written = records(&locations, 1);
    store.write(&written)?;
    model.write(&written);
    store.reclaim(&[loc(1, 4)])?;
    model.reclaim(&[loc(1, 4)]);
    let steps = [
        (ShardId(1), 3),  // Removes ids 3.., reclaimed ones included.
        (ShardId(1), 10), // Past the end: nothing.
        (ShardId(9), 0),  // A shard the store does not hold: nothing.
        (ShardId(u32::MAX), LocalId::MAX),
        (ShardId(2), 0), // The whole shard.
    ];
    for (shard, from) in steps {
        store.discard(shard, from)?;
        model.discard(shard, from);
        model.check(store, &locations)?;
    }
    let left: Vec<Location> = store.recover()?.iter().map(|r| r.location).collect();
    let expect: Vec<Location> =
        (0..6).map(|id| loc(0, id)).chain((0..3).map(|id| loc(1, id))).chain([loc(u32::MAX, 0)]).collect();
    assert_eq!(left, expect);
    Ok(())
}

pub fn recover_returns_records_sorted_by_location(store: &dyn RecordStore) -> SuiteResult {
    // Written out of order, and with values whose little-endian bytes sort differently.
    let shuffled = [loc(256, 1), loc(1, 256), loc(1, 1), loc(0, u64::from(u32::MAX) + 1), loc(2, 0), loc(1, 255), loc(0, 7)];
    for l in shuffled {
        store.write(&records(&[l], 1))?;
    }
    let mut sorted = shuffled.to_vec();
    sorted.sort();
    let recovered: Vec<Location> = store.recover()?.iter().map(|r| r.location).collect();
    assert_eq!(recovered, sorted);
    Ok(())
}

pub fn many_records_and_large_values(store: &dyn RecordStore) -> SuiteResult {
    let mut model = Model::default();
    for shard in 0..4 {
        for first in (0..2500).step_by(500) {
            let batch = records(&(first..first + 500).map(|id| loc(shard, id)).collect::<Vec<_>>(), 1);
            store.write(&batch)?;
            model.write(&batch);
        }
    }
    let mut large = record(loc(9, 0), 1);
    large.data = Bytes::from((0..8 << 20).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    // Empty data is data: the record is not reclaimed.
    let mut empty = record(loc(9, 1), 1);
    empty.data = Bytes::new();
    let special = vec![(loc(9, 0), large), (loc(9, 1), empty)];
    store.write(&special)?;
    model.write(&special);
    store.sync()?;
    assert_eq!(store.recover()?.len(), 10_002);
    model.check(store, &[])
}

/// A small generator for op sequences; the seed is in every failure message.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

pub fn random_operations_match_a_model(store: &dyn RecordStore) -> SuiteResult {
    // A key space small enough that writes, reclaims and discards keep meeting.
    let mut model = Model::default();
    let mut rng = SplitMix(0x7a11_5eed);
    let location = |rng: &mut SplitMix| loc(rng.below(3) as u32, rng.below(12));
    for step in 0..600 {
        match rng.below(10) {
            0..=4 => {
                let n = rng.below(4);
                let version = rng.below(200) as u8;
                let batch: Vec<(Location, Record)> =
                    (0..n).map(|_| location(&mut rng)).map(|l| (l, record(l, version))).collect();
                store.write(&batch)?;
                model.write(&batch);
            }
            5..=6 => {
                let batch: Vec<Location> = (0..rng.below(4)).map(|_| location(&mut rng)).collect();
                store.reclaim(&batch)?;
                model.reclaim(&batch);
            }
            7 => {
                let l = location(&mut rng);
                store.discard(l.shard, l.local_id)?;
                model.discard(l.shard, l.local_id);
            }
            8 => store.sync()?,
            _ => model.check(store, &[]).map_err(|f| f.context(format!("at step {step}")))?,
        }
    }
    model.check(store, &[])
}

/// The state a sequencer rebuilds from metalog writes: each metalog's entries,
/// whether it is sealed and whether this replica led it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MetalogState {
    entries: BTreeMap<(Term, LogId), Vec<MetalogEntry>>,
    sealed: BTreeSet<(Term, LogId)>,
    led: BTreeSet<(Term, LogId)>,
}

/// Replays writes as a sequencer would, refusing what a correct store never returns:
/// an entry that leaves a gap or overwrites without a truncation, or an entry after
/// its metalog's seal.
pub fn replay(writes: &[MetalogWrite]) -> SuiteResult<MetalogState> {
    let mut state = MetalogState::default();
    for (i, write) in writes.iter().enumerate() {
        match write {
            MetalogWrite::Entry(e) => {
                ensure!(!state.sealed.contains(&(e.term, e.log)), "write {i}: entry {} after the seal", e.index);
                let entries = state.entries.entry((e.term, e.log)).or_default();
                ensure!(e.index == entries.len() as u64, "write {i}: entry {} on a metalog of {}", e.index, entries.len());
                entries.push(e.clone());
            }
            MetalogWrite::Truncate { term, log, len } => {
                if let Some(entries) = state.entries.get_mut(&(*term, *log)) {
                    entries.truncate(usize::try_from(*len).unwrap_or(usize::MAX));
                }
            }
            MetalogWrite::Seal { term, log } => {
                state.sealed.insert((*term, *log));
            }
            MetalogWrite::Lead { term, log } => {
                state.led.insert((*term, *log));
            }
            MetalogWrite::Amnesiac { .. } => {}
        }
    }
    state.entries.retain(|_, entries| !entries.is_empty());
    Ok(state)
}

/// An entry whose content depends on `version`, so a rewritten index shows.
pub fn entry(term: u16, log: u8, index: u64, version: u64) -> MetalogWrite {
    let trims = (version % 2 == 1).then(|| TrimCommand {
        book: BookId(version),
        tag: Tag::ALL,
        seqnum: SeqNum::new(Term(term), LogId(log), index),
        origin: None,
    });
    MetalogWrite::Entry(MetalogEntry {
        term: Term(term),
        log: LogId(log),
        index,
        start_position: index * 10,
        prev_cut: vec![index, version],
        cut: vec![index + 1, version],
        trims: trims.into_iter().collect(),
        version: 0,
    })
}

/// Persists `writes`, in calls of one, two and three writes in turn, and checks that
/// `load` replays to the same state as they do.
pub fn check_metalog(store: &dyn MetalogStore, writes: &[MetalogWrite]) -> SuiteResult<MetalogState> {
    let (mut rest, mut n) = (writes, 1);
    while !rest.is_empty() {
        let (now, later) = rest.split_at(n.min(rest.len()));
        store.persist(now)?;
        (rest, n) = (later, n % 3 + 1);
    }
    let expect = replay(writes).map_err(|f| f.context("the test's own writes"))?;
    let loaded = store.load()?;
    let state = replay(&loaded).map_err(|f| f.context(format!("loaded {loaded:#?}")))?;
    assert_eq!(state, expect, "loaded {loaded:#?}");
    // Every range of every metalog, and of one without entries.
    let mut metalogs: Vec<(Term, LogId)> = expect.entries.keys().copied().collect();
    metalogs.push((Term(9), LogId(9)));
    for (term, log) in metalogs {
        let held = expect.entries.get(&(term, log)).map_or(&[][..], Vec::as_slice);
        let len = held.len() as u64;
        for from in 0..=len + 1 {
            for to in [from, from + 1, len, len + 2, u64::MAX] {
                let want: Vec<MetalogEntry> =
                    held.iter().skip(from as usize).take(to.saturating_sub(from) as usize).cloned().collect();
                let got = store.read_entries(term, log, from, to)?;
                assert_eq!(got, want, "entries {from}..{to} of term {} log {}", term.0, log.0);
            }
        }
    }
    Ok(state)
}

pub fn metalog_empty_store_loads_nothing(store: &dyn MetalogStore) -> SuiteResult {
    assert_eq!(store.load()?, vec![]);
    Ok(())
}

pub fn metalog_round_trip(store: &dyn MetalogStore) -> SuiteResult {
    // Two logs and two terms, interleaved as a sequencer of several logs writes them.
    let writes =
        [entry(1, 0, 0, 1), entry(1, 1, 0, 2), entry(1, 0, 1, 3), entry(2, 0, 0, 4), entry(1, 1, 1, 5), entry(1, 0, 2, 6)];
    let state = check_metalog(store, &writes)?;
    assert_eq!(state.entries.values().map(Vec::len).collect::<Vec<_>>(), vec![3, 2, 1]);
    Ok(())
}

pub fn metalog_truncate_drops_the_tail(store: &dyn MetalogStore) -> SuiteResult {
    let truncate = |term, log, len| MetalogWrite::Truncate { term: Term(term), log: LogId(log), len };
    let mut writes: Vec<MetalogWrite> = (0..5).map(|i| entry(1, 0, i, 1)).chain((0..2).map(|i| entry(1, 1, i, 1))).collect();
    writes.extend([
        truncate(1, 0, 3),
        // Entries 3 and 4 again, different: the old ones must not come back.
        entry(1, 0, 3, 2),
        entry(1, 0, 4, 2),
        truncate(1, 0, 9), // Past the end: nothing.
        truncate(1, 7, 0), // A metalog without entries: nothing.
        truncate(1, 1, 0), // Everything of log 1, and only of log 1.
    ]);
    let state = check_metalog(store, &writes)?;
    let log0 = &state.entries[&(Term(1), LogId(0))];
    assert_eq!(log0.len(), 5);
    assert_eq!(log0[4].prev_cut, vec![4, 2]);
    assert!(!state.entries.contains_key(&(Term(1), LogId(1))));
    Ok(())
}

pub fn metalog_long_metalogs_truncated_deep_and_written_again(store: &dyn MetalogStore) -> SuiteResult {
    // Long enough that a store indexing only some entries reads others by scanning
    // (the journal keeps one place per 64 entries), two logs interleaved in one frame.
    let truncate = |term, log, len| MetalogWrite::Truncate { term: Term(term), log: LogId(log), len };
    let mut writes = Vec::new();
    for i in 0..150 {
        writes.push(entry(1, 0, i, 1));
        if i % 3 == 0 {
            writes.push(entry(1, 1, i / 3, 1));
        }
    }
    // Cut below the third mark and in the middle of the second, then written on,
    // different: the old entries 70..150 must not come back.
    writes.push(truncate(1, 0, 70));
    writes.extend((70..140).map(|i| entry(1, 0, i, 2)));
    writes.push(truncate(1, 1, 30));
    writes.push(entry(1, 1, 30, 3));
    writes.push(entry(2, 0, 0, 1));
    let state = check_metalog(store, &writes)?;
    let log0 = &state.entries[&(Term(1), LogId(0))];
    assert_eq!((log0.len(), log0[69].prev_cut.clone(), log0[70].prev_cut.clone()), (140, vec![69, 1], vec![70, 2]));
    assert_eq!(state.entries[&(Term(1), LogId(1))].len(), 31);
    Ok(())
}

pub fn metalog_seal_follows_its_entries(store: &dyn MetalogStore) -> SuiteResult {
    let seal = |term, log| MetalogWrite::Seal { term: Term(term), log: LogId(log) };
    let writes = [
        entry(1, 0, 0, 1),
        entry(1, 0, 1, 1),
        entry(1, 0, 2, 1),
        entry(1, 1, 0, 1),
        // A seal, then the truncation of an uncommitted tail after it.
        seal(1, 0),
        MetalogWrite::Truncate { term: Term(1), log: LogId(0), len: 2 },
        seal(1, 2), // A metalog sealed before it had entries.
        entry(2, 0, 0, 1),
    ];
    let state = check_metalog(store, &writes)?;
    assert_eq!(state.sealed, BTreeSet::from([(Term(1), LogId(0)), (Term(1), LogId(2))]));
    assert_eq!(state.entries[&(Term(1), LogId(0))].len(), 2);
    Ok(())
}

pub fn metalog_lead_marks_survive_with_entries_and_seals(store: &dyn MetalogStore) -> SuiteResult {
    let lead = |term, log| MetalogWrite::Lead { term: Term(term), log: LogId(log) };
    let writes = [
        lead(1, 0),
        entry(1, 0, 0, 1),
        entry(1, 0, 1, 1),
        MetalogWrite::Seal { term: Term(1), log: LogId(0) },
        lead(1, 1), // Led, but no entry yet.
        lead(2, 0),
        entry(2, 0, 0, 1),
    ];
    let state = check_metalog(store, &writes)?;
    let led = BTreeSet::from([(Term(1), LogId(0)), (Term(1), LogId(1)), (Term(2), LogId(0))]);
    ensure!(state.led == led, "lead marks {:?}, expected {led:?}", state.led);
    ensure!(state.sealed == BTreeSet::from([(Term(1), LogId(0))]), "seals {:?}", state.sealed);
    Ok(())
}

/// A configuration of `terms` terms, each sealed but the last, whose every field
/// depends on the term, so a stale or mixed-up load shows.
pub fn configuration(terms: u16) -> Configuration {
    let term = |t: u16| {
        let shard = |l: u8| ShardConfig {
            shard: ShardId(u32::from(t) * 10 + u32::from(l)),
            engine: NodeId(7),
            incarnation: u64::from(t) << 40,
            replicas: vec![NodeId(4), NodeId(4 + u32::from(t) % 2)],
            since: 0,
            until: None,
        };
        let logs = (0..2).map(|l| LogTermConfig {
            log: LogId(l),
            sequencers: vec![NodeId(1 + u32::from(t) % 3)],
            shards: vec![shard(l)],
        });
        let sealed = (t < terms).then(|| {
            let last = match entry(t, 0, 4, u64::from(t)) {
                MetalogWrite::Entry(e) => e,
                _ => unreachable!("entry makes entries"),
            };
            vec![SealedTail { len: 5, last: Some(last) }, SealedTail { len: 0, last: None }]
        });
        TermConfig {
            term: Term(t),
            logs: logs.collect(),
            engines: vec![NodeId(7)],
            storage: vec![NodeId(4), NodeId(5)],
            sealed,
            version: 0,
        }
    };
    Configuration {
        n_logs: 2,
        controller: NodeId(0),
        terms: (1..=terms).map(term).collect(),
        indexers: vec![vec![NodeId(7)], vec![]],
        tier: Some(crate::config::TierLayout {
            shards: vec![vec![NodeId(8), NodeId(9)], vec![NodeId(10)]],
            aggregators: vec![NodeId(11)],
        }),
    }
}

pub fn controller_empty_store_loads_nothing(store: &dyn ControllerStore) -> SuiteResult {
    assert_eq!(store.load()?, None);
    Ok(())
}

pub fn controller_store_keeps_the_last_configuration(store: &dyn ControllerStore) -> SuiteResult {
    for terms in [1, 2, 3] {
        store.persist(&configuration(terms))?;
        assert_eq!(store.load()?, Some(configuration(terms)), "after persisting {terms} terms");
    }
    // Loading does not consume.
    assert_eq!(store.load()?, Some(configuration(3)));
    Ok(())
}

/// Runs every suite function of a store trait as a test, in a module of its own.
/// Not for direct use: see [`record_store_suite!`](crate::record_store_suite!) and the others.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_suite {
    ($module:ident, [$($case:ident),* $(,)?], |$dir:ident| $make:expr) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $case() -> $crate::conformance::SuiteResult {
                    let $dir = tempfile::TempDir::new().expect("a temporary directory");
                    let store = $make;
                    $crate::conformance::$case(&store)
                }
            )*
        }
    };
    ($module:ident, [$($case:ident),* $(,)?], $make:expr) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $case() -> $crate::conformance::SuiteResult {
                    let store = $make;
                    $crate::conformance::$case(&store)
                }
            )*
        }
    };
}

/// Runs every [`RecordStore`] suite function as a test in module `$module`, each on a
/// fresh store made by the expression (which may use `?` on the crate's errors).
/// `|dir| make` gives the expression a new temporary directory, a
/// `tempfile::TempDir` (the calling crate depends on `tempfile`).
///
/// ```text
/// tally_log_core::record_store_suite!(mem_store, MemStore::new());
/// tally_log_core::record_store_suite!(rocks_store, |dir| RocksStore::open(dir.path(), FsyncPolicy::EveryBatch)?);
/// ```
#[macro_export]
macro_rules! record_store_suite {
    ($module:ident, $($make:tt)+) => {
        $crate::__store_suite!(
            $module,
            [
                write_then_read,
                read_of_missing_location_is_none,
                overwrite_replaces_the_record,
                reclaim_keeps_meta_and_drops_data,
                discard_removes_only_the_shard_suffix,
                recover_returns_records_sorted_by_location,
                many_records_and_large_values,
                random_operations_match_a_model,
            ],
            $($make)+
        );
    };
}

/// Runs every [`MetalogStore`] suite function as a test in module `$module`, each on a
/// fresh store; the store expression is as for [`record_store_suite!`](crate::record_store_suite!).
#[macro_export]
macro_rules! metalog_store_suite {
    ($module:ident, $($make:tt)+) => {
        $crate::__store_suite!(
            $module,
            [
                metalog_empty_store_loads_nothing,
                metalog_round_trip,
                metalog_truncate_drops_the_tail,
                metalog_long_metalogs_truncated_deep_and_written_again,
                metalog_seal_follows_its_entries,
                metalog_lead_marks_survive_with_entries_and_seals,
            ],
            $($make)+
        );
    };
}

/// Runs every [`ControllerStore`] suite function as a test in module `$module`, each on
/// a fresh store; the store expression is as for [`record_store_suite!`](crate::record_store_suite!).
#[macro_export]
macro_rules! controller_store_suite {
    ($module:ident, $($make:tt)+) => {
        $crate::__store_suite!(
            $module,
            [controller_empty_store_loads_nothing, controller_store_keeps_the_last_configuration],
            $($make)+
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemControllerStore, MemMetalogStore, MemStore};

    crate::record_store_suite!(mem_store, MemStore::new());
    crate::metalog_store_suite!(mem_metalog_store, MemMetalogStore::new());
    crate::controller_store_suite!(mem_controller_store, MemControllerStore::new());

    #[test]
    fn mem_store_crash_forgets_unsynced_operations() -> SuiteResult {
        let store = MemStore::new();
        let mut model = Model::default();
        let synced = records(&[loc(1, 0), loc(1, 1), loc(1, 2)], 1);
        store.write(&synced)?;
        model.write(&synced);
        store.sync()?;
        // None of these reach the model: they are lost in the crash.
        store.write(&records(&[loc(1, 3), loc(2, 0)], 1))?;
        store.write(&records(&[loc(1, 0)], 2))?;
        store.reclaim(&[loc(1, 1)])?;
        store.discard(ShardId(1), 2)?;
        assert_ne!(store.recover()?, model.recovered(), "the unsynced operations are visible before the crash");
        store.crash();
        model.check(&store, &[loc(1, 3), loc(2, 0)])?;
        // Synced after the crash, a reclaim survives the next one.
        store.reclaim(&[loc(1, 1)])?;
        model.reclaim(&[loc(1, 1)]);
        store.sync()?;
        store.crash();
        model.check(&store, &[])
    }
}
