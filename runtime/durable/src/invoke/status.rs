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
        // An ID this platform cannot have handed out names no invocation; a child's
        // (its root's, then `/step` of each call) names the child.
        let id = InstanceId::parse(id).map_err(|_| Error::InvocationNotFound(id.to_string()))?;
        let kept = self.running.asyncs.lock().expect("not poisoned").by_id.get(&(book, id.clone())).cloned();
        if let Some(status) = kept {
            return Ok(status);
        }
        self.answered_logged(book, &id).await;
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
        Ok(self.last_of(ctx, book, id, SeqNum::MAX).await?.0)
    }

    /// [`Durable::status_of`] as of seqnum `at`, with the trailer of the record that
    /// holds the Result.
    pub(super) async fn last_of(
        &self,
        ctx: &mut Context,
        book: BookId,
        id: &InstanceId,
        at: SeqNum,
    ) -> Result<(InvocationStatus, Option<Meta>)> {
        let last = self.core.log.read_prev(ctx, shadow(book), self.core.tags.step(id), at).await?;
        let wall = self.core.clock.wall_ms();
        let meta = last.as_ref().and_then(|r| record::meta::meta_of::<Step>(&r.data));
        let status = match last.map(|r| record::decode_last("step", &r.data)).transpose()? {
            Some(Step::Result(kind::Result { outcome })) => InvocationStatus::Finished(outcome.into_result().map(Bytes::from)),
            Some(Step::Sleep(kind::Sleep { until_ms, .. }) | Step::Delay(kind::Delay { until_ms, .. })) if until_ms > wall => {
                InvocationStatus::Sleeping { wake_ms: until_ms }
            }
            _ => match self.running.suspended.lock().expect("not poisoned").get(&(book, id.clone())) {
                Some(&wake_ms) if wake_ms > wall => InvocationStatus::Sleeping { wake_ms },
                _ => InvocationStatus::Running,
            },
        };
        let finished = matches!(status, InvocationStatus::Finished(_));
        Ok((status, meta.filter(|_| finished)))
    }
}

impl Invocations<'_> {
    /// The root invocations of `book` that pass `filter`, at most `limit`, in the order
    /// they started from seqnum `cursor` on (0 for the first page), or, newest first
    /// ([`ListFilter::newest_first`]), back from it (`u64::MAX` for the first page); and
    /// the cursor of the next page, if the stream may hold more. Only what garbage
    /// collection has kept is listed (finished invocations for `results_kept_ms`). A
    /// page reads at most `LIST_SCAN_MAX` records of the stream.
    pub async fn list(
        &self,
        ctx: &mut Context,
        book: BookId,
        filter: &ListFilter,
        cursor: u64,
        limit: usize,
    ) -> Result<(Vec<Listed>, Option<u64>)> {
        let d = self.0;
        check_book(book)?;
        d.answered_results().await;
        let mut out = Vec::new();
        let mut at = match (filter.newest_first, filter.as_of) {
            (true, Some(s)) => cursor.min(s),
            _ => cursor,
        };
        for _ in 0..LIST_SCAN_MAX {
            if out.len() >= limit {
                return Ok((out, Some(at)));
            }
            let (log, sb) = (&d.core.log, shadow(book));
            let r = match filter.newest_first {
                true => log.read_prev(ctx, sb, INSTANCES, SeqNum(at)).await?,
                false => log.read_next(ctx, sb, INSTANCES, SeqNum(at)).await?,
            };
            let Some(r) = r else { return Ok((out, None)) };
            if filter.as_of.is_some_and(|s| r.seqnum.0 > s) {
                return Ok((out, None));
            }
            let next = match filter.newest_first {
                true => r.seqnum.0.checked_sub(1),
                false => r.seqnum.0.checked_add(1).filter(|&n| n < u64::MAX),
            };
            if let Some(listed) = d.listed(ctx, book, &r, filter).await? {
                out.push(listed);
            }
            let Some(next) = next else { return Ok((out, None)) };
            at = next;
        }
        Ok((out, Some(at)))
    }
}

impl Durable {
    /// The root that INSTANCES record `r` starts, if it is one and passes `filter`.
    async fn listed(&self, ctx: &mut Context, book: BookId, r: &LogRecord, filter: &ListFilter) -> Result<Option<Listed>> {
        let Ok((Some(init), _)) = record::decode_steps("step", &r.data).map(Step::into_init_and_last) else {
            return Ok(None);
        };
        let (id, function, version, key) = match init {
            Step::Init(kind::Init { id, function, version, .. }) => (id, function, version, None),
            Step::InitKeyed(kind::InitKeyed { id, function, version, key, .. }) => (id, function, version, Some(key.key)),
            _ => return Ok(None),
        };
        if !id.is_root() || filter.function.as_deref().is_some_and(|w| w != function) {
            return Ok(None);
        }
        if let Some(k) = &filter.key {
            let idempotent = InstanceId::keyed(&function, k).is_ok_and(|keyed| keyed == id);
            if key.as_deref() != Some(k.as_str()) && !idempotent {
                return Ok(None);
            }
        }
        let began = record::meta::meta_of::<Step>(&r.data).unwrap_or_default();
        let started_ms = began.started_ms;
        if filter.since_ms.is_some_and(|t| started_ms.is_none_or(|s| s < t))
            || filter.until_ms.is_some_and(|t| started_ms.is_none_or(|s| s >= t))
        {
            return Ok(None);
        }
        let (status, ended) = self.last_of(ctx, book, &id, SeqNum(filter.as_of.unwrap_or(u64::MAX))).await?;
        let status = match status {
            InvocationStatus::Running => ListedStatus::Running,
            InvocationStatus::Sleeping { wake_ms } => ListedStatus::Sleeping { wake_ms },
            InvocationStatus::Finished(Ok(_)) => ListedStatus::Succeeded,
            InvocationStatus::Finished(Err(e)) => ListedStatus::Failed(e.code()),
        };
        if filter.status.as_deref().is_some_and(|s| s != status.name()) {
            return Ok(None);
        }
        let ended = ended.unwrap_or_default();
        let duration_ms = started_ms.zip(ended.ended_ms).map(|(s, e)| e.saturating_sub(s));
        if filter.min_duration_ms.is_some_and(|m| duration_ms.is_none_or(|d| d < m))
            || filter.max_duration_ms.is_some_and(|m| duration_ms.is_none_or(|d| d > m))
        {
            return Ok(None);
        }
        Ok(Some(Listed {
            id,
            function,
            status,
            version,
            key,
            seqnum: r.seqnum.0,
            started_ms,
            ended_ms: ended.ended_ms,
            trace: began.trace.or(ended.trace),
            parts: ended.parts,
        }))
    }
}
