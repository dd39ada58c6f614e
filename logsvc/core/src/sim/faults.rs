//! The safety phase's faults (crashes, power losses, controller crashes and
//! failovers, partitions), and the liveness phase that ends them and checks the log
//! caught up.

use super::*;

impl Sim {
    /// Whether `n` may crash now: a quorum of sequencers and one storage replica per
    /// shard stay alive, the failure model the log promises to survive.
    pub(super) fn may_crash(&self, n: NodeId) -> bool {
        let role = self.slots[&n].role;
        let down_same = self.slots.values().filter(|s| s.role == role && s.node.is_none()).count();
        let limit = match role {
            Role::Sequencer => (self.opts.n_meta - 1) / 2,
            Role::Storage => self.opts.n_data - 1,
            Role::Engine => self.opts.engines as usize,
            Role::Index => self.opts.partial.map_or(0, |p| p.shards * p.replicas + p.spares),
            Role::Aggregator => self.opts.partial.map_or(0, |p| p.aggregators),
        };
        down_same < limit
    }

    pub(super) fn crash(&mut self, n: NodeId) {
        let slot = self.slots.get_mut(&n).expect("known node");
        let Some(node) = slot.node.take() else { return };
        self.stats.chunks_spilled += node.chunks_spilled();
        self.stats.paths.add(&node.paths());
        self.stats.add_index(&node);
        // A storage node's disk loses what was not synced; the metalog store syncs
        // every write, so it loses nothing.
        slot.records.crash();
        self.stats.crashes += 1;
        if std::env::var_os("TALLY_SIM_DEBUG").is_some() {
            eprintln!("CRASH {n} at {}", self.now);
        }
        // Clients of a crashed engine lose their request: its outcome is unknown.
        let orphaned: Vec<u32> = (0..self.clients.len() as u32).filter(|&c| self.clients[c as usize].engine == n).collect();
        for c in orphaned {
            if let Some((op, _, _)) = self.clients[c as usize].op.take() {
                self.op_started.remove(&op);
                self.schedule(50_000, Event::ClientStep(c));
            }
        }
        let downtime = 50_000 + self.rng.below(800_000);
        self.schedule(downtime, Event::Restart(n));
    }

    pub(super) fn fault(&mut self) {
        if self.liveness {
            return;
        }
        self.schedule(10_000, Event::Fault);
        let nodes: Vec<NodeId> = self.slots.keys().copied().collect::<BTreeSet<_>>().into_iter().collect();
        if self.rng.chance(self.opts.crash) {
            let n = nodes[self.rng.below(nodes.len() as u64) as usize];
            if self.may_crash(n) {
                self.crash(n);
            }
        }
        if self.opts.metalog == MetalogMode::Replicated {
            self.replicated_faults();
        }
        let leader = self.leader;
        let power_loss = self.rng.chance(self.opts.power_loss);
        if power_loss {
            self.stats.power_losses += 1;
            for &n in &nodes {
                self.crash(n);
            }
            if self.opts.metalog == MetalogMode::Replicated {
                self.lose_unsynced_entries();
            }
        }
        if self.controllers[leader].node.is_some() && (power_loss || self.rng.chance(self.opts.controller_crash)) {
            // The store holds every configuration before it is sent, so a crash loses
            // only soft state: liveness, incarnations, a seal under way.
            self.controllers[leader].node = None;
            self.stats.controller_crashes += 1;
            let downtime = 50_000 + self.rng.below(800_000);
            self.schedule(downtime, Event::Restart(self.controllers[leader].id));
        }
        if self.controllers.len() > 1 && self.rng.chance(self.opts.failover) {
            // The lease moves (the leader was slow to renew it); the old leader runs on
            // for a while before it notices, and may still seal and try to persist.
            let next = (leader + 1 + self.rng.below(self.controllers.len() as u64 - 1) as usize) % self.controllers.len();
            let until = self.now + self.rng.below(300_000);
            self.controllers[leader].deposed_until = Some(until);
            self.tick_by(self.controllers[leader].id, until);
            self.leader = next;
            self.stats.failovers += 1;
            self.start_controller(next);
        }
        if self.rng.chance(self.opts.partition) {
            let a = nodes[self.rng.below(nodes.len() as u64) as usize];
            for &b in &nodes {
                if b != a && self.rng.chance(0.5) {
                    self.partitioned.insert((a.min(b), a.max(b)));
                }
            }
            self.stats.partitions += 1;
            let d = 50_000 + self.rng.below(400_000);
            self.schedule(d, Event::Heal);
        }
    }

    /// A replicated metalog's faults: each sequencer's driver syncs its store about
    /// every 50 ms, and a sequencer's machine may lose power while every other one is
    /// up and remembers its entries (the failure model: a quorum keeps its memory).
    fn replicated_faults(&mut self) {
        let sequencers: Vec<NodeId> = self.slots.iter().filter(|(_, s)| s.role == Role::Sequencer).map(|(&n, _)| n).collect();
        for &n in &sequencers {
            if self.rng.chance(0.2) {
                self.slots[&n].metalog.sync().expect("the in-memory store never fails");
            }
        }
        if !self.rng.chance(self.opts.sequencer_power_loss) {
            return;
        }
        let n = sequencers[self.rng.below(sequencers.len() as u64) as usize];
        let term = self.oracle.config().map(|c| c.current().term);
        let failed = |s: &Slot| match &s.node {
            Some(Node::Sequencer(q)) => s.lost_power || term.is_some_and(|t| q.amnesiac(t)),
            _ => true,
        };
        if failed(&self.slots[&n]) || sequencers.iter().any(|&m| m != n && failed(&self.slots[&m])) {
            return;
        }
        self.stats.sequencer_power_losses += 1;
        self.crash(n);
        self.lose_unsynced(n);
    }

    /// Sequencer `n`'s machine lost power: its store keeps what it synced and maybe a
    /// little more.
    fn lose_unsynced(&mut self, n: NodeId) {
        let kept = self.rng.below(3) as usize;
        let slot = self.slots.get_mut(&n).expect("known node");
        slot.metalog.lose_unsynced(kept);
        slot.lost_power = true;
        let metalog = slot.metalog.clone();
        for (&(term, log), len) in slot.durable_len.iter_mut() {
            let held = metalog.read_entries(term, log, 0, *len).expect("the in-memory store never fails").len();
            *len = held as u64;
        }
    }

    /// A power loss of every node under a replicated metalog: each sequencer keeps what
    /// it synced, and of the current term, whose entries no seal synced yet, the entries
    /// none of them kept are gone (what the README says `replicated` may lose). The
    /// oracle forgets them, and checks that the seal keeps every other one.
    fn lose_unsynced_entries(&mut self) {
        let sequencers: Vec<NodeId> = self.slots.iter().filter(|(_, s)| s.role == Role::Sequencer).map(|(&n, _)| n).collect();
        for &n in &sequencers {
            self.lose_unsynced(n);
        }
        let Some(current) = self.oracle.config().map(|c| c.current().clone()) else { return };
        let kept: Vec<(Term, LogId, u64)> = current
            .logs
            .iter()
            .map(|lc| {
                let held = |n: &NodeId| {
                    let read = self.slots[n].metalog.read_entries(current.term, lc.log, 0, u64::MAX);
                    read.expect("the in-memory store never fails").len() as u64
                };
                (current.term, lc.log, sequencers.iter().map(held).max().unwrap_or(0))
            })
            .collect();
        self.stats.entries_lost += self.oracle.lose_entries(&kept);
    }

    pub(super) fn begin_liveness(&mut self) {
        self.liveness = true;
        self.partitioned.clear();
        let down: Vec<NodeId> = self.slots.iter().filter(|(_, s)| s.node.is_none()).map(|(n, _)| *n).collect();
        for n in down {
            self.start(n);
        }
        // A deposed leader learns it lost the lease; the leader runs.
        for i in 0..self.controllers.len() {
            if i != self.leader {
                self.controllers[i].node = None;
                self.controllers[i].deposed_until = None;
            }
        }
        if self.controllers[self.leader].node.is_none() {
            self.start_controller(self.leader);
        }
    }

    pub(super) fn check_liveness(&mut self) -> Result<(), Violation> {
        let mut what = Vec::new();
        for (&n, slot) in &self.slots {
            let applied = |l: LogId| match &slot.node {
                Some(Node::Engine(e)) => Some(e.applied(l)),
                // A spare index node (in no shard) follows nothing.
                Some(Node::Index(x)) => x.shard().map(|_| x.applied(l)),
                _ => None,
            };
            if applied(LogId(0)).is_some() {
                for l in 0..self.controller_cfg.n_logs {
                    let (mine, canonical) = (applied(LogId(l)).expect("checked"), self.oracle.position(LogId(l)));
                    if mine != canonical {
                        what.push(format!(
                            "after the liveness phase node {n} has applied {mine} of log {l}, the log is at {canonical}"
                        ));
                    }
                }
            }
        }
        for (&n, slot) in &self.slots {
            if let Some(shard) = slot.node.as_ref().and_then(Node::index_shard) {
                let (held, walked) = (shard.postings.held(), shard.postings.walk());
                if held != walked {
                    what.push(format!("index node {n} counts {held:?} in its postings, a walk {walked:?}"));
                }
            }
        }
        let stuck = self.clients.iter().any(|c| c.op.is_some());
        if (stuck || !what.is_empty()) && std::env::var_os("TALLY_SIM_DEBUG").is_some() {
            for (n, slot) in &self.slots {
                match &slot.node {
                    Some(Node::Engine(e)) => what.push(format!("engine {n}: {}", e.debug_state())),
                    Some(Node::Sequencer(s)) => what.push(format!("sequencer {n}: {}", s.debug_state())),
                    _ => {}
                }
            }
            if let Some(c) = self.oracle.config() {
                what.push(format!("config {:?}: {:?}", c.stamp(), c.current().logs));
            }
        }
        for (i, c) in self.clients.iter().enumerate() {
            if let Some((op, req, _)) = &c.op {
                what.push(format!("client {i}'s op {op} ({req:?}) is still waiting at the end of the liveness phase"));
            }
            if c.completed == 0 {
                what.push(format!("client {i} completed no request"));
            }
        }
        if what.is_empty() {
            Ok(())
        } else {
            Err(Violation { seed: self.seed, at_us: self.now, what })
        }
    }
}
