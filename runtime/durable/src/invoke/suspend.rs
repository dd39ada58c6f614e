//! Suspended invocations: the timer that runs a root again at its wake time, and
//! re-execution of an unfinished root.
//!
//! A root's suspension starts a timer task (`wake_at`) that holds the node weakly, so a
//! stopped node is not kept alive by its sleepers. Losing the task loses nothing: the
//! root is unfinished, and INSTANCES holds its Init and what it waits for (a Sleep, a
//! Delay or a Retry, with the wake time), so the recovery scan runs it again once it is
//! overdue, which is the fallback for a node that died. A child's suspension is its
//! parent's, so only roots get a timer; an await of a promise without a timeout gets
//! none, since the completion wakes it.

use super::*;

impl Durable {
    /// The answer of an attempt that ended suspended until `wake_ms`. A child's parent
    /// takes the suspension up; a root wakes by this node's timer (or, should the node
    /// die, by the recovery scan on its owner).
    pub(super) fn suspended(self: &Arc<Self>, run: &Run, version: u64, wake_ms: u64) -> (Result<Vec<u8>>, Context) {
        if run.id.is_root() {
            let mut suspended = self.running.suspended.lock().expect("not poisoned");
            // Roots woken on another node leave their entry here: forget the past ones
            // now and then, so that the map holds about the roots asleep.
            if suspended.len() >= SUSPENDED_PRUNE_AT && suspended.len().is_power_of_two() {
                let now = self.core.clock.wall_ms();
                suspended.retain(|_, wake| *wake > now);
            }
            suspended.insert((run.book, run.id.clone()), wake_ms);
            drop(suspended);
            self.wake_at(run.book, run.id.clone(), run.function.clone(), version, wake_ms);
        }
        (Err(Error::Suspended { id: run.id.to_string(), wake_ms }), run.ctx.clone())
    }

    /// Runs a suspended root invocation again at `wake_ms` (wall clock), from a timer
    /// task that holds the node weakly. Cancelling the task (the node stops) loses
    /// nothing: the Sleep record is in the INSTANCES stream, and the recovery scan wakes
    /// the invocation once it is overdue.
    pub(super) fn wake_at(self: &Arc<Self>, book: BookId, id: InstanceId, function: String, version: u64, wake_ms: u64) {
        if wake_ms == u64::MAX {
            // Waiting for a promise with no timeout: its completion wakes it.
            return;
        }
        let weak = Arc::downgrade(self);
        let wait = self.core.clock.sleep(wake_ms.saturating_sub(self.core.clock.wall_ms()));
        self.core.spawn.spawn(
            "wake",
            Box::pin(async move {
                wait.await;
                let Some(d) = Durable::live(&weak) else { return };
                if let (Err(e), _) = d.reexecute(book, id.clone(), function, version, 1, Context::new()).await {
                    if !matches!(e, Error::Suspended { .. }) {
                        tracing::warn!(%id, "waking a sleeping invocation: {e}");
                    }
                }
            }),
        );
    }

    /// Runs an unfinished root invocation again, on the version its Init record names.
    /// `ctx` is where the caller saw why (a completion, a cancellation, a wake record):
    /// the run reads nothing older, so it sees that too.
    pub(crate) async fn reexecute(
        self: &Arc<Self>,
        book: BookId,
        id: InstanceId,
        function: String,
        version: u64,
        attempt: u32,
        ctx: Context,
    ) -> (Result<Vec<u8>>, Context) {
        let run = Run {
            function,
            version: Some(version),
            book,
            input: None,
            ctx,
            depth: 0,
            deadline_ms: None,
            id,
            eager: true,
            crash: None,
            attempt,
            delay_until: None,
            fresh: false,
            background: true,
            defer: false,
            forgettable: false,
            key: None,
        };
        self.run(run).await
    }
}
