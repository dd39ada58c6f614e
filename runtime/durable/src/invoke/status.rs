//! What the API reads of invocations: one's status, and a book's roots, from their step logs.
//!
//! A listing reads the book's INSTANCES stream for the Inits of roots (also one that
//! begins a deferred group) and each root's status from the last record of its step log.
//! A page reads at most `LIST_SCAN_MAX` records of the stream, whatever it finds, so a
//! filter that matches little never makes one call read the whole stream.

use super::*;
use crate::node::Invocations;

impl Durable {
    /// The status of invocation `id` (as [`Durable::invoke_async`] returned it) on
    /// `book`: kept in memory for this node's asynchronous invocations, otherwise read
    /// from the invocation's step log.
    /// `ctx` is where the caller saw the log (a client's `Tally-Position`): the status
    /// is read at least there, and `ctx` moves to where it was read.
    pub async fn invocation(&self, ctx: &mut Context, book: BookId, id: &str) -> Result<InvocationStatus> {
        check_book(book)?;
        // An ID this platform cannot have handed out names no invocation.
        let id = InstanceId::parse_generated(id).map_err(|_| Error::InvocationNotFound(id.to_string()))?;
        let kept = self.running.asyncs.lock().expect("not poisoned").by_id.get(&(book, id.clone())).cloned();
        if let Some(status) = kept {
            return Ok(status);
        }
        let tag = self.core.tags.step(&id);
        let not_found = || Error::InvocationNotFound(id.to_string());
        let Some(first) = self.core.log.read_next(ctx, shadow(book), tag, SeqNum(0)).await? else {
            return Err(not_found());
        };
        match record::decode_steps("step", &first.data)?.into_init_and_last().0 {
            Some(Step::Init(kind::Init { id: found, .. }) | Step::InitKeyed(kind::InitKeyed { id: found, .. }))
                if found == id => {}
            _ => return Err(not_found()),
        }
        self.status_of(ctx, book, &id).await
    }

    /// The status of root `id` of `book` as the last record of its step log says: its
    /// result, a sleep not yet over, or (for a root whose child sleeps, which has no
    /// Sleep of its own) the wake time this node suspended it until.
    pub(super) async fn status_of(&self, ctx: &mut Context, book: BookId, id: &InstanceId) -> Result<InvocationStatus> {
        let last = self.core.log.read_prev(ctx, shadow(book), self.core.tags.step(id), SeqNum::MAX).await?;
        let wall = self.core.clock.wall_ms();
        Ok(match last.map(|r| record::decode_last("step", &r.data)).transpose()? {
            Some(Step::Result(kind::Result { outcome })) => InvocationStatus::Finished(outcome.into_result().map(Bytes::from)),
            Some(Step::Sleep(kind::Sleep { until_ms, .. }) | Step::Delay(kind::Delay { until_ms, .. })) if until_ms > wall => {
                InvocationStatus::Sleeping { wake_ms: until_ms }
            }
            _ => match self.running.suspended.lock().expect("not poisoned").get(&(book, id.clone())) {
                Some(&wake_ms) if wake_ms > wall => InvocationStatus::Sleeping { wake_ms },
                _ => InvocationStatus::Running,
            },
        })
    }
}

impl Invocations<'_> {
    /// The root invocations of `book` started at or after seqnum `after` (a cursor:
    /// 0 for the first page) whose function is `function` and whose status is named
    /// `status` (see [`ListedStatus::name`]), if given, in the order they started, at
    /// most `limit`; and the cursor of the next page, if the stream may hold more. Only
    /// what garbage collection has kept is listed (finished invocations for
    /// `results_kept_ms`). A page reads at most `LIST_SCAN_MAX` records of the stream.
    pub async fn list(
        &self,
        ctx: &mut Context,
        book: BookId,
        function: Option<&str>,
        status: Option<&str>,
        after: u64,
        limit: usize,
    ) -> Result<(Vec<Listed>, Option<u64>)> {
        let d = self.0;
        check_book(book)?;
        let mut out = Vec::new();
        let mut at = after;
        for _ in 0..LIST_SCAN_MAX {
            if out.len() >= limit {
                return Ok((out, Some(at)));
            }
            let Some(r) = d.core.log.read_next(ctx, shadow(book), INSTANCES, SeqNum(at)).await? else {
                return Ok((out, None));
            };
            at = r.seqnum.0.saturating_add(1);
            let Ok((
                Some(Step::Init(kind::Init { id, function: f, .. }) | Step::InitKeyed(kind::InitKeyed { id, function: f, .. })),
                _,
            )) = record::decode_steps("step", &r.data).map(Step::into_init_and_last)
            else {
                continue;
            };
            if !id.is_root() || function.is_some_and(|w| w != f) {
                continue;
            }
            let listed = match d.status_of(ctx, book, &id).await? {
                InvocationStatus::Running => ListedStatus::Running,
                InvocationStatus::Sleeping { wake_ms } => ListedStatus::Sleeping { wake_ms },
                InvocationStatus::Finished(Ok(_)) => ListedStatus::Succeeded,
                InvocationStatus::Finished(Err(e)) => ListedStatus::Failed(e.code()),
            };
            if status.is_none_or(|s| s == listed.name()) {
                out.push(Listed { id, function: f, status: listed });
            }
        }
        Ok((out, Some(at)))
    }
}
