//! Timers: heartbeats, resends of unordered records, retries of fetches, trims,
//! imports and forwards, and the requests whose operation timeout passed.

use super::*;

impl Engine {
    pub fn on_tick(&mut self, now: Micros) -> NextTick {
        let mut next = NextTick::after(now);
        if self.last_heartbeat.is_none_or(|t| now >= t + self.cfg.heartbeat_interval_us) {
            self.last_heartbeat = Some(now);
            let heartbeat = Message::heartbeat(self.incarnation, self.config.as_deref());
            for c in self.controllers.clone() {
                self.send(c, heartbeat.clone());
            }
        }
        next.at(now + self.cfg.heartbeat_interval_us);
        let Some(config) = self.config.clone() else { return next };
        let mut fetches = Vec::new();
        self.follower.on_tick(now, &config, &mut fetches, &mut next);
        for (to, m) in fetches {
            self.send(to, m);
        }
        // Resend unordered records.
        let retransmit = self.cfg.retransmit_us;
        let mut resend = Vec::new();
        for l in &mut self.logs {
            if let Some(s) = l.shard.as_mut() {
                let mut batch = Vec::new();
                for (&id, p) in s.pending.iter_mut() {
                    if now >= p.sent_at + retransmit {
                        p.sent_at = now;
                        batch.push((id, p.record.clone()));
                    }
                    next.at(p.sent_at + retransmit);
                }
                if !batch.is_empty() {
                    resend.push((s.shard, s.replicas.clone(), batch));
                }
            }
        }
        for (shard, replicas, records) in resend {
            for r in replicas {
                self.send(r, Message::Replicate { shard, records: records.clone(), traces: Vec::new() });
            }
        }
        // Retry metadata and record fetches, and trims.
        let retry = self.cfg.fetch_retry_us;
        for (to, msg) in self.assembly.retry(now, retry) {
            self.send(to, msg);
        }
        let stale: Vec<u64> = self.record_fetches.iter().filter(|(_, f)| now >= f.sent_at + retry).map(|(r, _)| *r).collect();
        for req in stale {
            self.send_record_fetch(now, req);
        }
        let stale: Vec<OpId> = self.trims.iter().filter(|(_, t)| now >= t.sent_at + retransmit).map(|(o, _)| *o).collect();
        for op in stale {
            self.send_trim(now, op);
        }
        for l in 0..self.logs.len() {
            if self.logs[l].import.as_ref().is_some_and(|i| i.sent_at.is_none_or(|t| now >= t + retransmit)) {
                self.send_import(now, LogId(l as u8));
            }
        }
        let stale: Vec<u64> =
            self.forwards.iter().filter(|(_, f)| f.resent() && now >= f.sent_at + retransmit).map(|(r, _)| *r).collect();
        for req in stale {
            self.send_forward(now, req);
        }
        self.partial_tick(now, &mut next);
        self.expire(now);
        // When the retries just made (or not yet due) fall due again.
        self.assembly.next_due(retry, &mut next);
        self.record_fetches.values().for_each(|f| next.at(f.sent_at + retry));
        self.trims.values().for_each(|t| next.at(t.sent_at + retransmit));
        for l in &self.logs {
            if let Some(i) = &l.import {
                next.at(i.sent_at.map_or(now, |t| t + retransmit));
            }
        }
        self.forwards.values().filter(|f| f.resent()).for_each(|f| next.at(f.sent_at + retransmit));
        if let Some((&(deadline, _), _)) = self.deadlines.first_key_value() {
            next.at(deadline);
        }
        next
    }

    pub(super) fn expire(&mut self, now: Micros) {
        while let Some((&(deadline, op), _)) = self.deadlines.first_key_value() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            let ms = self.cfg.op_timeout_us / 1000;
            if self.appends_in_flight.remove(&op).is_some() {
                // The record stays pending: it may still be ordered, but nobody waits.
                for l in &mut self.logs {
                    if let Some(s) = l.shard.as_mut() {
                        for p in s.pending.values_mut().filter(|p| p.op == op) {
                            p.done = true;
                        }
                    }
                }
                // Placed or failed, decided; only the holder's shard never answered.
                let e = self.partial_holder_cancel(op).unwrap_or(Error::Timeout(ms));
                self.complete(op, Err(e), LogId(0), MetalogPosition::ZERO);
            } else if self.trims.remove(&op).is_some() {
                self.complete(op, Err(Error::Timeout(ms)), LogId(0), MetalogPosition::ZERO);
            } else {
                if let Some(i) = self.awaiting_config.iter().position(|a| a.op == op) {
                    // No configuration with the caller's term came in a whole timeout:
                    // the position is not one this cluster gave out (a made-up one, or
                    // one kept from before its data was reset). Refused as bad input.
                    let a = self.awaiting_config.swap_remove(i);
                    let current = self.config.as_ref().map_or(0, |c| c.current().term.0);
                    let term = a.context.positions().iter().map(|p| p.term).max().unwrap_or(0);
                    let e = Error::InvalidArgument(format!(
                        "the caller's position names term {term}, and this cluster is at term {current}"
                    ));
                    self.complete(op, Err(e), LogId(0), MetalogPosition::ZERO);
                    continue;
                }
                let mut found = false;
                for l in &mut self.logs {
                    if let Some(i) = l.waiting.iter().position(|r| r.op == op) {
                        l.waiting.swap_remove(i);
                        found = true;
                    }
                }
                let fetch = self.record_fetches.iter().find(|(_, f)| f.op == op).map(|(r, _)| *r);
                if let Some(req) = fetch {
                    self.record_fetches.remove(&req);
                    found = true;
                }
                let forward = self.forwards.iter().find(|(_, f)| f.op == op).map(|(r, _)| *r);
                if let Some(req) = forward {
                    self.forwards.remove(&req);
                    found = true;
                }
                if let Some(tier) = self.partial_cancel(op) {
                    // The index tier never answered: a shard has no live replica.
                    self.complete(op, Err(tier.unwrap_or(Error::Timeout(ms))), LogId(0), MetalogPosition::ZERO);
                } else if found {
                    self.complete(op, Err(Error::Timeout(ms)), LogId(0), MetalogPosition::ZERO);
                }
            }
        }
    }

    #[cfg(feature = "sim")]
    /// For debugging the simulator: what this engine follows and appends to.
    pub fn debug_state(&self) -> String {
        let mut out = format!("stamp {:?}", self.config.as_ref().map(|c| c.stamp()));
        for (i, l) in self.logs.iter().enumerate() {
            let log = LogId(i as u8);
            out += &format!(
                "; log {i}: seeking {} delivered {} shard {:?} retiring {:?} pending {:?}",
                self.follower.seeking(log),
                self.follower.delivered(log),
                l.shard.as_ref().map(|s| (s.shard, s.next_local_id)),
                l.retiring.iter().map(|s| (s.shard, s.closes, s.pending.len())).collect::<Vec<_>>(),
                l.shard.as_ref().map(|s| s.pending.keys().copied().collect::<Vec<_>>()),
            );
        }
        out + &format!("; unassigned {}", self.unassigned.len())
    }
}
