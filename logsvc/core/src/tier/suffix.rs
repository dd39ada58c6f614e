//! The suffix of a function node's partial local index (§5.1.1, Alg 1, Fig 5.1): which
//! storage slot holds each of the most recent seqnums of one physical log, built from the
//! metalog entries alone.
//!
//! An entry orders runs of records, one per productive slot, in slot order from its start
//! position. The suffix keeps, per entry, its last seqnum (the chain member's key) and,
//! per run, the distance from the run's last seqnum to the key (2 bytes) and its slot
//! (2 bytes): a seqnum belongs to the first run of its member whose upper bound is at or
//! past it. A distance over 65,535 (an entry after a stall) is kept whole beside the
//! chain. The oldest members go first past `bytes_max`.

use std::collections::{BTreeMap, VecDeque};

use crate::types::SeqNum;

/// A distance too large for its 2 bytes: the whole one is in `wide`.
const WIDE: u16 = u16::MAX;

#[derive(Debug)]
pub struct Suffix {
    bytes_max: usize,
    /// Per member: its key (the entry's last seqnum), the seqnums it orders (its first is
    /// `key + 1 - count`), and where its runs start in `runs` (counted from `runs_base`,
    /// wrapping).
    keys: VecDeque<u64>,
    counts: VecDeque<u32>,
    offsets: VecDeque<u32>,
    /// (distance to the key, slot), members' runs one after another.
    runs: VecDeque<(u16, u16)>,
    runs_base: u32,
    /// Whole distances of runs whose distance is [`WIDE`], by (key, run's place).
    wide: BTreeMap<(u64, u64), u64>,
}

impl Suffix {
    pub fn new(bytes_max: usize) -> Suffix {
        Suffix {
            bytes_max,
            keys: VecDeque::new(),
            counts: VecDeque::new(),
            offsets: VecDeque::new(),
            runs: VecDeque::new(),
            runs_base: 0,
            wide: BTreeMap::new(),
        }
    }

    /// The bytes it holds (what it allocated; the side map's entries at 48 each).
    pub fn bytes(&self) -> usize {
        self.keys.capacity() * 8
            + (self.counts.capacity() + self.offsets.capacity() + self.runs.capacity()) * 4
            + self.wide.len() * 48
    }

    /// Its oldest seqnum, if any.
    pub fn head(&self) -> Option<SeqNum> {
        Some(SeqNum(self.start(0)?))
    }

    fn start(&self, member: usize) -> Option<u64> {
        Some(self.keys.get(member)? + 1 - u64::from(self.counts[member]))
    }

    /// Where member `m`'s runs start in `runs`.
    fn runs_from(&self, m: usize) -> usize {
        self.offsets[m].wrapping_sub(self.runs_base) as usize
    }

    /// Adds an entry that ordered, from `start`, runs of `count` records of `slot`, in
    /// slot order. Entries come in log order.
    pub fn push(&mut self, start: SeqNum, runs: impl IntoIterator<Item = (u16, u64)>) {
        let mut uppers = Vec::new();
        let mut next = start.0;
        for (slot, count) in runs {
            if count == 0 {
                continue;
            }
            next += count;
            uppers.push((next - 1, slot));
        }
        let Some(&(key, _)) = uppers.last() else { return };
        // Room first: the oldest members go rather than the deques growing past the bound
        // (a deque does not shrink when members leave).
        let wide = uppers.iter().filter(|(upper, _)| key - upper >= u64::from(WIDE)).count();
        while self.bytes_after_push(uppers.len(), wide) > self.bytes_max {
            if self.keys.is_empty() {
                return; // not even one member fits
            }
            self.pop_oldest();
        }
        // An entry of more than 4G records is kept as its last 4G (it cannot happen: an
        // entry orders what storage replicated since the last one).
        let count = u32::try_from(key + 1 - start.0).unwrap_or(u32::MAX);
        let offset = self.runs_base.wrapping_add(self.runs.len() as u32);
        for (i, (upper, slot)) in uppers.into_iter().enumerate() {
            let distance = key - upper;
            let short = u16::try_from(distance).ok().filter(|d| *d != WIDE);
            if short.is_none() {
                self.wide.insert((key, i as u64), distance);
            }
            self.runs.push_back((short.unwrap_or(WIDE), slot));
        }
        self.keys.push_back(key);
        self.counts.push_back(count);
        self.offsets.push_back(offset);
        while self.bytes() > self.bytes_max && !self.keys.is_empty() {
            self.pop_oldest();
        }
    }

    /// What [`Suffix::bytes`] would be after a push of a member of `runs` runs (`wide`
    /// of them with whole distances), were the deques to grow as `VecDeque` does
    /// (double, at least 4).
    fn bytes_after_push(&self, runs: usize, wide: usize) -> usize {
        fn cap(len: usize, cap: usize, add: usize) -> usize {
            if len + add <= cap {
                cap
            } else {
                (cap * 2).max(len + add).max(4)
            }
        }
        cap(self.keys.len(), self.keys.capacity(), 1) * 8
            + (cap(self.counts.len(), self.counts.capacity(), 1)
                + cap(self.offsets.len(), self.offsets.capacity(), 1)
                + cap(self.runs.len(), self.runs.capacity(), runs))
                * 4
            + (self.wide.len() + wide) * 48
    }

    fn pop_oldest(&mut self) {
        let (Some(key), Some(_), Some(_)) = (self.keys.pop_front(), self.counts.pop_front(), self.offsets.pop_front()) else {
            return;
        };
        let end = self.offsets.front().copied().unwrap_or(self.runs_base.wrapping_add(self.runs.len() as u32));
        let popped = end.wrapping_sub(self.runs_base);
        self.runs.drain(..popped as usize);
        self.runs_base = end;
        self.wide.retain(|&(k, _), _| k != key);
        if self.runs.len() < self.runs.capacity() / 4 || self.keys.is_empty() {
            self.runs.shrink_to_fit();
            self.keys.shrink_to_fit();
            self.counts.shrink_to_fit();
            self.offsets.shrink_to_fit();
        }
    }

    /// The slot that holds `seqnum`, if the suffix reaches it (Alg 1).
    pub fn slot_of(&self, seqnum: SeqNum) -> Option<u16> {
        let s = seqnum.0;
        // The member with the lowest key at or past the seqnum.
        let m = self.keys.partition_point(|&k| k < s);
        if m == self.keys.len() || s < self.start(m)? {
            return None;
        }
        let key = self.keys[m];
        let from = self.runs_from(m);
        let to = if m + 1 < self.keys.len() { self.runs_from(m + 1) } else { self.runs.len() };
        let distance = key - s;
        // Runs in slot order have decreasing distances (increasing upper bounds): the
        // first whose upper bound is at or past the seqnum.
        (from..to).find_map(|i| {
            let (d, slot) = self.runs[i];
            let d = if d == WIDE { self.wide[&(key, (i - from) as u64)] } else { u64::from(d) };
            (d <= distance).then_some(slot)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn at_its_bound_the_oldest_members_go_instead_of_the_deques_growing() {
        let mut suffix = Suffix::new(1 << 10);
        let mut least_after_full = usize::MAX;
        for i in 0..1_000u64 {
            suffix.push(SeqNum(i * 2), [(0, 1), (1, 1)]);
            assert!(suffix.bytes() <= 1 << 10, "{} bytes after {i} pushes", suffix.bytes());
            if i >= 100 {
                least_after_full = least_after_full.min(suffix.keys.len());
            }
        }
        // Steady: the deques keep their capacity, full; no emptying and regrowing.
        assert!(least_after_full >= 28, "it fell to {least_after_full} members");
    }

    #[test]
    fn every_seqnum_of_the_suffix_maps_to_its_slot_and_older_ones_miss() {
        let mut rng = 7u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut suffix = Suffix::new(4_000);
        let mut naive = BTreeMap::new();
        let mut position = 1_000u64;
        for entry in 0..2_000u64 {
            let start = position;
            let runs: Vec<(u16, u64)> = (0..4u16)
                .map(|slot| {
                    // Some slots idle; now and then a run after a stall.
                    let count = match next() % 10 {
                        0..=2 => 0,
                        3 if entry % 97 == 0 => 70_000,
                        _ => next() % 12,
                    };
                    (slot, count)
                })
                .collect();
            for &(slot, count) in &runs {
                for _ in 0..count {
                    naive.insert(position, slot);
                    position += 1;
                }
            }
            suffix.push(SeqNum(start), runs);
            assert!(suffix.bytes() <= 4_000 + 48 * 4, "{}", suffix.bytes());
        }
        let head = suffix.head().expect("not empty").0;
        assert!(head > 1_000, "the oldest went");
        for (&s, &slot) in naive.range(head - 50..).step_by(7) {
            let want = (s >= head).then_some(slot);
            assert_eq!(suffix.slot_of(SeqNum(s)), want, "seqnum {s}");
        }
        assert_eq!(suffix.slot_of(SeqNum(position + 5)), None, "past the tail");
    }

    #[test]
    fn distances_past_two_bytes_are_kept_whole() {
        let mut suffix = Suffix::new(usize::MAX);
        suffix.push(SeqNum(100), [(0, 5), (1, 5), (2, 70_000)]);
        suffix.push(SeqNum(70_110), [(3, 2)]);
        let at = |s: u64| suffix.slot_of(SeqNum(s));
        assert_eq!(
            (at(99), at(100), at(104), at(105), at(109), at(110), at(70_109)),
            (None, Some(0), Some(0), Some(1), Some(1), Some(2), Some(2))
        );
        assert_eq!((at(70_110), at(70_111), at(70_112)), (Some(3), Some(3), None));
    }

    #[test]
    fn it_takes_a_small_part_of_a_naive_map() {
        // The thesis's case: 4 shards, 10 records each per entry.
        let mut suffix = Suffix::new(usize::MAX);
        for entry in 0..10_000u64 {
            suffix.push(SeqNum(entry * 40), (0..4u16).map(|slot| (slot, 10)));
        }
        let naive = 10_000 * 40 * (8 + 2);
        // 32 bytes an entry, and what the containers reserve past their length.
        assert!(suffix.bytes() * 7 < naive, "{} bytes against a naive {naive}", suffix.bytes());
    }
}
