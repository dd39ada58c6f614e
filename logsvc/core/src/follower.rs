//! Follows the metalogs of every physical log, across terms, and hands their entries
//! to its owner (an engine or a storage node) exactly once and in order.
//!
//! Entries arrive pushed by primaries, possibly lost, duplicated or reordered. The
//! follower buffers what arrives early, and when it knows it is behind (a push or a
//! tail heartbeat told it of a longer committed metalog, or a sealed term's final
//! length) and nothing came for a while, it fetches from the term's sequencers in
//! turn. A sealed term ends at the length the configuration records; the follower
//! then moves on to the next term.
//!
//! Invariant: delivered positions per log are contiguous: (term, 0), (term, 1), ...,
//! then (next term, 0). Never a duplicate, never a gap. An entry of a version the
//! configuration does not have yet waits for it.
//!
//! A function node that joins a term through a version (partial mode) does not follow
//! from the term's start: it [`Follower::seek`]s, and its first entry is the first one it
//! receives of that version or later (pushed, or fetched at the tail it hears of).

use std::collections::BTreeMap;

use crate::config::Configuration;
use crate::message::{Message, MetalogEntry};
use crate::types::{LogId, MetalogPosition, Micros, NextTick, NodeId, Term};

#[derive(Clone, Debug)]
pub struct FollowerConfig {
    pub fetch_retry_us: Micros,
    /// Entries buffered ahead of the next one to deliver; later ones are dropped and
    /// fetched again when their turn comes.
    pub buffer_max: usize,
}

impl Default for FollowerConfig {
    fn default() -> Self {
        FollowerConfig { fetch_retry_us: 30_000, buffer_max: 8192 }
    }
}

#[derive(Default)]
struct LogFollow {
    /// Next position to deliver: `index` of `term`. Term 0 means no configuration yet.
    next: MetalogPosition,
    buffer: BTreeMap<(u16, u64), MetalogEntry>,
    /// Committed length of `next.term`'s metalog, as far as we have heard.
    known_len: u64,
    last_fetch: Micros,
    fetch_turn: usize,
    /// Seeking a start: (term, version) the first entry must have.
    seek: Option<(u16, u32)>,
    /// Where it was when it began seeking: what it reports as delivered meanwhile.
    seek_from: MetalogPosition,
    /// Where seeking ended: the position of the first entry, and that entry's first
    /// record position.
    anchored: Option<(MetalogPosition, u64)>,
}

/// What [`Follower::on_message`] did with a message.
pub enum Followed {
    /// Entries of this log may now be delivered (`poll`).
    Entries(LogId),
    Tail,
    /// Not a metalog message.
    Other(Message),
}

pub struct Follower {
    cfg: FollowerConfig,
    logs: Vec<LogFollow>,
}

impl Follower {
    pub fn new(cfg: FollowerConfig) -> Follower {
        Follower { cfg, logs: Vec::new() }
    }

    /// The position every entry before which has been delivered, per log.
    pub fn delivered(&self, log: LogId) -> MetalogPosition {
        self.logs.get(log.0 as usize).map_or(MetalogPosition::ZERO, |l| if l.seek.is_some() { l.seek_from } else { l.next })
    }

    /// Where `log` stands, for a log line: next position, committed length heard of,
    /// entries buffered, and the seek, if any.
    pub fn describe(&self, log: LogId) -> String {
        let Some(l) = self.logs.get(log.0 as usize) else { return "not followed".into() };
        let seek = l.seek.map_or(String::new(), |(t, v)| format!(" seeking {t}.v{v}"));
        format!("next {} known {} buffered {}{seek}", l.next, l.known_len, l.buffer.len())
    }

    /// Takes a newer configuration: a log it adds is followed from its first term.
    pub fn on_config(&mut self, config: &Configuration) {
        while self.logs.len() < config.n_logs as usize {
            let log = LogId(self.logs.len() as u8);
            let first = config.first_term_of(log).expect("the configuration has its logs");
            self.logs.push(LogFollow { next: MetalogPosition::new(first, 0), ..Default::default() });
        }
    }

    /// Starts `log` at the first entry of `term` of `version` or later that arrives
    /// (version 0: at the term's start), instead of where it is (nothing may have been
    /// delivered yet). Called again with a later term or version while seeking, it seeks
    /// that instead.
    pub fn seek(&mut self, log: LogId, term: Term, version: u32) {
        let Some(l) = self.logs.get_mut(log.0 as usize) else { return };
        if l.seek.is_none() && l.next.index > 0 {
            return;
        }
        if l.next.term != term.0 {
            l.known_len = 0;
        }
        if l.seek.is_none() {
            l.seek_from = l.next;
        }
        l.next = MetalogPosition::new(term, 0);
        if version == 0 {
            // Bound when the term began: its start is the term's.
            l.seek = None;
            l.anchored = Some((l.next, 0));
        } else {
            l.seek = Some((term.0, version));
        }
    }

    /// Starts `log` at `at` (a copied state's position): nothing before it is delivered.
    pub fn start_at(&mut self, log: LogId, at: MetalogPosition) {
        let Some(l) = self.logs.get_mut(log.0 as usize) else { return };
        l.next = at;
        l.known_len = 0;
        l.seek = None;
        l.buffer.clear();
    }

    /// Whether `log` is still seeking its start.
    pub fn seeking(&self, log: LogId) -> bool {
        self.logs.get(log.0 as usize).is_some_and(|l| l.seek.is_some())
    }

    /// Where `log`'s seek ended, once: the first entry's position and the position of
    /// its first record.
    pub fn take_anchored(&mut self, log: LogId) -> Option<(MetalogPosition, u64)> {
        self.logs.get_mut(log.0 as usize)?.anchored.take()
    }

    /// Takes in an entry from a push or a fetch reply.
    pub fn on_entry(&mut self, entry: MetalogEntry) {
        let max = self.cfg.buffer_max;
        let Some(l) = self.logs.get_mut(entry.log.0 as usize) else { return };
        if let Some((term, version)) = l.seek {
            if entry.term.0 != term || entry.version < version {
                return;
            }
            l.seek = None;
            l.next = MetalogPosition::new(entry.term, entry.index);
            l.anchored = Some((l.next, entry.start_position));
        }
        let pos = (entry.term.0, entry.index);
        if pos < (l.next.term, l.next.index) {
            return;
        }
        if entry.term.0 == l.next.term {
            l.known_len = l.known_len.max(entry.index + 1);
        }
        if l.buffer.len() < max {
            l.buffer.insert(pos, entry);
        }
    }

    /// Takes in a metalog message (a push, fetched entries, a tail), or hands back any
    /// other message.
    pub fn on_message(&mut self, msg: Message) -> Followed {
        match msg {
            Message::MetalogPush { entry } => {
                let log = entry.log;
                self.on_entry(entry);
                Followed::Entries(log)
            }
            Message::MetalogEntries { log, entries, .. } => {
                for e in entries {
                    self.on_entry(e);
                }
                Followed::Entries(log)
            }
            Message::MetalogTail { term, log, committed_len } => {
                self.on_tail(term, log, committed_len);
                Followed::Tail
            }
            other => Followed::Other(other),
        }
    }

    pub fn on_tail(&mut self, term: Term, log: LogId, committed_len: u64) {
        if let Some(l) = self.logs.get_mut(log.0 as usize) {
            if l.next.term == term.0 {
                l.known_len = l.known_len.max(committed_len);
            }
        }
    }

    /// Delivers the next entries of `log` that are ready, in order.
    pub fn poll(&mut self, config: &Configuration, log: LogId) -> Vec<MetalogEntry> {
        let mut out = Vec::new();
        let Some(l) = self.logs.get_mut(log.0 as usize) else { return out };
        if l.seek.is_some() {
            return out;
        }
        while let Some(term) = config.term(Term(l.next.term)) {
            let tail = term.sealed.as_ref().map(|t| &t[log.0 as usize]);
            if let Some(tail) = tail {
                if l.next.index >= tail.len {
                    assert_eq!(l.next.index, tail.len, "delivered past the sealed tail");
                    if config.term(Term(l.next.term + 1)).is_none() {
                        break;
                    }
                    l.next = MetalogPosition { term: l.next.term + 1, index: 0 };
                    l.known_len = 0;
                    continue;
                }
                l.known_len = l.known_len.max(tail.len);
            }
            let key = (l.next.term, l.next.index);
            let last = tail.and_then(|t| t.last.as_ref()).filter(|e| e.index == l.next.index);
            let Some(version) = l.buffer.get(&key).or(last).map(|e| e.version) else { break };
            if version > term.version {
                break; // announces a version this configuration does not have yet
            }
            let entry = match l.buffer.remove(&key) {
                Some(e) => e,
                None => last.expect("found above").clone(),
            };
            l.next.index += 1;
            out.push(entry);
        }
        // Whatever is left below `next` (duplicates) is dead weight.
        let next = (l.next.term, l.next.index);
        while let Some((&k, _)) = l.buffer.first_key_value() {
            if k >= next {
                break;
            }
            l.buffer.pop_first();
        }
        out
    }

    /// Fetch requests for logs that are known to be behind and have stalled.
    pub fn on_tick(&mut self, now: Micros, config: &Configuration, out: &mut Vec<(NodeId, Message)>, next: &mut NextTick) {
        for (i, l) in self.logs.iter_mut().enumerate() {
            let log = LogId(i as u8);
            let Some(term) = config.term(Term(l.next.term)) else { continue };
            // Seeking: the entry at the tail heard of may be the start.
            let from = match l.seek {
                Some(_) => l.known_len.saturating_sub(1),
                None => l.next.index,
            };
            let behind = l.known_len > from || term.sealed.as_ref().is_some_and(|t| t[i].len > from);
            if !behind {
                continue;
            }
            if now < l.last_fetch + self.cfg.fetch_retry_us {
                next.at(l.last_fetch + self.cfg.fetch_retry_us);
                continue;
            }
            l.last_fetch = now;
            next.at(now + self.cfg.fetch_retry_us);
            let sequencers = &term.log(log).sequencers;
            let to = sequencers[l.fetch_turn % sequencers.len()];
            l.fetch_turn += 1;
            out.push((to, Message::MetalogFetch { term: term.term, log, from }));
        }
    }
}
