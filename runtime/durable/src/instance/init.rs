//! The start of an instance: its Init record (logged, recovered, or deferred to the
//! first record of a lazily started root) and the step log it replays.
//!
//! The Init is deferred only on a node alone (`Peers::alone`: `tally dev`, one function
//! node over one engine, whose index holds every finished invocation's records before it
//! answers), by a synchronous root from outside, neither delayed nor addressed to a
//! key, whose input fits a pending step (`DEFER_INPUT_MAX`) and whose step log is empty
//! (the invocation path looks first). One with an idempotency key defers it before its guest
//! runs, since its result is logged even without an effect. The Init becomes the first
//! pending step. Read-optimized reads before the first record are taken as `Read` steps
//! with their values, read at the index's end from a position past the node's start
//! (`Durable::fresh_from`), so that every execution reads the same; write-optimized and
//! symmetric reads wait as they always do (the store's newest version). The first record
//! holds the Init, those reads and the steps up to it (tagged INSTANCES): a transfer or a
//! read-only invocation is one append instead of two, and a re-execution takes the
//! recorded reads. Reads of objects and read-only transactions read at a snapshot
//! instead (`snapshot.rs`), reads of the guest's book are recorded readings that wait
//! with it, small queue pushes wait with it as writes do (`queues.rs`), and calls run
//! their children deferred too (`children.rs`), and a pop's record holds the Init (a
//! consumer is one append for its pop and one for its result). Every other operation
//! (appends to the guest's log, object writes, large pushes, locks, sleeps, promises), a write of
//! a logged table, a table being switched and a read of a value stored as its version
//! log the Init first, and so does a trap (`log_init_alone`), so
//! that the attempt is retried as one that started. The
//! conditions of the first record (`begin`) keep a switch that began since the instance
//! looked from seeing it start after its Begin while it ran the old protocol; a failed
//! one ends the attempt (`Superseded`), which runs again with its Init first.
//!
//! Readers of INSTANCES and of a step log's first record take an Init that begins a group
//! (`Step::into_init_and_last`); readers of INSTANCES find a group's step log as its
//! derived tag that is not an object stream of its writes (`TagKey::step_log_of`). In a
//! cluster an index may lag the log, and only an append gives an invocation a fresh
//! position, so the Init stays eager there (until the log can answer a fresh position
//! without an append).

use super::*;

impl Instance {
    /// Appends the init record, or recovers the step log of an earlier execution.
    pub async fn init(&mut self, ctx: &mut Context) -> Result<Started, Abort> {
        if self.deferred.is_some() {
            // Whatever asks for the Init now needs it logged (and at the cursor).
            self.flush(ctx).await?;
        }
        if self.initialized() {
            return Ok(Started::Running { version: self.version });
        }
        let mut fresh = false;
        if let Some(input) = &self.input {
            self.child_may_log()?;
            if input.len() > crate::PAYLOAD_MAX {
                return Err(Abort::Refused(Error::TooLarge {
                    what: "the input of an exactly-once invocation",
                    size: Some(input.len() as u64),
                    limit: crate::PAYLOAD_MAX as u64,
                }));
            }
            self.core.register_book(self.book).await?;
            let (id, function, version, input) = (self.id.clone(), self.function.clone(), self.version, input.clone());
            let init = match self.key.clone() {
                None => Step::Init(kind::Init { id, function, version, input }),
                Some(key) => Step::InitKeyed(kind::InitKeyed { id, function, version, input, key }),
            };
            let tags = [self.step_tag, INSTANCES];
            let data = self.with_meta(record::encode(&init), (true, false));
            let appended = self.core.log.cond_append(ctx, self.shadow(), &tags, data, self.step_tag, 0).await;
            match appended {
                Ok(s) => {
                    self.steps.push(Recorded { seqnum: s.0, step: init });
                    self.records = 1;
                    fresh = true;
                    self.effect()?;
                }
                Err(LogError::Conflict { .. }) => self.load_steps(ctx, 0).await?,
                Err(e) => return Err(e.into()),
            }
        } else {
            self.load_steps(ctx, 0).await?;
        }
        // Offset 0 is taken, yet nothing is left: garbage collection took the step log
        // of an invocation that finished longer ago than `results_kept_ms`.
        let Some(first) = self.steps.first() else {
            return Err(Abort::Ended(Error::Conflict(format!(
                "invocation {} finished and its result is no longer kept; use a new idempotency key",
                self.id
            ))));
        };
        match &first.step {
            Step::Init(kind::Init { id, function, version, input })
            | Step::InitKeyed(kind::InitKeyed { id, function, version, input, .. })
                if *id == self.id =>
            {
                let key = match &first.step {
                    Step::InitKeyed(kind::InitKeyed { key, .. }) => Some(key.clone()),
                    _ => None,
                };
                // Only a client reusing an idempotency key for another request gets here.
                let other_key = self.input.is_some() && self.key.is_some() && self.key != key;
                if *function != self.function || self.input.as_ref().is_some_and(|i| i != input) || other_key {
                    return Err(Abort::Ended(Error::Conflict(format!(
                        "invocation {} was started with another function or input; an idempotency key names one request",
                        self.id
                    ))));
                }
                self.version = *version;
                self.input = Some(input.clone());
                self.key = key;
            }
            Step::Refused(kind::Refused { id, function, outcome }) if *id == self.id => {
                if *function != self.function {
                    return Err(Abort::Ended(Error::Conflict(format!(
                        "invocation {} was started with another function",
                        self.id
                    ))));
                }
                let outcome = outcome.clone();
                self.cursor = first.seqnum;
                self.init_cursor = first.seqnum;
                self.next = 1;
                return Ok(Started::Finished(outcome));
            }
            other => return Err(Abort::internal(format!("the step log of {} starts with {other:?}", self.id))),
        }
        self.cursor = first.seqnum;
        self.init_cursor = first.seqnum;
        self.next = 1;
        self.follow();
        let result = self.steps.iter().find_map(|r| match &r.step {
            Step::Result(kind::Result { outcome }) => Some(outcome.clone()),
            _ => None,
        });
        Ok(match result {
            Some(outcome) => Started::Finished(outcome),
            None if fresh => Started::Fresh,
            None => {
                // Run again (after a crash, a wake, a cancellation): look at once.
                self.cancel_checked_ms = None;
                Started::Running { version: self.version }
            }
        })
    }

    /// Starts the invocation for a read-optimized operation: a root started lazily
    /// defers its Init to the step log's first record, which then holds the Init, the
    /// reads taken before it (values and all, so that every execution reads the same)
    /// and the steps up to the next logged one, often the result: one append for an
    /// invocation that logged two. Conditional on the transition log of every table it
    /// used (`Log::cond_append_if`): no switch began since it looked, so its protocols
    /// are those of its Init's place, as every reader takes them. Anything else, and a
    /// failed condition (`Superseded`: it runs again with its Init first), logs the Init
    /// as before.
    pub(crate) async fn begin(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if self.initialized() {
            return Ok(());
        }
        let input = self.input.clone().filter(|i| i.len() <= DEFER_INPUT_MAX);
        let (true, None, true, Some(input)) = (self.may_defer, &self.key, self.steps.is_empty(), input) else {
            return self.init_checked(ctx).await;
        };
        self.core.register_book(self.book).await?;
        // Reads from here on see what finished before this invocation began.
        if let Some(fresh) = &self.core.fresh_from {
            ctx.merge(fresh);
        }
        let init = Step::Init(kind::Init { id: self.id.clone(), function: self.function.clone(), version: self.version, input });
        self.deferred = Some(Vec::new());
        self.pending.push(Pending { record_bytes: record::encoded_len(&init), step: init, write: None, cond: None });
        self.next = 1;
        self.follow();
        Ok(())
    }

    /// The deferred Init is logged (or a peer's identical one taken): the instance runs
    /// on from it as if it had logged it first.
    pub(super) fn settle_init(&mut self) {
        if self.deferred.is_some() && !self.steps.is_empty() {
            self.deferred = None;
            self.init_cursor = self.steps[0].seqnum;
        }
    }

    /// After a trap: logs the deferred Init alone, so that the invocation is retried as
    /// its policy says; the attempt's other pending steps are lost, as a crash loses them.
    pub async fn log_init_alone(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if self.deferred.is_none() {
            return Ok(());
        }
        self.pending.truncate(1);
        self.next = 1;
        // The Init alone depends on no snapshot.
        self.snapshot = None;
        self.snapshot_read = false;
        self.recorder.discard_fresh();
        self.follow();
        self.flush(ctx).await
    }

    /// Logs `outcome` as the whole history of a child refused before it ran, or finds
    /// what a peer logged first: that refusal, or the start of a real run.
    pub async fn refuse(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Started, Abort> {
        self.child_may_log()?;
        let refused =
            Step::Refused(kind::Refused { id: self.id.clone(), function: self.function.clone(), outcome: outcome.clone() });
        let tags = [self.step_tag, INSTANCES];
        match self.core.log.cond_append(ctx, self.shadow(), &tags, record::encode(&refused), self.step_tag, 0).await {
            Ok(_) => Ok(Started::Finished(outcome)),
            Err(LogError::Conflict { .. }) => {
                self.input = None;
                self.init(ctx).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the step log from seqnum `from` on into `steps`.
    pub(super) async fn load_steps(&mut self, ctx: &mut Context, from: u64) -> Result<(), Abort> {
        let mut at = from;
        let known = self.steps.last().map(|r| r.seqnum);
        while let Some(r) = self.core.log.read_next(ctx, self.shadow(), self.step_tag, SeqNum(at)).await? {
            at = r.seqnum.0.saturating_add(1);
            if known.is_some_and(|k| r.seqnum.0 <= k) {
                continue;
            }
            self.records += 1;
            if self.records == 1 {
                // An earlier execution logged the Init: this one links to its trace.
                if let Some(first) = record::meta::meta_of::<Step>(&r.data).and_then(|m| m.trace) {
                    self.core.observe.recorded(&first);
                }
            }
            for step in record::decode_steps("step", &r.data)?.into_steps() {
                self.steps.push(Recorded { seqnum: r.seqnum.0, step });
            }
            if at == u64::MAX {
                break;
            }
        }
        self.follow();
        Ok(())
    }

    /// `init` for a state operation: an invocation that finished already cannot be
    /// running one, unless this is a late peer, which stops.
    pub(super) async fn init_checked(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        match self.init(ctx).await? {
            Started::Finished(_) => Err(Abort::Superseded),
            _ => Ok(()),
        }
    }
}
