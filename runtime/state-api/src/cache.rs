//! [`VersionCache`]: a node's cache of stored versions' values, in front of its store.
//!
//! A read-optimized read looks up in the log which version of an object it sees, then
//! fetches exactly that version from the store. A version's value never changes while
//! it is stored (the first put wins), so the value fetched once serves every later read
//! of that version on this node, with no check against the store:
//!
//! ```text
//!   get_version(t, k, v) ──► cached? ──yes──► value
//!                               │no
//!                               └──► store.get_version ──► cache it ──► value
//!   put_version(t, k, v, x) ──► store.put_version ──stored it──► cache x
//!   delete_version(t, k, v) ──► drop (t, k, v) here ──► store.delete_version
//! ```
//!
//! A put caches its value only when the store says this put stored it; a put that
//! found the version keeps the stored value, which may differ (a re-execution of a
//! guest that is not deterministic). A delete by another node leaves this node's copy,
//! which is still the value that version had: the protocols delete a version only once
//! no reader can ask for it (garbage collection of superseded versions), and never put
//! it again, since a version is derived from an instance ID and a step that logged its
//! write. Every other operation passes straight through.
//!
//! The cache holds up to `bytes_max` of keys and values (every node's store sits behind
//! one of `[state] version_cache_bytes`, 32 MiB by default), evicting with CLOCK (a
//! second chance for an entry read since the hand last passed it), in 8 shards with a
//! lock each.

use std::collections::hash_map::{Entry, HashMap};
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use super::{Family, LatestPut, StateFuture, StateStore, Value, Version, VersionPut};

const SHARDS: usize = 8;
/// What an entry costs beyond its key and value: the map slot, the clock slot, the
/// allocations' headers.
const ENTRY_OVERHEAD: usize = 96;

/// A [`StateStore`] that caches versions' values in front of another one.
pub struct VersionCache {
    inner: Arc<dyn StateStore>,
    hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
    shard_bytes_max: usize,
}

#[derive(Default)]
struct Shard {
    /// By the hash of (table, key, version); `id` tells entries with one hash apart.
    entries: HashMap<u64, Cached>,
    /// The clock: hashes in insertion order, the hand at the front.
    clock: VecDeque<u64>,
    bytes: usize,
}

struct Cached {
    /// table, NUL, key, version (big-endian): unique, since tables hold no NUL.
    id: Box<[u8]>,
    value: Value,
    referenced: bool,
}

impl Cached {
    fn bytes(&self) -> usize {
        self.id.len() + self.value.as_ref().map_or(0, Bytes::len) + ENTRY_OVERHEAD
    }
}

fn id_matches(id: &[u8], table: &str, key: &[u8], version: u64) -> bool {
    let (t, rest) = id.split_at(table.len().min(id.len()));
    t == table.as_bytes()
        && rest.len() == 1 + key.len() + 8
        && rest[0] == 0
        && &rest[1..1 + key.len()] == key
        && rest[1 + key.len()..] == version.to_be_bytes()
}

impl VersionCache {
    /// Caches up to `bytes_max` (0: nothing, every call goes to `inner`).
    pub fn new(inner: Arc<dyn StateStore>, bytes_max: usize) -> VersionCache {
        VersionCache {
            inner,
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_bytes_max: bytes_max / SHARDS,
        }
    }

    fn hash(&self, table: &str, key: &[u8], version: u64) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(table.as_bytes());
        h.write_u8(0);
        h.write(key);
        h.write_u64(version);
        h.finish()
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        // The low bits pick the map's bucket; the top ones the shard.
        let shard = &self.shards[(hash >> 61) as usize % SHARDS];
        shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lookup(&self, table: &str, key: &[u8], version: u64) -> Option<Value> {
        let hash = self.hash(table, key, version);
        let mut shard = self.shard(hash);
        let cached = shard.entries.get_mut(&hash).filter(|c| id_matches(&c.id, table, key, version))?;
        cached.referenced = true;
        Some(cached.value.clone())
    }

    fn insert(&self, table: &str, key: &[u8], version: u64, value: Value) {
        let mut id = Vec::with_capacity(table.len() + 1 + key.len() + 8);
        id.extend_from_slice(table.as_bytes());
        id.push(0);
        id.extend_from_slice(key);
        id.extend_from_slice(&version.to_be_bytes());
        let cached = Cached { id: id.into_boxed_slice(), value, referenced: false };
        let bytes = cached.bytes();
        if bytes > self.shard_bytes_max {
            return;
        }
        let hash = self.hash(table, key, version);
        let mut shard = self.shard(hash);
        let shard = &mut *shard;
        match shard.entries.entry(hash) {
            // Another entry with the same hash (or this one, cached by a racing read):
            // the newer takes its place, and its clock slot.
            Entry::Occupied(mut slot) => {
                shard.bytes -= slot.get().bytes();
                slot.insert(cached);
            }
            Entry::Vacant(slot) => {
                slot.insert(cached);
                shard.clock.push_back(hash);
            }
        }
        shard.bytes += bytes;
        while shard.bytes > self.shard_bytes_max {
            let Some(hand) = shard.clock.pop_front() else { break };
            let Entry::Occupied(mut slot) = shard.entries.entry(hand) else { continue };
            if std::mem::take(&mut slot.get_mut().referenced) {
                shard.clock.push_back(hand);
            } else {
                shard.bytes -= slot.remove().bytes();
            }
        }
    }

    fn remove(&self, table: &str, key: &[u8], version: u64) {
        let hash = self.hash(table, key, version);
        let mut shard = self.shard(hash);
        if let Entry::Occupied(slot) = shard.entries.entry(hash) {
            if id_matches(&slot.get().id, table, key, version) {
                let removed = slot.remove();
                shard.bytes -= removed.bytes();
                // Its clock slot stays until the hand passes it, which skips it.
            }
        }
    }

    /// Entries cached now and the bytes they count for.
    #[cfg(test)]
    fn usage(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock().unwrap();
            (n + s.entries.len(), b + s.bytes)
        })
    }
}

impl StateStore for VersionCache {
    fn put_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64, value: Value) -> StateFuture<'a, bool> {
        Box::pin(async move {
            let stored = self.inner.put_version(table, key, version, value.clone()).await?;
            if stored && self.shard_bytes_max > 0 {
                self.insert(table, key, version, value);
            }
            Ok(stored)
        })
    }

    fn put_versions<'a>(&'a self, puts: Vec<VersionPut>, durable: bool) -> StateFuture<'a, Vec<bool>> {
        Box::pin(async move {
            // Markers, and versions put without durability, are not read (their values
            // travel elsewhere): they would only push out ones that are.
            let cached = (durable && self.shard_bytes_max > 0).then(|| puts.clone());
            let stored = self.inner.put_versions(puts, durable).await?;
            if let Some(puts) = cached {
                for (p, _) in puts.into_iter().zip(&stored).filter(|(p, &stored)| stored && !p.marker) {
                    self.insert(&p.table, &p.key, p.version, p.value);
                }
            }
            Ok(stored)
        })
    }

    fn get_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(u64, Value)>> {
        self.inner.get_at(table, key, at)
    }

    fn get_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, Option<Value>> {
        Box::pin(async move {
            if let Some(value) = self.lookup(table, key, version) {
                return Ok(Some(value));
            }
            let found = self.inner.get_version(table, key, version).await?;
            if let (Some(value), true) = (&found, self.shard_bytes_max > 0) {
                self.insert(table, key, version, value.clone());
            }
            Ok(found)
        })
    }

    fn delete_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, bool> {
        self.remove(table, key, version);
        self.inner.delete_version(table, key, version)
    }

    fn delete_versions<'a>(&'a self, table: &'a str, key: &'a [u8], versions: Vec<u64>) -> StateFuture<'a, u64> {
        for &version in &versions {
            self.remove(table, key, version);
        }
        self.inner.delete_versions(table, key, versions)
    }

    fn sync(&self) -> StateFuture<'_, ()> {
        self.inner.sync()
    }

    fn put_if_newer<'a>(&'a self, table: &'a str, key: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool> {
        self.inner.put_if_newer(table, key, version, value)
    }

    fn put_if_newer_all<'a>(&'a self, puts: &'a [LatestPut]) -> StateFuture<'a, ()> {
        self.inner.put_if_newer_all(puts)
    }

    fn put_latest<'a>(&'a self, table: &'a str, key: &'a [u8], value: Value) -> StateFuture<'a, ()> {
        self.inner.put_latest(table, key, value)
    }

    fn get_latest<'a>(&'a self, table: &'a str, key: &'a [u8]) -> StateFuture<'a, Option<(Version, Value)>> {
        self.inner.get_latest(table, key)
    }

    fn get_latest_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(Version, Value)>> {
        self.inner.get_latest_at(table, key, at)
    }

    fn trim_replaced<'a>(&'a self, table: &'a str, floor: u64) -> StateFuture<'a, u64> {
        self.inner.trim_replaced(table, floor)
    }

    fn list_keys<'a>(
        &'a self,
        table: &'a str,
        family: Family,
        after: Option<&'a [u8]>,
        limit: usize,
    ) -> StateFuture<'a, Vec<Bytes>> {
        self.inner.list_keys(table, family, after, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemStateStore;

    fn val(s: &str) -> Value {
        Some(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// The in-memory store never waits, and so neither does the cache in front of it.
    fn now<T>(f: impl std::future::Future<Output = T>) -> T {
        futures_util::FutureExt::now_or_never(f).expect("the in-memory store never waits")
    }

    #[test]
    fn passes_the_conformance_suite() {
        let inner = Arc::new(MemStateStore::new());
        now(crate::conformance::run_all(|| {
            let inner = inner.clone();
            async move { Box::new(VersionCache::new(inner, 1 << 20)) as Box<dyn StateStore> }
        }));
    }

    /// A version deleted and put again behind the cache's back is not what the
    /// protocols do; here it shows that reads are served from the cache.
    #[test]
    fn serves_a_version_it_has_seen_without_the_store() {
        let inner = Arc::new(MemStateStore::new());
        let cache = VersionCache::new(inner.clone(), 1 << 20);
        assert!(now(cache.put_version("t", b"k", 1, val("a"))).unwrap());
        now(inner.delete_version("t", b"k", 1)).unwrap();
        now(inner.put_version("t", b"k", 1, val("b"))).unwrap();
        assert_eq!(now(cache.get_version("t", b"k", 1)).unwrap(), Some(val("a")), "cached at the put");
        // A put that finds the version caches nothing: the stored value may differ.
        now(inner.put_version("t", b"k", 2, val("stored"))).unwrap();
        assert!(!now(cache.put_version("t", b"k", 2, val("mine"))).unwrap());
        assert_eq!(now(cache.get_version("t", b"k", 2)).unwrap(), Some(val("stored")));
        // A delete through the cache drops its copy.
        assert!(now(cache.delete_version("t", b"k", 2)).unwrap());
        assert_eq!(now(cache.get_version("t", b"k", 2)).unwrap(), None);
        // Where table and key meet is part of the entry.
        assert!(now(cache.put_version("ta", b"b", 3, val("x"))).unwrap());
        assert_eq!(now(cache.get_version("t", b"ab", 3)).unwrap(), None);
    }

    #[test]
    fn stays_within_its_bytes_and_keeps_what_is_read() {
        let bytes_max = SHARDS * 4_096;
        let cache = VersionCache::new(Arc::new(MemStateStore::new()), bytes_max);
        let value = Some(Bytes::from(vec![7u8; 100]));
        assert!(now(cache.put_version("t", b"hot", 0, value.clone())).unwrap());
        for version in 1..2_000u64 {
            now(cache.put_version("t", b"k", version, value.clone())).unwrap();
            // Read between puts, the hot entry gets a second chance every time.
            assert_eq!(now(cache.get_version("t", b"hot", 0)).unwrap(), Some(value.clone()));
            let (_, bytes) = cache.usage();
            assert!(bytes <= bytes_max, "{bytes} bytes cached, over {bytes_max}");
        }
        let (entries, _) = cache.usage();
        assert!(entries > bytes_max / 300, "the cache holds {entries} entries");
        let hot = cache.hash("t", b"hot", 0);
        assert!(cache.shard(hot).entries.contains_key(&hot), "an entry read between puts stays");
        // Nothing is cached with no room.
        let none = VersionCache::new(Arc::new(MemStateStore::new()), 0);
        now(none.put_version("t", b"k", 1, value.clone())).unwrap();
        assert_eq!(now(none.get_version("t", b"k", 1)).unwrap(), Some(value));
        assert_eq!(none.usage(), (0, 0));
    }
}
