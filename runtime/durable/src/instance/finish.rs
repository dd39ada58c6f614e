//! The end of an instance: its result record, or none for a read-only one that
//! nothing can ask for again.
//!
//! The read-only one is a *forgettable* root (`Of::forgettable`: synchronous, from
//! outside, with no key of any kind, so no retry names it and its caller waits) whose
//! Init is still deferred and that only read before it returned: it logs nothing
//! (`Instance::finish`), since it had no effect, nothing replays it and nobody asks for
//! its result. It checks on the index what its record's conditions would have checked
//! (each table's transition log unchanged since it looked), and logs its record as any
//! other does otherwise. An instance releases the locks it still holds before its Result
//! (`holds.rs`), and an instance that saw its cancellation has the outcome `Cancelled`,
//! whatever its guest returned.

use super::*;

impl Instance {
    /// Logs `outcome` as the result of an invocation that keeps failing, after whatever
    /// steps its attempts logged (or takes the result a peer logged meanwhile).
    pub async fn give_up(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        self.flush(ctx).await?;
        if let Started::Finished(logged) = self.init(ctx).await? {
            return Ok(logged);
        }
        self.load_steps(ctx, self.steps.last().map_or(0, |r| r.seqnum)).await?;
        self.next = self.steps.len();
        // Earlier attempts may have appended under the mark.
        self.marked = true;
        self.log_result(ctx, outcome, false).await
    }

    /// Logs `outcome` as the result after every step recorded so far, or returns the
    /// result logged already: for an execution that stopped short of the recorded
    /// history (a non-deterministic re-execution), whose own position is taken.
    pub async fn finish_after_recorded(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        self.flush(ctx).await?;
        self.load_steps(ctx, self.steps.last().map_or(0, |r| r.seqnum)).await?;
        let logged = self.steps.iter().find_map(|r| match &r.step {
            Step::Result(kind::Result { outcome }) => Some(outcome.clone()),
            _ => None,
        });
        if let Some(outcome) = logged {
            return Ok(outcome);
        }
        self.next = self.steps.len();
        self.marked = true;
        self.log_result(ctx, outcome, false).await
    }

    /// Logs the invocation's final outcome (or takes a peer's) and returns it, after
    /// the clock readings it may depend on.
    pub async fn finish(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        if self.read_only_unlogged(ctx, &outcome).await? {
            return Ok(outcome);
        }
        self.take_clocks(ctx).await?;
        self.log_result(ctx, outcome, true).await
    }

    /// Whether the invocation may end without a record: it is forgettable
    /// (`Of::forgettable`), its Init is still deferred and everything it did since was
    /// read-optimized reads, clock readings and calls (each child logged what it did
    /// itself, nothing if it only read), which the guest returned from. Such
    /// an invocation has no effect, and nothing will ever replay it or ask for its
    /// result, so the one append that would hold its Init, reads and result only
    /// costs time. Its reads were fresh (a node alone, past its start barrier), and
    /// they stand as they were if no table it read switched protocols since it looked:
    /// what the deferred record's conditions would have checked, checked here on the
    /// index, which holds every record ordered before this call.
    pub(super) async fn read_only_unlogged(&mut self, ctx: &mut Context, outcome: &Outcome) -> Result<bool, Abort> {
        if !self.forgettable {
            return Ok(false);
        }
        let Some(unchanged) = self.deferred.clone() else { return Ok(false) };
        let only_reads = self.latest.is_empty()
            && self.pending.iter().skip(1).all(|p| {
                p.write.is_none()
                    && matches!(
                        p.step,
                        Step::Read(kind::Read { .. }) | Step::Clocks(kind::Clocks { .. }) | Step::Invoke(kind::Invoke { .. })
                    )
            });
        let guest = matches!(outcome, Outcome::Ok(_) | Outcome::Failed(_));
        if !only_reads || !guest || self.cancelled || self.txn.is_some() || !self.held.is_empty() || !self.steps.is_empty() {
            return Ok(false);
        }
        for (cond, table) in unchanged.iter().zip(&self.deferred_tables) {
            let (latest, records) = self.core.latest_transition(ctx, self.book, table).await?;
            // Unchanged: the protocol it read under (`deferred_protocol`) still holds.
            if records != cond.position || !matches!(latest, Transition::End { .. }) {
                return Ok(false);
            }
        }
        self.pending.clear();
        self.recorder.discard_fresh();
        Ok(true)
    }

    /// Logs the Result step at `next`, after releasing the locks the instance holds
    /// (`replayed`: as its guest's execution says; otherwise as its recorded steps do).
    /// Clock readings not logged by now are dropped: only a trap or a diverging
    /// re-execution gets here with some, and its outcome is not the guest's to compute
    /// from them.
    pub(super) async fn log_result(&mut self, ctx: &mut Context, mut outcome: Outcome, replayed: bool) -> Result<Outcome, Abort> {
        self.recorder.discard_fresh();
        self.follow();
        if let Some(Recorded { step: Step::Cancelled, seqnum }) = self.steps.get(self.next) {
            let seqnum = *seqnum;
            self.take(seqnum);
            self.cancelled = true;
        }
        if self.cancelled {
            outcome = Outcome::Cancelled;
        }
        self.txn = None;
        self.release_held(ctx, replayed).await?;
        let tags: &[Tag] = if self.marked { &[INSTANCES, APPENDED] } else { &[INSTANCES] };
        Ok(self.log(ctx, kind::Result { outcome }, tags).await?.outcome)
    }
}
