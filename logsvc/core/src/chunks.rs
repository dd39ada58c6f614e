//! A double-ended queue in fixed-size chunks, for the index's rows, which grow at the
//! back and shrink at the front and can hold millions of entries.
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

use std::collections::VecDeque;
use std::ops::{Bound, Index, IndexMut, RangeBounds};

/// Entries per chunk (a power of two).
const CHUNK_SHIFT: u32 = 12;
const CHUNK: usize = 1 << CHUNK_SHIFT;

#[derive(Debug)]
pub(crate) struct Chunks<T> {
    chunks: VecDeque<Vec<T>>,
    /// Entries of the first chunk that already left the front.
    head: usize,
    len: usize,
}

impl<T> Default for Chunks<T> {
    fn default() -> Self {
        Chunks { chunks: VecDeque::new(), head: 0, len: 0 }
    }
}

impl<T: Copy> Chunks<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push_back(&mut self, value: T) {
        match self.chunks.back_mut() {
            Some(last) if last.len() < CHUNK => {
                if last.len() == last.capacity() {
                    // Only a first chunk grows: by doubling, never past CHUNK.
                    let grown = (last.capacity() * 2).clamp(4, CHUNK);
                    last.reserve_exact(grown - last.len());
                }
                last.push(value);
            }
            _ => {
                let mut chunk = Vec::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                chunk.push(value);
                self.chunks.push_back(chunk);
            }
        }
        self.len += 1;
    }

    pub(crate) fn front(&self) -> Option<&T> {
        self.get(0)
    }

    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let value = *self.front()?;
        self.drain_front(1);
        Some(value)
    }

    /// Removes the first `n` entries (all of them if there are fewer).
    pub(crate) fn drain_front(&mut self, n: usize) {
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
            self.chunks.pop_front();
            self.head = 0;
        }
    }

    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let at = self.head + i;
        Some(&self.chunks[at >> CHUNK_SHIFT][at & (CHUNK - 1)])
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        let at = self.head + i;
        Some(&mut self.chunks[at >> CHUNK_SHIFT][at & (CHUNK - 1)])
    }

    /// The number of entries from the front for which `pred` holds, given that it holds
    /// for a prefix (as `slice::partition_point`).
    pub(crate) fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(&self[mid]) {
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
            Some(e) if f(e) == *key => Ok(i),
            _ => Err(i),
        }
    }

    /// The entries at the positions of `range`, in order (and reversible).
    pub(crate) fn range(&self, range: impl RangeBounds<usize>) -> impl DoubleEndedIterator<Item = &T> + '_ {
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
        (start.min(self.len)..end.min(self.len)).map(move |i| &self[i])
    }

    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.range(..)
    }
}

impl<T: Copy> Index<usize> for Chunks<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        let len = self.len;
        self.get(i).unwrap_or_else(|| panic!("index {i} out of a row of {len}"))
    }
}

impl<T: Copy> IndexMut<usize> for Chunks<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        let len = self.len;
        self.get_mut(i).unwrap_or_else(|| panic!("index {i} out of a row of {len}"))
    }
}

impl<T: Copy> FromIterator<T> for Chunks<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut out = Chunks::default();
        for value in iter {
            out.push_back(value);
        }
        out
    }
}

impl<T: Copy> From<Vec<T>> for Chunks<T> {
    fn from(values: Vec<T>) -> Self {
        values.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random pushes, pops, drains and lookups, against a `VecDeque` doing the same:
    /// across chunk boundaries, down to empty and up again.
    #[test]
    fn behaves_as_a_vecdeque() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut chunks: Chunks<u64> = Chunks::default();
        let mut model: VecDeque<u64> = VecDeque::new();
        let mut value = 0u64;
        for step in 0..200_000 {
            match next() % 100 {
                0..=59 => {
                    value += 1 + next() % 3;
                    chunks.push_back(value);
                    model.push_back(value);
                }
                60..=84 => assert_eq!(chunks.pop_front(), model.pop_front(), "step {step}"),
                85..=89 => {
                    let n = (next() % (2 * CHUNK as u64 + 10)) as usize;
                    chunks.drain_front(n);
                    model.drain(..n.min(model.len()));
                }
                _ => {
                    let key = next() % (value + 2);
                    let expect = model.binary_search(&key);
                    assert_eq!(chunks.binary_search_by_key(&key, |&v| v), expect, "step {step}");
                    let point = model.partition_point(|&v| v <= key);
                    assert_eq!(chunks.partition_point(|&v| v <= key), point);
                    assert_eq!(chunks.range(..point).next_back(), model.range(..point).next_back());
                    assert_eq!(chunks.range(point..).next(), model.range(point..).next());
                }
            }
            assert_eq!(chunks.len(), model.len(), "step {step}");
            assert_eq!(chunks.front(), model.front(), "step {step}");
            if step % 10_000 == 0 {
                assert!(chunks.iter().eq(model.iter()), "step {step}");
            }
        }
        assert!(chunks.iter().eq(model.iter()));
    }

    /// Only the back chunk has room to spare, and a chunk whose entries all left the
    /// front is freed: what a long row holds stays within two chunks of its entries.
    #[test]
    fn holds_at_most_two_chunks_more_than_its_entries() {
        let mut chunks: Chunks<u64> = Chunks::default();
        let held = |c: &Chunks<u64>| c.chunks.iter().map(Vec::capacity).sum::<usize>();
        for i in 0..(10 * CHUNK as u64 + 7) {
            chunks.push_back(i);
            assert!(held(&chunks) <= chunks.len() + CHUNK, "after {i}: {} held for {}", held(&chunks), chunks.len());
        }
        for _ in 0..(5 * CHUNK + 3) {
            chunks.pop_front();
            assert!(held(&chunks) <= chunks.len() + 2 * CHUNK, "{} held for {}", held(&chunks), chunks.len());
        }
        chunks.drain_front(usize::MAX);
        assert_eq!((chunks.len(), held(&chunks)), (0, 0), "an empty row holds nothing");
        // A small row stays small.
        for i in 0..5 {
            chunks.push_back(i);
        }
        assert!(held(&chunks) <= 8, "{} held for 5 entries", held(&chunks));
    }
}
