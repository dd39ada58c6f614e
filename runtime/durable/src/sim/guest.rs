//! The simulator's functions: scripted guests, their versions, and the [`Functions`]
//! implementation that runs them against an [`Attempt`] as the wasmtime host runs a
//! component. Every execution reports what it observed (each read's value, each call's
//! outcome) and which version it ran, for the oracle.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tally_log_core::{Context, Error as LogError, SeqNum, Tag};

use crate::abort::Abort;
use crate::attempt::Attempt;
use crate::attempt::Functions;
use crate::config::Protocol;
use crate::env::{BoxFuture, Clock, FunctionVersion};
use crate::error::{Error, Result};
use crate::instance::Wake;

use super::exec::Handle;
use super::log::{user_trim, NodeLog};
use super::Rng;

/// The tables every book uses, and the protocol each is created with.
pub const TABLES: [(&str, Protocol); 4] =
    [("ro", Protocol::ReadOptimized), ("wo", Protocol::WriteOptimized), ("sym", Protocol::Symmetric), ("sw", Protocol::Auto)];
/// Keys per table a program names directly; `PutDyn` writes keys above them.
pub const KEYS: u8 = 4;
pub const DYN_KEYS: u8 = 4;

/// One operation of a scripted guest. Keys are relative to the invocation's client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Get {
        table: u8,
        key: u8,
    },
    Put {
        table: u8,
        key: u8,
    },
    /// Writes the key the reads so far select: an execution that read otherwise writes
    /// elsewhere, which later reads show.
    PutDyn {
        table: u8,
    },
    Incr {
        table: u8,
        key: u8,
    },
    Delete {
        table: u8,
        key: u8,
    },
    Call {
        function: String,
    },
    Trap,
    /// The guest tidies its own book: `log.trim(0, u64::MAX)`.
    TrimOwnBook,
    /// Computes for a while.
    Work {
        ms: u8,
    },
    /// Reads the wall clock, or the monotonic one; the reading goes into what follows.
    Now {
        monotonic: bool,
    },
    /// Draws a random number, which goes into what follows.
    Random,
    /// `log.append` of a record naming the invocation and op to the client's stream of
    /// its book; the seqnum goes into what follows.
    Append,
    /// Reads the client's whole stream (`log.read-next` from 0 until none): the guest's
    /// next offset is then the number of records it found.
    ReadStream,
    /// `log.cond-append` to the client's stream at the guest's next offset (what its
    /// last `ReadStream` found, plus its appends since).
    CondAppend,
    /// A durable sleep of `ms` (past the in-place limit and the timeout, it suspends):
    /// the guest fails if it wakes before the logged wake time.
    Sleep {
        ms: u16,
    },
    /// Creates a promise, hands its ID to the run's completer, and awaits it for at
    /// most `timeout_ms`; the value (or the timeout) goes into what follows.
    Approve {
        timeout_ms: u16,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub ops: Vec<Op>,
}

/// What an execution observed, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    Read(Option<u64>),
    Call(std::result::Result<u64, String>),
    /// A clock reading: each node's clocks read differently, so executions that did not
    /// replay one reading see another.
    Clock(u64),
    Random(u64),
    /// The seqnum an append got.
    Appended(u64),
    /// The seqnums a read of the client's stream returned.
    Stream(Vec<u64>),
    /// What a conditional append got: its seqnum, or a conflict and the holder.
    CondAppended(std::result::Result<u64, Option<u64>>),
    /// What an await of a promise got: its value, or none (the timeout).
    Awaited {
        promise: String,
        value: Option<u64>,
    },
}

/// One execution of one invocation (or child), identified by its input.
#[derive(Clone, Debug)]
pub struct Execution {
    pub node: usize,
    pub function: String,
    pub version: u64,
    pub observed: Vec<Observed>,
    /// The guest ran to its end (or its deterministic trap): every effect it has was made.
    pub completed: bool,
    /// What the guest returned, if it ran to its end without a trap.
    pub output: Option<u64>,
}

/// What all executions reported, by input.
#[derive(Default)]
pub struct Traces {
    pub by_input: BTreeMap<Vec<u8>, Vec<Execution>>,
    pub executions: u64,
    /// Books a guest trimmed whole (from then on, records arrive trimmed).
    pub trimmed_books: std::collections::BTreeSet<u64>,
    /// Promises guests created, by book, for the completer.
    pub promises: Vec<(u64, String)>,
    /// Per promise, every value a completion offered (one whose answer was lost may
    /// have taken effect), and the ones whose completion succeeded.
    pub promise_values: BTreeMap<String, (Vec<u64>, Vec<u64>)>,
    /// Invocations of [`TICKER`] (schedules' ticks and triggers), by input (the
    /// schedule's name) and ID: when an execution of each first ran.
    pub ticks: BTreeMap<(String, String), u64>,
    /// Those that an execution ran to its end.
    pub ticks_done: std::collections::BTreeSet<(String, String)>,
    /// Per [`TARGET`] input: the most steps one execution saw succeed, and whether one
    /// saw the cancellation.
    pub targets: BTreeMap<String, (u64, bool)>,
    /// [`TARGET`] inputs one of whose executions trapped (a trap once a cancellation
    /// was asked for ends the invocation cancelled, unseen by the guest).
    pub targets_trapped: std::collections::BTreeSet<String>,
    /// Per promise a [`WAITER`] awaited: the value each of its executions got.
    pub waited: BTreeMap<String, Vec<u64>>,
    /// What the libraries' functions reported (`libs.rs`).
    pub libs: super::libs::LibTraces,
}

/// The function schedules invoke, with the schedule's name as input: it works for a
/// while (so that ticks overlap), then appends its invocation's ID to the stream
/// [`ticks_of`] the schedule in its book, once.
pub const TICKER: &str = "ticker";

/// The function the simulator cancels: input `x<n>`, it cond-appends `TARGET_STEPS`
/// records to the stream [`target_of`] its input, each at its offset (a step each),
/// sleeping between them (in place, or suspended), stops at a `cancelled` error, and
/// returns after the last.
pub const TARGET: &str = "target";
pub const TARGET_STEPS: u64 = 4;

/// The stream a [`TARGET`] invocation appends to.
pub fn target_of(input: &[u8]) -> Tag {
    Tag::from_name(&format!("target-{}", String::from_utf8_lossy(input)))
}

/// The function that awaits, with no timeout, the promise its input names: one that
/// another invocation created, so only the promise's waiters stream wakes it.
pub const WAITER: &str = "waiter";
/// The function that creates a promise and returns its ID.
pub const MAKER: &str = "maker";

/// The tag of the stream the ticker appends to for schedule `name`.
pub fn ticks_of(name: &str) -> Tag {
    Tag::from_name(&format!("ticks-{name}"))
}

/// One deployed version.
#[derive(Clone, Debug)]
pub struct Deployed {
    pub version: u64,
    pub program: Program,
    pub tables: Arc<BTreeMap<String, Protocol>>,
}

/// The registry: every version of every function, in deploy order.
#[derive(Default)]
pub struct Registry {
    pub functions: BTreeMap<String, Vec<Deployed>>,
    next_version: u64,
}

impl Registry {
    pub fn deploy(&mut self, name: &str, program: Program, tables: BTreeMap<String, Protocol>) -> u64 {
        self.next_version += 1;
        let d = Deployed { version: self.next_version, program, tables: Arc::new(tables) };
        self.functions.entry(name.to_string()).or_default().push(d);
        self.next_version
    }

    pub fn get(&self, name: &str, version: u64) -> Option<&Deployed> {
        self.functions.get(name)?.iter().find(|d| d.version == version)
    }
}

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

pub fn mix(acc: u64, x: u64) -> u64 {
    (acc ^ x).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(17)
}

/// The client prefix of an input ("c3:n17:p.2" -> "c3").
pub fn prefix(input: &[u8]) -> String {
    let s = String::from_utf8_lossy(input);
    s.split(':').next().unwrap_or("").to_string()
}

pub fn key_name(prefix: &str, key: u64) -> Vec<u8> {
    format!("{prefix}/k{key}").into_bytes()
}

/// The input of the child called at op `i`.
pub fn child_input(input: &[u8], i: usize) -> Vec<u8> {
    let mut out = input.to_vec();
    out.extend_from_slice(format!(".{i}").as_bytes());
    out
}

/// The client's stream: the tag its invocations append under.
pub fn stream_of(prefix: &str) -> Tag {
    Tag::from_name(&format!("stream-{prefix}"))
}

pub fn seed_of(input: &[u8]) -> u64 {
    input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| mix(h, u64::from(b)))
}

impl SimFunctions {
    fn record(&self, input: &[u8], function: &str, version: u64) -> usize {
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
        });
        list.len() - 1
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
        let at = self.record(&input, &attempt.version.name, attempt.version.version);
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
                Op::Now { monotonic } => {
                    // Nanoseconds of simulated time, apart in every reading.
                    let n = self.readings.fetch_add(1, Ordering::Relaxed);
                    let live = self.handle.now_ms() * 1_000_000 + n % 1_000_000;
                    let v = if *monotonic { attempt.monotonic_clock_ns(live) } else { attempt.wall_clock_ns(live) };
                    self.observe(input, at, Observed::Clock(v));
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

/// What a conditional append's outcome adds to a guest's accumulator.
pub fn cond_mix(acc: u64, got: std::result::Result<u64, Option<u64>>) -> u64 {
    match got {
        Ok(s) => mix(acc, s),
        Err(holder) => mix(acc, holder.map_or(0xc0f1, |h| h ^ 0xc0f1)),
    }
}

/// What an await's outcome (a value, or none for the timeout) adds to an accumulator.
pub fn awaited_mix(acc: u64, value: Option<u64>) -> u64 {
    mix(acc, value.map_or(0xa3a1, |v| v ^ 0xa3a1))
}

/// What the append at op `i` of an invocation writes: unique in the run.
pub fn record_data(input: &[u8], i: usize) -> Vec<u8> {
    let mut data = input.to_vec();
    data.extend_from_slice(format!("#{i}").as_bytes());
    data
}

/// A refused argument is the guest's error (these guests do not expect any, and fail);
/// anything else ends the attempt, as a host trap with the abort would.
pub(super) fn guest(abort: Abort) -> Error {
    match abort {
        Abort::Refused(e) => Error::Failed(format!("refused: {e}")),
        other => other.into_error(),
    }
}

/// A random program of `len` operations that may call `callees`.
pub fn random_program(rng: &mut Rng, len: usize, callees: &[String], traps: bool, trims: bool) -> Program {
    let mut ops = Vec::with_capacity(len);
    for _ in 0..len {
        let table = rng.below(TABLES.len() as u64) as u8;
        let key = rng.below(u64::from(KEYS)) as u8;
        let op = match rng.below(100) {
            0..=22 => Op::Get { table, key },
            23..=37 => Op::Put { table, key },
            38..=47 => Op::PutDyn { table },
            48..=71 => Op::Incr { table, key },
            72..=76 => Op::Delete { table, key },
            77..=86 if !callees.is_empty() => Op::Call { function: callees[rng.below(callees.len() as u64) as usize].clone() },
            87..=88 if trims => Op::TrimOwnBook,
            89 if traps => Op::Trap,
            90..=92 => Op::Now { monotonic: rng.below(2) == 0 },
            93..=94 => Op::Random,
            95 if rng.below(2) == 0 => Op::Append,
            95 => Op::Sleep { ms: rng.below(700) as u16 },
            96 => Op::ReadStream,
            97 => Op::CondAppend,
            98 => Op::Approve { timeout_ms: rng.below(400) as u16 },
            _ => Op::Work { ms: rng.below(5) as u8 },
        };
        ops.push(op);
    }
    Program { ops }
}
