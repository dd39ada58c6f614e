//! Queue pushes and pops as steps of an instance (`queues.rs` has the queues).

use super::*;

impl Instance {
    /// Pushes `message` to `queue` (`queues.rs`): a step, in this instance's shard. A
    /// small message is taken like a read-optimized write, with the clock readings before
    /// it, and rides the instance's next record (its effect, the message's place in
    /// the shard, is that record's; a deferred Init waits for it too); a larger one is
    /// logged at once, in a record of its own.
    pub async fn queue_push(&mut self, ctx: &mut Context, queue: &str, message: Bytes) -> Result<(), Abort> {
        self.writable("a push")?;
        queues::check_name(queue).map_err(Abort::Refused)?;
        if message.len() > crate::abort::VALUE_MAX {
            return Err(Abort::Refused(Error::TooLarge {
                what: "a message",
                size: Some(message.len() as u64),
                limit: crate::abort::VALUE_MAX as u64,
            }));
        }
        let shard = queues::shard_of(&self.id);
        let small = message.len() <= record::PUT_INLINE_MAX;
        let step = Step::QueuePush(kind::QueuePush { queue: queue.to_string(), shard, message });
        if !small {
            self.init_checked(ctx).await?;
            self.flush(ctx).await?;
            self.log_clocks(ctx).await?;
            self.log_step(ctx, step, &[self.core.tags.queue_shard(queue, shard)]).await?;
            self.core.completions.notify(&queues::wake_key(self.book, queue));
            return Ok(());
        }
        // A root started lazily on a node alone defers its Init to that record too.
        self.begin(ctx).await?;
        self.take_clocks(ctx).await?;
        self.step_gate(ctx).await?;
        if let Some(r) = self.recorded(&step)? {
            self.take(r.seqnum);
            return Ok(());
        }
        self.take_pending(ctx, step, None).await
    }

    /// Pops the oldest message of a shard of `queue`, waiting up to `timeout_ms` (and
    /// not past the attempt's deadline) for one ([`Instance::queue_pop_many`] of one).
    pub async fn queue_pop(
        &mut self,
        ctx: &mut Context,
        queue: &str,
        timeout_ms: u64,
        deadline_ms: u64,
    ) -> Result<Option<Bytes>, Abort> {
        Ok(self.pop(ctx, queue, None, timeout_ms, deadline_ms).await?.pop())
    }

    /// Pops up to `max` (1 to [`queues::POP_MANY_MAX`]) of the oldest messages of a
    /// shard of `queue`, in order, waiting up to `timeout_ms` (and not past the
    /// attempt's deadline) for the first: every pop that finds one is a step, and so is
    /// the last, empty one, so that every execution returns the same. The pending steps
    /// before it ride the pop's record (a relay's push to the next queue, the clock
    /// readings), but for pushes to this queue, which are logged first: it looks for a
    /// message before it logs, and must find its own.
    pub async fn queue_pop_many(
        &mut self,
        ctx: &mut Context,
        queue: &str,
        max: u32,
        timeout_ms: u64,
        deadline_ms: u64,
    ) -> Result<Vec<Bytes>, Abort> {
        if !(1..=queues::POP_MANY_MAX).contains(&max) {
            return Err(Abort::Refused(Error::InvalidArgument(format!(
                "a pop takes 1 to {} messages, not {max}",
                queues::POP_MANY_MAX
            ))));
        }
        self.pop(ctx, queue, Some(max), timeout_ms, deadline_ms).await
    }

    /// A pop of one (`many` none: a [`kind::QueuePop`], as before pops of many) or of up
    /// to `many` messages.
    async fn pop(
        &mut self,
        ctx: &mut Context,
        queue: &str,
        many: Option<u32>,
        timeout_ms: u64,
        deadline_ms: u64,
    ) -> Result<Vec<Bytes>, Abort> {
        self.writable("a pop")?;
        if self.pending.iter().any(|p| matches!(&p.step, Step::QueuePush(kind::QueuePush { queue: q, .. }) if q == queue)) {
            self.flush(ctx).await?;
        }
        queues::check_name(queue).map_err(Abort::Refused)?;
        // A root started lazily on a node alone defers its Init to the pop's record.
        self.begin(ctx).await?;
        let now = self.core.clock.now_ms();
        let until = now.saturating_add(timeout_ms).min(deadline_ms.saturating_sub(IN_PLACE_MARGIN_MS)).max(now);
        let own = queues::shard_of(&self.id);
        let wake = queues::wake_key(self.book, queue);
        // How many a pop claims of the messages it sees (`queues/claims.rs`).
        let max = u64::from(many.unwrap_or(1));
        let step = |shard, last| match many {
            None => Step::QueuePop(kind::QueuePop { queue: queue.to_string(), shard, last }),
            Some(max) => Step::QueuePopMany(kind::QueuePopMany { queue: queue.to_string(), shard, last, max }),
        };
        self.take_clocks(ctx).await?;
        loop {
            let asked = step(own, false);
            // What this node's other pops are taking is left to them while it lasts.
            let mut claim = None;
            let (seqnum, pop) = match self.recorded(&asked)? {
                Some(r) => {
                    self.take(r.seqnum);
                    (r.seqnum, r.step)
                }
                None => {
                    let mut found = None;
                    for k in 0..queues::SHARDS {
                        let shard = (own + k) % queues::SHARDS;
                        let pending = queues::shard_at(&self.core, ctx, self.book, queue, shard, u64::MAX).await?.pending;
                        if let Some(c) = self.core.claims.claim(self.book, queue, shard, pending, max) {
                            found = Some(shard);
                            claim = Some(c);
                            break;
                        }
                    }
                    let now = self.core.clock.now_ms();
                    if found.is_none() && now < until {
                        let look = self.core.clock.sleep((until - now).min(queues::POLL_MS));
                        futures_util::future::select(look, self.core.completions.wait(&wake)).await;
                        continue;
                    }
                    let shard = found.unwrap_or(own);
                    let logged =
                        self.log_step(ctx, step(shard, found.is_none()), &[self.core.tags.queue_shard(queue, shard)]).await?;
                    (logged.seqnum, logged.step)
                }
            };
            let (shard, last) = match pop {
                Step::QueuePop(kind::QueuePop { shard, last, .. })
                | Step::QueuePopMany(kind::QueuePopMany { shard, last, .. }) => (shard, last),
                other => return Err(Abort::NonDeterministic(format!("a pop of {} is a {}", self.id, other.describe()))),
            };
            let view = queues::shard_at(&self.core, ctx, self.book, queue, shard, seqnum).await?;
            // A pop that got less than it claimed (another node's pops were first) has
            // the waiting pops look again.
            if claim.take().is_some_and(|c| view.popped.map_or(0, |p| u64::from(p.1)) < c.count()) {
                self.core.completions.notify(&wake);
            }
            match view.popped {
                Some(popped) => return queues::messages_from(&self.core, ctx, self.book, queue, shard, popped).await,
                None if last => return Ok(Vec::new()),
                // Another pop got there first: look again.
                None => {}
            }
        }
    }
}
