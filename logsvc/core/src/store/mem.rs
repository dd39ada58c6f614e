//! In-memory stores for the simulator and for tests. They model a disk that loses
//! unsynced writes on a crash ([`MemStore::crash`]); the metalog and controller stores
//! make every write durable at once, as their contracts ask.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{ControllerStore, MetalogStore, MetalogWrite, RecordStore, RecoveredRecord, StoredData};
use crate::config::Configuration;
use crate::error::Result;
use crate::message::{MetalogEntry, Record, RecordMeta};
use crate::types::{LocalId, Location, LogId, ShardId, Term};

#[derive(Clone, Debug)]
enum Op {
    Write(Location, Record),
    Reclaim(Location),
    Discard(ShardId, LocalId),
}

#[derive(Default)]
struct Inner {
    /// State as of the last sync.
    durable: BTreeMap<Location, StoredData>,
    /// Operations since, applied on top of `durable` for reads.
    pending: Vec<Op>,
    visible: BTreeMap<Location, StoredData>,
}

/// A [`RecordStore`] in memory, with a crash that forgets unsynced operations.
#[derive(Default)]
pub struct MemStore {
    inner: Mutex<Inner>,
}

fn apply(map: &mut BTreeMap<Location, StoredData>, op: &Op) {
    match op {
        Op::Write(loc, record) => {
            map.insert(*loc, StoredData::Record(record.clone()));
        }
        Op::Reclaim(loc) => {
            if let Some(StoredData::Record(r)) = map.get(loc) {
                let meta = r.meta.clone();
                map.insert(*loc, StoredData::Reclaimed(meta));
            }
        }
        Op::Discard(shard, from) => {
            let start = Location { shard: *shard, local_id: *from };
            let end = Location { shard: *shard, local_id: LocalId::MAX };
            let doomed: Vec<Location> = map.range(start..=end).map(|(l, _)| *l).collect();
            for l in doomed {
                map.remove(&l);
            }
        }
    }
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// Forgets every operation since the last sync, as a power failure would.
    pub fn crash(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.pending.clear();
        inner.visible = inner.durable.clone();
    }

    /// Whether the record at `location` would survive a crash now.
    pub fn is_durable(&self, location: Location) -> bool {
        self.inner.lock().unwrap().durable.contains_key(&location)
    }

    fn push(&self, op: Op) {
        let mut inner = self.inner.lock().unwrap();
        apply(&mut inner.visible, &op);
        inner.pending.push(op);
    }
}

impl RecordStore for MemStore {
    fn write(&self, records: &[(Location, Record)]) -> Result<()> {
        for (loc, record) in records {
            self.push(Op::Write(*loc, record.clone()));
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let mut inner = self.inner.lock().unwrap();
        let pending = std::mem::take(&mut inner.pending);
        for op in &pending {
            apply(&mut inner.durable, op);
        }
        Ok(())
    }

    fn read(&self, location: Location) -> Result<Option<StoredData>> {
        Ok(self.inner.lock().unwrap().visible.get(&location).cloned())
    }

    fn read_metas(&self, shard: ShardId, from: LocalId, to: LocalId) -> Result<Vec<RecordMeta>> {
        let inner = self.inner.lock().unwrap();
        let mut metas = Vec::new();
        for local_id in from..to {
            match inner.visible.get(&Location { shard, local_id }) {
                Some(StoredData::Record(r)) => metas.push(r.meta.clone()),
                Some(StoredData::Reclaimed(m)) => metas.push(m.clone()),
                None => break,
            }
        }
        Ok(metas)
    }

    fn reclaim(&self, locations: &[Location]) -> Result<()> {
        for loc in locations {
            self.push(Op::Reclaim(*loc));
        }
        Ok(())
    }

    fn discard(&self, shard: ShardId, from: LocalId) -> Result<()> {
        self.push(Op::Discard(shard, from));
        Ok(())
    }

    fn recover(&self) -> Result<Vec<RecoveredRecord>> {
        let inner = self.inner.lock().unwrap();
        Ok(inner
            .visible
            .iter()
            .map(|(loc, data)| match data {
                StoredData::Record(r) => RecoveredRecord { location: *loc, meta: r.meta.clone(), has_data: true },
                StoredData::Reclaimed(m) => RecoveredRecord { location: *loc, meta: m.clone(), has_data: false },
            })
            .collect())
    }
}

/// A [`MetalogStore`] in memory. A simulated sequencer crash keeps every write (the
/// kernel would); a power loss ([`MemMetalogStore::lose_unsynced`]) keeps the persisted
/// ones and a prefix of those written unsynced.
#[derive(Default)]
pub struct MemMetalogStore {
    /// Every write, and how many of them are durable.
    writes: Mutex<(Vec<MetalogWrite>, usize)>,
}

impl MemMetalogStore {
    pub fn new() -> MemMetalogStore {
        MemMetalogStore::default()
    }

    /// A power loss: the writes since the last sync are gone, or a prefix of them
    /// survives (`kept`, clamped).
    pub fn lose_unsynced(&self, kept: usize) {
        let mut w = self.writes.lock().unwrap();
        let keep = (w.1 + kept).min(w.0.len());
        w.0.truncate(keep);
        w.1 = keep;
    }
}

/// The entries `writes` leave for one metalog: the last one written at an index, unless
/// a later truncation dropped it.
fn held(writes: &[MetalogWrite], term: Term, log: LogId) -> BTreeMap<u64, MetalogEntry> {
    let mut held: BTreeMap<u64, MetalogEntry> = BTreeMap::new();
    for w in writes {
        match w {
            MetalogWrite::Entry(e) if (e.term, e.log) == (term, log) => {
                held.insert(e.index, e.clone());
            }
            MetalogWrite::Truncate { term: t, log: l, len } if (*t, *l) == (term, log) => {
                held.split_off(len);
            }
            _ => {}
        }
    }
    held
}

impl MetalogStore for MemMetalogStore {
    fn persist(&self, writes: &[MetalogWrite]) -> Result<()> {
        let mut w = self.writes.lock().unwrap();
        w.0.extend_from_slice(writes);
        w.1 = w.0.len();
        Ok(())
    }

    fn write_unsynced(&self, writes: &[MetalogWrite]) -> Result<()> {
        self.writes.lock().unwrap().0.extend_from_slice(writes);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let mut w = self.writes.lock().unwrap();
        w.1 = w.0.len();
        Ok(())
    }

    fn load(&self) -> Result<Vec<MetalogWrite>> {
        Ok(self.writes.lock().unwrap().0.clone())
    }

    fn read_entries(&self, term: Term, log: LogId, from: u64, to: u64) -> Result<Vec<MetalogEntry>> {
        let mut held = held(&self.writes.lock().unwrap().0, term, log);
        let mut entries = Vec::new();
        for index in from..to {
            let Some(e) = held.remove(&index) else { break };
            entries.push(e);
        }
        Ok(entries)
    }
}

/// A [`ControllerStore`] in memory. Every persist is durable at once, so a simulated
/// controller crash keeps it.
#[derive(Default)]
pub struct MemControllerStore {
    config: Mutex<Option<Configuration>>,
}

impl MemControllerStore {
    pub fn new() -> MemControllerStore {
        MemControllerStore::default()
    }
}

impl ControllerStore for MemControllerStore {
    fn persist(&self, config: &Configuration) -> Result<()> {
        *self.config.lock().unwrap() = Some(config.clone());
        Ok(())
    }

    fn load(&self) -> Result<Option<Configuration>> {
        Ok(self.config.lock().unwrap().clone())
    }
}
