//! The conformance suites of `tally-log-core` on this crate's stores, then the tests
//! specific to them: durability across a reopen, and the controller file's damage.

use anyhow::{bail, ensure, Context as _};
use tally_log_core::conformance::{check_metalog, configuration, entry, loc, records, replay, Model};
use tally_log_core::{LogId, ShardId, Term};

use super::{
    ControllerStore, FileControllerStore, FsyncPolicy, JournalMetalogStore, MetalogStore, MetalogWrite, RecordStore,
    RocksMetalogStore, RocksStore,
};

tally_log_core::record_store_suite!(rocks_store, |dir| RocksStore::open(dir.path(), FsyncPolicy::EveryBatch)?);
tally_log_core::metalog_store_suite!(rocks_metalog_store, |dir| RocksMetalogStore::open(dir.path())?);
tally_log_core::metalog_store_suite!(journal_metalog_store, |dir| JournalMetalogStore::open(dir.path())?);
// Segments of 256 bytes: a new one every few frames.
tally_log_core::metalog_store_suite!(journal_metalog_store_small_segments, |dir| JournalMetalogStore::open_with(
    dir.path(),
    256
)?);
tally_log_core::controller_store_suite!(file_controller_store, |dir| FileControllerStore::open(&dir.path().join("controller"))?);

#[test]
fn rocks_store_keeps_synced_operations_across_reopen() -> anyhow::Result<()> {
    for policy in [FsyncPolicy::EveryBatch, FsyncPolicy::Never] {
        let dir = tempfile::TempDir::new()?;
        let mut model = Model::default();
        {
            let store = RocksStore::open(dir.path(), policy)?;
            let written = records(&(0..100).map(|id| loc(id as u32 % 3, id)).collect::<Vec<_>>(), 1);
            store.write(&written)?;
            model.write(&written);
            store.reclaim(&[loc(0, 0), loc(1, 1)])?;
            model.reclaim(&[loc(0, 0), loc(1, 1)]);
            store.discard(ShardId(2), 50)?;
            model.discard(ShardId(2), 50);
            store.sync()?;
        }
        let store = RocksStore::open(dir.path(), policy).with_context(|| format!("reopen with {policy}"))?;
        model.check(&store, &[loc(2, 53)]).with_context(|| format!("after reopen with {policy}"))?;
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
