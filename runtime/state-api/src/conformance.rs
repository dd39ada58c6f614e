//! The conformance suite every [`StateStore`] must pass: the executable form of the
//! trait's doc comment. `runtime/state/tests/state_stores.rs` runs it against each backend.
//!
//! Each case uses tables named after itself, so all cases can share one store (and one
//! database) without seeing each other's data. A case fails by panicking, with the
//! case's name in the message.

use std::future::Future;

use bytes::Bytes;

use super::{Family, LatestPut, StateStore, Value, Version, VersionPut};

/// Runs every case. `open` opens the store under test; it is called once per case and
/// again by [`survives_reopen`], each time on the same underlying storage, after the
/// previous store was dropped.
pub async fn run_all<F, Fut>(mut open: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Box<dyn StateStore>>,
{
    missing_keys(&*open().await).await;
    get_at_boundaries(&*open().await).await;
    tombstones(&*open().await).await;
    first_put_wins(&*open().await).await;
    put_versions_puts_each(&*open().await).await;
    delete_version_removes_one(&*open().await).await;
    delete_versions_deletes_each(&*open().await).await;
    put_if_newer_ordering(&*open().await).await;
    put_if_newer_all_keeps_the_newest(&*open().await).await;
    put_latest_overwrites(&*open().await).await;
    replaced_entries_answer_the_past(&*open().await).await;
    list_keys_pages(&*open().await).await;
    concurrent_put_if_newer(&*open().await).await;
    table_isolation(&*open().await).await;
    family_isolation(&*open().await).await;
    binary_keys(&*open().await).await;
    large_values(&*open().await).await;
    invalid_table(&*open().await).await;
    survives_reopen(open).await;
}

fn val(s: &str) -> Value {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

fn v(cursor: u64, counter: u32) -> Version {
    Version { cursor, counter }
}

/// Asserts what `get_at` returns; the table names the failing case.
async fn check_at(store: &dyn StateStore, table: &str, key: &[u8], at: u64, expect: Option<(u64, Value)>) {
    let got = store.get_at(table, key, at).await.unwrap();
    assert_eq!(got, expect, "{table}: get_at(key={key:?}, at={at})");
}

/// Asserts what `get_latest` returns; the table names the failing case.
async fn check_latest(store: &dyn StateStore, table: &str, key: &[u8], expect: Option<(Version, Value)>) {
    let got = store.get_latest(table, key).await.unwrap();
    assert_eq!(got, expect, "{table}: get_latest(key={key:?})");
}

pub async fn missing_keys(store: &dyn StateStore) {
    let t = "missing_keys";
    check_at(store, t, b"k", u64::MAX, None).await;
    check_latest(store, t, b"k", None).await;
    assert!(!store.delete_version(t, b"k", 1).await.unwrap(), "{t}: delete");
}

pub async fn get_at_boundaries(store: &dyn StateStore) {
    let t = "get_at_boundaries";
    for version in [0, 5, 10, u64::MAX] {
        store.put_version(t, b"k", version, val(&format!("v{version}"))).await.unwrap();
    }
    // Versions above 2^63 must sort above the rest (PostgreSQL stores them signed).
    store.put_version(t, b"k", 1 << 63, val("high")).await.unwrap();
    let cases: [(u64, Option<(u64, Value)>); 9] = [
        (0, Some((0, val("v0")))),
        (4, Some((0, val("v0")))),
        (5, Some((5, val("v5")))),
        (6, Some((5, val("v5")))),
        (10, Some((10, val("v10")))),
        ((1 << 63) - 1, Some((10, val("v10")))),
        (1 << 63, Some((1 << 63, val("high")))),
        (u64::MAX - 1, Some((1 << 63, val("high")))),
        (u64::MAX, Some((u64::MAX, val(&format!("v{}", u64::MAX))))),
    ];
    for (at, expect) in cases {
        check_at(store, t, b"k", at, expect.clone()).await;
        // Exactly that version, or nothing.
        let exact = expect.and_then(|(v, value)| (v == at).then_some(value));
        assert_eq!(store.get_version(t, b"k", at).await.unwrap(), exact, "{t}: get_version({at})");
    }
    store.put_version(t, b"only_later", 7, val("x")).await.unwrap();
    check_at(store, t, b"only_later", 6, None).await;
}

pub async fn tombstones(store: &dyn StateStore) {
    let t = "tombstones";
    store.put_version(t, b"k", 1, val("a")).await.unwrap();
    store.put_version(t, b"k", 2, None).await.unwrap();
    store.put_version(t, b"k", 3, val("b")).await.unwrap();
    check_at(store, t, b"k", 1, Some((1, val("a")))).await;
    check_at(store, t, b"k", 2, Some((2, None))).await;
    check_at(store, t, b"k", 3, Some((3, val("b")))).await;
    assert_eq!(store.get_version(t, b"k", 2).await.unwrap(), Some(None), "{t}: a tombstone is a stored version");
    assert!(store.put_if_newer(t, b"k", v(1, 0), None).await.unwrap(), "{t}");
    check_latest(store, t, b"k", Some((v(1, 0), None))).await;
    // An empty value is a value, not a tombstone.
    assert!(store.put_if_newer(t, b"k", v(1, 1), val("")).await.unwrap(), "{t}");
    check_latest(store, t, b"k", Some((v(1, 1), val("")))).await;
}

pub async fn first_put_wins(store: &dyn StateStore) {
    let t = "first_put_wins";
    assert!(store.put_version(t, b"k", 4, val("first")).await.unwrap(), "the first put stores");
    assert!(!store.put_version(t, b"k", 4, val("second")).await.unwrap(), "a second put does not");
    assert!(!store.put_version(t, b"k", 4, None).await.unwrap());
    check_at(store, t, b"k", 4, Some((4, val("first")))).await;
    assert!(store.put_version(t, b"tomb", 4, None).await.unwrap());
    assert!(!store.put_version(t, b"tomb", 4, val("late")).await.unwrap());
    check_at(store, t, b"tomb", 9, Some((4, None))).await;
}

pub async fn put_versions_puts_each(store: &dyn StateStore) {
    let t = "put_versions_puts_each";
    let put = |key: &str, version: u64, value: Value| VersionPut {
        table: t.to_string(),
        key: Bytes::copy_from_slice(key.as_bytes()),
        version,
        value,
        marker: false,
    };
    assert!(store.put_version(t, b"old", 1, val("kept")).await.unwrap());
    let puts = vec![
        put("a", 1, val("a1")),
        put("old", 1, val("ignored")),
        put("b", 2, None),
        // The same version twice in one call: the first put wins here too.
        put("a", 3, val("first")),
        put("a", 3, val("second")),
    ];
    assert_eq!(store.put_versions(puts, true).await.unwrap(), [true, false, true, true, false], "{t}: what each put stored");
    check_at(store, t, b"a", 1, Some((1, val("a1")))).await;
    check_at(store, t, b"a", 9, Some((3, val("first")))).await;
    check_at(store, t, b"old", 9, Some((1, val("kept")))).await;
    check_at(store, t, b"b", 9, Some((2, None))).await;
    assert_eq!(store.put_versions(Vec::new(), true).await.unwrap(), Vec::<bool>::new(), "{t}: nothing to put");
    let invalid = vec![put("c", 1, val("c")), VersionPut { table: String::new(), ..put("c", 2, val("c")) }];
    assert!(store.put_versions(invalid, true).await.is_err(), "{t}: a put to an invalid table fails the call");
    // Not durable: stored all the same while the process lives.
    assert_eq!(store.put_versions(vec![put("d", 1, val("d")), put("a", 1, val("no"))], false).await.unwrap(), [true, false]);
    check_at(store, t, b"d", 1, Some((1, val("d")))).await;
}

pub async fn delete_version_removes_one(store: &dyn StateStore) {
    let t = "delete_version_removes_one";
    for version in [2u64, 4, 6] {
        let value = if version == 6 { None } else { val(&format!("v{version}")) };
        store.put_version(t, b"k", version, value).await.unwrap();
    }
    assert!(store.delete_version(t, b"k", 4).await.unwrap(), "{t}: 4 was there");
    assert!(!store.delete_version(t, b"k", 4).await.unwrap(), "{t}: 4 is gone");
    check_at(store, t, b"k", 5, Some((2, val("v2")))).await;
    check_at(store, t, b"k", 6, Some((6, None))).await;
    // A tombstone is a version like any other.
    assert!(store.delete_version(t, b"k", 6).await.unwrap(), "{t}: the tombstone");
    check_at(store, t, b"k", u64::MAX, Some((2, val("v2")))).await;
    assert!(!store.delete_version(t, b"other", 2).await.unwrap(), "{t}: another key");
    // Deleted, a version can be put again (a re-executed writer after GC would not, but
    // the store does not care).
    store.put_version(t, b"k", 4, val("again")).await.unwrap();
    check_at(store, t, b"k", 4, Some((4, val("again")))).await;
}

pub async fn delete_versions_deletes_each(store: &dyn StateStore) {
    let t = "delete_versions_deletes_each";
    for version in 1..=5u64 {
        store.put_version(t, b"k", version, val(&format!("v{version}"))).await.unwrap();
    }
    store.put_version(t, b"other", 2, val("stays")).await.unwrap();
    // 6 was never there; 2 is named twice: each counts once.
    assert_eq!(store.delete_versions(t, b"k", vec![1, 2, 6, 2, 4]).await.unwrap(), 3, "{t}: the versions that were there");
    check_at(store, t, b"k", 2, None).await;
    check_at(store, t, b"k", 4, Some((3, val("v3")))).await;
    check_at(store, t, b"k", 9, Some((5, val("v5")))).await;
    check_at(store, t, b"other", 9, Some((2, val("stays")))).await;
    assert_eq!(store.delete_versions(t, b"k", Vec::new()).await.unwrap(), 0, "{t}: nothing to delete");
}

pub async fn put_if_newer_ordering(store: &dyn StateStore) {
    let t = "put_if_newer_ordering";
    // (version, expect written, expect stored version after)
    let steps = [
        (v(5, 3), true, v(5, 3)),
        (v(5, 3), false, v(5, 3)), // equal
        (v(5, 2), false, v(5, 3)), // older counter
        (v(4, 9), false, v(5, 3)), // older cursor, larger counter
        (v(5, 4), true, v(5, 4)),  // newer counter
        (v(6, 0), true, v(6, 0)),  // newer cursor, smaller counter
        (v(u64::MAX, u32::MAX), true, v(u64::MAX, u32::MAX)),
        (v(1 << 63, 0), false, v(u64::MAX, u32::MAX)),
    ];
    for (i, (version, written, stored)) in steps.into_iter().enumerate() {
        let value = val(&format!("step{i}"));
        let wrote = store.put_if_newer(t, b"k", version, value).await.unwrap();
        assert_eq!(wrote, written, "{t}: step {i} {version:?}");
        let (got, _) = store.get_latest(t, b"k").await.unwrap().expect("stored");
        assert_eq!(got, stored, "{t}: step {i}");
    }
    let (_, value) = store.get_latest(t, b"k").await.unwrap().unwrap();
    assert_eq!(value, val("step6"), "{t}: the value belongs to the stored version");
}

pub async fn put_if_newer_all_keeps_the_newest(store: &dyn StateStore) {
    let (t, u) = ("put_if_newer_all", "put_if_newer_all_other");
    store.put_if_newer(t, b"stored", v(5, 0), val("stored")).await.unwrap();
    let put = |table: &str, key: &[u8], version, value| LatestPut {
        table: table.to_string(),
        key: Bytes::copy_from_slice(key),
        version,
        value,
    };
    let puts = [
        put(t, b"stored", v(3, 0), val("older than the stored one")),
        put(t, b"k", v(1, 0), val("first")),
        put(t, b"k", v(2, 0), val("newest")),
        put(t, b"k", v(1, 5), val("in between")),
        put(t, b"gone", v(1, 0), None),
        put(u, b"k", v(1, 0), val("other table")),
        // A key of any bytes: a zero byte, a slash, a byte that is not UTF-8.
        put(t, b"k\x00/\xff", v(7, 7), val("binary")),
    ];
    store.put_if_newer_all(&puts).await.unwrap();
    check_latest(store, t, b"stored", Some((v(5, 0), val("stored")))).await;
    check_latest(store, t, b"k", Some((v(2, 0), val("newest")))).await;
    check_latest(store, t, b"gone", Some((v(1, 0), None))).await;
    check_latest(store, u, b"k", Some((v(1, 0), val("other table")))).await;
    check_latest(store, t, b"k\x00/\xff", Some((v(7, 7), val("binary")))).await;
    // Again, whole: nothing moves. Then one newer put among older ones.
    store.put_if_newer_all(&puts).await.unwrap();
    check_latest(store, t, b"k", Some((v(2, 0), val("newest")))).await;
    store.put_if_newer_all(&[put(t, b"k", v(1, 9), val("older")), put(t, b"k", v(2, 1), val("newer"))]).await.unwrap();
    check_latest(store, t, b"k", Some((v(2, 1), val("newer")))).await;
    store.put_if_newer_all(&[]).await.unwrap();
    assert!(store.put_if_newer_all(&[put("", b"k", v(9, 0), val("x"))]).await.is_err(), "{t}: an invalid table");
    check_latest(store, t, b"k", Some((v(2, 1), val("newer")))).await;
}

pub async fn put_latest_overwrites(store: &dyn StateStore) {
    let t = "put_latest_overwrites";
    store.put_if_newer(t, b"k", v(9, 9), val("conditional")).await.unwrap();
    store.put_latest(t, b"k", val("raw")).await.unwrap();
    check_latest(store, t, b"k", Some((Version::ZERO, val("raw")))).await;
    store.put_latest(t, b"k", None).await.unwrap();
    check_latest(store, t, b"k", Some((Version::ZERO, None))).await;
    store.put_latest(t, b"k", val("again")).await.unwrap();
    check_latest(store, t, b"k", Some((Version::ZERO, val("again")))).await;
}

/// `get_latest_at` answers the entry stored at each seqnum from the replaced entries;
/// `trim_replaced` drops only what no read at its floor or later needs.
pub async fn replaced_entries_answer_the_past(store: &dyn StateStore) {
    let (t, u) = ("replaced_entries", "replaced_entries_other");
    let put = |key: &[u8], version, value| LatestPut { table: t.to_string(), key: Bytes::copy_from_slice(key), version, value };
    assert!(store.put_if_newer(t, b"k", v(3, 0), val("a")).await.unwrap());
    // Replaced at its own cursor: no reader sees it, nothing is kept.
    assert!(store.put_if_newer(t, b"k", v(3, 1), val("a2")).await.unwrap());
    assert!(store.put_if_newer(t, b"k", v(7, 0), val("b")).await.unwrap());
    // A late writer loses, and leaves no trace.
    assert!(!store.put_if_newer(t, b"k", v(5, 0), val("late")).await.unwrap());
    assert!(store.put_if_newer(t, b"k", v(7, 1), None).await.unwrap());
    store.put_if_newer_all(&[put(b"k", v(12, 0), val("c")), put(b"kk", v(4, 0), val("other key"))]).await.unwrap();
    store.put_if_newer_all(&[put(b"k", v(20, 2), val("d")), put(b"kk", v(30, 0), val("other key 2"))]).await.unwrap();
    store.put_if_newer(u, b"k", v(1, 0), val("other table")).await.unwrap();
    store.put_if_newer(u, b"k", v(2, 0), val("other table 2")).await.unwrap();
    let k = |at: u64| match at {
        0..=2 => None,
        3..=6 => Some((v(3, 1), val("a2"))),
        7..=11 => Some((v(7, 1), None)),
        12..=19 => Some((v(12, 0), val("c"))),
        _ => Some((v(20, 2), val("d"))),
    };
    let kk = |at: u64| match at {
        0..=3 => None,
        4..=29 => Some((v(4, 0), val("other key"))),
        _ => Some((v(30, 0), val("other key 2"))),
    };
    for at in (0..=32).chain([u64::MAX - 1, u64::MAX]) {
        assert_eq!(store.get_latest_at(t, b"k", at).await.unwrap(), k(at), "{t}: k at {at}");
        assert_eq!(store.get_latest_at(t, b"kk", at).await.unwrap(), kk(at), "{t}: kk at {at}");
    }
    assert_eq!(store.get_latest_at(t, b"missing", 9).await.unwrap(), None, "{t}");
    // Trimmed at 12: what reads at 12 and later need stays, exactly.
    assert_eq!(store.trim_replaced(t, 12).await.unwrap(), 2, "{t}: replaced at 7 and 12");
    assert_eq!(store.trim_replaced(t, 12).await.unwrap(), 0, "{t}: again");
    for at in (12..=32).chain([u64::MAX]) {
        assert_eq!(store.get_latest_at(t, b"k", at).await.unwrap(), k(at), "{t}: k at {at} after the trim");
        assert_eq!(store.get_latest_at(t, b"kk", at).await.unwrap(), kk(at), "{t}: kk at {at} after the trim");
    }
    // The other table keeps its own.
    assert_eq!(store.get_latest_at(u, b"k", 1).await.unwrap(), Some((v(1, 0), val("other table"))), "{t}");
    assert_eq!(store.trim_replaced(t, u64::MAX).await.unwrap(), 2, "{t}: replaced at 20 and 30");
    assert_eq!(store.get_latest_at(t, b"k", u64::MAX).await.unwrap(), k(u64::MAX), "{t}: the stored entry stays");
    assert_eq!(store.get_latest_at(u, b"k", 1).await.unwrap(), Some((v(1, 0), val("other table"))), "{t}");
    assert!(store.get_latest_at("", b"k", 1).await.is_err() && store.trim_replaced("a\0b", 1).await.is_err(), "{t}");
}

pub async fn list_keys_pages(store: &dyn StateStore) {
    let t = "list_keys_pages";
    // Keys that a naive prefix scan would confuse: prefixes of each other, zero bytes.
    let keys: Vec<&[u8]> = vec![b"a", b"a\0", b"aa", b"b", b"\0", b"ab\xff"];
    for (i, k) in keys.iter().enumerate() {
        for version in [1, 2] {
            store.put_version(t, k, version, val("v")).await.unwrap();
        }
        if i % 2 == 0 {
            store.put_latest(t, k, val("l")).await.unwrap();
        }
    }
    store.put_version("list_keys_pages_other", b"zz", 1, val("v")).await.unwrap();
    for (family, want) in
        [(Family::Versions, keys.clone()), (Family::Latest, keys.iter().step_by(2).copied().collect::<Vec<_>>())]
    {
        for page in [1, 2, 100] {
            let mut got: Vec<Bytes> = Vec::new();
            loop {
                let after = got.last().cloned();
                let next = store.list_keys(t, family, after.as_deref(), page).await.unwrap();
                assert!(next.len() <= page, "{t}: {family:?} page {page}");
                if next.is_empty() {
                    break;
                }
                got.extend(next);
            }
            let mut got: Vec<&[u8]> = got.iter().map(|b| &b[..]).collect();
            got.sort();
            let mut want = want.clone();
            want.sort();
            assert_eq!(got, want, "{t}: {family:?} in pages of {page}");
        }
    }
}

pub async fn concurrent_put_if_newer(store: &dyn StateStore) {
    let t = "concurrent_put_if_newer";
    // Distinct versions in a scrambled order, all racing.
    let versions: Vec<Version> = (0..16u32).map(|i| v(u64::from((i * 7) % 16), i % 3)).collect();
    let writes = versions
        .iter()
        .map(|&version| store.put_if_newer(t, b"k", version, val(&format!("{}.{}", version.cursor, version.counter))));
    let results = futures_util::future::join_all(writes).await;
    assert!(results.iter().all(Result::is_ok), "{t}: {results:?}");
    let max = versions.iter().max().copied().unwrap();
    let expect = val(&format!("{}.{}", max.cursor, max.counter));
    check_latest(store, t, b"k", Some((max, expect))).await;
}

pub async fn table_isolation(store: &dyn StateStore) {
    let (a, b) = ("table_isolation_a", "table_isolation_b");
    store.put_version(a, b"k", 1, val("a")).await.unwrap();
    store.put_if_newer(a, b"k", v(1, 0), val("a")).await.unwrap();
    check_at(store, b, b"k", 1, None).await;
    check_latest(store, b, b"k", None).await;
    store.put_version(b, b"k", 1, val("b")).await.unwrap();
    store.put_version(b, b"k", 2, val("b2")).await.unwrap();
    assert!(store.delete_version(b, b"k", 2).await.unwrap(), "table_isolation");
    check_at(store, a, b"k", 1, Some((1, val("a")))).await;
    check_at(store, b, b"k", 1, Some((1, val("b")))).await;
    // A table name that is a prefix of another, with keys that could make them collide
    // under a naive concatenation.
    store.put_version("table_isolation_p", b"xk", 1, val("p")).await.unwrap();
    check_at(store, "table_isolation_px", b"k", 1, None).await;
}

pub async fn family_isolation(store: &dyn StateStore) {
    let t = "family_isolation";
    store.put_version(t, b"k", 1, val("multi")).await.unwrap();
    check_latest(store, t, b"k", None).await;
    store.put_if_newer(t, b"j", v(1, 0), val("single")).await.unwrap();
    check_at(store, t, b"j", u64::MAX, None).await;
}

pub async fn binary_keys(store: &dyn StateStore) {
    let t = "binary_keys";
    let keys: [&[u8]; 5] = [b"", b"\0", b"\0\0", b"a\0b", &[0xff, 0x00, 0xfe]];
    for (i, key) in keys.iter().enumerate() {
        store.put_version(t, key, 1, val(&format!("m{i}"))).await.unwrap();
        store.put_if_newer(t, key, v(1, 0), val(&format!("s{i}"))).await.unwrap();
    }
    for (i, key) in keys.iter().enumerate() {
        let got = store.get_at(t, key, 1).await.unwrap();
        assert_eq!(got, Some((1, val(&format!("m{i}")))), "{t}: key {key:?}");
        let got = store.get_latest(t, key).await.unwrap();
        assert_eq!(got, Some((v(1, 0), val(&format!("s{i}")))), "{t}: key {key:?}");
    }
    // A key followed by version-like bytes is a different key.
    check_at(store, t, b"a", u64::MAX, None).await;
}

pub async fn large_values(store: &dyn StateStore) {
    let t = "large_values";
    let big: Bytes = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect::<Vec<u8>>().into();
    store.put_version(t, b"k", 1, Some(big.clone())).await.unwrap();
    store.put_if_newer(t, b"k", v(1, 0), Some(big.clone())).await.unwrap();
    check_at(store, t, b"k", 1, Some((1, Some(big.clone())))).await;
    check_latest(store, t, b"k", Some((v(1, 0), Some(big)))).await;
}

pub async fn invalid_table(store: &dyn StateStore) {
    for table in ["", "a\0b"] {
        assert!(store.get_at(table, b"k", 1).await.is_err(), "invalid_table {table:?}");
        assert!(store.put_version(table, b"k", 1, None).await.is_err(), "invalid_table");
        assert!(store.put_if_newer(table, b"k", v(1, 0), None).await.is_err(), "invalid_table");
    }
}

pub async fn survives_reopen<F, Fut>(mut open: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Box<dyn StateStore>>,
{
    let t = "survives_reopen";
    {
        let store = open().await;
        store.put_version(t, b"k", 1, val("one")).await.unwrap();
        store.put_version(t, b"k", 2, None).await.unwrap();
        store.put_version(t, b"k", 4, val("four")).await.unwrap();
        store.put_if_newer(t, b"k", v(3, 1), val("latest")).await.unwrap();
        // A delete asks for no sync of its own; `sync` makes it durable.
        assert!(store.delete_version(t, b"k", 4).await.unwrap(), "{t}");
        store.sync().await.unwrap();
    }
    let store = open().await;
    check_at(&*store, t, b"k", 1, Some((1, val("one")))).await;
    check_at(&*store, t, b"k", 2, Some((2, None))).await;
    check_at(&*store, t, b"k", 4, Some((2, None))).await;
    check_latest(&*store, t, b"k", Some((v(3, 1), val("latest")))).await;
    // Conditional writes still compare against the version stored before the reopen.
    assert!(!store.put_if_newer(t, b"k", v(3, 0), val("old")).await.unwrap(), "{t}");
}
