//! A table's protocol as an instance sees it: the transition log decides, as of the
//! instance's start (`switch.rs` makes the transitions); `observe` counts for `auto`.

use super::*;

impl Instance {
    /// The protocol of `table` for this instance. A table's protocol is the table's: its
    /// transition log decides (as of the instance's start), whatever a function
    /// declares; a declaration only names the protocol of a table nobody used yet.
    /// Using an `unsafe` table (no guarantee) needs an `unsafe` declaration.
    pub(super) async fn protocol(&mut self, ctx: &mut Context, table: &str) -> Result<Effective, Abort> {
        if let Some(&p) = self.protocols.get(table) {
            return Ok(p);
        }
        let declared = crate::table::declared_protocol(&self.core.config, &self.declared, table);
        // An unsafe table stays unsafe (tables switch only between read- and
        // write-optimized), so its first record says all, without an init record.
        let first = self.core.first_transition(ctx, self.book, table, declared).await?;
        let effective = match first {
            Transition::End { protocol: Protocol::Unsafe, .. } if declared == Protocol::Unsafe => Effective::Unsafe,
            Transition::End { protocol: Protocol::Unsafe, .. } => {
                return Err(Abort::Refused(Error::InvalidArgument(format!(
                    "table {table:?} is unsafe (its operations are not exactly-once); a function uses it only by \
                     declaring it unsafe too"
                ))))
            }
            _ => {
                self.begin(ctx).await?;
                match self.deferred_protocol(ctx, table).await? {
                    Some(effective) => effective,
                    None => match self.transition_at(ctx, table, first).await? {
                        Transition::End { protocol, .. } => effective(protocol),
                        Transition::Begin { .. } => Effective::Transitional,
                    },
                }
            }
        };
        self.protocols.insert(table.to_string(), effective);
        Ok(effective)
    }

    /// While the Init is deferred: the protocol `table` has now (its latest transition)
    /// if that is not a switch under way, and the deferred record then holds only if
    /// that stays so. A read-optimized read then reads at the index's end
    /// (`read_deferred`), a logged one (write-optimized, symmetric) the store's newest
    /// version, as it always does; both wait with the Init, and a write of those
    /// protocols logs it first (it flushes). `None` once the Init is logged (this logs
    /// it for a table being switched).
    pub(super) async fn deferred_protocol(&mut self, ctx: &mut Context, table: &str) -> Result<Option<Effective>, Abort> {
        let Some(unchanged) = &self.deferred else { return Ok(None) };
        if unchanged.len() < UNCHANGED_MAX {
            let (latest, records) = self.core.latest_transition(ctx, self.book, table).await?;
            let now = match latest {
                Transition::End { protocol, .. } if protocol != Protocol::Unsafe => Some(effective(protocol)),
                _ => None,
            };
            if let Some(now) = now {
                let unchanged = Cond { tag: self.core.tags.transition(table), position: records };
                self.deferred.as_mut().expect("checked").push(unchanged);
                self.deferred_tables.push(table.to_string());
                return Ok(Some(now));
            }
        }
        self.flush(ctx).await?;
        Ok(None)
    }

    /// The transition record in effect for `table` at this instance's start; `first`
    /// (the table's first record) if the table began after it.
    pub(super) async fn transition_at(&self, ctx: &mut Context, table: &str, first: Transition) -> Result<Transition, Abort> {
        let tag = self.core.tags.transition(table);
        let mut at = self.init_cursor;
        loop {
            let found = self.core.log.read_prev(ctx, self.shadow(), tag, SeqNum(at)).await?;
            let Some(r) = found else {
                // Nothing at or before the init record: the table began later.
                return Ok(first);
            };
            let t: Transition = record::decode("transition", &r.data)?;
            if t.table() == table {
                return Ok(t);
            }
            match r.seqnum.0.checked_sub(1) {
                Some(prev) => at = prev,
                None => return Ok(first),
            }
        }
    }

    /// Counts a read (`None`) or a write (`Some(large)`: its value is too large for its
    /// record) of `table`, switchable under `protocol`, with what it costs under
    /// read- and write-optimized as it follows this instance's last operation on the
    /// table ([`Ops`]).
    pub(super) fn observe(&mut self, table: &str, protocol: Effective, write: Option<bool>) {
        if matches!(protocol, Effective::Unsafe | Effective::Symmetric) {
            return;
        }
        let last = self.last_ops.get(table).copied();
        let (ops, now) = Ops::of(last, write, self.deferred.is_some());
        match self.last_ops.get_mut(table) {
            Some(l) => *l = now,
            None => {
                self.last_ops.insert(table.to_string(), now);
            }
        }
        self.core.observe(self.book, table, ops);
    }

    pub(super) fn store_table(&self, table: &str) -> String {
        crate::table::store_table(self.book, table)
    }
}
