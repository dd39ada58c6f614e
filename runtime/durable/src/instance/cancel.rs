//! Cancellation as an instance sees it: a Cancel record in its root's stream, looked for at
//! its steps and before it waits, logged as a `Cancelled` step where it is seen.
//!
//! A cancellation (`Durable::cancel`) is a `Cancel` record at offset 0 of the root's
//! cancel stream, also in INSTANCES, and the root is run again to see it. Every instance
//! of the tree passes a *step gate* (`Instance::step_gate`, in `steps.rs`) before each
//! step's effect: a conditional append and a call pass it before they act, since their
//! steps record the outcomes of effects made; the other steps pass it as they are logged.
//! A `Cancelled` step recorded at this position, or one taken before, fails the host call
//! with `cancelled`. Past the recorded history the gate looks at the cancel stream at most
//! every `CANCEL_CHECK_MS` (at once for a re-execution and for a parent whose child was
//! cancelled), and logs `Cancelled` here if it finds one; a wait looks before it starts,
//! as often.
//! The outcome of an instance that saw it is `Cancelled`, whatever its guest returns.
//! Known gap: a peer that passed its gate before the cancelling execution logged
//! `Cancelled` at that position makes that one step's effect (the simulator's scenario
//! `writes_taken_where_a_peer_logged_the_cancellation_never_become_visible` pins what a
//! pending write does there).

use super::*;

impl Instance {
    /// Whether the root has been cancelled, as the log says: looked up at most every
    /// `CANCEL_CHECK_MS`, unless `now`.
    pub(super) async fn cancel_requested(&mut self, ctx: &mut Context, now: bool) -> Result<bool, Abort> {
        let at = self.core.clock.now_ms();
        if !now && self.cancel_checked_ms.is_some_and(|t| at < t.saturating_add(CANCEL_CHECK_MS)) {
            return Ok(false);
        }
        self.cancel_checked_ms = Some(at);
        let stream = self.core.tags.cancel(&self.id.root());
        Ok(self.core.log.read_next(ctx, self.shadow(), stream, SeqNum(0)).await?.is_some())
    }

    /// Logs that the instance saw its cancellation here (or takes what a peer logged
    /// here) and returns what the guest's host call gets: a `cancelled` error.
    pub(super) async fn cancel(&mut self, ctx: &mut Context) -> Abort {
        let logged = match self.recorded(&Step::Cancelled) {
            Ok(Some(r)) => {
                self.take(r.seqnum);
                Ok(r)
            }
            Ok(None) => self.append_step(ctx, Step::Cancelled, &[]).await,
            Err(abort) => Err(abort),
        };
        match logged {
            Ok(Recorded { step: Step::Cancelled, .. }) => {
                self.cancelled = true;
                Abort::Refused(Error::Cancelled)
            }
            // A peer logged another step here first: this execution is behind it.
            Ok(r) => Abort::NonDeterministic(format!("step {} of {} is a {}", self.next - 1, self.id, r.step.describe())),
            Err(abort) => abort,
        }
    }

    /// For the first run of an invocation this node has just started (its Init is the
    /// only history): look for a cancellation only after `CANCEL_CHECK_MS`, as a fresh
    /// instance does.
    pub fn look_for_cancellation_later(&mut self) {
        self.cancel_checked_ms = Some(self.core.clock.now_ms());
    }

    /// Whether the instance saw its cancellation: its outcome is then `Cancelled`.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// Before the instance waits (a sleep, an await, a delayed start): a cancelled root
    /// does not wait. A re-execution (which a cancellation causes) looks in the log; a
    /// first execution does if it last looked `CANCEL_CHECK_MS` ago or more (one that
    /// sleeps without seeing a cancellation made meanwhile is woken to see it).
    pub(super) async fn check_cancelled(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if self.cancelled || self.cancel_requested(ctx, false).await? {
            return Err(self.cancel(ctx).await);
        }
        Ok(())
    }
}
