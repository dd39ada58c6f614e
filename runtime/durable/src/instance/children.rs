//! Child invocations as steps of their parent.
//!
//! A parent whose Init is deferred (a root on a node alone, `init.rs`) that wrote nothing
//! yet calls its child deferred too (`ChildCall::defer`): the child logs nothing at all
//! (`Instance::defer_under_parent`: its Init, any record, a refusal stop it with
//! `Superseded` first), so a child that only read ends without a record, and the parent
//! takes its outcome as a pending step, which goes in the parent's first record (or in
//! none, for a forgettable parent). A child that has something to log hands back before
//! it logs: the parent logs its Init and its pending steps, then calls it again as any
//! child is called, so a child's records always follow its parent's Init and a parent's
//! writes are logged before the child could read them. An unkeyed workflow whose steps
//! only read thus logs nothing, and a keyed one its one record.

use super::*;

impl Instance {
    /// Makes this instance a child called by a parent whose Init is deferred: it defers
    /// its own, and stops with `Superseded` rather than log anything (`child_may_log`).
    pub fn defer_under_parent(&mut self) {
        self.under_deferred = true;
    }

    /// Whether it is a child under a deferred parent (`defer_under_parent`).
    pub fn under_deferred(&self) -> bool {
        self.under_deferred
    }

    /// Before anything this instance would log (its Init, a record, a refusal): a child
    /// under a deferred parent logs nothing, and stops with `Superseded`; its parent logs
    /// its own Init first and calls it again (`Attempt::call`), so that a child's records
    /// come after its parent's Init, as they always do.
    pub(super) fn child_may_log(&self) -> Result<(), Abort> {
        match self.under_deferred {
            true => Err(Abort::Superseded),
            false => Ok(()),
        }
    }

    /// Before a child invocation of `function` with an input hashing to `input_sha256`:
    /// the logged outcome if an earlier execution finished it, otherwise the child's
    /// instance ID.
    pub async fn child(
        &mut self,
        ctx: &mut Context,
        function: &str,
        input_sha256: [u8; 32],
    ) -> Result<Result<Outcome, InstanceId>, Abort> {
        if !self.initialized() {
            // A root started lazily defers its Init here if it may (`init.rs`).
            self.begin(ctx).await?;
        }
        // A child sees its parent's writes: only a parent that wrote nothing yet calls
        // with its Init deferred.
        if self.init_deferred() && (self.pending.iter().any(|p| p.write.is_some()) || !self.latest.is_empty()) {
            self.flush(ctx).await?;
        }
        if self.init_deferred() {
            // The child runs deferred too; what the guest read before goes in the next
            // record with the call's outcome.
            self.take_clocks(ctx).await?;
        } else {
            self.flush(ctx).await?;
            self.init_checked(ctx).await?;
            self.log_clocks(ctx).await?;
            self.step_gate(ctx).await?;
        }
        let asked =
            Step::Invoke(kind::Invoke { function: function.to_string(), input_sha256, outcome: Outcome::Ok(Bytes::new()) });
        if let Some((_, called)) = self.take_recorded::<kind::Invoke>(&asked)? {
            return Ok(Ok(called.outcome));
        }
        Ok(Err(self.child_here()?))
    }

    /// The ID of the child called at this step.
    fn child_here(&self) -> Result<InstanceId, Abort> {
        let step = u32::try_from(self.next).map_err(|_| Abort::internal("more than 2^32 steps"))?;
        Ok(self.id.child(step))
    }

    /// After a child invocation finished for good: logs its outcome (or takes a peer's),
    /// or takes it to go in the next record, as a read is, when the child's own step log
    /// holds it as its Result (or, under a deferred parent, the child logged nothing as
    /// it only read): an execution that lost the step calls the child again and gets the
    /// same outcome, and nothing outside this instance depends on it before that record.
    /// A child that trapped before it started, or any other that left no Result, has
    /// its outcome logged here at once.
    pub async fn child_finished(
        &mut self,
        ctx: &mut Context,
        function: &str,
        input_sha256: [u8; 32],
        outcome: Outcome,
    ) -> Result<Outcome, Abort> {
        let may_wait = outcome != Outcome::Cancelled
            && self.steps.get(self.next).is_none()
            && (self.init_deferred() || self.child_result_logged(ctx, &outcome).await?);
        if may_wait {
            let step = kind::Invoke { function: function.to_string(), input_sha256, outcome: outcome.clone() };
            self.take_pending(ctx, step.into(), None).await?;
            return Ok(outcome);
        }
        self.flush(ctx).await?;
        if outcome == Outcome::Cancelled {
            // The child saw its root's cancellation: so does the parent, at its next step
            // (its call gets the child's outcome, which is logged as any other).
            self.cancel_checked_ms = None;
        }
        let step = kind::Invoke { function: function.to_string(), input_sha256, outcome };
        Ok(self.log(ctx, step, &[]).await?.outcome)
    }

    /// Whether the step log of the child called at this step ends in a Result of
    /// `outcome` (read in place on a node alone).
    async fn child_result_logged(&self, ctx: &mut Context, outcome: &Outcome) -> Result<bool, Abort> {
        let step_log = self.core.tags.step(&self.child_here()?);
        let Some(last) = self.core.log.read_prev(ctx, self.shadow(), step_log, SeqNum::MAX).await? else { return Ok(false) };
        Ok(matches!(record::decode_last("step", &last.data), Ok(Step::Result(kind::Result { outcome: o })) if o == *outcome))
    }
}
