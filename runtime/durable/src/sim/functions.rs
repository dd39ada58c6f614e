//! The [`Functions`] implementation that runs the simulator's guests (`guest.rs`) against
//! an [`Attempt`] as the wasmtime host runs a component: the scripted programs, the
//! special functions (ticker, target, waiter, maker) and, through `libs.rs`, the
//! libraries' functions. Every execution reports what it observed (each read's value,
//! each call's outcome) and which version it ran, for the oracle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tally_log_core::{Context, Error as LogError, SeqNum, Tag};

use crate::abort::Abort;
use crate::attempt::Attempt;
use crate::attempt::Functions;
use crate::env::{BoxFuture, Clock, FunctionVersion};
use crate::error::{Error, Result};
use crate::instance::{Outcall, Wake};
use crate::record::kind::OutcallOutcome;

use super::exec::Handle;
use super::guest::{
    awaited_mix, child_input, cond_mix, guest, key_name, mix, outcall_what, prefix, record_data, seed_of, stream_of, target_of,
    ticks_of, Deployed, Execution, Observed, Op, Program, Reads, Registry, Traces, DYN_KEYS, KEYS, MAKER, TABLES, TARGET,
    TARGET_STEPS, TICKER, WAITER,
};
use super::log::{user_trim, NodeLog};

pub const TIMEOUT_MS: u64 = 400;

fn fv(name: &str, d: &Deployed) -> FunctionVersion {
    FunctionVersion {
        name: name.to_string(),
        version: d.version,
        timeout_ms: TIMEOUT_MS,
        request_bytes_max: 1 << 20,
        tables: d.tables.clone(),
        // Traps run again at once, after a wait in place, or suspended until later.
        retry: crate::env::RetryPolicy {
            attempts: 3,
            backoff_ms: [0, 0, 60, 250][(seed_of(name.as_bytes()) % 4) as usize],
            backoff_max_ms: 400,
        },
    }
}

/// The functions a node runs.
pub struct SimFunctions {
    pub node: usize,
    pub registry: Arc<Mutex<Registry>>,
    pub traces: Arc<Mutex<Traces>>,
    pub log: NodeLog,
    pub handle: Handle,
    /// Clock readings of every node so far: each reading differs from every other.
    pub readings: Arc<AtomicU64>,
}

impl Functions for SimFunctions {
    fn current<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<FunctionVersion>>> {
        let r = self.registry.lock().expect("not poisoned");
        let found = r.functions.get(name).and_then(|v| v.last()).map(|d| fv(name, d));
        Box::pin(std::future::ready(Ok(found)))
    }

    fn version<'a>(&'a self, name: &'a str, version: u64) -> BoxFuture<'a, Result<Option<FunctionVersion>>> {
        let r = self.registry.lock().expect("not poisoned");
        Box::pin(std::future::ready(Ok(r.get(name, version).map(|d| fv(name, d)))))
    }

    fn run(&self, attempt: Attempt) -> BoxFuture<'_, (Result<Vec<u8>>, Attempt)> {
        Box::pin(self.run_attempt(attempt))
    }
}

/// The 8-byte value of a stored state value (what programs write: 8 bytes, or 8 bytes
/// padded with zeros past what a record carries, `padded`).
pub fn value_of(v: &Option<Bytes>) -> Option<u64> {
    v.as_ref().map(|b| match b.len() {
        8 | PADDED_LEN if b[8..].iter().all(|&z| z == 0) => u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
        _ => u64::MAX,
    })
}

/// The length of a padded value: one byte more than a write's record carries, so its
/// version is stored before the record (`Step::Write`).
const PADDED_LEN: usize = crate::record::PUT_INLINE_MAX + 1;

/// `x` as a state value, padded (see `value_of`) if `pad`.
fn state_value(x: u64, pad: bool) -> Bytes {
    let mut v = x.to_be_bytes().to_vec();
    if pad {
        v.resize(PADDED_LEN, 0);
    }
    Bytes::from(v)
}

impl SimFunctions {
    fn record(&self, input: &[u8], function: &str, version: u64, under_deferred: bool) -> usize {
        let mut t = self.traces.lock().expect("not poisoned");
        t.executions += 1;
        let list = t.by_input.entry(input.to_vec()).or_default();
        list.push(Execution {
            node: self.node,
            function: function.to_string(),
            version,
            observed: Vec::new(),
            completed: false,
            output: None,
            under_deferred,
        });
        list.len() - 1
    }

    /// An outgoing call to the simulated upstream, which answers each send with a number
    /// no other send got, after a while in flight (where a crash loses the answer).
    async fn outcall(&self, attempt: &mut Attempt, what: &str) -> Result<u64> {
        let got = match attempt.outcall(what).await.map_err(guest)? {
            Outcall::Logged(outcome) => outcome,
            Outcall::Send(slot) => {
                let key = slot.idempotency_key();
                let answer = {
                    let mut t = self.traces.lock().expect("not poisoned");
                    let answer = self.readings.fetch_add(1, Ordering::Relaxed) | (1 << 63);
                    let (named, answers) = t.upstream.entry(key).or_insert_with(|| (what.to_string(), Vec::new()));
                    if named != what {
                        return Err(Error::Failed(format!("one idempotency key for {named} and {what}")));
                    }
                    answers.push(answer);
                    answer
                };
                self.handle.sleep(answer % 7).await;
                slot.log(OutcallOutcome::Response(Bytes::copy_from_slice(&answer.to_be_bytes()))).await.map_err(guest)?
            }
        };
        match got {
            OutcallOutcome::Response(b) if b.len() == 8 => Ok(u64::from_be_bytes(b[..].try_into().expect("8 bytes"))),
            other => Err(Error::Failed(format!("an outgoing call got {other:?}"))),
        }
    }

    fn observe(&self, input: &[u8], at: usize, o: Observed) {
        let mut t = self.traces.lock().expect("not poisoned");
        if let Some(e) = t.by_input.get_mut(input).and_then(|l| l.get_mut(at)) {
            e.observed.push(o);
        }
    }

    async fn run_attempt(&self, mut attempt: Attempt) -> (Result<Vec<u8>>, Attempt) {
        let program = {
            let r = self.registry.lock().expect("not poisoned");
            r.get(&attempt.version.name, attempt.version.version).map(|d| d.program.clone())
        };
        let Some(program) = program else {
            return (Err(Error::FunctionUnavailable(attempt.version.name.clone(), "no such version".into())), attempt);
        };
        if attempt.version.name == TICKER {
            return self.tick(attempt).await;
        }
        if attempt.version.name == MAKER {
            let made = attempt.create_promise().await.map_err(guest).map(String::into_bytes);
            return (made, attempt);
        }
        if attempt.version.name == WAITER {
            let result = self.wait_for(&mut attempt).await;
            return (result, attempt);
        }
        if attempt.version.name == TARGET {
            let result = self.target(&mut attempt).await;
            if matches!(result, Err(Error::Trap(_))) {
                let name = String::from_utf8_lossy(&attempt.input).into_owned();
                self.traces.lock().expect("not poisoned").targets_trapped.insert(name);
            }
            return (result, attempt);
        }
        if let Some(result) = super::libs::run(&self.traces, &mut attempt).await {
            return (result, attempt);
        }
        let input = attempt.input.to_vec();
        let at = self.record(&input, &attempt.version.name, attempt.version.version, attempt.instance.under_deferred());
        let result = self.interpret(&mut attempt, &program, &input, at).await;
        // A trap with attempts left is run again, and what this attempt took and did not
        // log yet (read-optimized writes, clock readings) goes with it: only the last
        // attempt's trap stands for the invocation.
        let last = attempt.attempt >= attempt.version.retry.attempts;
        if result.is_ok() || matches!(&result, Err(Error::Trap(_)) if last) {
            let mut t = self.traces.lock().expect("not poisoned");
            if let Some(e) = t.by_input.get_mut(&input).and_then(|l| l.get_mut(at)) {
                e.completed = true;
                e.output = result.as_ref().ok().map(|out| u64::from_be_bytes(out[..].try_into().expect("8 bytes")));
            }
        }
        (result, attempt)
    }

    /// An execution of [`WAITER`].
    async fn wait_for(&self, attempt: &mut Attempt) -> Result<Vec<u8>> {
        let promise = String::from_utf8_lossy(&attempt.input).into_owned();
        let value = match attempt.await_promise(&promise, None).await.map_err(guest)? {
            Ok(v) if v.len() == 8 => u64::from_be_bytes(v[..].try_into().expect("8 bytes")),
            Ok(v) => return Err(Error::Failed(format!("a promise value of {} bytes", v.len()))),
            Err(e) => return Err(e),
        };
        self.traces.lock().expect("not poisoned").waited.entry(promise).or_default().push(value);
        Ok(value.to_be_bytes().to_vec())
    }

    /// An execution of [`TARGET`].
    async fn target(&self, attempt: &mut Attempt) -> Result<Vec<u8>> {
        let input = attempt.input.to_vec();
        let name = String::from_utf8_lossy(&input).into_owned();
        let stream = target_of(&input);
        let saw = |ok: u64, cancelled: bool| {
            let mut t = self.traces.lock().expect("not poisoned");
            let seen = t.targets.entry(name.clone()).or_default();
            *seen = (seen.0.max(ok), seen.1 || cancelled);
        };
        for i in 0..TARGET_STEPS {
            let data = Bytes::from(i.to_be_bytes().to_vec());
            match attempt.cond_append(&[stream], data, stream, i).await {
                Ok(Ok(_)) => saw(i + 1, false),
                Ok(Err(e)) => return Err(Error::Failed(format!("step {i}: {e}"))),
                Err(Abort::Refused(Error::Cancelled)) => {
                    saw(i, true);
                    return Err(Error::Failed(format!("cancelled at step {i}")));
                }
                Err(abort) => return Err(guest(abort)),
            }
            if i + 1 == TARGET_STEPS {
                break;
            }
            // What the guest makes of a failed call after step i: its cancellation.
            let after = |abort: Abort| match abort {
                Abort::Refused(Error::Cancelled) => {
                    saw(i + 1, true);
                    Error::Failed(format!("cancelled after step {i}"))
                }
                abort => guest(abort),
            };
            // A read-optimized write, taken and logged with the next record: a peer may
            // see the cancellation at its place meanwhile (`check_step_logs`).
            let key = format!("target-{name}");
            attempt.put(TABLES[0].0, key.as_bytes(), Bytes::from(i.to_be_bytes().to_vec())).await.map_err(after)?;
            // In place or suspended, the same in every execution.
            let ms = [20, 300][(seed_of(&input).wrapping_add(i) % 2) as usize];
            attempt.sleep(Wake::After(ms)).await.map_err(after)?;
        }
        Ok(vec![0; 8])
    }

    /// An execution of [`TICKER`].
    async fn tick(&self, mut attempt: Attempt) -> (Result<Vec<u8>>, Attempt) {
        let key = (String::from_utf8_lossy(&attempt.input).into_owned(), attempt.instance.id.to_string());
        self.traces.lock().expect("not poisoned").ticks.entry(key.clone()).or_insert(self.handle.now_ms());
        // Longer than the interval now and then, except for `every` (which starts every
        // tick, within the node's limit of asynchronous invocations).
        let work_max = if key.0 == "every" { 40 } else { 150 };
        self.handle.sleep(seed_of(key.1.as_bytes()) % work_max).await;
        match attempt.append(&[ticks_of(&key.0)], Bytes::from(key.1.clone())).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return (Err(e.into()), attempt),
            Err(abort) => return (Err(guest(abort)), attempt),
        }
        self.traces.lock().expect("not poisoned").ticks_done.insert(key);
        (Ok(vec![0; 8]), attempt)
    }

    async fn interpret(&self, attempt: &mut Attempt, program: &Program, input: &[u8], at: usize) -> Result<Vec<u8>> {
        let prefix = prefix(input);
        let mut acc = seed_of(input);
        // The offset of the client's stream the guest believes next.
        let mut next = 0u64;
        let table = |t: u8| TABLES[t as usize % TABLES.len()].0;
        for (i, op) in program.ops.iter().enumerate() {
            if self.handle.now_ms() > attempt.deadline_ms {
                return Err(Error::Timeout(TIMEOUT_MS));
            }
            match op {
                Op::Get { table: t, key } => {
                    let v = value_of(&attempt.get(table(*t), &key_name(&prefix, u64::from(*key))).await.map_err(guest)?);
                    self.observe(input, at, Observed::Read(v));
                    acc = mix(acc, v.map_or(0x5eed, |v| v.wrapping_add(1)));
                }
                Op::Put { table: t, key } => {
                    // Every fifth put writes a value too large for its record.
                    let value = state_value(mix(acc, i as u64), i % 5 == 4);
                    attempt.put(table(*t), &key_name(&prefix, u64::from(*key)), value).await.map_err(guest)?;
                }
                Op::PutDyn { table: t } => {
                    let key = u64::from(KEYS) + acc % u64::from(DYN_KEYS);
                    let value = Bytes::copy_from_slice(&mix(acc, i as u64).to_be_bytes());
                    attempt.put(table(*t), &key_name(&prefix, key), value).await.map_err(guest)?;
                }
                Op::Incr { table: t, key } => {
                    let k = key_name(&prefix, u64::from(*key));
                    let v = value_of(&attempt.get(table(*t), &k).await.map_err(guest)?);
                    self.observe(input, at, Observed::Read(v));
                    acc = mix(acc, v.map_or(0x5eed, |v| v.wrapping_add(1)));
                    let next = v.unwrap_or(0).wrapping_add(1);
                    attempt.put(table(*t), &k, Bytes::copy_from_slice(&next.to_be_bytes())).await.map_err(guest)?;
                }
                Op::Delete { table: t, key } => {
                    attempt.delete(table(*t), &key_name(&prefix, u64::from(*key))).await.map_err(guest)?;
                }
                Op::Call { function } => {
                    let child = child_input(input, i);
                    let outcome = attempt.call(function.clone(), Bytes::from(child)).await.map_err(guest)?;
                    let observed = match outcome {
                        Ok(out) if out.len() == 8 => Ok(u64::from_be_bytes(out[..].try_into().expect("8 bytes"))),
                        Ok(_) => Err("malformed output".to_string()),
                        Err(e) => Err(e.code().to_string()),
                    };
                    acc = match &observed {
                        Ok(v) => mix(acc, *v),
                        Err(code) => mix(acc, seed_of(code.as_bytes())),
                    };
                    self.observe(input, at, Observed::Call(observed));
                }
                Op::Trap => return Err(Error::Trap(format!("trap at op {i}"))),
                Op::TrimOwnBook => {
                    let mut ctx = Context::new();
                    // The guest's own book: what it may trim is the user client's business.
                    // Known as trimmed from before the trim: the oracle may relax its checks
                    // early, never late.
                    self.traces.lock().expect("not poisoned").trimmed_books.insert(attempt.book.0);
                    if let Err(e) = user_trim(&self.log, &mut ctx, attempt.book, Tag::ALL, SeqNum::MAX).await {
                        return Err(Error::from(e));
                    }
                }
                Op::Work { ms } => self.handle.sleep(u64::from(*ms)).await,
                Op::Now { clock } => {
                    // Nanoseconds of simulated time, apart in every reading; a settings
                    // version that changes every 200 ms.
                    let n = self.readings.fetch_add(1, Ordering::Relaxed);
                    let live = self.handle.now_ms() * 1_000_000 + n % 1_000_000;
                    let v = match clock {
                        Reads::Wall => attempt.wall_clock_ns(live),
                        Reads::Monotonic => attempt.monotonic_clock_ns(live),
                        Reads::Settings => attempt.settings_version(self.handle.now_ms() / 200),
                    };
                    self.observe(input, at, Observed::Clock(v));
                    acc = mix(acc, v);
                }
                Op::Outcall => {
                    let v = self.outcall(attempt, &outcall_what(input, i)).await?;
                    self.observe(input, at, Observed::Outcall(v));
                    acc = mix(acc, v);
                }
                Op::Random => {
                    let v = attempt.random_u64();
                    self.observe(input, at, Observed::Random(v));
                    acc = mix(acc, v);
                }
                Op::Append => {
                    let data = Bytes::from(record_data(input, i));
                    let s = attempt.append(&[stream_of(&prefix)], data).await.map_err(guest)?.map_err(Error::from)?;
                    self.observe(input, at, Observed::Appended(s.0));
                    acc = mix(acc, s.0);
                    next += 1;
                }
                Op::Sleep { ms } => {
                    let until = attempt.sleep(Wake::After(u64::from(*ms))).await.map_err(guest)?;
                    let now = self.handle.now_ms();
                    if now < until {
                        return Err(Error::Failed(format!("woke at {now} ms from a sleep until {until} ms")));
                    }
                }
                Op::Approve { timeout_ms } => {
                    let promise = attempt.create_promise().await.map_err(guest)?;
                    {
                        let mut t = self.traces.lock().expect("not poisoned");
                        if !t.promises.iter().any(|(_, p)| *p == promise) {
                            t.promises.push((attempt.book.0, promise.clone()));
                        }
                    }
                    let value = match attempt.await_promise(&promise, Some(u64::from(*timeout_ms))).await.map_err(guest)? {
                        Ok(v) if v.len() == 8 => Some(u64::from_be_bytes(v[..].try_into().expect("8 bytes"))),
                        Ok(v) => return Err(Error::Failed(format!("a promise value of {} bytes", v.len()))),
                        Err(Error::Timeout(_)) => None,
                        Err(e) => return Err(e),
                    };
                    self.observe(input, at, Observed::Awaited { promise, value });
                    acc = awaited_mix(acc, value);
                }
                Op::ReadStream => {
                    let mut seqnums = Vec::new();
                    let mut from = SeqNum::MIN;
                    while let Some(r) = attempt.read_next(stream_of(&prefix), from).await.map_err(guest)?.map_err(Error::from)? {
                        seqnums.push(r.seqnum.0);
                        acc = mix(acc, r.seqnum.0);
                        from = SeqNum(r.seqnum.0 + 1);
                    }
                    next = seqnums.len() as u64;
                    self.observe(input, at, Observed::Stream(seqnums));
                }
                Op::CondAppend => {
                    let (tag, data) = (stream_of(&prefix), Bytes::from(record_data(input, i)));
                    let got = match attempt.cond_append(&[tag], data, tag, next).await.map_err(guest)? {
                        Ok(s) => Ok(s.0),
                        Err(LogError::Conflict { holder }) => Err(holder.map(|h| h.0)),
                        Err(e) => return Err(Error::from(e)),
                    };
                    self.observe(input, at, Observed::CondAppended(got));
                    acc = cond_mix(acc, got);
                    next += u64::from(got.is_ok());
                }
            }
        }
        Ok(acc.to_be_bytes().to_vec())
    }
}
