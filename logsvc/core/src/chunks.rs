//! A double-ended queue in fixed-size, packed chunks, for the index's rows, which grow
//! at the back and shrink at the front and hold every live record of a book.
//!
//! A `VecDeque` doubles its buffer when full, so a large row holds up to twice the
//! memory its entries need (a quarter more on average), and the copy of each doubling
//! needs old and new buffers at once. Here the entries live in chunks of `CHUNK`: only
//! the first chunk (while it is the only one) grows, by doubling up to `CHUNK`, so a
//! small row stays small; every later chunk is allocated at its full size. The slack
//! is at most one chunk at the back and the consumed part of one at the front, whatever
//! the length, and a chunk is freed as soon as its last entry leaves the front.
//!
//! ```text
//!   chunks:  [ consumed | live ... ] [ live ... full ] [ live ... | free ]
//!              ^ head                                               ^ len ends here
//! ```
//!
//! Every chunk but the last is full (the back chunk is the only one that grows, and a
//! new one starts only when it is full), so entry `i` is at position `head + i` of the
//! chunks laid end to end: chunk `(head + i) / CHUNK`, offset `(head + i) % CHUNK`.
//!
//! Entries are stored packed ([`Pack`]): relative to what their chunk keeps once (its
//! first seqnum, the shards it has seen), in fewer bytes than the entry itself. An
//! entry that does not pack (a seqnum of a later term, a shard past the chunk's table)
//! is kept whole beside its chunk and marked in its place, so every entry keeps its
//! position and a lookup stays one computation and one read.
//!
//! Cold chunks: a full chunk that is not the last of its row can leave memory
//! ([`Chunks::spill`]): its packed entries go to a [`ColdStore`] (a scratch file on a
//! real node) and only its base, the first entry of each of its 16 blocks and its
//! escaped entries stay. Reading an entry of a spilled chunk reads its block into a
//! small cache ([`Cold`]); replacing one keeps the new value beside the chunk, as an
//! escaped entry, and the chunk is written again once it holds many. A search finds its
//! chunk by the chunks' first entries and its block by the blocks' first entries, so it
//! reads one block of one spilled chunk.
//!
//! A read loads its block through a cache of `CACHED_BLOCKS` blocks, and a spilled chunk is
//! written again once `OVERRIDES_MAX` replaced entries pile up beside it; a trim that kills
//! the front of a row pops its chunk without a write. The place of a chunk trimmed out of
//! its row is reused by size and, until then, freed (a real node punches it out of its
//! scratch file; the in-memory store scrambles it, so that a read of a freed place would
//! show). The last chunk of a row never spills.
//!
//! Tests and the simulator build the crate with 64-entry chunks (feature `testing`), and
//! simulated nodes spill every full chunk, a few, or none, by node: the oracle sees the
//! same log either way.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use crate::types::SeqNum;

/// Entries per chunk (a power of two; an offset in a chunk fits a `u16`). Tests and
/// the simulator use small chunks, so that their short rows fill and spill many.
#[cfg(not(any(test, feature = "testing")))]
const CHUNK_SHIFT: u32 = 12;
#[cfg(any(test, feature = "testing"))]
const CHUNK_SHIFT: u32 = 6;
const CHUNK: usize = 1 << CHUNK_SHIFT;

/// Replaced entries a spilled chunk keeps in memory before it is written again.
const OVERRIDES_MAX: usize = CHUNK / 16;

/// Entries per block, what is read of a spilled chunk at once; the chunk keeps the
/// first entry of each block in memory, so a search reads one block.
const BLOCK: usize = CHUNK / 16;

/// Blocks of spilled chunks [`Cold`] keeps read in memory.
const CACHED_BLOCKS: usize = 32;

/// How an entry is stored in a chunk.
pub(crate) trait Pack: Copy {
    /// What a chunk keeps once for all its entries; extended as entries are packed.
    type Base: Default + Debug;
    type Packed: Copy + Debug;

    /// `value` relative to `base`, which this may extend; `None` if it does not pack.
    fn pack(base: &mut Self::Base, value: &Self) -> Option<Self::Packed>;

    /// The place of an entry that did not pack.
    const ESCAPED: Self::Packed;

    /// The entry of a packed value (`None` for [`Pack::ESCAPED`]).
    fn unpack(base: &Self::Base, packed: Self::Packed) -> Option<Self>;

    /// Bytes of a packed value in a [`ColdStore`].
    const PACKED_BYTES: usize;

    fn to_bytes(packed: &Self::Packed, out: &mut [u8]);

    fn from_bytes(bytes: &[u8]) -> Self::Packed;
}

/// Where spilled chunks go: a byte array addressed by offset.
pub trait ColdStore: Send {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()>;

    /// Fills `out` with what was written at `offset`.
    fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()>;

    /// The `len` bytes at `offset` hold nothing any more (until written again): a
    /// store may give their space back. Best effort; nothing reads them before a write.
    fn discard(&mut self, _offset: u64, _len: usize) {}
}

/// A [`ColdStore`] in memory, for tests and the simulator.
#[derive(Default, Debug)]
pub struct MemColdStore(Vec<u8>);

impl ColdStore for MemColdStore {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        let (start, end) = (offset as usize, offset as usize + bytes.len());
        if self.0.len() < end {
            self.0.resize(end, 0);
        }
        self.0[start..end].copy_from_slice(bytes);
        Ok(())
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let bytes = self.0.get(offset as usize..offset as usize + out.len());
        out.copy_from_slice(bytes.ok_or_else(|| std::io::Error::other("read past the end"))?);
        Ok(())
    }

    /// Scrambles what was there, as a hole reads back zeros: an index that read a
    /// place it freed would find entries it never wrote, which tests and the
    /// simulator's oracle catch.
    fn discard(&mut self, offset: u64, len: usize) {
        let end = (offset as usize + len).min(self.0.len());
        for b in self.0.get_mut(offset as usize..end).unwrap_or_default() {
            *b = 0xA5;
        }
    }
}

/// What the rows of one index share for their cold chunks: the store and its free
/// space, the bytes of full chunks still in memory, and a cache of spilled chunks read.
#[derive(Default)]
pub(crate) struct Cold {
    store: Option<Box<dyn ColdStore>>,
    /// Bytes of full, resident chunks that are not the last of their row.
    pub(crate) resident: usize,
    /// The end of the store's used space, and the places freed there, by size.
    end: u64,
    free: HashMap<usize, Vec<u64>>,
    /// Blocks of spilled chunks read lately (offset, bytes), the most recent last.
    cache: RefCell<VecDeque<(u64, Box<[u8]>)>>,
}

impl Debug for Cold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cold").field("resident", &self.resident).field("end", &self.end).finish_non_exhaustive()
    }
}

impl Cold {
    pub(crate) fn new(store: Box<dyn ColdStore>) -> Cold {
        Cold { store: Some(store), ..Cold::default() }
    }

    pub(crate) fn can_spill(&self) -> bool {
        self.store.is_some()
    }

    /// Bytes of the store in use.
    #[cfg(test)]
    pub(crate) fn spilled_bytes(&self) -> u64 {
        self.end - self.free.iter().map(|(&size, places)| (size * places.len()) as u64).sum::<u64>()
    }

    /// Writes `bytes` in a free place of their size; returns it.
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<u64> {
        let store = self.store.as_mut().ok_or_else(|| std::io::Error::other("no cold store"))?;
        let reused = self.free.get_mut(&bytes.len()).and_then(Vec::pop);
        let offset = reused.unwrap_or(self.end);
        match store.write_at(offset, bytes) {
            Ok(()) => {
                if reused.is_none() {
                    self.end += bytes.len() as u64;
                }
                Ok(offset)
            }
            Err(e) => {
                if let Some(offset) = reused {
                    self.release(offset, bytes.len());
                }
                Err(e)
            }
        }
    }

    fn rewrite(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        let store = self.store.as_mut().ok_or_else(|| std::io::Error::other("no cold store"))?;
        let written = store.write_at(offset, bytes);
        self.forget(offset, bytes.len());
        written
    }

    fn release(&mut self, offset: u64, len: usize) {
        self.forget(offset, len);
        if let Some(store) = self.store.as_mut() {
            store.discard(offset, len);
        }
        self.free.entry(len).or_default().push(offset);
    }

    /// Drops the cached blocks of the `len` bytes at `offset`.
    fn forget(&mut self, offset: u64, len: usize) {
        self.cache.get_mut().retain(|c| c.0 < offset || c.0 >= offset + len as u64);
    }

    /// The `len` bytes at `offset`.
    fn read(&self, offset: u64, len: usize) -> Box<[u8]> {
        let mut bytes = vec![0; len].into_boxed_slice();
        let store = self.store.as_ref().expect("a spilled chunk has a store");
        if let Err(e) = store.read_at(offset, &mut bytes) {
            // The index cannot go on without its entries; a restarted node rebuilds it
            // from the log.
            panic!("the index's cold store failed to read {len} bytes at {offset}: {e}");
        }
        bytes
    }

    /// `f` of the `len` bytes spilled at `offset`, read through the cache.
    fn with<R>(&self, offset: u64, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let mut cache = self.cache.borrow_mut();
        match cache.iter().position(|c| c.0 == offset) {
            Some(i) => {
                let hit = cache.remove(i).expect("found");
                cache.push_back(hit);
            }
            None => {
                let bytes = self.read(offset, len);
                if cache.len() >= CACHED_BLOCKS {
                    cache.pop_front();
                }
                cache.push_back((offset, bytes));
            }
        }
        f(&cache.back().expect("just placed").1)
    }
}

#[derive(Debug)]
struct Chunk<T: Pack> {
    base: T::Base,
    /// Empty while the chunk is spilled.
    packed: Vec<T::Packed>,
    /// The entries that did not pack, by offset, ascending; for a spilled chunk, also
    /// the entries replaced since it was written.
    escaped: Vec<(u16, T)>,
    /// Where the packed entries are while spilled, and the first entry of each block.
    spilled: Option<(u64, Box<[T]>)>,
}

impl<T: Pack> Chunk<T> {
    fn with_capacity(n: usize) -> Self {
        Chunk { base: T::Base::default(), packed: Vec::with_capacity(n), escaped: Vec::new(), spilled: None }
    }

    /// Entries held, spilled or not.
    fn len(&self) -> usize {
        if self.spilled.is_some() {
            CHUNK
        } else {
            self.packed.len()
        }
    }

    fn push(&mut self, value: T) {
        let at = self.packed.len() as u16;
        match T::pack(&mut self.base, &value) {
            Some(p) => self.packed.push(p),
            None => {
                self.packed.push(T::ESCAPED);
                self.escaped.push((at, value));
            }
        }
    }

    fn escaped(&self, at: usize) -> Option<T> {
        self.escaped.binary_search_by_key(&(at as u16), |e| e.0).ok().map(|i| self.escaped[i].1)
    }

    fn get(&self, at: usize, cold: &Cold) -> T {
        if let Some((offset, fences)) = &self.spilled {
            if let Some(value) = self.escaped(at) {
                return value;
            }
            if at.is_multiple_of(BLOCK) {
                return fences[at / BLOCK];
            }
            let block = at / BLOCK * BLOCK;
            let block_at = offset + (block * T::PACKED_BYTES) as u64;
            let packed =
                cold.with(block_at, BLOCK * T::PACKED_BYTES, |bytes| T::from_bytes(&bytes[(at - block) * T::PACKED_BYTES..]));
            return T::unpack(&self.base, packed).expect("a spilled entry that did not pack is kept in memory");
        }
        T::unpack(&self.base, self.packed[at]).unwrap_or_else(|| self.escaped(at).expect("an escaped entry is kept"))
    }

    fn set(&mut self, at: usize, value: T, cold: &mut Cold) {
        let key = at as u16;
        match self.escaped.binary_search_by_key(&key, |e| e.0) {
            Ok(i) => self.escaped[i].1 = value,
            Err(i) if self.spilled.is_some() => {
                self.escaped.insert(i, (key, value));
                if self.escaped.len() > OVERRIDES_MAX {
                    self.rewrite(cold);
                }
            }
            Err(i) => match T::pack(&mut self.base, &value) {
                Some(p) => self.packed[at] = p,
                None => {
                    self.packed[at] = T::ESCAPED;
                    self.escaped.insert(i, (key, value));
                }
            },
        }
        if let Some((_, fences)) = self.spilled.as_mut().filter(|_| at.is_multiple_of(BLOCK)) {
            fences[at / BLOCK] = value;
        }
    }

    /// The packed entries as the store holds them.
    fn bytes(&self) -> Vec<u8> {
        let mut bytes = vec![0; self.packed.len() * T::PACKED_BYTES];
        for (p, out) in self.packed.iter().zip(bytes.chunks_exact_mut(T::PACKED_BYTES)) {
            T::to_bytes(p, out);
        }
        bytes
    }

    /// Writes a spilled chunk again with the replaced entries that pack; the rest stay
    /// in memory (all of them if the write fails).
    fn rewrite(&mut self, cold: &mut Cold) {
        let Some((offset, _)) = self.spilled else { return };
        let mut bytes = cold.read(offset, CHUNK * T::PACKED_BYTES);
        let mut kept = Vec::new();
        for &(at, value) in &self.escaped {
            match T::pack(&mut self.base, &value) {
                Some(p) => T::to_bytes(&p, &mut bytes[usize::from(at) * T::PACKED_BYTES..]),
                None => kept.push((at, value)),
            }
        }
        match cold.rewrite(offset, &bytes) {
            Ok(()) => self.escaped = kept,
            Err(e) => tracing::warn!(error = %e, "the index's cold store failed a write; replaced entries stay in memory"),
        }
    }
}

pub(crate) struct Chunks<T: Pack> {
    chunks: VecDeque<Chunk<T>>,
    /// Entries of the first chunk that already left the front.
    head: usize,
    len: usize,
    /// Chunks that left the front: the chunk at `chunks[i]` is number `dropped + i`.
    dropped: u64,
}

impl<T: Pack> Default for Chunks<T> {
    fn default() -> Self {
        Chunks { chunks: VecDeque::new(), head: 0, len: 0, dropped: 0 }
    }
}

impl<T: Pack + Debug> Debug for Chunks<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunks").field("len", &self.len).field("chunks", &self.chunks.len()).finish()
    }
}

/// Bytes of a full chunk of `T` in memory.
fn chunk_bytes<T: Pack>() -> usize {
    CHUNK * size_of::<T::Packed>()
}

impl<T: Pack> Chunks<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends `value`; returns the number of the chunk that filled up and is no longer
    /// the last (which may be spilled from now on), if one did and `cold` has a store
    /// to spill it to.
    pub(crate) fn push_back(&mut self, value: T, cold: &mut Cold) -> Option<u64> {
        let mut sealed = None;
        match self.chunks.back_mut() {
            Some(last) if last.len() < CHUNK => {
                if last.packed.len() == last.packed.capacity() {
                    // Only a first chunk grows: by doubling, never past CHUNK.
                    let grown = (last.packed.capacity() * 2).clamp(4, CHUNK);
                    last.packed.reserve_exact(grown - last.packed.len());
                }
                last.push(value);
            }
            _ => {
                if !self.chunks.is_empty() {
                    cold.resident += chunk_bytes::<T>();
                    sealed = Some(self.dropped + self.chunks.len() as u64 - 1);
                }
                let mut chunk = Chunk::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                chunk.push(value);
                self.chunks.push_back(chunk);
            }
        }
        self.len += 1;
        sealed.filter(|_| cold.can_spill())
    }

    pub(crate) fn front(&self, cold: &Cold) -> Option<T> {
        self.get(0, cold)
    }

    pub(crate) fn pop_front(&mut self, cold: &mut Cold) -> Option<T> {
        let value = self.front(cold)?;
        self.drain_front(1, cold);
        Some(value)
    }

    /// Removes the first `n` entries (all of them if there are fewer).
    pub(crate) fn drain_front(&mut self, n: usize, cold: &mut Cold) {
        let mut n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let first = self.chunks.front().expect("entries left are in chunks").len();
            let available = first - self.head;
            if n < available {
                self.head += n;
                return;
            }
            n -= available;
            let gone = self.chunks.pop_front().expect("entries left are in chunks");
            match gone.spilled {
                Some((offset, _)) => cold.release(offset, CHUNK * T::PACKED_BYTES),
                // It was full and not the last, unless no chunk is left.
                None if !self.chunks.is_empty() => cold.resident -= chunk_bytes::<T>(),
                None => {}
            }
            self.dropped += 1;
            self.head = 0;
        }
    }

    /// Moves chunk number `no` out of memory, if it is resident, full and not the
    /// last. Returns whether it was written (a failed write leaves it resident).
    pub(crate) fn spill(&mut self, no: u64, cold: &mut Cold) -> std::io::Result<bool> {
        let Some(i) = no.checked_sub(self.dropped).map(|i| i as usize) else { return Ok(false) };
        if i + 1 >= self.chunks.len() || self.chunks[i].spilled.is_some() || !cold.can_spill() {
            return Ok(false);
        }
        let chunk = &mut self.chunks[i];
        let fences = (0..CHUNK).step_by(BLOCK).map(|at| chunk.get(at, cold)).collect();
        let offset = cold.put(&chunk.bytes())?;
        chunk.packed = Vec::new();
        chunk.spilled = Some((offset, fences));
        cold.resident -= chunk_bytes::<T>();
        Ok(true)
    }

    fn place(&self, i: usize) -> (usize, usize) {
        let at = self.head + i;
        (at >> CHUNK_SHIFT, at & (CHUNK - 1))
    }

    pub(crate) fn get(&self, i: usize, cold: &Cold) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let (chunk, at) = self.place(i);
        Some(self.chunks[chunk].get(at, cold))
    }

    /// Replaces entry `i` (which must exist).
    pub(crate) fn set(&mut self, i: usize, value: T, cold: &mut Cold) {
        assert!(i < self.len, "index {i} out of a row of {}", self.len);
        let (chunk, at) = self.place(i);
        self.chunks[chunk].set(at, value, cold);
    }

    /// The number of entries from the front for which `pred` holds, given that it holds
    /// for a prefix (as `slice::partition_point`). The chunk is found by the first
    /// entries of the chunks, so only one spilled chunk is read.
    pub(crate) fn partition_point(&self, mut pred: impl FnMut(&T) -> bool, cold: &Cold) -> usize {
        // The first chunk from the second on whose first entry fails `pred`: the point
        // is in the chunk before it.
        let (mut lo, mut hi) = (1, self.chunks.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(&self.chunks[mid].get(0, cold)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let start = ((lo - 1) << CHUNK_SHIFT).saturating_sub(self.head);
        let end = ((lo << CHUNK_SHIFT) - self.head).min(self.len);
        let (mut lo, mut hi) = (start, end);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(&self.get(mid, cold).expect("mid < len")) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// As `slice::binary_search_by_key`, for entries sorted by `key`.
    pub(crate) fn binary_search_by_key<K: Ord>(&self, key: &K, mut f: impl FnMut(&T) -> K, cold: &Cold) -> Result<usize, usize> {
        let i = self.partition_point(|e| f(e) < *key, cold);
        match self.get(i, cold) {
            Some(e) if f(&e) == *key => Ok(i),
            _ => Err(i),
        }
    }

    /// The entries at the positions of `range`, in order (and reversible).
    pub(crate) fn range<'a>(&'a self, range: impl RangeBounds<usize>, cold: &'a Cold) -> impl DoubleEndedIterator<Item = T> + 'a {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e + 1,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        (start.min(self.len)..end.min(self.len)).map(move |i| self.get(i, cold).expect("i < len"))
    }

    pub(crate) fn iter<'a>(&'a self, cold: &'a Cold) -> impl DoubleEndedIterator<Item = T> + 'a {
        self.range(.., cold)
    }

    /// Numbers of the chunks that may be spilled (full and not the last).
    pub(crate) fn sealed(&self) -> std::ops::Range<u64> {
        self.dropped..self.dropped + self.chunks.len().saturating_sub(1) as u64
    }

    /// [`Chunks::sealed`] if `cold` has a store to spill them to, else none.
    pub(crate) fn spillable(&self, cold: &Cold) -> std::ops::Range<u64> {
        if cold.can_spill() {
            self.sealed()
        } else {
            0..0
        }
    }
}

impl<T: Pack> Chunks<T> {
    /// A row of `values`, all resident (their sealed chunks count in `cold.resident`).
    pub(crate) fn collect(values: impl IntoIterator<Item = T>, cold: &mut Cold) -> Self {
        let mut out = Chunks::default();
        for value in values {
            out.push_back(value, cold);
        }
        out
    }
}

/// A value as its distance past the chunk's first one, in 32 bits; `u32::MAX` marks an
/// escaped entry.
pub(crate) fn pack_delta(base: &mut Option<u64>, value: u64) -> Option<u32> {
    let delta = value.checked_sub(*base.get_or_insert(value))?;
    u32::try_from(delta).ok().filter(|&d| d != u32::MAX)
}

/// The value `pack_delta` packed (`None` for an escaped entry).
pub(crate) fn unpack_delta(base: Option<u64>, packed: u32) -> Option<u64> {
    (packed != u32::MAX).then(|| base.expect("a packed entry sets its chunk's base") + u64::from(packed))
}

/// Seqnums in a row: 4 bytes each, 8 unpacked.
impl Pack for SeqNum {
    type Base = Option<u64>;
    type Packed = u32;
    const ESCAPED: u32 = u32::MAX;

    fn pack(base: &mut Option<u64>, value: &SeqNum) -> Option<u32> {
        pack_delta(base, value.0)
    }

    fn unpack(base: &Option<u64>, packed: u32) -> Option<SeqNum> {
        unpack_delta(*base, packed).map(SeqNum)
    }

    const PACKED_BYTES: usize = 4;

    fn to_bytes(packed: &u32, out: &mut [u8]) {
        out[..4].copy_from_slice(&packed.to_le_bytes());
    }

    fn from_bytes(bytes: &[u8]) -> u32 {
        u32::from_le_bytes(bytes[..4].try_into().expect("four bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value step: mostly small, sometimes past what a chunk packs, sometimes back.
    fn step(r: u64) -> u64 {
        match r % 1000 {
            0 => 1 << 33,
            1 => u64::from(u32::MAX) - 1,
            _ => 1 + r % 3,
        }
    }

    /// What `cold` counts for `chunks`, against what the chunks hold.
    fn check_accounting(chunks: &Chunks<SeqNum>, cold: &Cold) {
        let n = chunks.chunks.len();
        let resident = chunks.chunks.iter().take(n.saturating_sub(1)).filter(|c| c.spilled.is_none()).count();
        assert_eq!(cold.resident, resident * chunk_bytes::<SeqNum>(), "resident bytes of full chunks");
        let spilled = chunks.chunks.iter().filter(|c| c.spilled.is_some()).count();
        assert_eq!(cold.spilled_bytes(), (spilled * CHUNK * 4) as u64, "store space in use");
        assert!(chunks.chunks.back().is_none_or(|c| c.spilled.is_none()), "the last chunk stays");
    }

    /// Random pushes, pops, drains, replacements and lookups, against a `VecDeque`
    /// doing the same: across chunk boundaries, down to empty and up again, with
    /// entries that pack and entries that do not, and, with a cold store, chunks
    /// spilled at random (replacements then pile up beside them and are written back).
    fn behaves_as_a_vecdeque(spill: bool) {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cold = if spill { Cold::new(Box::new(MemColdStore::default())) } else { Cold::default() };
        let mut chunks: Chunks<SeqNum> = Chunks::default();
        let mut model: VecDeque<SeqNum> = VecDeque::new();
        let mut value = 0u64;
        let mut spilled = 0;
        for step_no in 0..200_000 {
            match next() % 100 {
                0..=57 => {
                    value += step(next());
                    chunks.push_back(SeqNum(value), &mut cold);
                    model.push_back(SeqNum(value));
                }
                58..=59 => {
                    let sealed = chunks.sealed();
                    if !sealed.is_empty() {
                        let no = sealed.start + next() % (sealed.end - sealed.start);
                        spilled += usize::from(chunks.spill(no, &mut cold).expect("in memory"));
                    }
                }
                60..=77 => assert_eq!(chunks.pop_front(&mut cold), model.pop_front(), "step {step_no}"),
                78..=84 if !model.is_empty() => {
                    // A replacement by a value that packs in no chunk, and back.
                    let i = (next() % model.len() as u64) as usize;
                    let (old, far) = (model[i], SeqNum(model[i].0 | 1 << 63));
                    chunks.set(i, far, &mut cold);
                    assert_eq!(chunks.get(i, &cold), Some(far), "step {step_no}");
                    chunks.set(i, old, &mut cold);
                }
                85..=89 => {
                    let n = (next() % (2 * CHUNK as u64 + 10)) as usize;
                    chunks.drain_front(n, &mut cold);
                    model.drain(..n.min(model.len()));
                }
                _ => {
                    let key = SeqNum(next() % (value + 2));
                    let point = model.partition_point(|&v| v <= key);
                    assert_eq!(chunks.partition_point(|&v| v <= key, &cold), point);
                    assert_eq!(chunks.range(..point, &cold).next_back(), model.range(..point).next_back().copied());
                    assert_eq!(chunks.range(point.., &cold).next(), model.range(point..).next().copied());
                    assert_eq!(chunks.binary_search_by_key(&key, |&v| v, &cold), model.binary_search(&key), "step {step_no}");
                }
            }
            assert_eq!(chunks.len(), model.len(), "step {step_no}");
            assert_eq!(chunks.front(&cold), model.front().copied(), "step {step_no}");
            if step_no % 10_000 == 0 {
                assert!(chunks.iter(&cold).eq(model.iter().copied()), "step {step_no}");
                check_accounting(&chunks, &cold);
            }
        }
        assert!(chunks.iter(&cold).eq(model.iter().copied()));
        check_accounting(&chunks, &cold);
        assert_eq!(spilled > 10, spill, "{spilled} chunks spilled");
    }

    #[test]
    fn behaves_as_a_vecdeque_in_memory() {
        behaves_as_a_vecdeque(false);
    }

    #[test]
    fn behaves_as_a_vecdeque_with_chunks_spilled() {
        behaves_as_a_vecdeque(true);
    }

    /// A spilled chunk leaves only its base, its blocks' first entries and escaped
    /// entries in memory; a lookup reads one block; replacements are written back once they are many; a
    /// chunk that leaves the front frees its place in the store for the next one.
    #[test]
    fn a_spilled_chunk_is_read_through_the_cache_and_written_back() {
        let mut cold = Cold::new(Box::new(MemColdStore::default()));
        let mut chunks: Chunks<SeqNum> = Chunks::default();
        let rows = 4 * CHUNK as u64;
        for i in 0..rows {
            assert_eq!(chunks.push_back(SeqNum(10 * i), &mut cold).is_some(), i > 0 && i % CHUNK as u64 == 0);
        }
        assert_eq!(chunks.sealed(), 0..3);
        assert_eq!(cold.resident, 3 * chunk_bytes::<SeqNum>());
        for no in 0..3 {
            assert!(chunks.spill(no, &mut cold).unwrap());
        }
        assert!(!chunks.spill(3, &mut cold).unwrap(), "the last chunk stays");
        assert!(!chunks.spill(1, &mut cold).unwrap(), "spilled once");
        assert_eq!(cold.resident, 0);
        assert!(chunks.chunks.iter().take(3).all(|c| c.packed.capacity() == 0));
        let i = CHUNK + CHUNK / 3;
        assert_eq!(chunks.binary_search_by_key(&SeqNum(10 * i as u64), |&v| v, &cold), Ok(i));
        assert_eq!(chunks.binary_search_by_key(&SeqNum(10 * i as u64 + 1), |&v| v, &cold), Err(i + 1));
        assert_eq!(cold.cache.borrow().len(), 1, "one block read");
        for i in 0..(OVERRIDES_MAX as u64 + 1) {
            chunks.set(i as usize, SeqNum(10 * i + 1), &mut cold);
        }
        assert!(chunks.chunks[0].escaped.is_empty(), "written back");
        assert!(chunks
            .iter(&cold)
            .take(OVERRIDES_MAX + 2)
            .map(|s| s.0 % 10)
            .eq((0..OVERRIDES_MAX + 2).map(|i| u64::from(i <= OVERRIDES_MAX))));
        let used = cold.end;
        chunks.drain_front(CHUNK + 1, &mut cold);
        for i in rows..rows + CHUNK as u64 {
            chunks.push_back(SeqNum(10 * i), &mut cold);
        }
        assert!(chunks.spill(chunks.sealed().end - 1, &mut cold).unwrap());
        assert_eq!(cold.end, used, "the freed place is reused");
        assert!(chunks.iter(&cold).map(|s| s.0).eq((CHUNK as u64 + 1..rows + CHUNK as u64).map(|i| 10 * i)));
    }

    /// Without a store, full chunks stay resident (and counted) but none is offered
    /// for spilling, by an append or to an import.
    #[test]
    fn without_a_store_no_chunk_is_offered_for_spilling() {
        let mut cold = Cold::default();
        let mut chunks: Chunks<SeqNum> = Chunks::default();
        for i in 0..3 * CHUNK as u64 {
            assert_eq!(chunks.push_back(SeqNum(i), &mut cold), None);
        }
        assert_eq!(chunks.sealed(), 0..2);
        assert!(chunks.spillable(&cold).is_empty());
        assert_eq!(cold.resident, 2 * chunk_bytes::<SeqNum>());
        let stored = Cold::new(Box::new(MemColdStore::default()));
        assert_eq!(chunks.spillable(&stored), 0..2);
    }

    /// A store that fails every write: nothing is spilled, nothing is lost.
    #[test]
    fn a_failed_spill_keeps_the_chunk_in_memory() {
        struct Full;
        impl ColdStore for Full {
            fn write_at(&mut self, _: u64, _: &[u8]) -> std::io::Result<()> {
                Err(std::io::Error::other("disk full"))
            }
            fn read_at(&self, _: u64, _: &mut [u8]) -> std::io::Result<()> {
                unreachable!("nothing was written")
            }
        }
        let mut cold = Cold::new(Box::new(Full));
        let mut chunks: Chunks<SeqNum> = Chunks::default();
        for i in 0..2 * CHUNK as u64 {
            chunks.push_back(SeqNum(i), &mut cold);
        }
        assert!(chunks.spill(0, &mut cold).is_err());
        assert_eq!(cold.resident, chunk_bytes::<SeqNum>());
        assert!(chunks.iter(&cold).map(|s| s.0).eq(0..2 * CHUNK as u64));
    }

    /// Only the back chunk has room to spare, and a chunk whose entries all left the
    /// front is freed: what a long row holds stays within two chunks of its entries.
    #[test]
    fn holds_at_most_two_chunks_more_than_its_entries() {
        let mut cold = Cold::default();
        let mut chunks: Chunks<SeqNum> = Chunks::default();
        let held = |c: &Chunks<SeqNum>| c.chunks.iter().map(|c| c.packed.capacity()).sum::<usize>();
        for i in 0..(10 * CHUNK as u64 + 7) {
            chunks.push_back(SeqNum(i), &mut cold);
            assert!(held(&chunks) <= chunks.len() + CHUNK, "after {i}: {} held for {}", held(&chunks), chunks.len());
        }
        assert!(chunks.chunks.iter().all(|c| c.escaped.is_empty()), "consecutive seqnums all pack");
        for _ in 0..(5 * CHUNK + 3) {
            chunks.pop_front(&mut cold);
            assert!(held(&chunks) <= chunks.len() + 2 * CHUNK, "{} held for {}", held(&chunks), chunks.len());
        }
        chunks.drain_front(usize::MAX, &mut cold);
        assert_eq!((chunks.len(), held(&chunks)), (0, 0), "an empty row holds nothing");
        assert_eq!(cold.resident, 0);
        // A small row stays small.
        for i in 0..5 {
            chunks.push_back(SeqNum(i), &mut cold);
        }
        assert!(held(&chunks) <= 8, "{} held for 5 entries", held(&chunks));
    }

    /// A seqnum packs into half its size, and what does not pack (a later term, a
    /// value below the chunk's first) is kept whole.
    #[test]
    fn seqnums_pack_into_four_bytes_and_the_rest_is_kept_whole() {
        assert_eq!(size_of::<<SeqNum as Pack>::Packed>(), 4);
        let values = [5, 6, 5 + u64::from(u32::MAX), 7, 4, u64::MAX, 8];
        let cold = &mut Cold::default();
        let chunks = Chunks::collect(values.iter().map(|&v| SeqNum(v)), cold);
        assert!(chunks.iter(cold).eq(values.iter().map(|&v| SeqNum(v))));
        assert_eq!(chunks.chunks[0].escaped.len(), 3);
    }
}
