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
//!
//! A root on a node alone may be *answered first* (`Instance::end`): its caller gets the
//! outcome when everything its guest did is logged, and its Result record follows (the
//! task `result`, which holds the root's turn on this node until it lands). That is sound
//! when the outcome is a function of the log alone: the Init and every step are logged,
//! or are calls whose outcomes are their children's logged Results, nothing else is
//! pending (no write, push, release or reading taken since the last record, no store
//! write), no lock is held, no transaction is open, and no cancellation was seen. Then
//! any later execution (a retry of its key, the recovery scan after a crash that lost the
//! Result) replays that history and reaches the same outcome, with no effect of its own:
//! readings taken after the last record would not replay, so an invocation that has
//! some pending logs its Result before it answers. On a node alone nothing else runs the
//! root meanwhile (a retry, a cancellation and the recovery scan all wait for the turn),
//! so no peer can log another outcome in the Result's place.

use super::*;
use crate::record::meta::TraceRef;

/// How an invocation ended ([`Instance::end`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// Its Result is logged (or, for a read-only forgettable one, needs no record).
    Logged(Outcome),
    /// Answerable now; its Result is still to be logged ([`Instance::log_answered`]).
    Answered(Outcome),
}

/// When an invocation answered first was answered, for its Result's trailer.
pub(super) struct Answered {
    pub ended_ms: u64,
    pub trace: Option<TraceRef>,
    pub parts: Vec<(String, u64)>,
}

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
        match self.end(ctx, outcome, false).await? {
            Ending::Logged(outcome) | Ending::Answered(outcome) => Ok(outcome),
        }
    }

    /// [`Instance::finish`], or, if `may_answer` and the outcome is the log's alone (see
    /// the module's doc), `Ending::Answered`: the caller answers with it, and logs the
    /// Result after ([`Instance::log_answered`]).
    pub async fn end(&mut self, ctx: &mut Context, outcome: Outcome, may_answer: bool) -> Result<Ending, Abort> {
        if self.read_only_unlogged(ctx, &outcome).await? {
            return Ok(Ending::Logged(outcome));
        }
        self.take_clocks(ctx).await?;
        if may_answer && self.answerable_first(&outcome) {
            let observe = &self.core.observe;
            self.answered =
                Some(Answered { ended_ms: self.core.clock.wall_ms(), trace: observe.trace(), parts: observe.parts() });
            return Ok(Ending::Answered(outcome));
        }
        self.log_result(ctx, outcome, true).await.map(Ending::Logged)
    }

    /// Whether `outcome`, the guest's, follows from the logged history alone, so that
    /// the invocation may be answered before its Result is logged (the module's doc).
    fn answerable_first(&self, outcome: &Outcome) -> bool {
        let alone = self.core.fresh_from.is_some();
        // Calls' outcomes may wait: each is its child's logged Result.
        let calls_only = self.pending.iter().all(|p| matches!(p.step, Step::Invoke(kind::Invoke { .. })));
        let logged = self.deferred.is_none() && self.cursor != 0 && calls_only && self.latest.is_empty();
        let guest = matches!(outcome, Outcome::Ok(_) | Outcome::Failed(_));
        let behind = self.steps.get(self.next).is_some();
        alone
            && self.id.is_root()
            && logged
            && guest
            && !behind
            && !self.cancelled
            && self.txn.is_none()
            && self.held.is_empty()
            && !self.recorder.has_fresh()
    }

    /// Logs the Result of an invocation answered with `outcome` (`Ending::Answered`).
    /// A failure loses nothing: the invocation is unfinished in the log, and the
    /// recovery scan runs it again to the same outcome.
    pub async fn log_answered(mut self, mut ctx: Context, outcome: Outcome) {
        match self.log_result(&mut ctx, outcome.clone(), true).await {
            Ok(logged) if logged == outcome => {}
            Ok(logged) => tracing::error!(id = %self.id, "answered {outcome:?}, but the log holds {logged:?}"),
            Err(abort) => tracing::warn!(id = %self.id, "the result of an answered invocation: {}", abort.into_error()),
        }
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
