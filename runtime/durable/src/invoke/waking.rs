//! What wakes an invocation from outside: a promise's completion, a cancellation, a
//! released lock.

use super::*;
use crate::node::Invocations;

impl Durable {
    /// Wakes the roots that wait for `promise`: its creator's, and those of awaits that
    /// would suspend (the promise's waiters stream). Should this node die first, the
    /// recovery scan wakes them from the completion's record. A finished root answers
    /// from its log, running nothing.
    pub(super) async fn wake_waiters(
        self: &Arc<Self>,
        ctx: &mut Context,
        book: BookId,
        promise: &str,
        creator: InstanceId,
    ) -> Result<()> {
        let mut woken = std::collections::BTreeSet::from([creator]);
        woken.extend(self.promise_waiters(ctx, book, promise).await?);
        for root in woken {
            self.wake(ctx, book, root).await?;
        }
        Ok(())
    }

    /// The roots of the awaits of `promise` that logged a wait (their Sleep records in
    /// the promise's waiters stream).
    pub(crate) async fn promise_waiters(&self, ctx: &mut Context, book: BookId, promise: &str) -> Result<Vec<InstanceId>> {
        let waiters = self.core.tags.promise_waiters(promise);
        let mut roots = Vec::new();
        let mut at = SeqNum(0);
        while let Some(r) = self.core.log.read_next(ctx, shadow(book), waiters, at).await? {
            at = SeqNum(r.seqnum.0.saturating_add(1));
            if let Ok(Step::Sleep(kind::Sleep { root, .. })) = record::decode::<Step>("step", &r.data) {
                roots.push(root);
            }
        }
        Ok(roots)
    }

    /// Runs root `root` of `book` again here, in the background, if it exists.
    pub(crate) async fn wake(self: &Arc<Self>, ctx: &mut Context, book: BookId, root: InstanceId) -> Result<()> {
        let first = self.core.log.read_next(ctx, shadow(book), self.core.tags.step(&root), SeqNum(0)).await?;
        let Some(Step::Init(kind::Init { function, version, .. }) | Step::InitKeyed(kind::InitKeyed { function, version, .. })) =
            first.map(|r| record::decode_steps("step", &r.data)).transpose()?.and_then(|s| s.into_init_and_last().0)
        else {
            return Ok(());
        };
        let weak = Arc::downgrade(self);
        // From the caller's position: a replica behind it would not show the run what
        // woke it (a completion, a cancellation), and the run would wait again.
        let seen = ctx.clone();
        // Cancelling it loses nothing: the root is due in the recovery scan.
        self.core.spawn.spawn(
            "wake",
            Box::pin(async move {
                let Some(d) = Durable::live(&weak) else { return };
                let _ = d.reexecute(book, root, function, version, 1, seen).await;
            }),
        );
        Ok(())
    }

    /// Runs `root`, which holds a lock a waiter here waited for all along, again here
    /// in the background, at most every `reexecute_after_ms` per root (see `locks.rs`).
    pub(crate) fn kick_holder(self: &Arc<Self>, ctx: &Context, book: BookId, root: &InstanceId) {
        let now = self.core.clock.now_ms();
        {
            let mut kicked = self.kicked.lock().expect("not poisoned");
            if kicked.get(root).is_some_and(|&at| now < at.saturating_add(self.core.config.reexecute_after_ms)) {
                return;
            }
            if kicked.len() >= 4096 {
                kicked.retain(|_, at| now < at.saturating_add(self.core.config.reexecute_after_ms));
            }
            kicked.insert(root.clone(), now);
        }
        let (weak, mut ctx, root) = (Arc::downgrade(self), ctx.clone(), root.clone());
        // Cancelling it loses nothing: the holder is due in the recovery scan anyway.
        self.core.spawn.spawn(
            "kick",
            Box::pin(async move {
                let Some(d) = Durable::live(&weak) else { return };
                // A holder asleep wakes by its own timer (or the recovery scan): running
                // it now would only replay it up to its sleep again.
                if let Ok(InvocationStatus::Sleeping { .. }) = d.status_of(&mut ctx, book, &root).await {
                    return;
                }
                if let Err(e) = d.wake(&mut ctx, book, root.clone()).await {
                    tracing::debug!(%root, "running a lock's holder again: {e}");
                }
            }),
        );
    }
}

impl Invocations<'_> {
    /// Completes `promise` of `book` with `value`, once: the completion is a
    /// conditional append at offset 1 of the promise's stream, so a second one gets
    /// `Conflict`, one of a promise never created `PromiseNotFound`. Then the invocation
    /// that created it, and any other that suspended awaiting it, runs again here (the
    /// recovery scan wakes them too, from the completion's record in INSTANCES). An
    /// await waiting in place sees the completion within a few ms.
    pub async fn complete_promise(&self, ctx: &mut Context, book: BookId, promise: &str, value: Bytes) -> Result<()> {
        let d = self.0;
        check_book(book)?;
        if !crate::tags::is_promise_id(promise) {
            return Err(Error::PromiseNotFound(promise.to_string()));
        }
        if value.len() > crate::PAYLOAD_MAX {
            return Err(Error::TooLarge {
                what: "the value of a promise",
                size: Some(value.len() as u64),
                limit: crate::PAYLOAD_MAX as u64,
            });
        }
        let stream = d.core.tags.promise(promise);
        let Some(created) = d.core.log.read_next(ctx, shadow(book), stream, SeqNum(0)).await? else {
            return Err(Error::PromiseNotFound(promise.to_string()));
        };
        let Step::Promise(kind::Promise { root, .. }) = record::decode::<Step>("promise", &created.data)? else {
            return Err(Error::Internal(format!("promise {promise} starts with another record")));
        };
        let done = Step::Completed(kind::Completed { promise: promise.to_string(), root: root.clone(), value });
        let tags = [stream, INSTANCES];
        match d.core.log.cond_append(ctx, shadow(book), &tags, record::encode(&done), stream, 1).await {
            Ok(_) => d.core.completions.notify(promise),
            Err(tally_log_core::Error::Conflict { .. }) => {
                return Err(Error::Conflict(format!("promise {promise} was completed already")));
            }
            Err(e) => return Err(e.into()),
        }
        // The completion stands: waking its waiters is the scan's too, should it fail here.
        if let Err(e) = d.wake_waiters(ctx, book, promise, root).await {
            tracing::warn!(promise, "waking the invocations that await a completed promise: {e}");
        }
        Ok(())
    }

    /// Cancels root invocation `id` of `book` and its children, cooperatively: each of
    /// its instances sees the cancellation at its next step (a state operation, a call,
    /// a conditional append, a sleep, an await: within `CANCEL_CHECK_MS` on a node
    /// where it runs), which then fails with `cancelled`, as does every step after it;
    /// what it did before stays done, and its outcome is `Cancelled` whatever its guest
    /// returns. A sleeping or suspended root is run again at once, to see it. Cancelling
    /// twice is cancelling once; a finished invocation gets `Conflict`, an unknown one
    /// `InvocationNotFound`.
    pub async fn cancel(&self, ctx: &mut Context, book: BookId, id: &str) -> Result<()> {
        let d = self.0;
        match d.invocation(ctx, book, id).await? {
            // Cancelling twice is cancelling once: the first cancellation ended it.
            InvocationStatus::Finished(Err(Error::Cancelled)) => return Ok(()),
            InvocationStatus::Finished(r) => {
                let how = match r {
                    Ok(_) => "succeeded".to_string(),
                    Err(e) => format!("failed ({})", e.code()),
                };
                return Err(Error::Conflict(format!("invocation {id} has finished: it {how}")));
            }
            InvocationStatus::Running | InvocationStatus::Sleeping { .. } => {}
        }
        let root = InstanceId::parse_generated(id)?;
        let stream = d.core.tags.cancel(&root);
        let request = record::encode(&Step::Cancel(kind::Cancel { root: root.clone() }));
        match d.core.log.cond_append(ctx, shadow(book), &[stream, INSTANCES], request, stream, 0).await {
            Ok(_) | Err(tally_log_core::Error::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        d.wake(ctx, book, root).await
    }
}
