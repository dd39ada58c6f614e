//! An in-memory [`StateStore`]: what the simulator and unit tests run the protocols
//! against. It passes the same conformance suite as the real backends.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Mutex;

use bytes::Bytes;

use super::{check_table, Family, StateFuture, StateStore, Value, Version, VersionPut};

type Key = (String, Bytes);

#[derive(Default)]
struct Tables {
    /// `(table, key)` to its versions.
    versions: BTreeMap<Key, BTreeMap<u64, Value>>,
    /// `(table, key)` to its single-version entry.
    latest: BTreeMap<Key, (Version, Value)>,
    /// `(table, key)` to the single-version entries replaced, by the cursor that did.
    replaced: BTreeMap<Key, BTreeMap<u64, (Version, Value)>>,
    /// What a machine crash undoes, oldest first: versions deleted since the last
    /// sync, and versions put without durability since the last synced write.
    unsynced: Vec<Unsynced>,
    refuse_syncs: bool,
}

enum Unsynced {
    Deleted(Key, u64, Value),
    Put(Key, u64),
}

impl Tables {
    /// A write the store syncs makes every version put before it durable (the
    /// embedded store's write-ahead log is one sequence); deletes wait for `sync`.
    fn synced_write(&mut self) {
        self.unsynced.retain(|u| matches!(u, Unsynced::Deleted(..)));
    }

    /// `put_version`'s rule: the first version under a name stays.
    fn put_version(&mut self, k: Key, version: u64, value: Value) -> bool {
        match self.versions.entry(k).or_default().entry(version) {
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(value);
                true
            }
            std::collections::btree_map::Entry::Occupied(_) => false,
        }
    }
}

/// Every table in one map per family, behind one lock: each call is atomic.
///
/// It models what a machine crash leaves of a store that syncs deletes and versions put
/// without durability only on request (the trait's contract, the embedded store's
/// behaviour): [`lose_unsynced`](Self::lose_unsynced) brings back every version deleted
/// since the last `sync` and drops every version `put_versions(_, false)` stored since
/// the last synced write, and
/// [`refuse_syncs`](Self::refuse_syncs) makes `sync` fail, as a full disk would.
#[derive(Default)]
pub struct MemStateStore {
    tables: Mutex<Tables>,
}

impl MemStateStore {
    pub fn new() -> MemStateStore {
        MemStateStore::default()
    }

    /// A crash of the machine: the deletes and the puts not synced are undone, newest
    /// first.
    pub fn lose_unsynced(&self) {
        let mut t = self.tables.lock().expect("not poisoned");
        for undo in std::mem::take(&mut t.unsynced).into_iter().rev() {
            match undo {
                Unsynced::Deleted(k, version, value) => {
                    t.versions.entry(k).or_default().entry(version).or_insert(value);
                }
                Unsynced::Put(k, version) => {
                    // A delete after it was undone first: the version is there.
                    if let Some(versions) = t.versions.get_mut(&k) {
                        versions.remove(&version);
                        if versions.is_empty() {
                            t.versions.remove(&k);
                        }
                    }
                }
            }
        }
    }

    /// Whether `(table, key)` has a version stored.
    pub fn has_versions(&self, table: &str, key: &[u8]) -> bool {
        let t = self.tables.lock().expect("not poisoned");
        t.versions.get(&(table.to_string(), Bytes::copy_from_slice(key))).is_some_and(|v| !v.is_empty())
    }

    /// Whether `sync` fails from now on.
    pub fn refuse_syncs(&self, refuse: bool) {
        self.tables.lock().expect("not poisoned").refuse_syncs = refuse;
    }

    fn with<T>(&self, table: &str, f: impl FnOnce(&mut Tables) -> T) -> Result<T, super::StateError> {
        check_table(table)?;
        Ok(f(&mut self.tables.lock().expect("not poisoned")))
    }
}

fn key(table: &str, key: &[u8]) -> Key {
    (table.to_string(), Bytes::copy_from_slice(key))
}

/// Up to `limit` keys of `table` in `map` after `after`.
fn keys_after<V>(map: &BTreeMap<Key, V>, table: &str, after: Option<&[u8]>, limit: usize) -> Vec<Bytes> {
    let start = match after {
        Some(a) => Bound::Excluded(key(table, a)),
        None => Bound::Included(key(table, b"")),
    };
    map.range((start, Bound::Unbounded))
        .map(|(k, _)| k)
        .take_while(|(t, _)| t == table)
        .map(|(_, k)| k.clone())
        .take(limit)
        .collect()
}

fn ready<'a, T: Send + 'a>(r: Result<T, super::StateError>) -> StateFuture<'a, T> {
    Box::pin(std::future::ready(r))
}

impl StateStore for MemStateStore {
    fn put_version<'a>(&'a self, table: &'a str, k: &'a [u8], version: u64, value: Value) -> StateFuture<'a, bool> {
        ready(self.with(table, |t| {
            t.synced_write();
            t.put_version(key(table, k), version, value)
        }))
    }

    fn put_versions<'a>(&'a self, puts: Vec<VersionPut>, durable: bool) -> StateFuture<'a, Vec<bool>> {
        if let Err(e) = puts.iter().try_for_each(|p| check_table(&p.table)) {
            return ready(Err(e));
        }
        let mut t = self.tables.lock().expect("not poisoned");
        let stored = puts
            .into_iter()
            .map(|p| {
                let k = key(&p.table, &p.key);
                let stored = t.put_version(k.clone(), p.version, p.value);
                if stored && !durable {
                    t.unsynced.push(Unsynced::Put(k, p.version));
                }
                stored
            })
            .collect();
        if durable {
            t.synced_write();
        }
        ready(Ok(stored))
    }

    fn get_at<'a>(&'a self, table: &'a str, k: &'a [u8], at: u64) -> StateFuture<'a, Option<(u64, Value)>> {
        ready(self.with(table, |t| {
            let versions = t.versions.get(&key(table, k))?;
            versions.range(..=at).next_back().map(|(v, value)| (*v, value.clone()))
        }))
    }

    fn delete_version<'a>(&'a self, table: &'a str, k: &'a [u8], version: u64) -> StateFuture<'a, bool> {
        ready(self.with(table, |t| {
            let Some(versions) = t.versions.get_mut(&key(table, k)) else { return false };
            let Some(value) = versions.remove(&version) else { return false };
            if versions.is_empty() {
                t.versions.remove(&key(table, k));
            }
            t.unsynced.push(Unsynced::Deleted(key(table, k), version, value));
            true
        }))
    }

    fn sync(&self) -> StateFuture<'_, ()> {
        let mut t = self.tables.lock().expect("not poisoned");
        if t.refuse_syncs {
            return ready(Err(super::StateError::Backend { backend: "memory", message: "sync refused".into() }));
        }
        t.unsynced.clear();
        ready(Ok(()))
    }

    fn put_if_newer<'a>(&'a self, table: &'a str, k: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool> {
        ready(self.with(table, |t| {
            t.synced_write();
            let entry = t.latest.entry(key(table, k));
            match entry {
                std::collections::btree_map::Entry::Occupied(mut e) if e.get().0 < version => {
                    let old = e.insert((version, value));
                    if old.0.cursor < version.cursor {
                        t.replaced.entry(key(table, k)).or_default().insert(version.cursor, old);
                    }
                    true
                }
                std::collections::btree_map::Entry::Occupied(_) => false,
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert((version, value));
                    true
                }
            }
        }))
    }

    fn put_latest<'a>(&'a self, table: &'a str, k: &'a [u8], value: Value) -> StateFuture<'a, ()> {
        ready(self.with(table, |t| {
            t.synced_write();
            t.latest.insert(key(table, k), (Version::ZERO, value));
        }))
    }

    fn get_latest<'a>(&'a self, table: &'a str, k: &'a [u8]) -> StateFuture<'a, Option<(Version, Value)>> {
        ready(self.with(table, |t| t.latest.get(&key(table, k)).cloned()))
    }

    fn get_latest_at<'a>(&'a self, table: &'a str, k: &'a [u8], at: u64) -> StateFuture<'a, Option<(Version, Value)>> {
        ready(self.with(table, |t| {
            let k = key(table, k);
            match t.latest.get(&k) {
                Some(entry) if entry.0.cursor <= at => Some(entry.clone()),
                Some(_) => {
                    let replaced = t.replaced.get(&k)?;
                    let (_, old) = replaced.range((Bound::Excluded(at), Bound::Unbounded)).next()?;
                    (old.0.cursor <= at).then(|| old.clone())
                }
                None => None,
            }
        }))
    }

    fn trim_replaced<'a>(&'a self, table: &'a str, floor: u64) -> StateFuture<'a, u64> {
        ready(self.with(table, |t| {
            let mut trimmed = 0;
            let from = (table.to_string(), Bytes::new());
            for ((tbl, _), replaced) in t.replaced.range_mut(from..) {
                if tbl != table {
                    break;
                }
                let before = replaced.len();
                replaced.retain(|superseded, _| *superseded > floor);
                trimmed += (before - replaced.len()) as u64;
            }
            t.replaced.retain(|_, replaced| !replaced.is_empty());
            trimmed
        }))
    }

    fn list_keys<'a>(
        &'a self,
        table: &'a str,
        family: Family,
        after: Option<&'a [u8]>,
        limit: usize,
    ) -> StateFuture<'a, Vec<Bytes>> {
        ready(self.with(table, |t| match family {
            Family::Versions => keys_after(&t.versions, table, after, limit),
            Family::Latest => keys_after(&t.latest, table, after, limit),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_the_conformance_suite() {
        // One store for every case: the suite's cases use tables of their own, and
        // "reopening" the in-memory store keeps its contents, as a durable store would.
        let store = std::sync::Arc::new(MemStateStore::new());
        futures_util::FutureExt::now_or_never(crate::conformance::run_all(|| {
            let store = store.clone();
            async move { Box::new(store) as Box<dyn StateStore> }
        }))
        .expect("the in-memory store never waits");
    }
}
