//! The simulator's guests as data: the scripted programs and their operations, the
//! functions every run deploys besides them (ticker, target, waiter, maker, peek), their
//! versions, and what executions report for the oracle (each read's value, each call's
//! outcome, the libraries' reports), with the helpers that name keys, streams and inputs.
//! `functions.rs` runs them; `libs.rs` holds the libraries' functions.

use std::collections::BTreeMap;
use std::sync::Arc;

use tally_log_core::Tag;

use crate::abort::Abort;
use crate::config::Protocol;
use crate::error::Error;

use super::Rng;

/// The tables every book uses, and the protocol each is created with.
pub const TABLES: [(&str, Protocol); 4] =
    [("ro", Protocol::ReadOptimized), ("wo", Protocol::WriteOptimized), ("sym", Protocol::Symmetric), ("sw", Protocol::Auto)];
/// Keys per table a program names directly; `PutDyn` writes keys above them.
pub const KEYS: u8 = 4;
pub const DYN_KEYS: u8 = 4;

/// What an `Op::Now` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    Wall,
    Monotonic,
    /// The function's settings' version, which moves on as simulated time does.
    Settings,
}

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
    /// Reads the wall clock, the monotonic one, or the version of the function's
    /// settings (read as a clock is); the reading goes into what follows.
    Now {
        clock: Reads,
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
    /// An outgoing call (`Attempt::outcall`) to the simulated upstream, which answers
    /// every send with a number of its own; the answer goes into what follows.
    Outcall,
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
    /// What an outgoing call got.
    Outcall(u64),
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
    /// A child run under a parent whose Init was deferred: it logged nothing (it stops
    /// rather than log), so it may run and never finish when that parent never logs.
    pub under_deferred: bool,
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
    pub libs: LibTraces,
    /// What the simulated upstream of outgoing calls saw, by idempotency key: the call
    /// each send named, and the answer to each send.
    pub upstream: BTreeMap<String, (String, Vec<u64>)>,
}

/// What one execution of a teller saw, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A transaction's commit: its record, whether it committed, what it read, what it
    /// added (per counter).
    Txn { seqnum: u64, committed: bool, reads: Vec<(u64, i64)>, adds: Vec<(u64, i64)> },
    /// A plain increment, at its record.
    Plain { seqnum: u64, counter: u64, by: i64 },
}

/// A message a consumer popped, with its pop's record and its place among what that
/// pop got.
pub type Popped = (String, (u64, usize));

/// What executions of the libraries' functions (`libs.rs`) that ran to their end
/// reported, by input.
#[derive(Default)]
pub struct LibTraces {
    pub tellers: BTreeMap<String, Vec<Vec<Seen>>>,
    /// Per consumer: the messages its executions popped.
    pub consumers: BTreeMap<String, Vec<Vec<Popped>>>,
    /// Per locker or keyed invocation: whether it held its lock.
    pub holders: BTreeMap<String, Vec<bool>>,
    pub read: BTreeMap<String, Vec<Vec<i64>>>,
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
/// A read-only function of the read-optimized table and the switching one, which
/// clients call without any key (`peek`).
pub(super) const PEEK: &str = "peek";

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
    // Finished as SplitMix64 does: `mix` alone leaves the low bits of similar inputs
    // alike (every teller of seeds below 100 drew the same kind, none a transaction).
    let mut z = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| mix(h, u64::from(b)));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What the outgoing call of op `i` of the invocation of `input` names: one call of
/// one invocation.
pub fn outcall_what(input: &[u8], i: usize) -> String {
    format!("POST sim://upstream/{:016x}/{i}", seed_of(input))
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
            90..=92 => Op::Now { clock: [Reads::Wall, Reads::Monotonic, Reads::Settings][rng.below(3) as usize] },
            93..=94 => Op::Random,
            95 if rng.below(2) == 0 => Op::Append,
            95 => Op::Sleep { ms: rng.below(700) as u16 },
            96 => Op::ReadStream,
            97 => Op::CondAppend,
            98 => Op::Approve { timeout_ms: rng.below(400) as u16 },
            99 if rng.below(2) == 0 => Op::Outcall,
            _ => Op::Work { ms: rng.below(5) as u8 },
        };
        ops.push(op);
    }
    Program { ops }
}
