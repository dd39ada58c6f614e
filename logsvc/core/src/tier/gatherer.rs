//! The aggregator role (§5.2, Alg 6:26-39): a node of its own that combines the index
//! shards' answers to function nodes' lookups, so that a function node sends one ask
//! per shard and gets one answer back.
//!
//! A function node names an aggregator in its lookups (`TierLookup::aggregator`); every
//! shard's replica sends its answer there (`TierAnswerFor`, carrying what combining it
//! needs). An `Exact` answer ends the lookup at once (the shard had storage send the
//! record); once every shard has answered `Closest`, the aggregator has storage send
//! the smallest (read_next) or largest (read_prev) candidate to the caller
//! (`ReadRecordFor`) and tells the caller what it is (`TierDone`), or that there is none.
//! A `TooOld` sends the caller a `TierRestart`: it asks every shard again, as of the
//! floor, in a new round. The aggregator keeps state per lookup only, for at most
//! `gather_us`; a lookup it loses (it died, an answer was lost) the caller asks again of
//! another aggregator after its `lookup_retry_us`. It follows no log: it needs only the
//! configuration (the tier's nodes and the storage shards' replicas).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

use crate::config::Configuration;
use crate::index::Found;
use crate::message::Message;
use crate::types::{MetalogPosition, Micros, NextTick, NodeId};

use super::ShardAnswer;

#[derive(Clone, Debug)]
pub struct AggregatorConfig {
    pub heartbeat_interval_us: Micros,
    /// How long a lookup's answers are kept waiting for the others.
    pub gather_us: Micros,
    /// Lookups kept at once; the oldest goes past this (its caller asks again).
    pub lookups_max: usize,
}

impl Default for AggregatorConfig {
    fn default() -> Self {
        AggregatorConfig { heartbeat_interval_us: 100_000, gather_us: 2_000_000, lookups_max: 100_000 }
    }
}

/// Lookups gathered, and what became of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AggregatorStats {
    pub answers: u64,
    pub done: u64,
    pub restarts: u64,
    /// Answers from nodes outside the tier, or naming a shard it does not have.
    pub refused: u64,
    /// Lookups dropped unanswered after `gather_us` or past `lookups_max`.
    pub expired: u64,
}

struct Gather {
    round: u32,
    answers: Vec<Option<(Option<Found>, Option<Bytes>)>>,
    since: Micros,
}

pub struct AggregatorNode {
    id: NodeId,
    controllers: Vec<NodeId>,
    incarnation: u64,
    cfg: AggregatorConfig,
    config: Option<Arc<Configuration>>,
    /// Per (caller, lookup); ordered, so that a simulated seed replays.
    pending: BTreeMap<(NodeId, u64), Gather>,
    /// The gathers in the order they began, with their start: the oldest goes first.
    /// An entry whose gather ended, or began again in a later round, is skipped.
    order: VecDeque<(Micros, (NodeId, u64))>,
    last_heartbeat: Option<Micros>,
    out: Vec<(NodeId, Message)>,
    pub stats: AggregatorStats,
}

impl AggregatorNode {
    pub fn new(id: NodeId, controllers: Vec<NodeId>, incarnation: u64, cfg: AggregatorConfig) -> AggregatorNode {
        AggregatorNode {
            id,
            controllers,
            incarnation,
            cfg,
            config: None,
            pending: BTreeMap::new(),
            order: VecDeque::new(),
            last_heartbeat: None,
            out: Vec::new(),
            stats: AggregatorStats::default(),
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Messages to send, in order.
    pub fn take_actions(&mut self) -> Vec<(NodeId, Message)> {
        std::mem::take(&mut self.out)
    }

    /// Lookups being gathered.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    pub fn on_tick(&mut self, now: Micros) -> NextTick {
        let mut next = NextTick::after(now);
        if self.last_heartbeat.is_none_or(|t| now >= t + self.cfg.heartbeat_interval_us) {
            self.last_heartbeat = Some(now);
            let heartbeat = Message::heartbeat(self.incarnation, self.config.as_deref());
            for &c in &self.controllers {
                self.out.push((c, heartbeat.clone()));
            }
        }
        next.at(now + self.cfg.heartbeat_interval_us);
        while let Some(&(since, key)) = self.order.front() {
            if self.live(since, key) {
                if now < since + self.cfg.gather_us {
                    next.at(since + self.cfg.gather_us);
                    break;
                }
                self.pending.remove(&key);
                self.stats.expired += 1;
            }
            self.order.pop_front();
        }
        next
    }

    /// Whether the gather of `key` that began at `since` still runs.
    fn live(&self, since: Micros, key: (NodeId, u64)) -> bool {
        self.pending.get(&key).is_some_and(|g| g.since == since)
    }

    pub fn on_message(&mut self, now: Micros, from: NodeId, msg: Message) {
        match msg {
            Message::NewConfig { config } => {
                if self.config.as_ref().is_none_or(|c| c.stamp() < config.stamp()) {
                    self.config = Some(config.clone());
                }
                let ack = Message::config_ack(self.config.as_ref().expect("set"));
                self.out.push((config.controller, ack));
            }
            Message::TierAnswerFor { caller, req, round, shard, shards, next, q, fetch, answer, aux } => {
                self.on_answer(now, from, caller, req, round, (shard, shards), (next, q, fetch), answer, aux)
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_answer(
        &mut self,
        now: Micros,
        from: NodeId,
        caller: NodeId,
        req: u64,
        round: u32,
        (shard, shards): (u16, u16),
        (next, q, fetch): (bool, MetalogPosition, bool),
        answer: ShardAnswer,
        aux: Option<Bytes>,
    ) {
        // Only the tier's index nodes answer, and only for shards the tier has.
        let tier = self.config.as_ref().and_then(|c| c.tier.as_ref());
        let known =
            tier.is_some_and(|t| t.shard_of_node(from) == Some(usize::from(shard)) && usize::from(shards) == t.shards.len());
        if !known {
            self.stats.refused += 1;
            return;
        }
        self.stats.answers += 1;
        let key = (caller, req);
        match self.pending.get(&key) {
            Some(g) if g.round > round => return, // an answer of an earlier round
            Some(g) if g.round == round => {}
            _ => {
                if self.pending.len() >= self.cfg.lookups_max {
                    while let Some((since, oldest)) = self.order.pop_front() {
                        if self.live(since, oldest) {
                            self.pending.remove(&oldest);
                            self.stats.expired += 1;
                            break;
                        }
                    }
                }
                let g = Gather { round, answers: vec![None; usize::from(shards)], since: now };
                self.pending.insert(key, g);
                self.order.push_back((now, key));
            }
        }
        match answer {
            ShardAnswer::Exact(found) => {
                self.pending.remove(&key);
                self.stats.done += 1;
                self.out.push((caller, Message::TierDone { req, round, found: Some(found), q, aux, sent: fetch }));
            }
            ShardAnswer::TooOld(floor) => {
                self.pending.remove(&key);
                self.stats.restarts += 1;
                self.out.push((caller, Message::TierRestart { req, round, floor }));
            }
            ShardAnswer::Closest(found) => {
                let g = self.pending.get_mut(&key).expect("inserted");
                let slot = &mut g.answers[usize::from(shard)];
                if slot.is_some() {
                    return; // a duplicate
                }
                *slot = Some((found, aux));
                if g.answers.iter().any(Option::is_none) {
                    return;
                }
                let g = self.pending.remove(&key).expect("found");
                let candidates = g.answers.into_iter().flatten().filter_map(|(f, aux)| Some((f?, aux)));
                let best = if next { candidates.min_by_key(|(f, _)| f.seqnum) } else { candidates.max_by_key(|(f, _)| f.seqnum) };
                self.stats.done += 1;
                let Some((found, aux)) = best else {
                    let done = Message::TierDone { req, round, found: None, q, aux: None, sent: false };
                    return self.out.push((caller, done));
                };
                let to = fetch.then(|| self.storage_replica(found, req)).flatten();
                if let Some(to) = to {
                    self.out.push((to, Message::ReadRecordFor { req, seqnum: found.seqnum, reply_to: caller }));
                }
                let done = Message::TierDone { req, round, found: Some(found), q, aux, sent: to.is_some() };
                self.out.push((caller, done));
            }
        }
    }

    /// A replica of `found`'s storage shard, chosen by `req` as index nodes choose.
    fn storage_replica(&self, found: Found, req: u64) -> Option<NodeId> {
        let t = self.config.as_ref()?.term(found.seqnum.term())?;
        let (lc, i) = t.shard(found.location.shard)?;
        let replicas = &lc.shards[i].replicas;
        (!replicas.is_empty()).then(|| replicas[req as usize % replicas.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Location, LogId, SeqNum, ShardId, Term};

    /// Tier shards [[8, 9], [10]], aggregator 11; term 1's shard 10 of log 0 on 4 and 5.
    fn node() -> AggregatorNode {
        let mut a = AggregatorNode::new(NodeId(11), vec![NodeId(0)], 1, AggregatorConfig::default());
        let config = Arc::new(crate::store::conformance::configuration(1));
        a.on_message(0, NodeId(0), Message::NewConfig { config });
        a.take_actions();
        a
    }

    fn found(p: u64) -> Found {
        Found { seqnum: SeqNum::new(Term(1), LogId(0), p), location: Location { shard: ShardId(10), local_id: p } }
    }

    fn answer(shard: u16, round: u32, next: bool, answer: ShardAnswer) -> Message {
        let q = MetalogPosition::new(Term(1), 9);
        Message::TierAnswerFor { caller: NodeId(7), req: 3, round, shard, shards: 2, next, q, fetch: true, answer, aux: None }
    }

    #[test]
    fn the_best_candidate_is_read_for_the_caller_once_every_shard_answered() {
        for (next, want) in [(true, 4), (false, 6)] {
            let mut a = node();
            a.on_message(1, NodeId(8), answer(0, 0, next, ShardAnswer::Closest(Some(found(6)))));
            assert!(a.take_actions().is_empty(), "one shard of two answered");
            a.on_message(1, NodeId(10), answer(1, 0, next, ShardAnswer::Closest(Some(found(4)))));
            let out = a.take_actions();
            let read = Message::ReadRecordFor { req: 3, seqnum: found(want).seqnum, reply_to: NodeId(7) };
            assert_eq!(out[0], (NodeId(5), read), "a replica of the record's storage shard, by request id");
            assert!(
                matches!(&out[1], (NodeId(7), Message::TierDone { req: 3, round: 0, found: Some(f), sent: true, .. }) if *f == found(want))
            );
            assert_eq!(a.in_flight(), 0);
        }
    }

    #[test]
    fn an_exact_answer_ends_the_lookup_and_too_old_restarts_it_at_the_caller() {
        let mut a = node();
        a.on_message(1, NodeId(9), answer(0, 0, true, ShardAnswer::Exact(found(5))));
        let out = a.take_actions();
        assert!(matches!(&out[..], [(NodeId(7), Message::TierDone { found: Some(_), .. })]), "{out:?}");
        // The other shard's late answer starts a gather that never completes: it expires.
        a.on_message(2, NodeId(10), answer(1, 0, true, ShardAnswer::Closest(None)));
        assert!(a.take_actions().is_empty());
        a.on_tick(2 + AggregatorConfig::default().gather_us);
        a.take_actions(); // its heartbeat
        assert_eq!((a.in_flight(), a.stats.expired), (0, 1));
        let floor = MetalogPosition::new(Term(1), 20);
        a.on_message(3, NodeId(10), answer(1, 1, true, ShardAnswer::TooOld(floor)));
        let out = a.take_actions();
        assert!(matches!(&out[..], [(NodeId(7), Message::TierRestart { req: 3, round: 1, floor: f })] if *f == floor));
    }

    #[test]
    fn answers_from_outside_the_tier_or_of_an_earlier_round_change_nothing() {
        let mut a = node();
        // Node 10 replicates shard 1, not 0; node 12 is no index node; 3 shards is wrong.
        a.on_message(1, NodeId(10), answer(0, 0, true, ShardAnswer::Exact(found(1))));
        a.on_message(1, NodeId(12), answer(1, 0, true, ShardAnswer::Exact(found(1))));
        let mut wrong = answer(0, 0, true, ShardAnswer::Exact(found(1)));
        if let Message::TierAnswerFor { shards, .. } = &mut wrong {
            *shards = 3;
        }
        a.on_message(1, NodeId(8), wrong);
        assert!(a.take_actions().is_empty());
        assert_eq!(a.stats.refused, 3);
        a.on_message(2, NodeId(8), answer(0, 2, true, ShardAnswer::Closest(Some(found(2)))));
        a.on_message(2, NodeId(10), answer(1, 1, true, ShardAnswer::Closest(Some(found(1)))));
        assert!(a.take_actions().is_empty(), "round 1's answer does not complete round 2");
        a.on_message(2, NodeId(10), answer(1, 2, true, ShardAnswer::Closest(None)));
        let out = a.take_actions();
        assert!(matches!(&out[1], (_, Message::TierDone { round: 2, found: Some(f), .. }) if *f == found(2)), "{out:?}");
    }

    #[test]
    fn past_lookups_max_the_oldest_gather_goes_first() {
        let mut a = node();
        a.cfg.lookups_max = 2;
        let req = |req: u64| Message::TierAnswerFor {
            caller: NodeId(7),
            req,
            round: 0,
            shard: 0,
            shards: 2,
            next: true,
            q: MetalogPosition::new(Term(1), 9),
            fetch: false,
            answer: ShardAnswer::Closest(None),
            aux: None,
        };
        // Lookup 1 ends; 2 and 3 gather; 4 pushes out 2, the oldest still gathering.
        a.on_message(1, NodeId(8), req(1));
        a.on_message(2, NodeId(10), answer_of(1));
        a.on_message(3, NodeId(8), req(2));
        a.on_message(4, NodeId(8), req(3));
        a.on_message(5, NodeId(8), req(4));
        assert_eq!((a.in_flight(), a.stats.expired, a.stats.done), (2, 1, 1));
        a.take_actions();
        a.cfg.lookups_max = 10;
        a.on_message(6, NodeId(10), answer_of(2));
        assert!(a.take_actions().is_empty(), "lookup 2 was pushed out: its last answer starts it again");
        a.on_message(6, NodeId(10), answer_of(3));
        assert!(matches!(&a.take_actions()[..], [(NodeId(7), Message::TierDone { req: 3, .. })]));
        // Gathers past `gather_us` expire at a tick, oldest first, and the tick asks
        // for the next one's end.
        let end = 5 + AggregatorConfig::default().gather_us;
        assert_eq!(a.on_tick(end - 1).due(), end);
        assert_eq!(a.in_flight(), 2, "lookups 4 and 2");
        a.on_tick(end + 1);
        assert_eq!(a.in_flight(), 0);
    }

    fn answer_of(req: u64) -> Message {
        let q = MetalogPosition::new(Term(1), 9);
        let answer = ShardAnswer::Closest(None);
        Message::TierAnswerFor {
            caller: NodeId(7),
            req,
            round: 0,
            shard: 1,
            shards: 2,
            next: true,
            q,
            fetch: false,
            answer,
            aux: None,
        }
    }
}
