//! The simulator's oracle: the canonical history of every physical log, derived
//! independently of the engines, and the checks every observation must pass.
//!
//! The reference model holds the records of all logs together and looks at books,
//! never at which log holds a record: a book that moved to an added log keeps one
//! history, its old records (ordered in earlier terms) before its new ones.
//!
//! Ground truth is what the sequencers committed (and the final tails the controller
//! sealed), plus the metadata clients asked to append at each location. From these the
//! oracle orders records itself and evaluates conditions and trims with a reference
//! model that shares no code with the engine's index.
//!
//! Checks: one committed entry per metalog slot; sealing keeps every committed entry;
//! installed configurations form one history, whichever controller installed them; every
//! engine's index application matches the canonical log; acknowledged appends keep their
//! seqnum; every read returns exactly what the canonical log holds at the index position it
//! was served at (monotonic reads, read-your-writes, failed conditional appends invisible,
//! trimmed records never back); aux data is accepted exactly when its seqnum is a record of
//! the caller's book live at the position it was decided at, and a read returns only aux
//! data accepted for that record in its own book; storage progress covers only durable
//! records; a committed entry's records are durable on every replica, and a sealed tail's
//! last entry's on one at least; nothing commits past a sealed tail; and, after the
//! liveness phase, every engine caught up and every client request completed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;

use crate::config::{Configuration, TermConfig};
use crate::context::Context;
use crate::engine::IndexedRecord;
use crate::follower::{Follower, FollowerConfig};
use crate::index::Placement;
use crate::message::{LogRecord, MetalogEntry, RecordMeta};
use crate::types::{BookId, Location, LogId, MetalogPosition, NodeId, SeqNum, ShardId, Tag, Term};

#[derive(Clone, Debug)]
struct RefRecord {
    seqnum: SeqNum,
    location: Location,
    meta: RecordMeta,
    placement: Placement,
    at: MetalogPosition,
}

#[derive(Clone, Debug)]
struct RefTrim {
    at: MetalogPosition,
    log: LogId,
    book: BookId,
    tag: Tag,
    seqnum: SeqNum,
}

/// Every ordered record and trim of the cluster. Positions of different logs compare
/// term first, which is all the model needs: a book's records in the log it left are
/// all in terms before any of its records in the log it moved to.
#[derive(Default)]
struct RefHistory {
    records: Vec<RefRecord>,
    by_seqnum: HashMap<SeqNum, usize>,
    trims: Vec<RefTrim>,
    /// Successful records per (book, tag) stream, in order (trimmed ones included).
    streams: HashMap<(BookId, Tag), Vec<SeqNum>>,
}

/// What a reader sees: every entry up to `at`, the position it was served at, and
/// every entry its context had seen already (in whichever log), since its read must
/// reflect its own writes and earlier reads.
#[derive(Clone, Copy)]
struct View<'a> {
    at: MetalogPosition,
    seen: Option<&'a Context>,
}

impl View<'_> {
    fn at(at: MetalogPosition) -> View<'static> {
        View { at, seen: None }
    }

    fn sees(&self, p: MetalogPosition, log: LogId) -> bool {
        p <= self.at || self.seen.is_some_and(|c| p <= c.position(log))
    }
}

impl RefHistory {
    fn trim_point(&self, book: BookId, tag: Tag, view: View) -> SeqNum {
        let trims = self.trims.iter().filter(|t| view.sees(t.at, t.log) && t.book == book && t.tag == tag);
        trims.map(|t| t.seqnum).max().unwrap_or(SeqNum::MIN)
    }

    fn live_in(&self, r: &RefRecord, tag: Tag, view: View) -> bool {
        if r.placement != Placement::Placed || !view.sees(r.at, r.seqnum.log()) {
            return false;
        }
        let all = self.trim_point(r.meta.book, Tag::ALL, view);
        if r.seqnum < all {
            return false;
        }
        // Marks keep nothing alive: a record with marks only lives as an untagged one.
        let mut kept_by = r.meta.tags.iter().filter(|t| !t.is_mark()).peekable();
        if tag == Tag::ALL {
            kept_by.peek().is_none() || kept_by.any(|&t| r.seqnum >= self.trim_point(r.meta.book, t, view))
        } else if tag.is_mark() {
            self.live_in(r, Tag::ALL, view) && self.in_mark_row(r, tag, view)
        } else {
            r.meta.tags.contains(&tag) && r.seqnum >= self.trim_point(r.meta.book, tag, view)
        }
    }

    /// Whether `mark`'s row still lists `r`, live or not: a trim of the mark drops the
    /// seqnums below its point that it finds there, and holds for no later record.
    fn in_mark_row(&self, r: &RefRecord, mark: Tag, view: View) -> bool {
        r.placement == Placement::Placed
            && view.sees(r.at, r.seqnum.log())
            && r.meta.tags.contains(&mark)
            && !self
                .trims
                .iter()
                .any(|t| view.sees(t.at, t.log) && t.book == r.meta.book && t.tag == mark && t.at >= r.at && t.seqnum > r.seqnum)
    }

    /// What `read_next` / `read_prev` must return to a reader with `view`.
    fn expect_read(&self, book: BookId, tag: Tag, bound: SeqNum, next: bool, view: View) -> Option<SeqNum> {
        let candidates = self.records.iter().filter(|r| r.meta.book == book && self.live_in(r, tag, view));
        if next {
            candidates.filter(|r| r.seqnum >= bound).map(|r| r.seqnum).min()
        } else {
            candidates.filter(|r| r.seqnum <= bound).map(|r| r.seqnum).max()
        }
    }
}

/// A client's request to attach aux data, named by its aux value (unique per request).
struct AuxRequest {
    book: BookId,
    seqnum: SeqNum,
    /// The engine refused it: no read may ever return its value.
    refused: bool,
}

pub struct Oracle {
    /// Metadata and data each location was assigned, from clients' requests.
    assigned: HashMap<Location, (RecordMeta, Bytes)>,
    /// Every aux data request clients submitted, by aux value.
    aux: HashMap<Bytes, AuxRequest>,
    committed: HashMap<(u16, LogId), Vec<MetalogEntry>>,
    config: Option<Arc<Configuration>>,
    follower: Follower,
    history: RefHistory,
    /// How far the canonical history of each log reaches.
    positions: Vec<MetalogPosition>,
    pub violations: Vec<String>,
}

impl Oracle {
    pub fn new() -> Oracle {
        Oracle {
            assigned: HashMap::new(),
            aux: HashMap::new(),
            committed: HashMap::new(),
            config: None,
            follower: Follower::new(FollowerConfig { fetch_retry_us: 0, buffer_max: usize::MAX }),
            history: RefHistory::default(),
            positions: Vec::new(),
            violations: Vec::new(),
        }
    }

    fn violation(&mut self, what: String) {
        if self.violations.len() < 20 {
            self.violations.push(what);
        }
    }

    pub fn position(&self, log: LogId) -> MetalogPosition {
        self.positions.get(log.0 as usize).copied().unwrap_or(MetalogPosition::ZERO)
    }

    pub fn on_assigned(&mut self, location: Location, meta: RecordMeta, data: Bytes) {
        if let Some((m, d)) = self.assigned.get(&location) {
            if *m != meta || *d != data {
                self.violation(format!("location {location:?} was assigned twice with different records"));
            }
            return;
        }
        self.assigned.insert(location, (meta, data));
    }

    /// A primary committed `entry`: no other entry may ever hold its place.
    pub fn on_committed(&mut self, entry: MetalogEntry) {
        // A seal decided where the term ends: nothing past it commits after.
        let tail = self.config.as_ref().and_then(|c| c.term(entry.term)?.sealed.as_ref()?.get(entry.log.0 as usize).cloned());
        if tail.is_some_and(|t| entry.index >= t.len) {
            self.violation(format!("entry {}:{} of {:?} committed past its sealed tail", entry.term.0, entry.index, entry.log));
            return;
        }
        let log = self.committed.entry((entry.term.0, entry.log)).or_default();
        match (entry.index as usize).cmp(&log.len()) {
            std::cmp::Ordering::Less => {
                if log[entry.index as usize] != entry {
                    let msg = format!("two different entries committed at {}:{} of {:?}", entry.term.0, entry.index, entry.log);
                    self.violation(msg);
                }
                return;
            }
            std::cmp::Ordering::Greater => {
                let msg = format!("entry {}:{} committed before its predecessor", entry.term.0, entry.index);
                self.violation(msg);
                return;
            }
            std::cmp::Ordering::Equal => log.push(entry.clone()),
        }
        self.follower.on_entry(entry);
        self.advance();
    }

    /// Where an engine's incarnation starts following `log` in partial mode, from the
    /// installed configurations and the canonical metalog: the start of the first term
    /// that binds it at version 0, or else that term's first committed entry of its
    /// shard's version or later. `None`: not bound, or no such entry committed yet.
    pub fn start_of(&self, engine: NodeId, incarnation: u64, log: LogId) -> Option<MetalogPosition> {
        let config = self.config.as_ref()?;
        let (term, since) = config.terms.iter().find_map(|t| {
            let lc = t.logs.get(usize::from(log.0))?;
            lc.shards.iter().find(|s| s.engine == engine && s.incarnation == incarnation).map(|s| (t.term, s.since))
        })?;
        if since == 0 {
            return Some(MetalogPosition::new(term, 0));
        }
        let entries = self.committed.get(&(term.0, log))?;
        entries.iter().find(|e| e.version >= since).map(|e| MetalogPosition::new(term, e.index))
    }

    /// A power loss of every sequencer of a replicated metalog: of each log's current
    /// term, the entries past `kept` (the longest prefix any sequencer still holds) are
    /// gone, committed or not, and the canonical history is rebuilt without them. What
    /// the seal keeps is checked against what is left. Returns the committed entries
    /// lost.
    pub fn lose_entries(&mut self, kept: &[(Term, LogId, u64)]) -> u64 {
        let mut lost = 0;
        for &(term, log, len) in kept {
            if let Some(entries) = self.committed.get_mut(&(term.0, log)) {
                lost += entries.len().saturating_sub(len as usize) as u64;
                entries.truncate(len as usize);
            }
        }
        if lost == 0 {
            return 0;
        }
        self.follower = Follower::new(FollowerConfig { fetch_retry_us: 0, buffer_max: usize::MAX });
        self.history = RefHistory::default();
        self.positions.iter_mut().for_each(|p| *p = MetalogPosition::ZERO);
        if let Some(config) = self.config.clone() {
            self.follower.on_config(&config);
        }
        let mut keys: Vec<(u16, LogId)> = self.committed.keys().copied().collect();
        keys.sort();
        for key in keys {
            for e in self.committed[&key].clone() {
                self.follower.on_entry(e);
            }
        }
        self.advance();
        lost
    }

    pub fn config(&self) -> Option<&Arc<Configuration>> {
        self.config.as_ref()
    }

    pub fn on_installed(&mut self, config: Arc<Configuration>) {
        // Installed configurations form one history, whichever controller installed
        // them: a later one keeps every term of an earlier one (sealing its last).
        if let Some(old) = self.config.clone() {
            let new_current = config.current().term;
            if config.stamp() <= old.stamp() {
                let (t, v) = config.stamp();
                self.violation(format!("term {} version {v} was installed after {:?}", t.0, old.stamp()));
            }
            for t in &old.terms {
                let kept = config.term(t.term).is_some_and(|n| {
                    let same_shape = n.storage == t.storage && version_follows(t, n);
                    same_shape && (t.sealed.is_none() || n.sealed == t.sealed) && (n.sealed.is_some() || t.term == new_current)
                });
                if !kept {
                    self.violation(format!(
                        "the configuration of term {} installed by {} differs from the one installed by {}",
                        t.term.0, config.controller, old.controller
                    ));
                }
            }
        }
        // The index tier keeps its shards; a node replicates one shard at most; its
        // layout changes only by replacing replicas (the spec's item 9).
        if let Some(tier) = &config.tier {
            let nodes: Vec<NodeId> = tier.nodes().collect();
            let once = nodes.iter().collect::<BTreeSet<_>>().len() == nodes.len();
            let old = self.config.as_ref().and_then(|c| c.tier.as_ref());
            if !once || tier.shards.iter().any(Vec::is_empty) || old.is_some_and(|o| o.shards.len() != tier.shards.len()) {
                let what = format!("the index tier {tier:?} does not follow {old:?}");
                self.violation(what);
            }
        }
        // A sealed tail keeps every committed entry.
        let sealed_count = config.terms.len().saturating_sub(1);
        if let Some(t) = config.terms.get(sealed_count.wrapping_sub(1)).filter(|_| sealed_count > 0) {
            let tails = t.sealed.as_ref().expect("an earlier term is sealed");
            for (l, tail) in tails.iter().enumerate() {
                let committed = self.committed.get(&(t.term.0, LogId(l as u8))).map_or(0, |v| v.len() as u64);
                if tail.len < committed {
                    let msg =
                        format!("sealing term {} of log {l} kept {} entries, {committed} were committed", t.term.0, tail.len);
                    self.violation(msg);
                }
            }
        }
        let ids: Vec<ShardId> = config.terms.iter().flat_map(|t| &t.logs).flat_map(|l| &l.shards).map(|s| s.shard).collect();
        if ids.iter().collect::<BTreeSet<_>>().len() != ids.len() {
            let (t, v) = config.stamp();
            self.violation(format!("a shard id is used twice in term {} version {v}", t.0));
        }
        self.follower.on_config(&config);
        if config.n_logs < self.positions.len() as u8 {
            self.violation(format!(
                "term {} has {} logs, an earlier one had {}",
                config.current().term.0,
                config.n_logs,
                self.positions.len()
            ));
        }
        while self.positions.len() < config.n_logs as usize {
            self.positions.push(MetalogPosition::ZERO);
        }
        self.config = Some(config);
        self.advance();
    }

    fn advance(&mut self) {
        let Some(config) = self.config.clone() else { return };
        for l in 0..config.n_logs {
            for e in self.follower.poll(&config, LogId(l)) {
                self.apply(&config, e);
            }
            let delivered = self.follower.delivered(LogId(l));
            let position = &mut self.positions[l as usize];
            *position = (*position).max(delivered);
        }
    }

    fn apply(&mut self, config: &Configuration, e: MetalogEntry) {
        let lc = config.term(e.term).expect("known term").log(e.log).clone();
        let at = e.position_after();
        for (j, ids, start) in e.runs() {
            if !lc.shards.get(j).is_some_and(|s| s.open_at(e.version)) {
                let (t, i, v) = (e.term.0, e.index, e.version);
                self.violation(format!("entry {t}:{i} of {:?} (version {v}) orders shard {j}, not bound at its version", e.log));
                continue;
            }
            for (k, local_id) in ids.enumerate() {
                let location = Location { shard: lc.shards[j].shard, local_id };
                let seqnum = e.seqnum_at(start + k as u64);
                let Some((meta, _)) = self.assigned.get(&location).cloned() else {
                    self.violation(format!("{location:?} was ordered at {seqnum} but no engine assigned it"));
                    continue;
                };
                let log = &mut self.history;
                // Every condition must hold; the first that does not names the holder.
                let failed = meta.cond.iter().chain(&meta.unchanged).find_map(|c| {
                    let stream = log.streams.get(&(meta.book, c.tag)).map_or(&[][..], |v| &v[..]);
                    if stream.len() as u64 == c.position {
                        return None;
                    }
                    let holder = stream.get(c.position as usize).copied().filter(|h| {
                        let r = &log.records[log.by_seqnum[h]];
                        if c.tag.is_mark() {
                            log.in_mark_row(r, c.tag, View::at(at))
                        } else {
                            log.live_in(r, c.tag, View::at(at))
                        }
                    });
                    Some(Placement::CondFailed { holder })
                });
                let placement = failed.unwrap_or(Placement::Placed);
                if placement == Placement::Placed {
                    for &t in &meta.tags {
                        log.streams.entry((meta.book, t)).or_default().push(seqnum);
                    }
                }
                log.by_seqnum.insert(seqnum, log.records.len());
                log.records.push(RefRecord { seqnum, location, meta, placement, at });
            }
        }
        for t in &e.trims {
            self.history.trims.push(RefTrim { at, log: e.log, book: t.book, tag: t.tag, seqnum: t.seqnum });
        }
        self.positions[e.log.0 as usize] = at;
    }

    /// An engine's index applied an entry: it must match the canonical history.
    pub fn on_indexed(&mut self, engine: u32, log: LogId, position: MetalogPosition, records: &[IndexedRecord]) {
        self.on_decided(engine, log, position, records, &[]);
    }

    /// An index node (or an engine's index) decided an entry's records: they must
    /// match the canonical history. The failed records in `holder_lookups` name no
    /// holder (the shards' postings know it): the canonical one must be an older record.
    pub fn on_decided(
        &mut self,
        engine: u32,
        log: LogId,
        position: MetalogPosition,
        records: &[IndexedRecord],
        holder_lookups: &[SeqNum],
    ) {
        let l = &self.history;
        if position > self.position(log) {
            let msg =
                format!("engine n{engine} indexed {position} of {log:?} beyond the committed history {}", self.position(log));
            self.violation(msg);
            return;
        }
        let mut bad = Vec::new();
        for r in records {
            let Some(&i) = l.by_seqnum.get(&r.seqnum) else {
                bad.push(format!("engine n{engine} indexed {} which the canonical log lacks", r.seqnum));
                continue;
            };
            let c = &l.records[i];
            let placement = match c.placement {
                Placement::CondFailed { holder: Some(h) } if holder_lookups.contains(&r.seqnum) && h < r.seqnum => {
                    Placement::CondFailed { holder: None }
                }
                p => p,
            };
            if c.location != r.location || c.meta != r.meta || placement != r.placement || c.at != position {
                bad.push(format!("engine n{engine} disagrees on {}: it has {:?}, canonical {:?}", r.seqnum, r, c));
            }
        }
        for b in bad {
            self.violation(b);
        }
    }

    /// A stream an engine's local index caches at its position `at`: its seqnums must
    /// be exactly the stream's live records at `at` from `covered_from` on, or all of
    /// them when it claims `complete`.
    #[allow(clippy::too_many_arguments)]
    pub fn check_local_stream(
        &mut self,
        engine: u32,
        at: MetalogPosition,
        book: BookId,
        tag: Tag,
        covered_from: SeqNum,
        complete: bool,
        cached: &[SeqNum],
    ) {
        let h = &self.history;
        let view = View::at(at);
        let mut live: Vec<SeqNum> =
            h.records.iter().filter(|r| r.meta.book == book && h.live_in(r, tag, view)).map(|r| r.seqnum).collect();
        live.sort_unstable();
        if !complete {
            live.retain(|s| *s >= covered_from);
        }
        if live != cached {
            let what = format!(
                "engine n{engine}'s local index at {at} caches {book:?} {tag:?} as {cached:?} (from {covered_from}, complete: \
                 {complete}); the log holds {live:?}"
            );
            self.violation(what);
        }
    }

    /// An append completed: its record sits where the canonical log put `location`.
    pub fn check_append(&mut self, location: Location, result: &Result<SeqNum, Option<SeqNum>>) {
        let Some(seqnum) = self.history.records.iter().find(|r| r.location == location).map(|r| (r.seqnum, r.placement)) else {
            self.violation(format!("append at {location:?} completed but the canonical log never ordered it"));
            return;
        };
        let ok = match (result, seqnum.1) {
            (Ok(s), Placement::Placed) => *s == seqnum.0,
            (Err(holder), Placement::CondFailed { holder: h }) => *holder == h,
            _ => false,
        };
        if !ok {
            self.violation(format!("append at {location:?} completed with {result:?}, canonical {:?}", seqnum));
        }
    }

    /// A client asked to attach `aux` to `seqnum` as a record of `book`.
    pub fn on_aux_submitted(&mut self, aux: Bytes, book: BookId, seqnum: SeqNum) {
        let fresh = self.aux.insert(aux.clone(), AuxRequest { book, seqnum, refused: false }).is_none();
        assert!(fresh, "aux values name one request each: {aux:?}");
    }

    /// An aux data request completed at index position `at` of `log`: it must be
    /// accepted exactly when its seqnum is a record of its book live in the canonical
    /// log there.
    pub fn check_aux(&mut self, aux: &Bytes, accepted: bool, log: LogId, at: MetalogPosition) {
        let a = self.aux.get_mut(aux).expect("completed aux requests were submitted");
        a.refused = !accepted;
        let (book, seqnum) = (a.book, a.seqnum);
        if at > self.position(log) {
            self.violation(format!(
                "aux data was decided at {at} of {log:?}, beyond the canonical position {}",
                self.position(log)
            ));
            return;
        }
        let log = &self.history;
        let record = log.by_seqnum.get(&seqnum).map(|&i| &log.records[i]);
        let live = record.is_some_and(|r| r.meta.book == book && log.live_in(r, Tag::ALL, View::at(at)));
        if accepted != live {
            let owner = record.map(|r| r.meta.book);
            let msg = format!(
                "aux data for {seqnum} of {book:?} was {} at {at}, but the record there is {} (its book: {owner:?})",
                if accepted { "accepted" } else { "refused" },
                if live { "live" } else { "not live" }
            );
            self.violation(msg);
        }
    }

    /// A read completed at index position `at` of `log` for a caller whose context
    /// was `seen`: it returned what the canonical history holds there, including
    /// whatever the caller had seen before in any log (read-your-writes across engines
    /// and across a book's move to an added log).
    #[allow(clippy::too_many_arguments)]
    pub fn check_read(
        &mut self,
        book: BookId,
        tag: Tag,
        bound: SeqNum,
        next: bool,
        log: LogId,
        at: MetalogPosition,
        seen: &Context,
        got: &Option<LogRecord>,
    ) {
        if at > self.position(log) {
            self.violation(format!("a read was served at {at} of {log:?}, beyond the canonical position {}", self.position(log)));
            return;
        }
        let log = &self.history;
        let expected = log.expect_read(book, tag, bound, next, View { at, seen: Some(seen) });
        let got_seqnum = got.as_ref().map(|r| r.seqnum);
        if expected != got_seqnum {
            let msg = format!(
                "read {book:?} tag {tag:?} {} {bound} at {at}: got {got_seqnum:?}, expected {expected:?}",
                if next { ">=" } else { "<=" }
            );
            self.violation(msg);
            return;
        }
        if let Some(r) = got {
            let c = &log.records[log.by_seqnum[&r.seqnum]];
            let owner = c.meta.book;
            let data = &self.assigned[&c.location].1;
            let mut bad = Vec::new();
            if *data != r.data || c.meta.tags != r.tags {
                bad.push(format!("read of {} returned other data or tags than appended", r.seqnum));
            }
            // Aux data comes only from an accepted request for this very record, made
            // in the record's own book.
            if let Some(v) = &r.aux {
                let wrong = match self.aux.get(v) {
                    None => Some("no client set it".to_string()),
                    Some(a) if a.refused => Some("its request was refused".to_string()),
                    Some(a) if a.seqnum != r.seqnum || a.book != owner => {
                        Some(format!("it was set for {} of {:?}", a.seqnum, a.book))
                    }
                    Some(_) => None,
                };
                if let Some(wrong) = wrong {
                    bad.push(format!("read of {} (a record of {owner:?}) returned aux data {v:?}, but {wrong}", r.seqnum));
                }
            }
            for b in bad {
                self.violation(b);
            }
        }
    }
}

/// Whether `new` is `old` or a later version of it: the same logs and sequencers, every
/// shard of `old` unchanged but for a close at a later version, shards added only by a
/// later version, and the engines those bind.
fn version_follows(old: &TermConfig, new: &TermConfig) -> bool {
    if new.version == old.version {
        return new.logs == old.logs && new.engines == old.engines;
    }
    new.version > old.version
        && new.logs.len() == old.logs.len()
        && old.logs.iter().zip(&new.logs).all(|(o, n)| {
            let kept = o.shards.iter().zip(&n.shards).all(|(a, b)| {
                let closed = a.until == b.until || (a.until.is_none() && b.until.is_some_and(|u| u > old.version));
                (a.shard, a.engine, a.incarnation, &a.replicas, a.since)
                    == (b.shard, b.engine, b.incarnation, &b.replicas, b.since)
                    && closed
            });
            let added = n.shards.iter().skip(o.shards.len()).all(|s| s.since > old.version && s.since <= new.version);
            o.log == n.log && o.sequencers == n.sequencers && n.shards.len() >= o.shards.len() && kept && added
        })
}
