//! The conformance suites of `tally-log-core` on this crate's stores, then the tests
//! specific to them: durability across a reopen, and the controller file's damage.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use tally_log_core::conformance::{check_metalog, configuration, entry, loc, records, replay, Model};
use tally_log_core::{LogId, ShardId, Term};

use super::{
    open_record_store, ControllerStore, FileControllerStore, FsyncPolicy, JournalMetalogStore, JournalStore, MetalogStore,
    MetalogWrite, RecordStore, RecordStoreKind, RocksMetalogStore, RocksStore, StoredData,
};

tally_log_core::record_store_suite!(rocks_store, |dir| RocksStore::open(dir.path(), FsyncPolicy::EveryBatch)?);
tally_log_core::record_store_suite!(journal_store, |dir| JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?);
// Segments of 4 KiB: a new one every few writes, and old ones deleted as records go.
tally_log_core::record_store_suite!(journal_store_small_segments, |dir| JournalStore::open_with(
    dir.path(),
    FsyncPolicy::EveryBatch,
    4096
)?);
tally_log_core::metalog_store_suite!(rocks_metalog_store, |dir| RocksMetalogStore::open(dir.path())?);
tally_log_core::metalog_store_suite!(journal_metalog_store, |dir| JournalMetalogStore::open(dir.path())?);
// Segments of 256 bytes: a new one every few frames.
tally_log_core::metalog_store_suite!(journal_metalog_store_small_segments, |dir| JournalMetalogStore::open_with(
    dir.path(),
    256
)?);
tally_log_core::controller_store_suite!(file_controller_store, |dir| FileControllerStore::open(&dir.path().join("controller"))?);

#[test]
fn record_stores_keep_synced_operations_across_reopen() -> anyhow::Result<()> {
    type Open = fn(&std::path::Path, FsyncPolicy) -> tally_log_core::Result<Box<dyn RecordStore>>;
    let stores: [(&str, Open); 3] = [
        ("rocksdb", |p, f| Ok(Box::new(RocksStore::open(p, f)?))),
        ("journal", |p, f| Ok(Box::new(JournalStore::open(p, f)?))),
        ("journal, 256 B segments", |p, f| Ok(Box::new(JournalStore::open_with(p, f, 256)?))),
    ];
    for (name, open) in stores {
        stores_keep_synced_operations_across_reopen(open).with_context(|| name)?;
    }
    Ok(())
}

fn stores_keep_synced_operations_across_reopen(
    open: fn(&std::path::Path, FsyncPolicy) -> tally_log_core::Result<Box<dyn RecordStore>>,
) -> anyhow::Result<()> {
    for policy in [FsyncPolicy::EveryBatch, FsyncPolicy::Never] {
        let dir = tempfile::TempDir::new()?;
        let mut model = Model::default();
        {
            let store = open(dir.path(), policy)?;
            let written = records(&(0..100).map(|id| loc(id as u32 % 3, id)).collect::<Vec<_>>(), 1);
            store.write(&written)?;
            model.write(&written);
            store.reclaim(&[loc(0, 0), loc(1, 1)])?;
            model.reclaim(&[loc(0, 0), loc(1, 1)]);
            store.discard(ShardId(2), 50)?;
            model.discard(ShardId(2), 50);
            store.sync()?;
        }
        let store = open(dir.path(), policy).with_context(|| format!("reopen with {policy}"))?;
        model.check(&*store, &[loc(2, 53)]).with_context(|| format!("after reopen with {policy}"))?;
    }
    Ok(())
}

#[test]
fn rocks_metalog_store_keeps_writes_across_reopen() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let writes = [
        entry(1, 0, 0, 1),
        entry(1, 0, 1, 1),
        entry(1, 3, 0, 1),
        MetalogWrite::Seal { term: Term(1), log: LogId(0) },
        MetalogWrite::Truncate { term: Term(1), log: LogId(0), len: 1 },
    ];
    let before = {
        let store = RocksMetalogStore::open(dir.path())?;
        check_metalog(&store, &writes)?;
        store.load()?
    };
    let after = RocksMetalogStore::open(dir.path())?.load()?;
    assert_eq!(after, before);
    assert_eq!(replay(&after)?, replay(&writes)?);
    Ok(())
}

#[test]
fn file_controller_store_keeps_the_configuration_across_reopen() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    FileControllerStore::open(dir.path())?.persist(&configuration(2))?;
    // A write interrupted by a crash left its temporary file: it never took effect.
    std::fs::write(dir.path().join("configuration.tmp"), b"half a configuration")?;
    let store = FileControllerStore::open(dir.path())?;
    assert_eq!(store.load()?, Some(configuration(2)));
    ensure!(!dir.path().join("configuration.tmp").exists(), "the interrupted write is gone");
    store.persist(&configuration(3))?;
    assert_eq!(FileControllerStore::open(dir.path())?.load()?, Some(configuration(3)));
    Ok(())
}

#[test]
fn a_damaged_configuration_file_is_an_error() -> anyhow::Result<()> {
    fn check(content: &[u8], expect: &str) -> anyhow::Result<()> {
        let dir = tempfile::TempDir::new()?;
        std::fs::write(dir.path().join("configuration"), content)?;
        match FileControllerStore::open(dir.path())?.load() {
            Err(tally_log_core::Error::Storage(m)) => ensure!(m.contains(expect), "{m:?} should say {expect:?}"),
            other => bail!("loading {content:?}: {other:?}"),
        }
        Ok(())
    }
    check(b"", "not a tally configuration")?;
    check(b"tally-records-v1", "not a tally configuration")?;
    check(b"tally-configuration-v1\n\xff\xff", "corrupt configuration")?;
    // A whole configuration with a byte after it.
    let dir = tempfile::TempDir::new()?;
    FileControllerStore::open(dir.path())?.persist(&configuration(1))?;
    let mut trailing = std::fs::read(dir.path().join("configuration"))?;
    trailing.push(0);
    check(&trailing, "corrupt configuration")
}

#[test]
fn a_configuration_file_from_before_aggregators_still_reads() -> anyhow::Result<()> {
    let c = configuration(2);
    let v3 = tally_log_core::ConfigurationV3::from(&c);
    let dir = tempfile::TempDir::new()?;
    let bytes = super::codec::encode("configuration", &v3, 64 << 20, b"tally-configuration-v3\n")?;
    std::fs::write(dir.path().join("configuration"), bytes)?;
    let mut want = c.clone();
    want.tier.as_mut().context("a tier")?.aggregators.clear();
    assert_eq!(FileControllerStore::open(dir.path())?.load()?, Some(want));
    Ok(())
}

/// Writes of several metalogs with truncations, seals and lead marks, as a sequencer
/// writes them over terms.
fn metalog_history(terms: u16) -> Vec<MetalogWrite> {
    let mut writes = Vec::new();
    for term in 1..=terms {
        writes.push(MetalogWrite::Lead { term: Term(term), log: LogId(0) });
        for index in 0..20 {
            writes.push(entry(term, (index % 2) as u8, index / 2, u64::from(term) + index));
        }
        writes.push(MetalogWrite::Truncate { term: Term(term), log: LogId(1), len: 7 });
        writes.push(entry(term, 1, 7, 99));
        writes.push(MetalogWrite::Seal { term: Term(term), log: LogId(0) });
    }
    writes
}

#[test]
fn journal_metalog_store_keeps_writes_across_reopens_and_segments() -> anyhow::Result<()> {
    for segment_bytes in [256, 16 << 20] {
        let dir = tempfile::TempDir::new()?;
        let writes = metalog_history(4);
        // Persisted over three openings of the store, a third of the writes each.
        for part in writes.chunks(writes.len().div_ceil(3)) {
            let store = JournalMetalogStore::open_with(dir.path(), segment_bytes)?;
            for batch in part.chunks(2) {
                store.persist(batch)?;
            }
        }
        let store = JournalMetalogStore::open_with(dir.path(), segment_bytes)?;
        let expect = replay(&writes)?;
        assert_eq!(replay(&store.load()?)?, expect, "segments of {segment_bytes} bytes");
        for term in 1..=4u16 {
            // Log 0 of each term holds entries 0..10, entry i written as version term + 2i.
            let want: Vec<_> = (2..9)
                .map(|i| match entry(term, 0, i, u64::from(term) + 2 * i) {
                    MetalogWrite::Entry(e) => e,
                    _ => unreachable!("entry() makes an entry"),
                })
                .collect();
            assert_eq!(store.read_entries(Term(term), LogId(0), 2, 9)?, want);
        }
    }
    Ok(())
}

#[test]
fn journal_metalog_store_holds_one_place_per_64_entries() -> anyhow::Result<()> {
    // At one client every append is an entry: what the store holds in memory must not
    // grow by a place per entry (it did: ~40 bytes each).
    let dir = tempfile::TempDir::new()?;
    let store = JournalMetalogStore::open_with(dir.path(), 64 << 10)?;
    for index in 0..10_000 {
        store.persist(&[entry(1, 0, index, 1), entry(1, 1, index, 2)])?;
    }
    ensure!(store.marks_held() == 2 * 10_000usize.div_ceil(64), "{} places held", store.marks_held());
    // Reads from anywhere, across segments, from the store and after a reopen.
    let want = |from: u64, to: u64| -> Vec<_> {
        (from..to)
            .map(|i| match entry(1, 1, i, 2) {
                MetalogWrite::Entry(e) => e,
                _ => unreachable!("entry() makes an entry"),
            })
            .collect()
    };
    for (from, to) in [(0, 256), (63, 64), (64, 65), (5_000, 5_256), (9_990, 10_000)] {
        assert_eq!(store.read_entries(Term(1), LogId(1), from, to)?, want(from, to));
    }
    drop(store);
    let store = JournalMetalogStore::open_with(dir.path(), 64 << 10)?;
    ensure!(store.marks_held() == 2 * 10_000usize.div_ceil(64), "{} places held after a reopen", store.marks_held());
    assert_eq!(store.read_entries(Term(1), LogId(1), 7_777, 7_900)?, want(7_777, 7_900));
    Ok(())
}

#[test]
fn journal_metalog_store_drops_a_torn_last_frame_and_writes_on() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let writes = metalog_history(2);
    let (kept, torn) = writes.split_at(writes.len() - 1);
    let (path, start) = {
        let store = JournalMetalogStore::open(dir.path())?;
        store.persist(kept)?;
        let start = store.position();
        store.persist(torn)?;
        start
    };
    // A crash left the last frame without its checksum.
    let file = std::fs::OpenOptions::new().write(true).open(&path)?;
    std::os::unix::fs::FileExt::write_all_at(&file, &[0; 4], start + 4)?;
    drop(file);
    let store = JournalMetalogStore::open(dir.path())?;
    assert_eq!(replay(&store.load()?)?, replay(kept)?, "the torn frame is gone, the rest is kept");
    // New frames follow the kept ones, and the torn frame's leftover bytes never come back.
    store.persist(&[MetalogWrite::Lead { term: Term(7), log: LogId(3) }])?;
    drop(store);
    let mut expect = kept.to_vec();
    expect.push(MetalogWrite::Lead { term: Term(7), log: LogId(3) });
    assert_eq!(replay(&JournalMetalogStore::open(dir.path())?.load()?)?, replay(&expect)?);
    Ok(())
}

#[test]
fn journal_metalog_store_refuses_damage_before_its_last_frame() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let first = {
        let store = JournalMetalogStore::open_with(dir.path(), 256)?;
        let first = store.position();
        for write in metalog_history(1) {
            store.persist(&[write])?;
        }
        first
    };
    // One byte of the first frame of the first segment, which later segments follow.
    let file = std::fs::OpenOptions::new().write(true).open(&first.0)?;
    std::os::unix::fs::FileExt::write_all_at(&file, &[0xff], first.1 + 30)?;
    drop(file);
    match JournalMetalogStore::open_with(dir.path(), 256) {
        Err(tally_log_core::Error::Storage(m)) => ensure!(m.contains("corrupt frame"), "{m}"),
        Err(e) => bail!("expected a corrupt frame, got {e}"),
        Ok(_) => bail!("a damaged frame before the last one was accepted"),
    }
    Ok(())
}

#[test]
fn journal_metalog_store_is_opened_once_at_a_time() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let store = JournalMetalogStore::open(dir.path())?;
    ensure!(JournalMetalogStore::open(dir.path()).is_err(), "a second open of a store in use");
    drop(store);
    JournalMetalogStore::open(dir.path())?;
    Ok(())
}

#[test]
fn journal_metalog_store_imports_a_rocksdb_metalog() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let writes = metalog_history(3);
    {
        let rocks = RocksMetalogStore::open(dir.path())?;
        for batch in writes.chunks(5) {
            rocks.persist(batch)?;
        }
    }
    for _ in 0..2 {
        let store = JournalMetalogStore::open(dir.path())?;
        assert_eq!(replay(&store.load()?)?, replay(&writes)?);
        ensure!(!dir.path().join("CURRENT").exists(), "the RocksDB files are removed");
    }
    Ok(())
}

#[test]
fn journal_metalog_store_refuses_a_damaged_frame_with_frames_after_it() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let history = metalog_history(1);
    let damaged = {
        let store = JournalMetalogStore::open(dir.path())?;
        store.persist(&history[..3])?;
        let damaged = store.position();
        for write in &history[3..] {
            store.persist(std::slice::from_ref(write))?;
        }
        damaged
    };
    // A byte of a frame in the middle of the last segment: not a torn last frame, so
    // cutting the journal there would drop acknowledged writes.
    let file = std::fs::OpenOptions::new().write(true).open(&damaged.0)?;
    std::os::unix::fs::FileExt::write_all_at(&file, &[0xff], damaged.1 + 20)?;
    drop(file);
    match JournalMetalogStore::open(dir.path()) {
        Err(tally_log_core::Error::Storage(m)) => ensure!(m.contains("corrupt frame"), "{m}"),
        Err(e) => bail!("expected a corrupt frame, got {e}"),
        Ok(store) => {
            bail!("a damaged frame with frames after it was cut off as a torn tail: {} writes left", store.load()?.len())
        }
    }
    Ok(())
}

/// The journal's last segment, and where its frames end (its first zero byte run to the
/// end of the file).
fn journal_tail(dir: &std::path::Path) -> anyhow::Result<(std::path::PathBuf, usize)> {
    let mut segments: Vec<_> = std::fs::read_dir(dir.join("journal"))?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    segments.sort();
    let last = segments.pop().context("a segment")?;
    let bytes = std::fs::read(&last)?;
    let end = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    Ok((last, end))
}

#[test]
fn journal_store_drops_a_torn_tail_and_metadata_flushed_ahead_of_it() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let mut model = Model::default();
    let torn_at;
    {
        let store = JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?;
        let synced = records(&[loc(1, 0), loc(1, 1), loc(2, 0)], 1);
        store.write(&synced)?;
        model.write(&synced);
        store.sync()?;
        torn_at = journal_tail(dir.path())?.1;
        // Never synced: a crash may keep any of it. Its metadata reaches RocksDB's files
        // (a flush), its frames are torn.
        store.write(&records(&[loc(1, 2), loc(1, 3)], 1))?;
        store.write(&records(&[loc(2, 1)], 1))?;
        store.flush_metadata()?;
    }
    let (segment, end) = journal_tail(dir.path())?;
    ensure!(end > torn_at, "the unsynced frames are in the file");
    let mut bytes = std::fs::read(&segment)?;
    // The first unsynced frame lost its last bytes; the second reached the disk whole.
    bytes[torn_at + 20..torn_at + 40].fill(0);
    std::fs::write(&segment, &bytes)?;
    let store = JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?;
    model.check(&store, &[loc(1, 2), loc(1, 3), loc(2, 1)]).context("after the crash")?;
    // Writing goes on where the synced frames end, and survives the next reopen.
    let more = records(&[loc(1, 2), loc(3, 0)], 2);
    store.write(&more)?;
    model.write(&more);
    store.sync()?;
    drop(store);
    model.check(&JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?, &[loc(1, 3), loc(2, 1)]).context("after the reopen")
}

#[test]
fn journal_store_damage_before_its_tail_is_an_error() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    {
        let store = JournalStore::open_with(dir.path(), FsyncPolicy::EveryBatch, 256)?;
        for id in 0..20 {
            store.write(&records(&[loc(1, id)], 1))?;
        }
        store.sync()?;
    }
    let mut segments: Vec<_> =
        std::fs::read_dir(dir.path().join("journal"))?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    segments.sort();
    ensure!(segments.len() > 2, "{} segments", segments.len());
    // A flipped byte in a frame of a synced, full segment.
    let mut bytes = std::fs::read(&segments[0])?;
    bytes[40] ^= 0xff;
    std::fs::write(&segments[0], &bytes)?;
    match JournalStore::open_with(dir.path(), FsyncPolicy::EveryBatch, 256) {
        Ok(_) => bail!("a damaged synced segment was opened"),
        Err(e) => ensure!(e.to_string().contains("damaged frame"), "{e}"),
    }
    Ok(())
}

#[test]
fn journal_store_deletes_segments_once_their_records_are_gone() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let mut model = Model::default();
    let store = JournalStore::open_with(dir.path(), FsyncPolicy::EveryBatch, 256)?;
    let oldest = |store: &JournalStore| store.segments().first().map(|(s, _)| *s);
    let files = || -> anyhow::Result<usize> { Ok(std::fs::read_dir(dir.path().join("journal"))?.count()) };
    for id in 0..40 {
        let written = records(&[loc(1, id), loc(2, id)], 1);
        store.write(&written)?;
        model.write(&written);
    }
    store.sync()?;
    ensure!(store.segments().len() > 4, "{:?}", store.segments());
    // Shard 1 trimmed, shard 2 discarded past 30: every segment still holds some of
    // shard 2's first 30.
    let trimmed: Vec<_> = (0..40).map(|id| loc(1, id)).collect();
    store.reclaim(&trimmed)?;
    model.reclaim(&trimmed);
    store.discard(ShardId(2), 30)?;
    model.discard(ShardId(2), 30);
    ensure!(oldest(&store) == Some(1), "no segment is free of live records yet: {:?}", store.segments());
    // An overwrite releases the old copy at the next sync, not before.
    let rewritten = records(&[loc(2, 0)], 2);
    store.write(&rewritten)?;
    model.write(&rewritten);
    let live_in_first = |store: &JournalStore| store.segments()[0].1;
    let before = live_in_first(&store);
    ensure!(before > 0, "{:?}", store.segments());
    store.sync()?;
    ensure!(live_in_first(&store) == before - 1, "the sync released the old copy: {:?}", store.segments());
    // Shard 2's first 20 go too: the segments that held only them and shard 1's are
    // deleted, and the oldest one left holds live records.
    let trimmed: Vec<_> = (0..20).map(|id| loc(2, id)).collect();
    store.reclaim(&trimmed)?;
    model.reclaim(&trimmed);
    ensure!(oldest(&store) > Some(1), "{:?}", store.segments());
    ensure!(live_in_first(&store) > 0, "{:?}", store.segments());
    ensure!(files()? == store.segments().len(), "a file per segment");
    model.check(&store, &[loc(2, 35)])?;
    store.sync()?;
    let left = store.segments();
    drop(store);
    let store = JournalStore::open_with(dir.path(), FsyncPolicy::EveryBatch, 256)?;
    model.check(&store, &[loc(2, 35)]).context("after reopen")?;
    ensure!(store.segments() == left, "the reopen found the same segments: {:?}, {left:?}", store.segments());
    Ok(())
}

#[test]
fn journal_store_replays_from_its_last_checkpoint() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let mut model = Model::default();
    {
        let store = JournalStore::open_with(dir.path(), FsyncPolicy::EveryBatch, 256)?;
        for id in 0..60 {
            let written = records(&[loc(1, id)], 1);
            store.write(&written)?;
            model.write(&written);
            store.sync()?;
        }
        ensure!(store.segments().len() > 10, "{:?}", store.segments());
        // The checkpoint's flush runs in the background and is stored by the first sync
        // that finds it done: on a loaded machine that can be after the last write.
        let deadline = Instant::now() + Duration::from_secs(60);
        while store.replay_from() <= 1 {
            ensure!(Instant::now() < deadline, "no checkpoint stored within a minute");
            std::thread::sleep(Duration::from_millis(5));
            store.sync()?;
        }
    }
    // The first segment's first frame header damaged: an open that replayed it would
    // fail; one that starts at the checkpoint never reads it.
    let first = dir.path().join("journal/records-0000000001.journal");
    let mut bytes = std::fs::read(&first)?;
    bytes[24..28].fill(0xff);
    std::fs::write(&first, &bytes)?;
    let store = JournalStore::open_with(dir.path(), FsyncPolicy::EveryBatch, 256).context("open from the checkpoint")?;
    model.check(&store, &[loc(1, 60)])?;
    let more = records(&[loc(1, 60), loc(2, 0)], 2);
    store.write(&more)?;
    model.write(&more);
    store.sync()?;
    drop(store);
    model.check(&JournalStore::open_with(dir.path(), FsyncPolicy::EveryBatch, 256)?, &[]).context("after the second reopen")
}

#[test]
fn journal_store_removes_a_segment_a_crash_left_without_its_header() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let mut model = Model::default();
    {
        let store = JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?;
        let written = records(&[loc(1, 0), loc(1, 1)], 1);
        store.write(&written)?;
        model.write(&written);
        store.sync()?;
    }
    // The next segment was being created (preallocated, its header not yet written).
    let next = dir.path().join("journal/records-0000000002.journal");
    std::fs::write(&next, vec![0u8; 4096])?;
    let store = JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?;
    ensure!(!next.exists(), "the headerless segment is gone");
    model.check(&store, &[])?;
    let more = records(&[loc(1, 2)], 1);
    store.write(&more)?;
    model.write(&more);
    store.sync()?;
    drop(store);
    model.check(&JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?, &[]).context("after the second reopen")
}

/// Found by the `record_journal` fuzz target: a segment cut inside its header (the
/// magic whole, 4 of the first sequence number's 8 bytes) made the open panic.
#[test]
fn journal_store_refuses_a_segment_cut_inside_its_header() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    drop(JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?);
    let (segment, _) = journal_tail(dir.path())?;
    std::fs::write(&segment, b"tally-records-j1\x01\x00\x00\x03")?;
    match JournalStore::open(dir.path(), FsyncPolicy::EveryBatch) {
        Ok(_) => bail!("a segment without a whole header was opened"),
        Err(e) => ensure!(e.to_string().contains("no record journal header"), "{e}"),
    }
    Ok(())
}

#[test]
fn a_directory_keeps_the_record_store_it_holds() -> anyhow::Result<()> {
    let (old, new) = (tempfile::TempDir::new()?, tempfile::TempDir::new()?);
    let written = records(&[loc(1, 0)], 1);
    for (dir, kind) in [(&old, RecordStoreKind::Rocksdb), (&new, RecordStoreKind::Journal)] {
        let store = open_record_store(dir.path(), kind, FsyncPolicy::EveryBatch)?;
        store.write(&written)?;
        store.sync()?;
    }
    // Asked for the other kind, each directory opens as what it holds.
    let mut model = Model::default();
    model.write(&written);
    for (dir, asked) in [(&old, RecordStoreKind::Journal), (&new, RecordStoreKind::Rocksdb)] {
        let store = open_record_store(dir.path(), asked, FsyncPolicy::EveryBatch)?;
        model.check(&*store, &[]).with_context(|| format!("asked for {asked:?}"))?;
    }
    ensure!(!old.path().join("journal").exists(), "the RocksDB store got no journal");
    ensure!(new.path().join("journal").exists(), "the journal store kept its journal");
    Ok(())
}

/// A write's metadata goes to RocksDB on the store's own thread while the journal
/// syncs: a read, a sync and a reclaim wait for it rather than miss it.
#[test]
fn journal_store_waits_for_the_metadata_of_earlier_writes() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let store = std::sync::Arc::new(JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?);
    let batch = records(&[loc(1, 0), loc(1, 1)], 1);
    let paused = store.pause_metadata();
    store.write(&batch)?;
    let (reader, syncer, reclaimer) = (store.clone(), store.clone(), store.clone());
    let read = std::thread::spawn(move || reader.read(loc(1, 0)));
    let synced = std::thread::spawn(move || syncer.sync());
    let reclaimed = std::thread::spawn(move || reclaimer.reclaim(&[loc(1, 1)]));
    std::thread::sleep(Duration::from_millis(200));
    for (what, done) in [("read", read.is_finished()), ("sync", synced.is_finished()), ("reclaim", reclaimed.is_finished())] {
        ensure!(!done, "a {what} returned before the write's metadata was in RocksDB");
    }
    drop(paused);
    let read = read.join().map_err(|_| anyhow::anyhow!("the reader panicked"))??;
    ensure!(read == Some(StoredData::Record(batch[0].1.clone())), "read {read:?}");
    synced.join().map_err(|_| anyhow::anyhow!("the syncer panicked"))??;
    reclaimed.join().map_err(|_| anyhow::anyhow!("the reclaimer panicked"))??;
    ensure!(
        matches!(store.read(loc(1, 1))?, Some(StoredData::Reclaimed(_))),
        "the reclaim of a record whose metadata was in flight was lost"
    );
    Ok(())
}

#[test]
fn journal_store_keeps_writes_after_an_empty_one() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let mut model = Model::default();
    {
        let store = JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?;
        for batch in [records(&[loc(1, 0)], 1), Vec::new(), records(&[loc(1, 1)], 1)] {
            store.write(&batch)?;
            model.write(&batch);
        }
        store.sync()?;
    }
    model.check(&JournalStore::open(dir.path(), FsyncPolicy::EveryBatch)?, &[]).context("after the reopen")
}

#[test]
fn journal_metalog_store_knows_after_a_reboot_that_unsynced_writes_may_be_lost() -> anyhow::Result<()> {
    let dir = tempfile::TempDir::new()?;
    let writes = metalog_history(2);
    let (synced, unsynced) = writes.split_at(writes.len() - 3);
    let damaged = {
        let store = JournalMetalogStore::open(dir.path())?;
        store.persist(synced)?;
        let damaged = store.position();
        for w in unsynced {
            store.write_unsynced(std::slice::from_ref(w))?;
        }
        damaged
    };
    // A crash of the process loses nothing, and is no reboot.
    let store = JournalMetalogStore::open(dir.path())?;
    ensure!(!store.lost_unsynced(), "a reopen in the same boot lost nothing");
    assert_eq!(replay(&store.load()?)?, replay(&writes)?);
    drop(store);

    // A power loss: the machine booted again (another id in the marker), and the page
    // of the first unsynced frame never reached the disk while a later one did.
    let file = std::fs::OpenOptions::new().write(true).open(&damaged.0)?;
    std::os::unix::fs::FileExt::write_all_at(&file, &[0xff; 4], damaged.1 + 4)?;
    drop(file);
    std::fs::remove_file(dir.path().join("UNSYNCED"))?;
    ensure!(JournalMetalogStore::open(dir.path()).is_err(), "without a reboot, a damaged frame before others is corruption");
    std::fs::write(dir.path().join("UNSYNCED"), "an earlier boot")?;
    let store = JournalMetalogStore::open(dir.path())?;
    ensure!(store.lost_unsynced(), "the store must say it may have lost writes");
    assert_eq!(replay(&store.load()?)?, replay(synced)?, "the damaged tail is cut off, not refused");
    // Until the sequencer persisted its amnesia, another open still says so; then the
    // next unsynced write marks this boot.
    store.write_unsynced(&[MetalogWrite::Lead { term: Term(7), log: LogId(3) }])?;
    drop(store);
    let store = JournalMetalogStore::open(dir.path())?;
    ensure!(store.lost_unsynced(), "the loss was forgotten before the sequencer recorded it");
    store.persist(&[MetalogWrite::Amnesiac { through: Term(3) }])?;
    store.write_unsynced(&[MetalogWrite::Lead { term: Term(8), log: LogId(3) }])?;
    drop(store);
    let store = JournalMetalogStore::open(dir.path())?;
    ensure!(!store.lost_unsynced(), "the marker names this boot");
    assert!(store.load()?.contains(&MetalogWrite::Amnesiac { through: Term(3) }));
    Ok(())
}
