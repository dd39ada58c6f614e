//! Configuration versions within a term (partial mode, the spec's item 8): function
//! nodes join, leave and restart with no seal, no new term and no replay.
//!
//! A version binds a new shard, at the end of each log's list, to every live function
//! node without an open shard of its current incarnation, and closes the open shards of
//! function nodes that are down or restarted. Shards are never rebound or reused, so a
//! shard's index in the list names it in every version (and `Progress` by index stays
//! unambiguous); closed shards stay in the list, and each log's entries carry a cut for
//! every shard bound up to their version. A term holds at most `slots_per_log` shards per
//! log: a join that does not fit seals the term, and the next one starts afresh with the
//! live nodes.
//!
//! A version also replaces an index replica silent for `index_replace_us` by a live
//! spare index node (the spec's item 9), and lists the live aggregators (one that is
//! down, or new, makes a version).

use super::*;

impl Controller {
    /// The function nodes that need a shard: live, and without an open shard of their
    /// current incarnation in the current version.
    fn joining(&self, now: Micros, t: &TermConfig) -> Vec<NodeId> {
        let bound = |e: NodeId| {
            let incarnation = self.members.get(&e).map_or(0, |m| m.incarnation);
            t.logs[0].shards.iter().any(|s| s.engine == e && s.incarnation == incarnation && s.open_at(t.version))
        };
        self.live_of(now, Role::Engine).into_iter().filter(|&e| !bound(e)).collect()
    }

    /// Whether the function nodes that need a shard fit the term's slots.
    pub(super) fn versions_fit(&self, now: Micros, t: &TermConfig) -> bool {
        let joining = self.joining(now, t).len();
        joining == 0 || t.logs.iter().all(|lc| lc.shards.len() + joining <= self.cfg.slots_per_log)
    }

    /// Publishes the next version of the current term if function nodes joined, left
    /// or restarted (the caller checked they fit).
    pub(super) fn next_version(&mut self, now: Micros) {
        let Some(config) = self.config.clone() else { return };
        let t = config.current();
        let Some(version) = t.version.checked_add(1) else { return };
        let live = |e: NodeId| self.live(now, e);
        let incarnation = |e: NodeId| self.members.get(&e).map_or(0, |m| m.incarnation);
        let mut logs = t.logs.clone();
        let mut changed = false;
        for lc in &mut logs {
            for s in lc.shards.iter_mut().filter(|s| s.open_at(t.version)) {
                if !live(s.engine) || incarnation(s.engine) != s.incarnation {
                    s.until = Some(version);
                    changed = true;
                }
            }
        }
        let joining = self.joining(now, t);
        if !joining.is_empty() && t.storage.is_empty() {
            return;
        }
        for lc in &mut logs {
            for &e in &joining {
                let shard = ShardId(self.next_shard);
                self.next_shard += 1;
                let k = lc.shards.len() + lc.log.0 as usize;
                let n_data = self.cfg.n_data.min(t.storage.len());
                let replicas = (0..n_data).map(|r| t.storage[(k + r) % t.storage.len()]).collect();
                lc.shards.push(ShardConfig {
                    shard,
                    engine: e,
                    incarnation: incarnation(e),
                    replicas,
                    since: version,
                    until: None,
                });
                changed = true;
            }
        }
        let tier = self.replaced_tier(now);
        if !changed && tier.is_none() {
            return;
        }
        let engines = logs[0].shards.iter().filter(|s| s.open_at(version)).map(|s| s.engine).collect();
        let mut next = (*config).clone();
        if let Some(tier) = tier {
            tracing::info!(?tier, "the index tier changes: a spare replaces a silent replica, or aggregators came or went");
            self.tier = Some(Some(tier.clone()));
            next.tier = Some(tier);
        }
        let current = next.terms.last_mut().expect("a configuration has a term");
        *current = TermConfig { logs, engines, version, ..current.clone() };
        tracing::info!(term = t.term.0, version, joining = joining.len(), "installed a new version of the term");
        self.publish(now, Arc::new(next));
    }

    /// The index tier with every replica silent for `index_replace_us` replaced by a
    /// live spare index node, if there is one: `None` if nothing changes. The newcomer
    /// goes last in its shard's list, so a replica that has the log pushes the decided
    /// updates while it replays; the one it replaces becomes a spare if it comes back.
    fn replaced_tier(&self, now: Micros) -> Option<TierLayout> {
        let mut tier = self.tier.clone().flatten()?;
        let aggregators = self.live_of(now, Role::Aggregator);
        let mut changed = aggregators != tier.aggregators;
        tier.aggregators = aggregators;
        let started = self.started_at.unwrap_or(now);
        let silent = |n: &NodeId| {
            let heard = self.members.get(n).and_then(|m| m.last_seen).unwrap_or(0).max(started);
            now >= heard + self.cfg.index_replace_us
        };
        let mut spares: Vec<NodeId> =
            self.live_of(now, Role::Index).into_iter().filter(|&n| tier.shard_of_node(n).is_none()).collect();
        for replicas in &mut tier.shards {
            while let Some(i) = replicas.iter().position(&silent) {
                let Some(spare) = spares.pop() else { return changed.then_some(tier) };
                replicas.remove(i);
                replicas.push(spare);
                changed = true;
            }
        }
        changed.then_some(tier)
    }
}
