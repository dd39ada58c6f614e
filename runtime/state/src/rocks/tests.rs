//! The RocksDB store's tests.

use super::*;

/// A batch decides each write on what the writes before it in the same batch store,
/// not only on the database: the first put of a version wins within a batch too,
/// put-if-newer compares with a newer version queued just before, and a delete
/// sees (and removes) a version written earlier in its batch.
#[tokio::test]
async fn a_batch_decides_each_write_after_the_ones_before_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = RocksStateStore::open(dir.path()).expect("opening");
    let value = |s: &str| Some(Bytes::copy_from_slice(s.as_bytes()));
    let version = |cursor| Version { cursor, counter: 0 };
    let (kv, ka, kd) = (version_key(&object_key("t", b"k"), 7), object_key("t", b"a"), version_key(&object_key("t", b"d"), 1));
    // A latest entry's header: the version's cursor, then its counter (0 here).
    let header = |v: Version| {
        let mut h = [0; 12];
        h[..8].copy_from_slice(&v.cursor.to_be_bytes());
        h
    };
    let mut units = Vec::new();
    let mut bools = Vec::new();
    let mut writes = Vec::new();
    for v in ["first", "second"] {
        let (done, answer) = oneshot::channel();
        writes.push(Write::Version { key: kv.clone(), value: encode_value(&[], &value(v)), sync: true, marker: false, done });
        units.push(answer);
    }
    for cursor in [5, 3, 5, 6] {
        let (done, answer) = oneshot::channel();
        let (key, value) = (ka.clone(), encode_value(&header(version(cursor)), &value(&cursor.to_string())));
        writes.push(Write::IfNewer { key, version: version(cursor), value, done });
        bools.push(answer);
    }
    let (done, answer) = oneshot::channel();
    writes.push(Write::Version { key: kd.clone(), value: encode_value(&[], &value("gone")), sync: true, marker: false, done });
    units.push(answer);
    for _ in 0..2 {
        let (done, answer) = oneshot::channel();
        writes.push(Write::DeleteVersion { key: kd.clone(), done });
        bools.push(answer);
    }
    store.inner.commit(writes).expect("committed");
    for answer in units {
        answer.await.expect("answered").expect("written");
    }
    let mut wrote = Vec::new();
    for answer in bools {
        wrote.push(answer.await.expect("answered").expect("decided"));
    }
    assert_eq!(wrote, [true, false, false, true, true, false], "put-if-newer 5, 3, 5, 6; delete, delete again");
    assert_eq!(store.get_version("t", b"k", 7).await.unwrap(), Some(value("first")));
    assert_eq!(store.get_latest("t", b"a").await.unwrap(), Some((version(6), value("6"))));
    assert_eq!(store.get_version("t", b"d", 1).await.unwrap(), None);
}

/// A marker is written without looking whether its name is taken: it says stored,
/// and overwrites (no reader looks it up; a value's version keeps its first value).
#[tokio::test]
async fn markers_are_written_without_a_lookup() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = RocksStateStore::open(dir.path()).expect("opening");
    let val = |s: &'static str| Some(Bytes::from_static(s.as_bytes()));
    let put = |value: &'static str, marker| {
        let p = VersionPut { table: "t".into(), key: Bytes::from_static(b"m"), version: 7, value: val(value), marker };
        store.put_versions(vec![p], false)
    };
    assert_eq!(put("one", true).await.unwrap(), [true]);
    assert_eq!(put("two", true).await.unwrap(), [true]);
    assert_eq!(store.get_version("t", b"m", 7).await.unwrap(), Some(val("two")));
    assert_eq!(put("three", false).await.unwrap(), [false], "a value's version finds the name taken");
    assert_eq!(store.get_version("t", b"m", 7).await.unwrap(), Some(val("two")));
}

/// Unsynced marker versions on an idle store are written by their caller, not the
/// writer thread; anything else (a sync, a version that looks first) is the
/// writer's. Every one of them is stored, and a later sync covers the markers.
#[tokio::test]
async fn unsynced_markers_are_written_in_place_and_the_rest_by_the_writer() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = RocksStateStore::open(dir.path()).expect("opening");
    let in_place = || store.inner.in_place.load(std::sync::atomic::Ordering::Relaxed);
    let put = |k: &str, marker, durable| {
        let p = VersionPut { table: "t".into(), key: Bytes::from(k.to_string()), version: 1, value: None, marker };
        store.put_versions(vec![p.clone(), VersionPut { version: 2, ..p }], durable)
    };
    assert_eq!(put("a", true, false).await.unwrap(), [true, true]);
    assert_eq!(in_place(), 1, "unsynced markers, idle store: in place");
    assert_eq!(put("b", true, true).await.unwrap(), [true, true]);
    assert_eq!(put("c", false, false).await.unwrap(), [true, true]);
    assert_eq!(in_place(), 1, "a synced marker and a version that looks first: the writer's");
    // The writer answers before it marks its batch done: wait for that.
    while {
        let queue = store.inner.lock_queue();
        queue.busy || !queue.writes.is_empty()
    } {
        std::thread::yield_now();
    }
    // Many calls at once (each is queued or written as it is made, before it is
    // awaited): in place or behind a synced one, each is answered and stored.
    let puts: Vec<_> = (0..64)
        .map(|k| {
            let p = VersionPut { table: "t".into(), key: Bytes::from(format!("m{k}")), version: 3, value: None, marker: true };
            store.put_versions(vec![p], k % 8 == 7)
        })
        .collect();
    for answer in puts {
        assert_eq!(answer.await.unwrap(), [true]);
    }
    assert!(in_place() >= 8, "the 7 before the first synced one were written in place");
    store.sync().await.unwrap();
    drop(store);
    let store = RocksStateStore::open(dir.path()).expect("reopening");
    for (key, version) in [("a", 2), ("b", 1), ("c", 2), ("m63", 3)] {
        assert_eq!(store.get_version("t", key.as_bytes(), version).await.unwrap(), Some(None), "{key}@{version}");
    }
}

/// The versions of one `put_versions` call are one synced batch, however the writer
/// thread's wakeups fall: an instance's pending writes cost one fsync.
#[tokio::test]
async fn put_versions_is_one_sync() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = RocksStateStore::open(dir.path()).expect("opening");
    let syncs = || store.inner.syncs.load(std::sync::atomic::Ordering::Relaxed);
    for round in 0..20u64 {
        let puts = (0..8u64)
            .map(|k| VersionPut {
                table: "t".into(),
                key: Bytes::from(format!("k{k}")),
                version: round,
                value: Some(Bytes::from(format!("{round}"))),
                marker: false,
            })
            .collect();
        let before = syncs();
        assert_eq!(store.put_versions(puts, true).await.unwrap(), [true; 8]);
        assert_eq!(syncs() - before, 1, "round {round}: one sync for the call's 8 versions");
    }
    // Not durable: no sync; a durable put that finds such a version syncs all the same.
    let put = |k: &str, durable| {
        let p = VersionPut { table: "t".into(), key: Bytes::from(k.to_string()), version: 1, value: None, marker: false };
        store.put_versions(vec![p], durable)
    };
    let before = syncs();
    assert_eq!(put("lazy", false).await.unwrap(), [true]);
    assert_eq!(syncs(), before, "no sync for a version that need not be durable");
    assert_eq!(put("lazy", true).await.unwrap(), [false]);
    assert_eq!(syncs(), before + 1, "a sync for a durable put of a version that exists");
    assert_eq!(store.get_version("t", b"k7", 19).await.unwrap(), Some(Some(Bytes::from("19"))));
}

/// Deletes are not synced (garbage collection deletes many versions a pass, and a
/// sync each would hold the writer): `sync` makes them durable, with one fsync.
#[tokio::test]
async fn deletes_wait_for_a_sync() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = RocksStateStore::open(dir.path()).expect("opening");
    let syncs = || store.inner.syncs.load(std::sync::atomic::Ordering::Relaxed);
    for v in 0..40 {
        store.put_version("t", b"k", v, Some(Bytes::from("x"))).await.unwrap();
    }
    let before = syncs();
    assert_eq!(store.delete_versions("t", b"k", (0..32).collect()).await.unwrap(), 32);
    assert!(store.delete_version("t", b"k", 32).await.unwrap());
    assert_eq!(syncs(), before, "no sync for deletes");
    assert_eq!(store.get_version("t", b"k", 5).await.unwrap(), None, "gone once deleted");
    store.sync().await.unwrap();
    assert_eq!(syncs(), before + 1, "one sync for all of them");
    drop(store);
    let store = RocksStateStore::open(dir.path()).expect("reopening");
    assert_eq!(store.get_at("t", b"k", 39).await.unwrap().map(|(v, _)| v), Some(39));
    assert_eq!(store.get_at("t", b"k", 32).await.unwrap(), None, "the deletes stay");
}

/// Listing keys passes a key's versions with one seek: every key comes once, in
/// order, whatever its versions (many, deleted, the largest), and a key that
/// extends another with the bytes of a version is its own.
#[tokio::test]
async fn list_keys_passes_every_version_of_a_key() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = RocksStateStore::open(dir.path()).expect("opening");
    let mut forged = b"a".to_vec();
    forged.extend_from_slice(&[0xff; 8]);
    // In the store's order: by length, then bytes.
    let keys: [&[u8]; 4] = [b"a", b"b", b"c", &forged];
    for version in 0..100u64 {
        store.put_version("t", keys[0], version, None).await.unwrap();
    }
    for version in 0..50u64 {
        store.delete_version("t", keys[0], version).await.unwrap();
    }
    store.put_version("t", keys[1], u64::MAX, None).await.unwrap();
    store.put_version("t", keys[2], 0, None).await.unwrap();
    store.put_version("t", keys[3], 0, None).await.unwrap();
    for limit in [1, 2, 10] {
        let mut listed = Vec::new();
        let mut after: Option<Bytes> = None;
        loop {
            let page = store.list_keys("t", Family::Versions, after.as_deref(), limit).await.unwrap();
            let Some(last) = page.last().cloned() else { break };
            listed.extend(page);
            after = Some(last);
        }
        assert_eq!(listed, keys.map(Bytes::copy_from_slice), "pages of {limit}");
    }
}

/// A read limited to memory is refused (`Incomplete`) for a key only a table file
/// holds, and served once a read from the file put its block in the cache; so the
/// tier `read_options` makes is RocksDB's kBlockCacheTier, and a read in place never
/// touches a file.
#[test]
fn a_read_in_memory_refuses_what_only_a_file_holds() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        let db = DB::open(&opts, dir.path()).expect("opening");
        db.put(b"key", b"value").expect("writing");
        db.flush().expect("flushing the memtable to a table file");
    }
    let db = DB::open(&Options::default(), dir.path()).expect("reopening");
    match db.get_pinned_opt(b"key", &read_options(Tier::Memory)) {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Incomplete, "{e}"),
        Ok(found) => panic!("a read in memory found {:?} in a table file", found.map(|v| v.to_vec())),
    }
    let value = db.get_pinned_opt(b"key", &read_options(Tier::All)).expect("reading the file");
    assert_eq!(value.as_deref(), Some(&b"value"[..]));
    let cached = db.get_pinned_opt(b"key", &read_options(Tier::Memory)).expect("reading the cached block");
    assert_eq!(cached.as_deref(), Some(&b"value"[..]));
}
