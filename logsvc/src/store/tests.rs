//! The conformance suites of `tally-log-core` on this crate's stores, then the tests
//! specific to them: durability across a reopen, and the controller file's damage.

use anyhow::{bail, ensure, Context as _};
use tally_log_core::conformance::{check_metalog, configuration, entry, loc, records, replay, Model};
use tally_log_core::{LogId, ShardId, Term};

use super::{
    ControllerStore, FileControllerStore, FsyncPolicy, MetalogStore, MetalogWrite, RecordStore, RocksMetalogStore, RocksStore,
};

tally_log_core::record_store_suite!(rocks_store, |dir| RocksStore::open(dir.path(), FsyncPolicy::EveryBatch)?);
tally_log_core::metalog_store_suite!(rocks_metalog_store, |dir| RocksMetalogStore::open(dir.path())?);
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
