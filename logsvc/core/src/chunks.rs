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

use std::collections::VecDeque;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use crate::types::SeqNum;

/// Entries per chunk (a power of two; an offset in a chunk fits a `u16`).
const CHUNK_SHIFT: u32 = 12;
const CHUNK: usize = 1 << CHUNK_SHIFT;

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
}

#[derive(Debug)]
struct Chunk<T: Pack> {
    base: T::Base,
    packed: Vec<T::Packed>,
    /// The entries that did not pack, by offset, ascending.
    escaped: Vec<(u16, T)>,
}

impl<T: Pack> Chunk<T> {
    fn with_capacity(n: usize) -> Self {
        Chunk { base: T::Base::default(), packed: Vec::with_capacity(n), escaped: Vec::new() }
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

    fn get(&self, at: usize) -> T {
        T::unpack(&self.base, self.packed[at]).unwrap_or_else(|| {
            let i = self.escaped.binary_search_by_key(&(at as u16), |e| e.0).expect("an escaped entry is kept");
            self.escaped[i].1
        })
    }

    fn set(&mut self, at: usize, value: T) {
        let key = at as u16;
        match self.escaped.binary_search_by_key(&key, |e| e.0) {
            Ok(i) => self.escaped[i].1 = value,
            Err(i) => match T::pack(&mut self.base, &value) {
                Some(p) => self.packed[at] = p,
                None => {
                    self.packed[at] = T::ESCAPED;
                    self.escaped.insert(i, (key, value));
                }
            },
        }
    }
}

pub(crate) struct Chunks<T: Pack> {
    chunks: VecDeque<Chunk<T>>,
    /// Entries of the first chunk that already left the front.
    head: usize,
    len: usize,
}

impl<T: Pack> Default for Chunks<T> {
    fn default() -> Self {
        Chunks { chunks: VecDeque::new(), head: 0, len: 0 }
    }
}

impl<T: Pack + Debug> Debug for Chunks<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Pack> Chunks<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push_back(&mut self, value: T) {
        match self.chunks.back_mut() {
            Some(last) if last.packed.len() < CHUNK => {
                if last.packed.len() == last.packed.capacity() {
                    // Only a first chunk grows: by doubling, never past CHUNK.
                    let grown = (last.packed.capacity() * 2).clamp(4, CHUNK);
                    last.packed.reserve_exact(grown - last.packed.len());
                }
                last.push(value);
            }
            _ => {
                let mut chunk = Chunk::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                chunk.push(value);
                self.chunks.push_back(chunk);
            }
        }
        self.len += 1;
    }

    pub(crate) fn front(&self) -> Option<T> {
        self.get(0)
    }

    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let value = self.front()?;
        self.drain_front(1);
        Some(value)
    }

    /// Removes the first `n` entries (all of them if there are fewer).
    pub(crate) fn drain_front(&mut self, n: usize) {
        let mut n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let first = self.chunks.front().expect("entries left are in chunks").packed.len();
            let available = first - self.head;
            if n < available {
                self.head += n;
                return;
            }
            n -= available;
            self.chunks.pop_front();
            self.head = 0;
        }
    }

    fn place(&self, i: usize) -> (usize, usize) {
        let at = self.head + i;
        (at >> CHUNK_SHIFT, at & (CHUNK - 1))
    }

    pub(crate) fn get(&self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let (chunk, at) = self.place(i);
        Some(self.chunks[chunk].get(at))
    }

    /// Replaces entry `i` (which must exist).
    pub(crate) fn set(&mut self, i: usize, value: T) {
        assert!(i < self.len, "index {i} out of a row of {}", self.len);
        let (chunk, at) = self.place(i);
        self.chunks[chunk].set(at, value);
    }

    /// The number of entries from the front for which `pred` holds, given that it holds
    /// for a prefix (as `slice::partition_point`).
    pub(crate) fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(&self.get(mid).expect("mid < len")) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// As `slice::binary_search_by_key`, for entries sorted by `key`.
    pub(crate) fn binary_search_by_key<K: Ord>(&self, key: &K, mut f: impl FnMut(&T) -> K) -> Result<usize, usize> {
        let i = self.partition_point(|e| f(e) < *key);
        match self.get(i) {
            Some(e) if f(&e) == *key => Ok(i),
            _ => Err(i),
        }
    }

    /// The entries at the positions of `range`, in order (and reversible).
    pub(crate) fn range(&self, range: impl RangeBounds<usize>) -> impl DoubleEndedIterator<Item = T> + '_ {
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
        (start.min(self.len)..end.min(self.len)).map(move |i| self.get(i).expect("i < len"))
    }

    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = T> + '_ {
        self.range(..)
    }
}

impl<T: Pack> FromIterator<T> for Chunks<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut out = Chunks::default();
        for value in iter {
            out.push_back(value);
        }
        out
    }
}

impl<T: Pack> From<Vec<T>> for Chunks<T> {
    fn from(values: Vec<T>) -> Self {
        values.into_iter().collect()
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

    /// Random pushes, pops, drains, replacements and lookups, against a `VecDeque`
    /// doing the same: across chunk boundaries, down to empty and up again, with
    /// entries that pack and entries that do not.
    #[test]
    fn behaves_as_a_vecdeque() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut chunks: Chunks<SeqNum> = Chunks::default();
        let mut model: VecDeque<SeqNum> = VecDeque::new();
        let mut value = 0u64;
        for step_no in 0..200_000 {
            match next() % 100 {
                0..=59 => {
                    value += step(next());
                    chunks.push_back(SeqNum(value));
                    model.push_back(SeqNum(value));
                }
                60..=79 => assert_eq!(chunks.pop_front(), model.pop_front(), "step {step_no}"),
                80..=84 if !model.is_empty() => {
                    // A replacement by a value that packs in no chunk, and back.
                    let i = (next() % model.len() as u64) as usize;
                    let (old, far) = (model[i], SeqNum(model[i].0 | 1 << 63));
                    chunks.set(i, far);
                    assert_eq!(chunks.get(i), Some(far), "step {step_no}");
                    chunks.set(i, old);
                }
                85..=89 => {
                    let n = (next() % (2 * CHUNK as u64 + 10)) as usize;
                    chunks.drain_front(n);
                    model.drain(..n.min(model.len()));
                }
                _ => {
                    let key = SeqNum(next() % (value + 2));
                    let point = model.partition_point(|&v| v <= key);
                    assert_eq!(chunks.partition_point(|&v| v <= key), point);
                    assert_eq!(chunks.range(..point).next_back(), model.range(..point).next_back().copied());
                    assert_eq!(chunks.range(point..).next(), model.range(point..).next().copied());
                    assert_eq!(chunks.binary_search_by_key(&key, |&v| v), model.binary_search(&key), "step {step_no}");
                }
            }
            assert_eq!(chunks.len(), model.len(), "step {step_no}");
            assert_eq!(chunks.front(), model.front().copied(), "step {step_no}");
            if step_no % 10_000 == 0 {
                assert!(chunks.iter().eq(model.iter().copied()), "step {step_no}");
            }
        }
        assert!(chunks.iter().eq(model.iter().copied()));
    }

    /// Only the back chunk has room to spare, and a chunk whose entries all left the
    /// front is freed: what a long row holds stays within two chunks of its entries.
    #[test]
    fn holds_at_most_two_chunks_more_than_its_entries() {
        let mut chunks: Chunks<SeqNum> = Chunks::default();
        let held = |c: &Chunks<SeqNum>| c.chunks.iter().map(|c| c.packed.capacity()).sum::<usize>();
        for i in 0..(10 * CHUNK as u64 + 7) {
            chunks.push_back(SeqNum(i));
            assert!(held(&chunks) <= chunks.len() + CHUNK, "after {i}: {} held for {}", held(&chunks), chunks.len());
        }
        assert!(chunks.chunks.iter().all(|c| c.escaped.is_empty()), "consecutive seqnums all pack");
        for _ in 0..(5 * CHUNK + 3) {
            chunks.pop_front();
            assert!(held(&chunks) <= chunks.len() + 2 * CHUNK, "{} held for {}", held(&chunks), chunks.len());
        }
        chunks.drain_front(usize::MAX);
        assert_eq!((chunks.len(), held(&chunks)), (0, 0), "an empty row holds nothing");
        // A small row stays small.
        for i in 0..5 {
            chunks.push_back(SeqNum(i));
        }
        assert!(held(&chunks) <= 8, "{} held for 5 entries", held(&chunks));
    }

    /// A seqnum packs into half its size, and what does not pack (a later term, a
    /// value below the chunk's first) is kept whole.
    #[test]
    fn seqnums_pack_into_four_bytes_and_the_rest_is_kept_whole() {
        assert_eq!(size_of::<<SeqNum as Pack>::Packed>(), 4);
        let values = [5, 6, 5 + u64::from(u32::MAX), 7, 4, u64::MAX, 8];
        let chunks: Chunks<SeqNum> = values.iter().map(|&v| SeqNum(v)).collect();
        assert!(chunks.iter().eq(values.iter().map(|&v| SeqNum(v))));
        assert_eq!(chunks.chunks[0].escaped.len(), 3);
    }
}
