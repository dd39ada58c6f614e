//! Outgoing calls: requests a guest sends out of the platform (an HTTP request to a
//! payment API, say), recorded so that a re-execution gets what the first execution got
//! instead of sending again.
//!
//! A call is in flight while the guest goes on (wasi:http's `handle` answers a future,
//! and the guest may write the request's body, make other calls and take other steps
//! before it looks at the response), so its record cannot hold a place in the step log,
//! whose offsets follow the guest's steps. Each call has a stream of its own instead:
//! the instance's `n`-th call (counted in the order the guest makes them, the same in
//! every execution) logs its outcome at offset 0 of `TagKey::outcall(id, n)` with a
//! conditional append, so the first execution (or peer) to log it wins and every
//! other takes its record. The record is also in INSTANCES, for garbage collection.
//!
//! [`Instance::outcall`] comes first, in the guest's order: it logs what the request may
//! depend on (pending writes, clock readings, the Init), passes the step gate (a
//! cancelled invocation sends nothing), counts the call and looks for its record. If an
//! earlier execution logged one, the guest gets it and nothing is sent. Otherwise the
//! host sends the request and logs what came back with the returned [`OutcallSlot`],
//! which needs nothing of the instance (it runs beside the guest), before the guest
//! sees it. A node that dies between sending and logging leaves no record: the
//! re-execution sends again, with the same `Idempotency-Key`
//! ([`OutcallSlot::idempotency_key`]), so an upstream that honours keys sees it once.

use super::*;

/// What the host does with an outgoing call.
pub enum Outcall {
    /// An earlier execution, or a peer, logged what the call got: the guest gets that,
    /// and nothing is sent.
    Logged(kind::OutcallOutcome),
    /// Send it, then log what came back with the slot.
    Send(OutcallSlot),
}

/// Where an outgoing call's outcome goes: what logging it needs, apart from the
/// instance.
pub struct OutcallSlot {
    core: Arc<Core>,
    book: BookId,
    id: InstanceId,
    n: u64,
    what: String,
    ctx: Context,
    crash: Option<Arc<CrashAfter>>,
}

impl Instance {
    /// Before outgoing call `what` (`POST https://host/path`): its logged outcome if an
    /// earlier execution logged one, otherwise the slot to log it in once it is sent.
    pub async fn outcall(&mut self, ctx: &mut Context, what: &str) -> Result<Outcall, Abort> {
        self.flush(ctx).await?;
        self.init_checked(ctx).await?;
        self.log_clocks(ctx).await?;
        self.step_gate(ctx).await?;
        let n = self.outcalls;
        self.outcalls += 1;
        let tag = self.core.tags.outcall(&self.id, n);
        if let Some(r) = self.core.log.read_next(ctx, self.shadow(), tag, SeqNum(0)).await? {
            let logged = logged_outcall(&r)?;
            if logged.what != what {
                return Err(Abort::NonDeterministic(format!(
                    "outgoing call {n} of {} was {} and is now {what}",
                    self.id, logged.what
                )));
            }
            return Ok(Outcall::Logged(logged.outcome));
        }
        self.effect()?;
        Ok(Outcall::Send(OutcallSlot {
            core: self.core.clone(),
            book: self.shadow(),
            id: self.id.clone(),
            n,
            what: what.to_string(),
            ctx: ctx.clone(),
            crash: self.crash.clone(),
        }))
    }
}

impl OutcallSlot {
    /// The `Idempotency-Key` the call carries: the same in every execution of the
    /// invocation, another for every call.
    pub fn idempotency_key(&self) -> String {
        self.core.tags.outcall_key(self.book, &self.id, self.n)
    }

    /// The call's number among the instance's outgoing calls.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Logs what the call got, or takes what a peer logged first; returns what the
    /// guest gets.
    pub async fn log(mut self, outcome: kind::OutcallOutcome) -> Result<kind::OutcallOutcome, Abort> {
        // The crash-injection hook: the call was sent, and its outcome is lost.
        if self.crash.as_ref().is_some_and(|c| c.hit()) {
            return Err(Abort::Crash);
        }
        let tag = self.core.tags.outcall(&self.id, self.n);
        let call = kind::Outcall { id: self.id.clone(), n: self.n, what: self.what.clone(), outcome };
        let data = record::encode(&Step::Outcall(call.clone()));
        match self.core.log.cond_append(&mut self.ctx, self.book, &[tag, INSTANCES], data, tag, 0).await {
            // The hook again: the outcome is logged, and the guest never sees it.
            Ok(_) if self.crash.as_ref().is_some_and(|c| c.hit()) => Err(Abort::Crash),
            Ok(_) => Ok(call.outcome),
            Err(LogError::Conflict { .. }) => match self.core.log.read_next(&mut self.ctx, self.book, tag, SeqNum(0)).await? {
                Some(r) => Ok(logged_outcall(&r)?.outcome),
                // Held, yet gone: garbage collection took the record of a finished root.
                None => Err(Abort::Superseded),
            },
            Err(e) => Err(e.into()),
        }
    }
}

/// The outgoing call a record of an outcall stream holds.
fn logged_outcall(r: &LogRecord) -> Result<kind::Outcall, Abort> {
    match record::decode_steps("outgoing call", &r.data)? {
        Step::Outcall(call) => Ok(call),
        other => Err(Abort::internal(format!("an outgoing call's stream holds a {}", other.describe()))),
    }
}
