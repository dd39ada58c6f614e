//! Running an invocation: its version, its admission, and its attempts until a final
//! outcome (retries after traps, a peer's result, a deferred Init).
//!
//! Retries: the wait before the next attempt after a trap doubles with each attempt, up
//! to a cap (`RetryPolicy::backoff_before`). It is a `Retry` record (the next attempt's
//! number and start time) in the instance's retry stream and in INSTANCES, so that the
//! count and the wait outlive the node: the next attempt, on any node, reads it, and
//! waits in place or suspends. A trap after the root was asked to stop is not retried.
//! A child refused before it ran (its function missing, its arguments refused) has the
//! refusal logged in its own step log as well as in its parent's step, so that a peer of
//! the parent that calls it once the function exists finds the refusal; a child's
//! suspension suspends its parent.

use super::*;

impl Durable {
    /// Runs one invocation to a final outcome or a transient failure; returns it with
    /// the invocation's final log context. Roots of one ID run one at a time here.
    pub(crate) async fn run(self: &Arc<Self>, run: Run) -> (Result<Vec<u8>>, Context) {
        let id = run.id.clone();
        if self.core.observe.claims(&id) {
            // Measured by the probe already running (the request's): no scope to enter.
            return self.run_observed(run).await;
        }
        let mut out = None;
        let observed = async { out = Some(self.run_observed(run).await) };
        self.core.observe.scope(&id, Box::pin(observed)).await;
        out.expect("a scope runs what it is given")
    }

    async fn run_observed(self: &Arc<Self>, run: Run) -> (Result<Vec<u8>>, Context) {
        if !run.id.is_root() {
            return self.run_attempts(run, &mut None).await;
        }
        let id = run.id.clone();
        let book = run.book;
        let lock = self.running.running.lock().expect("not poisoned").entry((book, id.clone())).or_default().clone();
        let turn = lock.clone().lock_owned().await;
        self.running.suspended.lock().expect("not poisoned").remove(&(book, id.clone()));
        let mut answered = None;
        let outcome = self.run_attempts(run, &mut answered).await;
        match answered {
            None => {
                drop(turn);
                self.leave(book, id, lock);
            }
            // Answered first: the root's turn here lasts until its Result is logged.
            Some(logging) => {
                let d = self.clone();
                self.running.answered.lock().expect("not poisoned").insert((book, id.clone()));
                self.running.answered_first.fetch_add(1, Ordering::Relaxed);
                let logged = async move {
                    logging.await;
                    d.running.answered.lock().expect("not poisoned").remove(&(book, id.clone()));
                    drop(turn);
                    d.leave(book, id, lock);
                };
                // Cancelling it loses the Result only: the recovery scan logs it again.
                self.core.spawn.spawn("result", Box::pin(logged));
            }
        }
        outcome
    }

    /// Waits for the Result of root `id` if it was answered before that was logged.
    pub(super) async fn answered_logged(&self, book: BookId, id: &InstanceId) {
        let key = (book, id.clone());
        if !self.running.answered.lock().expect("not poisoned").contains(&key) {
            return;
        }
        let turn = self.running.running.lock().expect("not poisoned").get(&key).cloned();
        if let Some(turn) = turn {
            drop(turn.lock().await);
            self.leave(book, id.clone(), turn);
        }
    }

    /// Waits for the Results of the roots answered before them (as of this call), so
    /// that a read of the log after this sees each: for what reads invocations' steps
    /// in bulk (SQL, listings) on behalf of a client that may have its answer.
    pub async fn answered_results(&self) {
        let roots: Vec<(BookId, InstanceId)> = self.running.answered.lock().expect("not poisoned").iter().cloned().collect();
        for (book, id) in roots {
            self.answered_logged(book, &id).await;
        }
    }

    /// Ends a root's turn on this node (`lock`, from `Running::running`, no longer held).
    fn leave(&self, book: BookId, id: InstanceId, lock: Arc<AsyncMutex<()>>) {
        let mut running = self.running.running.lock().expect("not poisoned");
        // The map's reference and ours: nobody else waits.
        if Arc::strong_count(&lock) == 2 {
            running.remove(&(book, id));
        }
    }

    /// The version a run starts from: the one it names, or the current one.
    pub(super) async fn resolve(&self, run: &Run) -> Result<FunctionVersion> {
        let found = match run.version {
            Some(v) => self.functions.version(&run.function, v).await?,
            None => self.functions.current(&run.function).await?,
        };
        found.ok_or_else(|| Error::FunctionNotFound(run.function.clone()))
    }

    /// What a fresh invocation must pass before anything is logged for it.
    pub(super) fn admit(&self, run: &Run, version: &FunctionVersion) -> Result<()> {
        check_book(run.book)?;
        if let Some(input) = &run.input {
            if input.len() as u64 > version.request_bytes_max {
                return Err(Error::TooLarge {
                    what: "the request",
                    size: Some(input.len() as u64),
                    limit: version.request_bytes_max,
                });
            }
        }
        if run.depth > self.core.bounds.call_depth_max {
            return Err(Error::InvalidArgument(format!("calls nest deeper than {}", self.core.bounds.call_depth_max)));
        }
        Ok(())
    }

    /// The version the Init record of `id` names, if the invocation has one: then it was
    /// admitted once, and runs on that version whatever the registry or the checks
    /// say now.
    pub(super) async fn recorded_version(&self, ctx: &mut Context, book: BookId, id: &InstanceId) -> Result<Option<u64>> {
        if book.is_reserved() {
            return Ok(None);
        }
        let Some(first) = self.core.log.read_next(ctx, shadow(book), self.core.tags.step(id), SeqNum(0)).await? else {
            return Ok(None);
        };
        match record::decode_steps("step", &first.data)?.into_init_and_last().0 {
            Some(
                Step::Init(kind::Init { id: found, version, .. }) | Step::InitKeyed(kind::InitKeyed { id: found, version, .. }),
            ) if found == *id => Ok(Some(version)),
            _ => Ok(None),
        }
    }

    /// The version to run and whether the run is admitted: a fresh invocation must
    /// exist and pass [`Durable::admit`]; one with history runs the version it began on.
    pub(super) async fn version_for(&self, run: &mut Run) -> Result<FunctionVersion> {
        let resolved = self.resolve(run).await;
        let admitted = resolved.as_ref().map_err(Clone::clone).and_then(|v| self.admit(run, v));
        match admitted {
            Ok(()) => resolved,
            // Only an eager run's ID may have history (the others are fresh).
            Err(e @ (Error::FunctionNotFound(_) | Error::InvalidArgument(_) | Error::TooLarge { .. })) if run.eager => {
                match self.recorded_version(&mut run.ctx, run.book, &run.id).await? {
                    Some(v) => self.functions.version(&run.function, v).await?.ok_or(e),
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Logs `refusal` as the outcome of the child `run` in the child's own step log, or
    /// finds what a peer logged there first: its outcome, or (`None`, with `run.version`
    /// set) the version a peer started the child on.
    pub(super) async fn refuse_child(self: &Arc<Self>, run: &mut Run, refusal: Error) -> Result<Option<Outcome>> {
        let of = Of {
            id: run.id.clone(),
            book: run.book,
            function: run.function.clone(),
            version: 0,
            input: run.input.clone(),
            declared: Default::default(),
            crash: run.crash.clone(),
            key: None,
            defer_init: false,
            forgettable: false,
        };
        let outcome = Outcome::of_final(&Err(refusal)).expect("refusals are final");
        match Instance::new(self.core.clone(), of).refuse(&mut run.ctx, outcome).await.map_err(Abort::into_error)? {
            Started::Finished(logged) => Ok(Some(logged)),
            Started::Running { version } => {
                run.version = Some(version);
                Ok(None)
            }
            Started::Fresh => Err(Error::Internal("a refusal found no history".into())),
        }
    }

    /// Runs `run`'s attempts. A root answered before its Result is logged
    /// (`Instance::end`) leaves in `answered` what logs it.
    pub(super) async fn run_attempts(
        self: &Arc<Self>,
        mut run: Run,
        answered: &mut Option<BoxFuture<'static, ()>>,
    ) -> (Result<Vec<u8>>, Context) {
        let mut version = loop {
            match self.version_for(&mut run).await {
                Ok(v) => break v,
                // Under a deferred parent the refusal is logged once the parent's Init is.
                Err(Error::FunctionNotFound(_) | Error::InvalidArgument(_) | Error::TooLarge { .. })
                    if !run.id.is_root() && run.defer =>
                {
                    return (Err(Error::Superseded), run.ctx)
                }
                // A child refused before it ran (its function missing, say) has that
                // refusal logged in its own step log, not only in its parent's: a peer of
                // the parent that calls the child once the function exists then finds the
                // refusal there, instead of running the child under a parent whose history
                // says it never ran.
                Err(e @ (Error::FunctionNotFound(_) | Error::InvalidArgument(_) | Error::TooLarge { .. }))
                    if !run.id.is_root() =>
                {
                    match self.refuse_child(&mut run, e).await {
                        Ok(Some(logged)) => return (logged.into_result(), run.ctx),
                        // A peer started the child on a version: run that one.
                        Ok(None) => continue,
                        Err(e) => return (Err(e), run.ctx),
                    }
                }
                Err(e) => return (Err(e), run.ctx),
            }
        };
        // Whether the invocation has a history (a retry may be logged in it).
        let mut history = false;
        // Whether lock tries may ride later records (`Instance::take_locks_eagerly`).
        let mut speculate = true;
        loop {
            // On a node alone, a root from outside defers its Init, unless it has a
            // history (a retry of one that started or finished takes that first, as an
            // eager start does, rather than run its guest in vain).
            let mut defer = false;
            if let Some(fresh) = self.core.fresh_from.as_ref().filter(|_| run.defer) {
                run.ctx.merge(fresh);
                let step_log = self.core.tags.step(&run.id);
                // A forgettable root's ID was made for it just now: it has no history
                // before its first attempt (a trap logs its Init, and the retry is eager).
                let history = match run.forgettable && !run.eager && run.id.is_root() {
                    true => Ok(None),
                    false => self.core.log.read_next(&mut run.ctx, shadow(run.book), step_log, SeqNum(0)).await,
                };
                match history {
                    Ok(None) => defer = true,
                    Ok(Some(_)) => run.eager = true,
                    Err(e) => return (Err(e.into()), run.ctx),
                }
            }
            let of = Of {
                id: run.id.clone(),
                book: run.book,
                function: run.function.clone(),
                version: version.version,
                input: run.input.clone(),
                declared: version.tables.clone(),
                crash: run.crash.clone(),
                key: run.key.clone(),
                defer_init: defer,
                forgettable: defer && run.forgettable,
            };
            let mut instance = Instance::new(self.core.clone(), of);
            if !speculate {
                instance.take_locks_eagerly();
            }
            // A child of a deferred parent that must log anything hands that back to
            // its parent (`Attempt::call`) rather than run again here.
            let under_deferred = defer && !run.id.is_root();
            if under_deferred {
                instance.defer_under_parent();
            }
            if run.eager && defer {
                // An idempotency key: the result is logged even without an effect, so
                // the deferred Init is taken before the guest runs.
                match instance.begin(&mut run.ctx).await {
                    Ok(()) => {}
                    // A peer logged it meanwhile: take its history.
                    Err(Abort::Superseded) if under_deferred => return (Err(Error::Superseded), run.ctx),
                    Err(Abort::Superseded) => {
                        run.defer = false;
                        continue;
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            } else if run.eager {
                match instance.init(&mut run.ctx).await {
                    Ok(Started::Fresh) => history = false,
                    Ok(Started::Running { version: v }) if v != version.version => {
                        history = true;
                        // Invocations finish on the version that started them.
                        version = match self.functions.version(&run.function, v).await {
                            Ok(Some(found)) => found,
                            Ok(None) => {
                                let e = Error::Internal(format!("version {v} of {:?} is missing", run.function));
                                return (Err(e), run.ctx);
                            }
                            Err(e) => return (Err(e), run.ctx),
                        };
                        instance.set_declared(version.tables.clone());
                    }
                    Ok(Started::Running { .. }) if run.fresh => instance.look_for_cancellation_later(),
                    Ok(Started::Running { .. }) => history = true,
                    Ok(Started::Finished(logged)) => {
                        self.running.replayed.fetch_add(1, Ordering::Relaxed);
                        return (logged.into_result(), run.ctx);
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            }
            // A retry after a trap: its attempt number, and the wait before it.
            if history {
                match self.retry_state(&mut run).await {
                    Ok(Some((attempt, until_ms))) => {
                        run.attempt = run.attempt.max(attempt);
                        // Cancelled while it waited to retry (the cancellation woke it):
                        // the rest of the wait is not waited out.
                        let cancelled = match self.cancel_requested(&mut run).await {
                            Ok(c) => c,
                            Err(e) => return (Err(e), run.ctx),
                        };
                        if cancelled {
                        } else if let Err(suspended) = self.wait_to_retry(&run, version.version, until_ms).await {
                            return suspended;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => return (Err(e), run.ctx),
                }
                history = false;
            }
            let own = self.core.clock.now_ms().saturating_add(version.timeout_ms);
            let deadline_ms = run.deadline_ms.map_or(own, |d| d.min(own));
            if instance.initialized() && !instance.init_deferred() {
                // What runs before the guest: a delayed start's wait, a keyed one's key.
                let in_place_ms = if run.background { self.core.config.sleep_in_place_max_ms } else { u64::MAX };
                let before = async {
                    instance.delay(&mut run.ctx, run.delay_until, deadline_ms).await?;
                    instance.enter_key(&mut run.ctx, deadline_ms, in_place_ms).await
                };
                match before.await {
                    Ok(()) => {}
                    Err(Abort::Suspended { wake_ms }) => return self.suspended(&run, version.version, wake_ms),
                    // Cancelled before it started: that is its outcome.
                    Err(_) if instance.is_cancelled() => {
                        let finished = instance.finish(&mut run.ctx, Outcome::Cancelled).await;
                        return (finished.map_err(Abort::into_error).and_then(Outcome::into_result), run.ctx);
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            }
            run.fresh = false;
            let input = instance.input().cloned().unwrap_or_default();
            let attempt = Attempt {
                version: version.clone(),
                book: run.book,
                input,
                instance,
                attempt: run.attempt,
                depth: run.depth,
                ctx: run.ctx,
                deadline_ms,
            };
            let (result, mut attempt) = self.functions.run(attempt).await;
            run.ctx = attempt.ctx;
            if let Err(Error::Suspended { wake_ms, .. }) = result {
                return self.suspended(&run, version.version, wake_ms);
            }
            if !attempt.instance.initialized() {
                // Nothing durable happened: the outcome is the attempt's, as it is.
                return (result, run.ctx);
            }
            if matches!(result, Err(Error::Trap(_))) && attempt.instance.init_deferred() {
                // Retried (or given up) as an invocation that started: its Init first.
                match attempt.instance.log_init_alone(&mut run.ctx).await {
                    Ok(()) => {}
                    Err(Abort::Superseded) if under_deferred => return (Err(Error::Superseded), run.ctx),
                    Err(Abort::Superseded) => {
                        (run.eager, run.defer, speculate) = (true, false, false);
                        continue;
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            }
            // A trap after the root was asked to stop is not retried: the cancellation
            // is its outcome (the next attempt would only replay up to its first new
            // step and be refused there, or trap before it again).
            let trapped = matches!(result, Err(Error::Trap(_))) && !attempt.instance.is_cancelled();
            let stop = match trapped && run.attempt < version.retry.attempts {
                true => match self.cancel_requested(&mut run).await {
                    Ok(c) => c,
                    Err(e) => return (Err(e), run.ctx),
                },
                false => false,
            };
            let outcome = match result {
                // Whatever the guest made of its cancellation.
                _ if attempt.instance.is_cancelled() || stop => Outcome::Cancelled,
                Err(Error::Trap(m)) if run.attempt >= version.retry.attempts => Outcome::Trap(cut(&m)),
                Err(Error::Trap(m)) => {
                    tracing::info!(function = run.function, id = %run.id, attempt = run.attempt, "running again after a trap: {m}");
                    run.attempt += 1;
                    run.eager = true;
                    let wait = version.retry.backoff_before(run.attempt);
                    if wait > 0 {
                        // Logged, so that the attempt count and the wait outlive this node.
                        let until_ms = self.core.clock.wall_ms().saturating_add(wait);
                        let retry =
                            Step::Retry(kind::Retry { id: run.id.clone(), root: run.id.root(), attempt: run.attempt, until_ms });
                        let tags = [self.core.tags.retry(&run.id), INSTANCES];
                        if let Err(e) = self.core.log.append(&mut run.ctx, shadow(run.book), &tags, record::encode(&retry)).await
                        {
                            return (Err(e.into()), run.ctx);
                        }
                        if let Err(suspended) = self.wait_to_retry(&run, version.version, until_ms).await {
                            return suspended;
                        }
                    }
                    continue;
                }
                // A late peer: the logged result stands; the next init returns it.
                Err(Error::Superseded) if under_deferred => return (Err(Error::Superseded), run.ctx),
                Err(Error::Superseded) => {
                    (run.eager, run.defer, speculate) = (true, false, false);
                    continue;
                }
                other => match Outcome::of_final(&other) {
                    Some(outcome) => outcome,
                    None => return (other, run.ctx),
                },
            };
            // A trap may come from a re-execution that left the recorded history (a
            // non-deterministic one), whose position is taken: its result goes after
            // what is recorded. So does a result that a diverging execution reached
            // early, at a recorded step.
            let instance = &mut attempt.instance;
            let finished = match outcome {
                Outcome::Trap(_) => instance.finish_after_recorded(&mut run.ctx, outcome).await,
                Outcome::Cancelled if stop => instance.finish_after_recorded(&mut run.ctx, outcome).await,
                outcome => match instance.end(&mut run.ctx, outcome, true).await {
                    Ok(Ending::Logged(logged)) => Ok(logged),
                    Ok(Ending::Answered(outcome)) => {
                        let logging = attempt.instance.log_answered(run.ctx.clone(), outcome.clone());
                        *answered = Some(Box::pin(logging));
                        return (outcome.into_result(), run.ctx);
                    }
                    Err(Abort::NonDeterministic(m)) => {
                        let trap = Outcome::Trap(cut(&format!("non-deterministic re-execution: {m}")));
                        instance.finish_after_recorded(&mut run.ctx, trap).await
                    }
                    Err(abort) => Err(abort),
                },
            };
            match finished {
                Ok(logged) => return (logged.into_result(), run.ctx),
                Err(Abort::Superseded) if under_deferred => return (Err(Error::Superseded), run.ctx),
                Err(Abort::Superseded) => (run.eager, run.defer, speculate) = (true, false, false),
                Err(abort) => return (Err(abort.into_error()), run.ctx),
            }
        }
    }

    /// The attempt number and start time of the last retry of `run` logged after a
    /// trap, if any.
    pub(super) async fn retry_state(&self, run: &mut Run) -> Result<Option<(u32, u64)>> {
        let last = self.core.log.read_prev(&mut run.ctx, shadow(run.book), self.core.tags.retry(&run.id), SeqNum::MAX).await?;
        match last.map(|r| record::decode::<Step>("retry", &r.data)).transpose()? {
            Some(Step::Retry(kind::Retry { id, attempt, until_ms, .. })) if id == run.id => Ok(Some((attempt, until_ms))),
            Some(other) => Err(Error::Internal(format!("the retry stream of {} holds {}", run.id, other.describe()))),
            None => Ok(None),
        }
    }

    /// Whether `run`'s root was asked to be cancelled (see [`Durable::cancel`]).
    pub(super) async fn cancel_requested(&self, run: &mut Run) -> Result<bool> {
        let stream = self.core.tags.cancel(&run.id.root());
        Ok(self.core.log.read_next(&mut run.ctx, shadow(run.book), stream, SeqNum(0)).await?.is_some())
    }

    /// Waits for `until_ms` (wall clock) before a retry: in place if near, else the
    /// attempt ends suspended (`Err`, the answer to return) and the root wakes then.
    pub(super) async fn wait_to_retry(
        self: &Arc<Self>,
        run: &Run,
        version: u64,
        until_ms: u64,
    ) -> Result<(), (Result<Vec<u8>>, Context)> {
        let remaining = until_ms.saturating_sub(self.core.clock.wall_ms());
        if remaining == 0 {
            return Ok(());
        }
        if remaining <= self.core.config.sleep_in_place_max_ms {
            self.core.clock.sleep(remaining).await;
            return Ok(());
        }
        Err(self.suspended(run, version, until_ms))
    }
}
