//! Child invocations as steps of their parent.

use super::*;

impl Instance {
    /// Before a child invocation of `function` with an input hashing to `input_sha256`:
    /// the logged outcome if an earlier execution finished it, otherwise the child's
    /// instance ID.
    pub async fn child(
        &mut self,
        ctx: &mut Context,
        function: &str,
        input_sha256: [u8; 32],
    ) -> Result<Result<Outcome, InstanceId>, Abort> {
        self.flush(ctx).await?;
        self.init_checked(ctx).await?;
        self.log_clocks(ctx).await?;
        self.step_gate(ctx).await?;
        let asked =
            Step::Invoke(kind::Invoke { function: function.to_string(), input_sha256, outcome: Outcome::Ok(Bytes::new()) });
        if let Some((_, called)) = self.take_recorded::<kind::Invoke>(&asked)? {
            return Ok(Ok(called.outcome));
        }
        let step = u32::try_from(self.next).map_err(|_| Abort::internal("more than 2^32 steps"))?;
        Ok(Err(self.id.child(step)))
    }

    /// After a child invocation finished for good: logs its outcome (or takes a peer's).
    pub async fn child_finished(
        &mut self,
        ctx: &mut Context,
        function: &str,
        input_sha256: [u8; 32],
        outcome: Outcome,
    ) -> Result<Outcome, Abort> {
        self.flush(ctx).await?;
        if outcome == Outcome::Cancelled {
            // The child saw its root's cancellation: so does the parent, at its next step
            // (its call gets the child's outcome, which is logged as any other).
            self.cancel_checked_ms = None;
        }
        let step = kind::Invoke { function: function.to_string(), input_sha256, outcome };
        Ok(self.log(ctx, step, &[]).await?.outcome)
    }
}
