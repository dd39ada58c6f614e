//! The aggregator of index-tier lookups (§5.2, Alg 6:26-39): it asks one replica of
//! every index shard for a read as of Q and combines their answers.
//!
//! A shard that holds the bound itself, in its row at Q, sends the read to storage and
//! says so (`Exact`, the thesis's type 2): the lookup is done. Otherwise each shard
//! sends its closest candidate (`Closest`, type 3), and once all have, the aggregator
//! sends the read of the smallest (read_next) or largest (read_prev) to storage, or
//! answers none. A shard that no longer keeps what Q needs answers `TooOld(floor)`: the
//! whole lookup restarts as of the floor on every shard (answers of shards at different
//! positions do not make one answer). A shard silent for `retry_us` is asked again, of
//! another replica; late and duplicate answers are dropped by round.

use std::collections::BTreeMap;

use crate::index::Found;
use crate::types::{MetalogPosition, Micros};

use super::popularity::ReadKey;

/// A lookup, numbered by whoever asks.
pub type LookupId = u64;

/// An index shard's answer to one round of a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ShardAnswer {
    /// It held the bound and sent the read to storage itself.
    Exact(Found),
    /// Its closest record, if any.
    Closest(Option<Found>),
    /// It answers no older position than this.
    TooOld(MetalogPosition),
}

/// What the aggregator's driver does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregatorAction {
    /// Ask shard `shard` (its replica `attempt` modulo the replicas) for `read` as of `q`,
    /// in round `round`.
    Ask { lookup: LookupId, round: u32, shard: usize, attempt: u32, read: ReadKey, q: MetalogPosition },
    /// Read `found` from storage for the lookup's caller: the answer, as of `q`.
    Read { lookup: LookupId, found: Found, q: MetalogPosition },
    /// The answer is none, as of `q`.
    None { lookup: LookupId, q: MetalogPosition },
    /// A shard holds the bound itself, in its row at `q` (type 2): the answer is `found`.
    Done { lookup: LookupId, found: Found, q: MetalogPosition },
}

#[derive(Debug)]
struct Pending {
    read: ReadKey,
    q: MetalogPosition,
    round: u32,
    answers: Vec<Option<Option<Found>>>,
    attempts: Vec<u32>,
    asked_at: Micros,
}

#[derive(Debug)]
pub struct Aggregator {
    shards: usize,
    retry_us: Micros,
    /// Ordered: a tick asks again in one order, so a simulated seed replays.
    pending: BTreeMap<LookupId, Pending>,
    /// Answers of finished lookups or past rounds, dropped.
    pub dropped: u64,
    /// Lookups restarted by a `TooOld`.
    pub restarts: u64,
    /// Asks sent again to shards silent for `retry_us`.
    pub resends: u64,
}

impl Aggregator {
    pub fn new(shards: usize, retry_us: Micros) -> Aggregator {
        Aggregator { shards: shards.max(1), retry_us, pending: BTreeMap::new(), dropped: 0, restarts: 0, resends: 0 }
    }

    /// Lookups in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The round lookup `lookup` is in, while it runs.
    pub fn round(&self, lookup: LookupId) -> Option<u32> {
        self.pending.get(&lookup).map(|p| p.round)
    }

    /// Starts lookup `lookup` of `read` as of `q`.
    pub fn start(&mut self, now: Micros, lookup: LookupId, read: ReadKey, q: MetalogPosition, out: &mut Vec<AggregatorAction>) {
        let pending =
            Pending { read, q, round: 0, answers: vec![None; self.shards], attempts: vec![0; self.shards], asked_at: now };
        ask_all(lookup, &pending, out);
        self.pending.insert(lookup, pending);
    }

    /// Shard `shard`'s answer to round `round` of `lookup`.
    pub fn answer(
        &mut self,
        now: Micros,
        lookup: LookupId,
        round: u32,
        shard: usize,
        answer: ShardAnswer,
        out: &mut Vec<AggregatorAction>,
    ) {
        let Some(p) = self.pending.get_mut(&lookup).filter(|p| p.round == round && shard < p.answers.len()) else {
            self.dropped += 1;
            return;
        };
        match answer {
            ShardAnswer::Exact(found) => {
                let q = p.q;
                self.pending.remove(&lookup);
                out.push(AggregatorAction::Done { lookup, found, q });
            }
            ShardAnswer::TooOld(floor) => {
                self.restarts += 1;
                p.q = p.q.max(floor);
                p.round += 1;
                p.answers.iter_mut().for_each(|a| *a = None);
                p.asked_at = now;
                ask_all(lookup, p, out);
            }
            ShardAnswer::Closest(found) => {
                if p.answers[shard].is_some() {
                    self.dropped += 1;
                    return;
                }
                p.answers[shard] = Some(found);
                if p.answers.iter().any(Option::is_none) {
                    return;
                }
                let next = p.read.3;
                let candidates = p.answers.iter().filter_map(|a| a.flatten());
                let best = if next { candidates.min_by_key(|f| f.seqnum) } else { candidates.max_by_key(|f| f.seqnum) };
                let q = p.q;
                self.pending.remove(&lookup);
                out.push(match best {
                    Some(found) => AggregatorAction::Read { lookup, found, q },
                    None => AggregatorAction::None { lookup, q },
                });
            }
        }
    }

    /// Asks again, of another replica, the shards silent for `retry_us`.
    pub fn tick(&mut self, now: Micros, out: &mut Vec<AggregatorAction>) {
        for (&lookup, p) in self.pending.iter_mut() {
            if now.saturating_sub(p.asked_at) < self.retry_us {
                continue;
            }
            p.asked_at = now;
            for shard in 0..p.answers.len() {
                if p.answers[shard].is_none() {
                    p.attempts[shard] += 1;
                    self.resends += 1;
                    out.push(AggregatorAction::Ask {
                        lookup,
                        round: p.round,
                        shard,
                        attempt: p.attempts[shard],
                        read: p.read,
                        q: p.q,
                    });
                }
            }
        }
    }

    /// Gives up `lookup` (its caller timed out); returns the shards that had not
    /// answered its last round, with the number of times each was asked.
    pub fn cancel(&mut self, lookup: LookupId) -> Vec<(usize, u32)> {
        let Some(p) = self.pending.remove(&lookup) else { return Vec::new() };
        (0..p.answers.len()).filter(|&s| p.answers[s].is_none()).map(|s| (s, p.attempts[s] + 1)).collect()
    }
}

fn ask_all(lookup: LookupId, p: &Pending, out: &mut Vec<AggregatorAction>) {
    for shard in 0..p.answers.len() {
        out.push(AggregatorAction::Ask { lookup, round: p.round, shard, attempt: p.attempts[shard], read: p.read, q: p.q });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{BookId, Location, LogId, SeqNum, ShardId, Tag, Term};

    fn found(p: u64) -> Found {
        Found { seqnum: SeqNum::new(Term(1), LogId(0), p), location: Location { shard: ShardId(0), local_id: p } }
    }

    fn read(next: bool) -> ReadKey {
        (BookId(1), Tag(5), SeqNum::new(Term(1), LogId(0), 3), next)
    }

    fn q(i: u64) -> MetalogPosition {
        MetalogPosition::new(Term(1), i)
    }

    #[test]
    fn the_smallest_next_and_the_largest_previous_candidate_win() {
        for (next, want) in [(true, 4), (false, 9)] {
            let (mut a, mut out) = (Aggregator::new(3, 1_000), Vec::new());
            a.start(0, 7, read(next), q(10), &mut out);
            assert_eq!(out.len(), 3, "one ask per shard");
            out.clear();
            a.answer(1, 7, 0, 0, ShardAnswer::Closest(Some(found(9))), &mut out);
            a.answer(1, 7, 0, 1, ShardAnswer::Closest(None), &mut out);
            assert!(out.is_empty(), "not before every shard answered");
            a.answer(1, 7, 0, 2, ShardAnswer::Closest(Some(found(4))), &mut out);
            assert_eq!(out, vec![AggregatorAction::Read { lookup: 7, found: found(want), q: q(10) }]);
            assert_eq!(a.in_flight(), 0);
        }
        let (mut a, mut out) = (Aggregator::new(2, 1_000), Vec::new());
        a.start(0, 1, read(true), q(10), &mut out);
        out.clear();
        a.answer(1, 1, 0, 0, ShardAnswer::Closest(None), &mut out);
        a.answer(1, 1, 0, 1, ShardAnswer::Closest(None), &mut out);
        assert_eq!(out, vec![AggregatorAction::None { lookup: 1, q: q(10) }]);
    }

    #[test]
    fn an_exact_answer_ends_the_lookup_and_late_or_duplicate_answers_are_dropped() {
        let (mut a, mut out) = (Aggregator::new(3, 1_000), Vec::new());
        a.start(0, 1, read(true), q(10), &mut out);
        out.clear();
        a.answer(1, 1, 0, 0, ShardAnswer::Closest(Some(found(8))), &mut out);
        a.answer(1, 1, 0, 0, ShardAnswer::Closest(Some(found(5))), &mut out);
        assert_eq!(a.dropped, 1, "a duplicate");
        a.answer(1, 1, 0, 1, ShardAnswer::Exact(found(3)), &mut out);
        assert!(matches!(out[..], [AggregatorAction::Done { lookup: 1, q: at, .. }] if at == q(10)), "{out:?}");
        out.clear();
        a.answer(2, 1, 0, 2, ShardAnswer::Closest(None), &mut out);
        assert!(out.is_empty() && a.dropped == 2, "late");
    }

    #[test]
    fn a_silent_shard_is_asked_again_of_another_replica() {
        let (mut a, mut out) = (Aggregator::new(2, 1_000), Vec::new());
        a.start(0, 1, read(true), q(10), &mut out);
        out.clear();
        a.answer(10, 1, 0, 0, ShardAnswer::Closest(None), &mut out);
        a.tick(500, &mut out);
        assert!(out.is_empty(), "not yet");
        a.tick(1_000, &mut out);
        assert_eq!(out, vec![AggregatorAction::Ask { lookup: 1, round: 0, shard: 1, attempt: 1, read: read(true), q: q(10) }]);
        out.clear();
        a.answer(1_100, 1, 0, 1, ShardAnswer::Closest(Some(found(6))), &mut out);
        assert_eq!(out, vec![AggregatorAction::Read { lookup: 1, found: found(6), q: q(10) }]);
    }

    #[test]
    fn one_shards_too_old_restarts_the_whole_lookup_at_its_floor() {
        let (mut a, mut out) = (Aggregator::new(2, 1_000), Vec::new());
        a.start(0, 1, read(true), q(10), &mut out);
        out.clear();
        a.answer(1, 1, 0, 0, ShardAnswer::Closest(Some(found(4))), &mut out);
        a.answer(1, 1, 0, 1, ShardAnswer::TooOld(q(15)), &mut out);
        assert_eq!(a.restarts, 1);
        assert_eq!(out.len(), 2, "every shard again, the one that answered too");
        assert!(out.iter().all(|o| matches!(o, AggregatorAction::Ask { round: 1, q: at, .. } if *at == q(15))), "{out:?}");
        out.clear();
        // The first round's answers no longer count.
        a.answer(2, 1, 0, 1, ShardAnswer::Closest(Some(found(3))), &mut out);
        a.answer(2, 1, 1, 0, ShardAnswer::Closest(Some(found(7))), &mut out);
        assert!(out.is_empty());
        a.answer(2, 1, 1, 1, ShardAnswer::Closest(None), &mut out);
        assert_eq!(out, vec![AggregatorAction::Read { lookup: 1, found: found(7), q: q(15) }]);
    }
}
