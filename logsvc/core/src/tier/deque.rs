//! A deque that grows one chunk at a time: a posting row (a book's ALL row holds every
//! record of the book) never moves its entries to grow, where a `VecDeque` copies them
//! all at each doubling, inside one call of the index node.
//!
//! Entries live in chunks of [`CHUNK`]; every chunk but the last is full, and only the
//! first one of a row grows by doubling (so a small row stays small), so entry `i` is at
//! place `head + i` of the chunks laid end to end. A chunk goes once its last entry left
//! the front.

use std::collections::VecDeque;

/// Entries per chunk.
const CHUNK: usize = 1024;

#[derive(Debug)]
pub struct ChunkDeque<T> {
    chunks: VecDeque<Vec<T>>,
    /// Entries of the first chunk already popped.
    head: usize,
    len: usize,
}

impl<T> Default for ChunkDeque<T> {
    fn default() -> Self {
        ChunkDeque { chunks: VecDeque::new(), head: 0, len: 0 }
    }
}

impl<T> ChunkDeque<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn place(&self, i: usize) -> (usize, usize) {
        let at = self.head + i;
        (at / CHUNK, at % CHUNK)
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let (c, o) = self.place(i);
        Some(&self.chunks[c][o])
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        let (c, o) = self.place(i);
        Some(&mut self.chunks[c][o])
    }

    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    pub fn push_back(&mut self, value: T) {
        match self.chunks.back_mut() {
            Some(last) if last.len() < CHUNK => last.push(value),
            _ => {
                let mut chunk = Vec::with_capacity(if self.chunks.is_empty() { 1 } else { CHUNK });
                chunk.push(value);
                self.chunks.push_back(chunk);
            }
        }
        self.len += 1;
    }

    /// Drops the first entry.
    pub fn pop_front(&mut self) {
        if self.len == 0 {
            return;
        }
        self.len -= 1;
        self.head += 1;
        if self.head == CHUNK || self.len == 0 {
            self.chunks.pop_front();
            self.head = 0;
            if self.len == 0 {
                self.chunks.clear();
            }
        }
    }

    /// The first index whose entry is not `pred` (entries partitioned by it).
    pub fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.get(mid).expect("in range")) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The entries at indexes `from..to`, either way.
    pub fn range(&self, from: usize, to: usize) -> impl DoubleEndedIterator<Item = &T> + '_ {
        (from..to.min(self.len)).map(move |i| self.get(i).expect("in range"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_keeps_order_across_chunks_and_frees_them_from_the_front() {
        let mut d = ChunkDeque::default();
        let mut model = VecDeque::new();
        let mut x = 7u64;
        for step in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if x >> 62 == 0 && !model.is_empty() {
                d.pop_front();
                model.pop_front();
            } else {
                d.push_back(step);
                model.push_back(step);
            }
            if step % 997 == 0 {
                assert_eq!(d.len(), model.len());
                assert!(d.range(0, d.len()).eq(model.iter()));
                assert!(d.range(0, d.len()).rev().eq(model.iter().rev()));
                let mid = step / 2;
                assert_eq!(d.partition_point(|v| *v < mid), model.partition_point(|v| *v < mid));
            }
        }
        // Every chunk but the last is full, and popped chunks are gone.
        assert!(d.chunks.len() <= d.len() / CHUNK + 2, "{} chunks for {}", d.chunks.len(), d.len());
        while !d.is_empty() {
            d.pop_front();
        }
        assert!(d.chunks.is_empty() && d.front().is_none());
    }
}
