//! Hand-driven scenarios of the exactly-once core, one per defect that was fixed: the
//! seeded simulator finds such defects by chance, these reach each one on purpose and
//! fail if its fix is undone (each test's doc comment names the defect and the fix).
//!
//! A [`World`] is one or two nodes running the real core over the simulated log (every
//! replica kept caught up), an in-memory store and the seeded executor, with small test
//! guests instead of the simulator's scripted ones, so that a test says exactly which
//! key holds what. No fault is injected by chance: each crash, switch, migration,
//! recovery round and garbage collection happens where the test says (only the order
//! of tasks ready at once is drawn, from a fixed seed). Time is the executor's clock.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use bytes::Bytes;
use futures_util::future::join;
use tally_log_core::{BookId, Context, SeqNum, Tag};

use crate::attempt::Attempt;
use crate::attempt::Functions;
use crate::config::{Protocol, StateConfig};
use crate::env::{BoxFuture, Clock, FunctionVersion};
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::instance::{CrashAfter, Instance, Of, Started};
use crate::invoke::{InvocationStatus, InvokeRequest};
use crate::node::{Abort, Durable};
use crate::record::kind;
use crate::record::{self, Outcome, Step};
use crate::recovery::Recovery;
use crate::store::{MemStateStore, StateStore};
use crate::switch::{Switch, TableStatus};
use crate::tags::shadow;

use super::clients::unkeyed_request;
use super::exec::{Exec, Handle, Stepped};
use super::guest::guest as guest_error;
use super::log::{LogFaults, SimLog};
use super::world::{node_parts, BOUNDS};
use super::Rng;

const SEED: u64 = 7;
/// The user book every scenario runs in.
const BOOK: BookId = BookId(3);
/// The most simulated time one [`World::run`] may take, and the most executor steps.
const RUN_MS_MAX: u64 = 600_000;
const STEPS_MAX: u64 = 1_000_000;

/// What a function does with one attempt; an `Abort` ends the attempt as the wasmtime
/// host's trap with it would (a refused argument becomes the guest's failure).
type Guest = Arc<dyn for<'a> Fn(&'a mut Attempt) -> BoxFuture<'a, Result<Vec<u8>, Abort>> + Send + Sync>;

fn guest<F>(f: F) -> Guest
where
    F: for<'a> Fn(&'a mut Attempt) -> BoxFuture<'a, Result<Vec<u8>, Abort>> + Send + Sync + 'static,
{
    Arc::new(f)
}

/// The words of a guest's input ("ro k v").
fn words(input: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(input).split(' ').map(str::to_string).collect()
}

/// The limits a version is deployed with.
#[derive(Clone, Copy, Debug)]
struct Limits {
    timeout_ms: u64,
    request_bytes_max: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { timeout_ms: 100, request_bytes_max: 1 << 20 }
    }
}

/// One execution of a guest that returned, and what it returned.
#[derive(Clone, Debug)]
struct Ran {
    function: String,
    version: u64,
    attempt: u32,
    result: Result<Vec<u8>>,
}

#[derive(Default)]
struct Registry {
    functions: BTreeMap<String, Vec<(FunctionVersion, Guest)>>,
    last_version: u64,
}

/// The test's functions: every version of every guest, and every execution.
#[derive(Default)]
struct Guests {
    registry: Mutex<Registry>,
    ran: Mutex<Vec<Ran>>,
}

impl Guests {
    fn find(&self, name: &str, version: Option<u64>) -> Option<(FunctionVersion, Guest)> {
        let r = self.registry.lock().expect("not poisoned");
        let versions = r.functions.get(name)?;
        match version {
            None => versions.last().cloned(),
            Some(v) => versions.iter().find(|(f, _)| f.version == v).cloned(),
        }
    }

    fn deploy(&self, name: &str, limits: Limits, guest: Guest) -> u64 {
        let mut r = self.registry.lock().expect("not poisoned");
        r.last_version += 1;
        let version = FunctionVersion {
            name: name.to_string(),
            version: r.last_version,
            timeout_ms: limits.timeout_ms,
            request_bytes_max: limits.request_bytes_max,
            tables: Arc::default(),
            retry: crate::env::RetryPolicy::default(),
        };
        r.functions.entry(name.to_string()).or_default().push((version, guest));
        r.last_version
    }

    /// The executions of `function` that returned so far.
    fn runs(&self, function: &str) -> Vec<Ran> {
        self.ran.lock().expect("not poisoned").iter().filter(|r| r.function == function).cloned().collect()
    }
}

impl Functions for Guests {
    fn current<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<FunctionVersion>>> {
        Box::pin(std::future::ready(Ok(self.find(name, None).map(|(v, _)| v))))
    }

    fn version<'a>(&'a self, name: &'a str, version: u64) -> BoxFuture<'a, Result<Option<FunctionVersion>>> {
        Box::pin(std::future::ready(Ok(self.find(name, Some(version)).map(|(v, _)| v))))
    }

    fn run(&self, mut attempt: Attempt) -> BoxFuture<'_, (Result<Vec<u8>>, Attempt)> {
        Box::pin(async move {
            let Some((_, guest)) = self.find(&attempt.version.name, Some(attempt.version.version)) else {
                let e = Error::FunctionUnavailable(attempt.version.name.clone(), "no such version".into());
                return (Err(e), attempt);
            };
            let result = guest(&mut attempt).await.map_err(guest_error);
            self.ran.lock().expect("not poisoned").push(Ran {
                function: attempt.version.name.clone(),
                version: attempt.version.version,
                attempt: attempt.attempt,
                result: result.clone(),
            });
            (result, attempt)
        })
    }
}

/// Sets a flag when the future [`World::run`] drives is woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The scenarios' nodes own every book but are not alone (`Peers::alone`): their
/// invocations log their Init first, as in a cluster, unless started alone.
struct NotAlone;

impl crate::env::Peers for NotAlone {
    fn owns(&self, _book: BookId) -> bool {
        true
    }
}

/// A small world: nodes of the real core over one simulated log and one store.
struct World {
    exec: Exec,
    rng: Rng,
    log: SimLog,
    store: Arc<MemStateStore>,
    guests: Arc<Guests>,
    config: StateConfig,
    /// Nodes started so far, with how many times each started.
    incarnations: BTreeMap<usize, u64>,
}

/// The configuration the scenarios start from: a table per protocol, crash injection,
/// re-execution soon after a failure, a collection in every recovery round.
fn config() -> StateConfig {
    let tables = [("ro", Protocol::ReadOptimized), ("wo", Protocol::WriteOptimized), ("sym", Protocol::Symmetric)];
    StateConfig {
        tables: tables.into_iter().map(|(t, p)| (t.to_string(), p)).collect(),
        crash_injection: true,
        reexecute_after_ms: 100,
        recovery_interval_ms: 50,
        gc_interval_ms: 0,
        ..StateConfig::default()
    }
}

/// An invocation of `function` on [`BOOK`], without an idempotency key.
fn unkeyed(function: &str, input: &str) -> InvokeRequest {
    unkeyed_request(function, BOOK, input.as_bytes())
}

/// An invocation of `function` on [`BOOK`] with idempotency key `key`.
fn keyed(function: &str, key: &str, input: &str) -> InvokeRequest {
    InvokeRequest { idempotency_key: Some(key.to_string()), ..unkeyed(function, input) }
}

/// The switch of `table` of [`BOOK`] to `to` that `begun` (what `switch_table`
/// answered) shows begun, as a node completing it sees it.
fn begun_switch(begun: &TableStatus, table: &str, to: Protocol) -> Switch {
    let &(begin, _) = begun.history.last().expect("a Begin record");
    Switch { book: BOOK, table: table.into(), begin, to, auto: false, end_position: begun.history.len() as u64 }
}

fn id(function: &str, key: &str) -> InstanceId {
    InstanceId::keyed(function, key).expect("a valid key")
}

impl World {
    /// A world with the functions `put` ("table key value") and `get` ("table key").
    fn new(config: StateConfig) -> World {
        let no_faults = LogFaults { fail_before: 0.0, fail_after: 0.0, delay_max_ms: 0 };
        let world = World {
            exec: Exec::new(),
            rng: Rng::new(SEED),
            log: SimLog::new(SEED, no_faults),
            store: Arc::new(MemStateStore::new()),
            guests: Arc::default(),
            config,
            incarnations: BTreeMap::new(),
        };
        let put = guest(|a| {
            Box::pin(async move {
                let w = words(&a.input);
                a.put(&w[0], w[1].as_bytes(), Bytes::from(w[2].clone())).await?;
                Ok(b"ok".to_vec())
            })
        });
        world.deploy("put", Limits::default(), put);
        let get = guest(|a| {
            Box::pin(async move {
                let w = words(&a.input);
                let value = a.get(&w[0], w[1].as_bytes()).await?;
                Ok(value.map_or(b"none".to_vec(), |v| [b"=", &v[..]].concat()))
            })
        });
        world.deploy("get", Limits::default(), get);
        world
    }

    fn deploy(&self, name: &str, limits: Limits, guest: Guest) -> u64 {
        self.guests.deploy(name, limits, guest)
    }

    /// Starts (or restarts) node `n` without its background work: the tests run
    /// recovery rounds themselves, unless they call `start_background`.
    fn start(&mut self, n: usize) -> Arc<Durable> {
        self.start_with(n, Arc::new(NotAlone))
    }

    /// [`World::start`] of a node alone (`Peers::alone`, as `tally dev` is): its roots
    /// defer their Init.
    fn start_alone(&mut self, n: usize) -> Arc<Durable> {
        self.start_with(n, Arc::new(crate::env::Alone))
    }

    fn start_with(&mut self, n: usize, peers: Arc<dyn crate::env::Peers>) -> Arc<Durable> {
        self.log.open_replica(n);
        let incarnation = {
            let i = self.incarnations.entry(n).or_default();
            *i += 1;
            *i
        };
        let handle = Handle { shared: self.exec.shared.clone(), owner: Some(n) };
        let mut parts = node_parts(&self.log, self.store.clone(), &handle, self.guests.clone(), SEED, incarnation);
        parts.peers = peers;
        self.run(Durable::start(parts, self.config.clone(), BOUNDS)).expect("the node starts")
    }

    /// Node `n` dies: every task it owns is dropped.
    fn crash(&mut self, n: usize) {
        self.exec.kill(n);
    }

    /// Drives the executor until `fut` completes (it runs as the harness, owned by no
    /// node), keeping every replica caught up with the log. Panics if nothing can move
    /// any more, or after [`RUN_MS_MAX`] simulated ms or [`STEPS_MAX`] steps.
    fn run<F: Future>(&mut self, fut: F) -> F::Output {
        let flag = Arc::new(Flag(AtomicBool::new(true)));
        let waker = Waker::from(flag.clone());
        let mut cx = TaskContext::from_waker(&waker);
        let mut fut = std::pin::pin!(fut);
        let limit_ms = self.exec.now_ms() + RUN_MS_MAX;
        for _ in 0..STEPS_MAX {
            if flag.0.swap(false, Ordering::SeqCst) {
                if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                    return out;
                }
            }
            for &n in self.incarnations.keys() {
                self.log.apply(n, usize::MAX);
            }
            let stepped = self.exec.step(&mut self.rng, &BTreeSet::new(), limit_ms);
            if matches!(stepped, Stepped::Idle) && !flag.0.load(Ordering::SeqCst) {
                panic!("stuck at {} ms; tasks left: {:?}", self.exec.now_ms(), self.exec.task_names());
            }
        }
        panic!("no end after {STEPS_MAX} executor steps");
    }

    /// Lets `ms` of simulated time pass, running whatever is due meanwhile.
    fn advance(&mut self, ms: u64) {
        let sleep = Handle { shared: self.exec.shared.clone(), owner: None }.sleep(ms);
        self.run(sleep);
    }

    /// `rounds` recovery rounds of `scan` on `d` (each collects garbage), each followed
    /// by enough time for what it finds unfinished to be due at the next, and for the
    /// re-executions it starts to run.
    fn recover(&mut self, d: &Arc<Durable>, scan: &mut Recovery, rounds: usize) {
        let due_ms = Limits::default().timeout_ms + self.config.reexecute_after_ms + 1;
        for _ in 0..rounds {
            self.run(scan.round(d)).expect("a recovery round");
            self.advance(due_ms);
        }
    }

    /// Invokes on `d`; the output as text (every guest here answers in text).
    fn invoke(&mut self, d: &Arc<Durable>, req: InvokeRequest) -> Result<String> {
        self.run(d.invoke(req)).map(|out| text(&out))
    }

    /// The versions that the write log `object` names, in log order.
    fn written_versions(&mut self, d: &Arc<Durable>, object: Tag) -> Vec<u64> {
        let steps = self.stream(d, object).into_iter().flat_map(Step::into_steps);
        steps
            .filter_map(|s| match s {
                Step::Write(kind::Write { version, .. }) | Step::Put(kind::Put { version, .. }) => Some(version),
                _ => None,
            })
            .collect()
    }

    /// Whether the store holds each of `versions` of `(table, key)` of [`BOOK`].
    fn stored_versions(&mut self, table: &str, key: &str, versions: &[u64]) -> Vec<bool> {
        let (store, st) = (self.store.clone(), crate::node::store_table(BOOK, table));
        let read = |v| store.get_version(&st, key.as_bytes(), v);
        versions.iter().map(|&v| self.run(read(v)).expect("a read").is_some()).collect()
    }

    /// Writes `(table, key)` with a fresh invocation of `put`.
    fn put(&mut self, d: &Arc<Durable>, table: &str, key: &str, value: &str) {
        let req = unkeyed("put", &format!("{table} {key} {value}"));
        assert_eq!(self.invoke(d, req).as_deref(), Ok("ok"), "writing {table}/{key}");
    }

    /// Reads `(table, key)` with a fresh invocation of `get`.
    fn get(&mut self, d: &Arc<Durable>, table: &str, key: &str) -> Option<String> {
        let req = unkeyed("get", &format!("{table} {key}"));
        let out = self.invoke(d, req).expect("reading");
        out.strip_prefix('=').map(str::to_string)
    }

    /// The status of the invocation of `function` with idempotency key `key`, from its
    /// step log (asking never runs it).
    fn status(&mut self, d: &Arc<Durable>, function: &str, key: &str) -> InvocationStatus {
        self.run(d.invocation(&mut Context::new(), BOOK, &id(function, key).to_string())).expect("a status")
    }

    /// The status of invocation `id` once it has finished, or the last one seen after
    /// two simulated seconds of asking.
    fn wait_finished(&mut self, d: &Arc<Durable>, id: &InstanceId) -> Result<InvocationStatus> {
        let id = id.to_string();
        self.run(async {
            let mut status = d.invocation(&mut Context::new(), BOOK, &id).await;
            for _ in 0..100 {
                if matches!(status, Ok(InvocationStatus::Finished(_))) {
                    break;
                }
                d.clock.sleep(20).await;
                status = d.invocation(&mut Context::new(), BOOK, &id).await;
            }
            status
        })
    }

    /// The live records of `tag` in [`BOOK`]'s shadow, in log order.
    fn stream(&mut self, d: &Arc<Durable>, tag: Tag) -> Vec<Step> {
        self.run(async {
            let (mut ctx, mut at, mut out) = (Context::new(), SeqNum(0), Vec::new());
            while let Some(r) = d.log.read_next(&mut ctx, shadow(BOOK), tag, at).await.expect("a read") {
                out.push(record::decode("step", &r.data).expect("a step"));
                at = SeqNum(r.seqnum.0 + 1);
            }
            out
        })
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The key of a write record (of a group's first write: a deferred Init's group
/// begins with the Init).
fn write_key(step: &Step) -> String {
    match step {
        Step::Write(kind::Write { key, .. }) | Step::Put(kind::Put { key, .. }) => text(key),
        Step::Group(kind::Group { steps }) => write_key(steps.iter().find(|s| s.is_taken_write()).expect("a group of writes")),
        other => panic!("not a write: {other:?}"),
    }
}

/// A guest that takes another path when run again: its first attempt uses key "a" of
/// the table its input names, every later attempt key "b" (a write-optimized table is
/// read, then written back, others written).
fn branchy() -> Guest {
    guest(|a| {
        Box::pin(async move {
            let table = text(&a.input);
            let key: &[u8] = if a.attempt == 1 { b"a" } else { b"b" };
            if table == "wo" {
                let value = a.get(&table, key).await?.unwrap_or_default();
                // The write logs the read first (the result would take it in its own
                // record otherwise).
                a.put(&table, key, value.clone()).await?;
                Ok(value.to_vec())
            } else {
                a.put(&table, key, Bytes::from_static(b"x")).await?;
                // A read logs a read-optimized write at once (the result would take it
                // in its own record otherwise).
                a.get(&table, key).await?;
                Ok(b"written".to_vec())
            }
        })
    })
}

/// Defect 3, second half: a re-execution that asked for a step of the kind recorded at
/// its position, but on another key, was handed the recorded step (the read's value, or
/// the write as done) instead of being stopped. `Instance::recorded` must compare the
/// whole operation (`Step::same_operation`: table, key, version or value), not only the
/// kind of step. Checked for a write-optimized read, a symmetric write and a
/// read-optimized write.
#[test]
fn a_re_execution_asking_for_another_key_is_reported_as_non_deterministic() {
    // Effects up to the step's record: Init, the read-optimized version, the record.
    for (table, effects) in [("wo", 2), ("sym", 2), ("ro", 3)] {
        let mut w = World::new(config());
        let d = w.start(0);
        w.deploy("branchy", Limits::default(), branchy());
        w.put(&d, "wo", "a", "of-a");
        w.put(&d, "wo", "b", "of-b");
        let first = InvokeRequest { crash_after: Some(effects), ..keyed("branchy", "nd", table) };
        assert_eq!(w.invoke(&d, first), Err(Error::InjectedCrash), "{table}");
        // The recovery scan re-executes it (attempt 2), which traps and runs once more.
        w.recover(&d, &mut Recovery::default(), 2);
        let runs = w.guests.runs("branchy");
        let again: Vec<&Ran> = runs.iter().filter(|r| r.attempt > 1).collect();
        assert!(!again.is_empty(), "{table}: no re-execution ran");
        for r in again {
            match &r.result {
                Err(Error::Trap(m)) if m.contains("non-deterministic") => {}
                other => {
                    let other = other.as_deref().map(text);
                    panic!("{table}: attempt {} asking for key b ended with {other:?}, not non-determinism", r.attempt)
                }
            }
        }
        let b = if table == "wo" { Some("of-b".to_string()) } else { None };
        assert_eq!(w.get(&d, table, "b"), b, "{table}: key b");
    }
}

/// Defect 6: a switch to read-optimized whose migration ran more than once (a retried
/// completion, or two nodes completing it) appended a migration record of a key each
/// time. A transitional write logged between two of them was then followed by two
/// migration records, and readers, who let a migration record defer only to a write
/// just before it, took the write-optimized value again: the transitional write was
/// lost. `migrate` must claim each key's record with a conditional append at offset 0
/// of the key's migration tag, so that every run after the first writes nothing.
///
/// The transitional write dies between its write-log record and its single-version
/// put, so the later runs still find the write-optimized entry (a finished transitional
/// write leaves an entry they skip). Two runs follow it, since a single migration
/// record right after the write is voided by the readers' rule.
#[test]
fn a_migration_run_more_than_once_keeps_a_transitional_write_visible() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::WriteOptimized);
    let mut w = World::new(config);
    let d = w.start(0);
    w.put(&d, "sw", "k", "before");
    // Node 1 begins the switch and dies at once, before its completion task ever ran.
    let d1 = w.start(1);
    let begun = w.run(d1.switch_table(BOOK, "sw", Protocol::ReadOptimized)).expect("the switch begins");
    w.crash(1);
    drop(d1);
    let switch = begun_switch(&begun, "sw", Protocol::ReadOptimized);
    let mut ctx = Context::new();
    w.run(d.migrate(&mut ctx, &switch)).expect("the first migration");
    // A transitional instance writes k and dies right after its write-log record (its
    // effects: Init, the version, the record), before its single-version put: the
    // migration still finds the write-optimized entry.
    let transitional = keyed("put", "transitional", "sw k during");
    let crashing = InvokeRequest { crash_after: Some(3), ..transitional.clone() };
    assert_eq!(w.invoke(&d, crashing), Err(Error::InjectedCrash));
    w.run(d.migrate(&mut ctx, &switch)).expect("a second migration");
    w.run(d.migrate(&mut ctx, &switch)).expect("a third migration");
    w.run(d.complete(&mut ctx, &switch)).expect("the switch completes");
    let status = w.run(d.table_status(BOOK, "sw")).expect("a status").expect("a table");
    assert_eq!((status.protocol, status.switching), (Protocol::ReadOptimized, None));
    assert_eq!(w.invoke(&d, transitional).as_deref(), Ok("ok"), "the transitional write finishes");
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("during"), "a read-optimized reader after End");
    // Collection keeps the write that is visible and drops the migration before it.
    w.recover(&d, &mut Recovery::default(), 1);
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("during"), "a reader after garbage collection");
    let object = d.tags.object("sw", b"k");
    match &w.stream(&d, object)[..] {
        [Step::Write(kind::Write { migrated_from: None, .. })] => {}
        other => panic!("the write log of k after collection: {other:?}"),
    }
}

/// Defect 7: a peer of a root that initialised before the root finished (a retry on
/// another node, say) could read, at its old cursor, an object whose write-log records
/// garbage collection had trimmed once the root finished, see "never written", and let
/// its guest act on that. A read-optimized read that finds nothing must check that the
/// root is unfinished (`Instance::check_unfinished`) and stop the late peer with
/// `Abort::Superseded` otherwise.
#[test]
fn a_late_peer_of_a_finished_root_stops_instead_of_reading_trimmed_history() {
    let mut config = config();
    config.results_kept_ms = 0;
    let mut w = World::new(config);
    let d = w.start(0);
    w.put(&d, "ro", "k", "first");
    // Root R starts and dies right after its Init record.
    let r = keyed("put", "r", "ro k from-r");
    let crashing = InvokeRequest { crash_after: Some(1), ..r.clone() };
    assert_eq!(w.invoke(&d, crashing), Err(Error::InjectedCrash));
    // A peer of R initialises: its cursor is R's Init, where k is "first".
    let of = Of {
        id: id("put", "r"),
        book: BOOK,
        function: "put".into(),
        version: w.guests.find("put", None).expect("deployed").0.version,
        input: Some(r.input.clone()),
        declared: Arc::default(),
        crash: None,
        key: None,
        defer_init: false,
        forgettable: false,
    };
    let mut peer = Instance::new(d.clone(), of);
    let mut peer_ctx = Context::new();
    assert!(matches!(w.run(peer.init(&mut peer_ctx)), Ok(Started::Running { .. })));
    // R finishes, k is written again, and garbage collection trims R's step log and the
    // write-log records of k before the last.
    assert_eq!(w.invoke(&d, r).as_deref(), Ok("ok"));
    w.put(&d, "ro", "k", "later");
    w.recover(&d, &mut Recovery::default(), 1);
    assert_eq!(w.stream(&d, d.tags.step(&id("put", "r"))), [], "R's step log is collected");
    assert_eq!(w.stream(&d, d.tags.object("ro", b"k")).len(), 1, "k's write log is collected");
    match w.run(peer.get(&mut peer_ctx, "ro", b"k")) {
        Err(Abort::Superseded) => {}
        other => panic!("the late peer's read of k at its old cursor gave {other:?}, not Superseded"),
    }
}

/// Defect 9: garbage collection trimmed an object's write log up to the record visible
/// at the horizon, whatever lay before it, so a record of another object that shares
/// the tag (two objects whose derived tags collide) went too, and that object lost its
/// value. `collect_table` must stop at the first record of another object.
#[test]
fn garbage_collection_never_trims_another_objects_record_under_a_shared_tag() {
    let mut w = World::new(config());
    let d = w.start(0);
    w.put(&d, "ro", "a", "a1");
    // A write of object b under a's tag, as if their tags collided.
    let a_tag = d.tags.object("ro", b"a");
    let foreign = Step::Write(kind::Write { table: "ro".into(), key: Bytes::from_static(b"b"), version: 7, migrated_from: None });
    w.run(d.log.append(&mut Context::new(), shadow(BOOK), &[a_tag], record::encode(&foreign))).expect("appended");
    w.put(&d, "ro", "a", "a2");
    w.put(&d, "ro", "a", "a3");
    w.recover(&d, &mut Recovery::default(), 1);
    let left = w.stream(&d, a_tag);
    let keys: Vec<String> = left.iter().map(write_key).collect();
    assert_eq!(keys, ["b", "a", "a"], "a's write log after collection: a1 trimmed, b's record and what follows kept");
    assert_eq!(left[0], foreign);
    assert_eq!(w.get(&d, "ro", "a").as_deref(), Some("a3"));
}

/// A resource defect: a keyed retry of an invocation that was admitted and started on
/// version 1 was checked again against the current version, and refused when a later
/// deploy lowered `request_bytes_max` below its input, although it runs on version 1.
/// `version_for` must, when a run fails admission, take the version that the Init
/// record names (`recorded_version`) and run that.
#[test]
fn a_re_execution_runs_on_its_version_whatever_a_later_deploy_admits() {
    let mut w = World::new(config());
    let d = w.start(0);
    let answer = |out: &'static [u8]| guest(move |_| Box::pin(async move { Ok(out.to_vec()) }));
    let v1 = w.deploy("sized", Limits { request_bytes_max: 1 << 20, ..Limits::default() }, answer(b"v1"));
    let input = "x".repeat(50);
    for key in ["retried", "recovered"] {
        let crashing = InvokeRequest { crash_after: Some(1), ..keyed("sized", key, &input) };
        assert_eq!(w.invoke(&d, crashing), Err(Error::InjectedCrash), "{key}");
    }
    w.deploy("sized", Limits { request_bytes_max: 10, ..Limits::default() }, answer(b"v2"));
    let fresh = w.invoke(&d, keyed("sized", "fresh", &input));
    assert!(matches!(fresh, Err(Error::TooLarge { size: Some(50), limit: 10, .. })), "a fresh invocation: {fresh:?}");
    assert_eq!(w.invoke(&d, keyed("sized", "retried", &input)).as_deref(), Ok("v1"), "a keyed retry");
    // The recovery scan names the version itself, and passes no input to check.
    w.recover(&d, &mut Recovery::default(), 2);
    assert_eq!(w.status(&d, "sized", "recovered"), InvocationStatus::Finished(Ok(Bytes::from_static(b"v1"))));
    let versions: Vec<u64> = w.guests.runs("sized").iter().map(|r| r.version).collect();
    assert_eq!(versions, [v1, v1], "the retry and the re-execution (the first attempts crashed before the guest ran)");
}

/// The LogBook contract (`tally_log_core::logbook_conformance`) on the simulator's log,
/// from two nodes' replicas: the same suite runs against the engine's client over an
/// in-process cluster (`tally-logsvc`'s tests), so the core is simulated on a log that
/// keeps the real one's promises.
#[test]
fn the_simulators_log_keeps_the_logbook_contract() {
    let mut w = World::new(config());
    w.start(0);
    w.start(1);
    for (node, book) in [(0, BookId(31)), (1, BookId(32))] {
        let log = w.log.node(node, Handle { shared: w.exec.shared.clone(), owner: None });
        w.run(async move { tally_log_core::logbook_conformance::run_all(&log, book, "sim").await });
    }
}

/// Review finding 9: one attempt kept every step's payload in host memory, outside the
/// guest's memory limit: a guest pushing large messages in a loop grew the host by all
/// of them. The steps an instance has passed now keep only their kinds and names.
#[test]
fn an_attempt_keeps_no_payload_of_the_steps_it_passed() {
    let mut w = World::new(config());
    let d = w.start(0);
    let pusher = guest(|a| {
        Box::pin(async move {
            for _ in 0..40 {
                a.queue_push("big", Bytes::from(vec![7u8; 64 << 10])).await?;
            }
            let v = a.get("ro", b"k").await?;
            Ok(format!("{} {}", a.instance.kept_step_bytes(), v.is_none()).into_bytes())
        })
    });
    w.deploy("pusher", Limits::default(), pusher);
    let out = w.invoke(&d, keyed("pusher", "k", "")).expect("an output");
    let kept: usize = out.split(' ').next().and_then(|n| n.parse().ok()).expect("a count");
    assert!(kept < 16 << 10, "40 pushes of 64 KiB left {kept} bytes of steps in the instance");
}

/// Asynchronous invocations: at most `async_max` run on a node at once (more are
/// refused as busy, and admitted again once some finish), and a submission is
/// acknowledged only once its Init record is in the log, so that it finishes even if
/// the node dies right after acknowledging it. The defect: `invoke_async` answered
/// before the Init was logged (the spawned run logged it), and an invocation whose
/// node died then was lost, although the client held its ID.
#[test]
fn asynchronous_invocations_are_bounded_and_acknowledged_once_logged() {
    let mut config = config();
    config.async_max = 1;
    let mut w = World::new(config);
    let d = w.start(0);
    let slow = guest(|a| {
        Box::pin(async move {
            a.instance.svc().clock.sleep(50).await;
            let key = a.input.clone();
            a.put("ro", &key, Bytes::from_static(b"done")).await?;
            Ok(b"done".to_vec())
        })
    });
    w.deploy("slow", Limits::default(), slow);
    let submit = |key: &'static str| {
        let d = d.clone();
        async move {
            d.invoke_async(&mut Context::new(), "slow".into(), BOOK, Bytes::from_static(key.as_bytes()), None, 0, None).await
        }
    };
    let done = Ok(InvocationStatus::Finished(Ok(Bytes::from_static(b"done"))));
    let first = w.run(submit("first")).expect("admitted");
    match w.run(submit("second")) {
        Err(Error::Busy(_)) => {}
        other => panic!("a second asynchronous invocation with async_max = 1 got {other:?}"),
    }
    assert_eq!(w.wait_finished(&d, &first), done);
    let third = w.run(submit("third")).expect("admitted once the first finished");
    assert_eq!(w.wait_finished(&d, &third), done);
    // The node dies right after acknowledging a submission; its run never started.
    let acked = w.run(submit("acked")).expect("admitted");
    w.crash(0);
    drop(d);
    let d = w.start(0);
    d.start_background();
    assert_eq!(w.wait_finished(&d, &acked), done, "the acknowledged invocation after its node restarted");
    assert_eq!(w.get(&d, "ro", "acked").as_deref(), Some("done"));
}

/// Two concurrent runs of one keyed invocation on one node (a client's retry racing
/// its first request, or the recovery scan racing a retry) both ran the guest: the
/// loser of the Init record found the invocation running and ran it too. `Durable::run`
/// must run the roots of one ID one at a time on a node (a lock per ID), so the second
/// finds the logged result.
#[test]
fn concurrent_runs_of_one_keyed_invocation_run_its_guest_once() {
    let mut w = World::new(config());
    let d = w.start(0);
    let req = keyed("put", "twice", "ro k v");
    let (a, b) = w.run(join(d.invoke(req.clone()), d.invoke(req)));
    assert_eq!(a, Ok(b"ok".to_vec()));
    assert_eq!(b, a);
    assert_eq!(w.guests.runs("put").len(), 1, "executions of the guest");
    assert_eq!(d.replayed(), 1, "the second run answered from the log");
}

/// Recovery state is bounded yet complete: with `open_max = 2`, the scan tracks two
/// unfinished roots at a time, and picks up the others as those finish, so all five are
/// re-executed; and garbage collection keeps what the untracked ones read meanwhile (the
/// horizon stays below the first untracked root). The roots read k at their Init,
/// before it changed, and copy what they read.
///
/// The defect guarded against: a horizon that ignored untracked roots. Through
/// `Recovery::round` the `untracked_from` term of `BookScan::horizon` does not decide:
/// `catch_up` runs before every collection and leaves roots untracked only with the
/// tracked set full of earlier roots, which hold the horizon lower still. The test
/// fails if the horizon passes unfinished roots at all (it ignores the tracked ones).
#[test]
fn every_unfinished_root_is_re_executed_and_collection_waits_for_untracked_ones() {
    let mut config = config();
    config.open_max = 2;
    let mut w = World::new(config);
    let d = w.start(0);
    let copy = guest(|a| {
        Box::pin(async move {
            let w = words(&a.input);
            let value = a.get("ro", w[0].as_bytes()).await?.unwrap_or_else(|| Bytes::from_static(b"none"));
            a.put("ro", w[1].as_bytes(), value.clone()).await?;
            Ok(value.to_vec())
        })
    });
    w.deploy("copy", Limits::default(), copy);
    w.put(&d, "ro", "k", "old");
    let roots: Vec<String> = (0..5).map(|i| format!("root{i}")).collect();
    for r in &roots {
        let crashing = InvokeRequest { crash_after: Some(1), ..keyed("copy", r, &format!("k {r}")) };
        assert_eq!(w.invoke(&d, crashing), Err(Error::InjectedCrash), "{r}");
    }
    // A newer write of k: collecting the old one would change what the roots read.
    w.put(&d, "ro", "k", "new");
    let mut scan = Recovery::default();
    w.recover(&d, &mut scan, 2);
    assert_eq!(w.guests.runs("copy").len(), 2, "re-executions while two roots are tracked");
    w.recover(&d, &mut scan, 6);
    assert_eq!(w.guests.runs("copy").len(), 5, "re-executions once the scan caught up");
    for r in &roots {
        let old = InvocationStatus::Finished(Ok(Bytes::from_static(b"old")));
        assert_eq!(w.status(&d, "copy", r), old, "{r}");
        assert_eq!(w.get(&d, "ro", r).as_deref(), Some("old"), "{r}");
    }
}

/// Review finding 5: after a restart (or an owner change) nobody's timer wakes a sleeping
/// root, and one the scan did not track (past `open_max`) woke only once older unfinished
/// roots had finished. Its Sleep record now makes it due anyway.
#[test]
fn an_untracked_sleeper_wakes_after_a_restart_whatever_older_roots_do() {
    let mut config = config();
    config.open_max = 1;
    let mut w = World::new(config);
    let d = w.start(0);
    let napper = guest(|a| {
        Box::pin(async move {
            let ms: u64 = String::from_utf8_lossy(&a.input).parse().expect("a duration");
            a.sleep(crate::Wake::After(ms)).await?;
            Ok(b"awake".to_vec())
        })
    });
    w.deploy("napper", Limits::default(), napper);
    for (key, ms) in [("long", "3600000"), ("short", "5000")] {
        let input = Bytes::from(ms.to_string());
        w.run(d.invoke_async(&mut Context::new(), "napper".into(), BOOK, input, Some(key.into()), 0, None)).expect("started");
        w.advance(50);
        assert!(matches!(w.status(&d, "napper", key), InvocationStatus::Sleeping { .. }), "{key} sleeps");
    }
    w.crash(0);
    drop(d);
    let d = w.start(0);
    w.advance(6_000);
    w.recover(&d, &mut Recovery::default(), 3);
    assert_eq!(w.status(&d, "napper", "short"), InvocationStatus::Finished(Ok(Bytes::from_static(b"awake"))));
    assert!(matches!(w.status(&d, "napper", "long"), InvocationStatus::Sleeping { .. }));
}

/// A non-deterministic re-execution's trap is logged as the invocation's result once
/// retries are spent, after the recorded history (the diverged step's position is
/// taken), naming the step that diverged; nothing is adopted and the invocation does
/// not linger for the recovery scan.
#[test]
fn a_non_determinism_trap_is_logged_once_retries_are_spent() {
    let mut w = World::new(config());
    let d = w.start(0);
    w.deploy("branchy", Limits::default(), branchy());
    let first = InvokeRequest { crash_after: Some(2), ..keyed("branchy", "nd", "wo") };
    assert_eq!(w.invoke(&d, first), Err(Error::InjectedCrash));
    w.recover(&d, &mut Recovery::default(), 2);
    match w.status(&d, "branchy", "nd") {
        InvocationStatus::Finished(Err(Error::Trap(m))) if m.contains("is now a read of wo/\"b\"") => {}
        other => panic!("after one re-execution and its retry: {other:?}"),
    }
    assert_eq!(w.guests.runs("branchy").len(), 3, "the crashed attempt, the re-execution and its retry");
}

/// A guest that reads its wall clock and a random number around three writes: a
/// log-free one first, then the reading, stored read-optimized, then the random number,
/// stored write-optimized. Each clock reading's live value differs from every other.
/// With `pad`, the reading is stored padded with spaces past what a record carries (so
/// its version is stored before its record, `Step::Write`).
fn stamp(live: Arc<std::sync::atomic::AtomicU64>, pad: bool) -> Guest {
    guest(move |a| {
        let live = live.clone();
        Box::pin(async move {
            a.put("wo", b"before", Bytes::from_static(b"x")).await?;
            let t = a.wall_clock_ns(live.fetch_add(1, Ordering::SeqCst));
            let width = if pad { crate::record::PUT_INLINE_MAX + 1 } else { 0 };
            a.put("ro", b"stamp", Bytes::from(format!("{t:<width$}"))).await?;
            let r = a.random_u64();
            a.put("wo", b"random", Bytes::from(r.to_string())).await?;
            Ok(format!("{t} {r}").into_bytes())
        })
    })
}

/// Recorded clocks, first half: an execution that crashed after any of its effects is
/// continued by one that reads what it read, so that what the re-execution returns is
/// what the crashed one stored. Found by the simulator: a `Clocks` record logged after
/// a log-free write was taken by a re-execution at that write, before the reading it
/// holds, which then read the clock live; `Instance::log_clocks` takes a recorded
/// `Clocks` step only once the execution read a clock at that point.
/// With the reading stored as a `Step::Write` (padded), it is also what catches
/// readings that wait for the record after its version was stored: reverting the flush
/// before such a write in `Instance::put` fails it.
#[test]
fn a_re_execution_reads_the_clocks_and_random_numbers_of_the_crashed_one() {
    for pad in [false, true] {
        let mut w = World::new(config());
        let d = w.start(0);
        w.deploy("stamp", Limits::default(), stamp(Arc::new(std::sync::atomic::AtomicU64::new(1_000)), pad));
        let mut stamps = BTreeSet::new();
        for k in 1u64.. {
            let key = format!("stamp-{k}");
            let first = w.invoke(&d, InvokeRequest { crash_after: Some(k), ..keyed("stamp", &key, "") });
            let again = w.invoke(&d, keyed("stamp", &key, "")).expect("the re-execution");
            let stamped = w.get(&d, "ro", "stamp").expect("stamped");
            let stored = format!("{} {}", stamped.trim_end(), w.get(&d, "wo", "random").expect("drawn"));
            assert_eq!(again, stored, "after a crash at effect {k} (pad: {pad})");
            stamps.insert(again.clone());
            match first {
                Err(Error::InjectedCrash) => {}
                Ok(out) => {
                    assert_eq!(out, again, "the uncrashed run");
                    assert!(k >= 5, "only {k} effects");
                    break;
                }
                Err(e) => panic!("crash at {k}: {e}"),
            }
        }
        assert!(stamps.iter().map(|s| s.split(' ').nth(1)).collect::<BTreeSet<_>>().len() > 3, "one random number for all");
    }
}

/// Recorded clocks, second half: an execution that read its clock live and then finds
/// that another execution logged other readings at that point (a racing peer), or that
/// the invocation it started lazily has history already, has acted on a reading the
/// invocation does not hold. It must stop before its next effect (`Superseded`, which
/// runs it again, replaying), never adopt the record and go on with its own value.
#[test]
fn an_execution_that_read_other_clocks_than_the_logged_ones_stops_before_acting() {
    let mut w = World::new(config());
    let d = w.start(0);
    w.deploy("stamp", Limits::default(), stamp(Arc::new(std::sync::atomic::AtomicU64::new(1_000)), false));
    let version = w.guests.find("stamp", None).expect("deployed").0.version;
    let of = |key: &str, input: Option<Bytes>| Of {
        id: id("stamp", key),
        book: BOOK,
        function: "stamp".into(),
        version,
        input,
        declared: Arc::default(),
        crash: None,
        key: None,
        defer_init: false,
        forgettable: false,
    };
    // A peer initialised eagerly, which reads its clock before the other run logs.
    let mut peer = Instance::new(d.clone(), of("raced", Some(Bytes::new())));
    let mut ctx = Context::new();
    assert!(matches!(w.run(peer.init(&mut ctx)), Ok(Started::Fresh)));
    assert!(w.run(peer.put(&mut ctx, "wo", b"before", Some(Bytes::from_static(b"x")))).is_ok());
    peer.read_clock(crate::recorder::GuestClock::Wall, 7);
    let done = w.invoke(&d, keyed("stamp", "raced", "")).expect("the other run");
    assert!(!done.starts_with("7 "), "the other run read its own clock: {done}");
    // The read-optimized write carries its value, so it and the reading wait for the
    // next record, and the next effect stops.
    assert!(w.run(peer.put(&mut ctx, "ro", b"stamp", Some(Bytes::from_static(b"7")))).is_ok(), "taken");
    match w.run(peer.put(&mut ctx, "wo", b"random", Some(Bytes::from_static(b"7")))) {
        Err(Abort::Superseded) => {}
        other => panic!("the peer that read 7 went on to write with {other:?}"),
    }
    assert_ne!(w.get(&d, "ro", "stamp").as_deref(), Some("7"), "the peer's write became visible");
    // A lazy start over history, after a live reading: the invocation crashed after
    // logging its reading, and a retry (no Init of its own yet) read the clock anew.
    let crashed = InvokeRequest { crash_after: Some(4), ..keyed("stamp", "lazy", "") };
    assert_eq!(w.invoke(&d, crashed), Err(Error::InjectedCrash));
    let mut lazy = Instance::new(d.clone(), of("lazy", Some(Bytes::new())));
    let mut ctx = Context::new();
    lazy.read_clock(crate::recorder::GuestClock::Wall, 9);
    let stopped = match w.run(lazy.put(&mut ctx, "ro", b"stamp", Some(Bytes::from_static(b"9")))) {
        Ok(()) => w.run(lazy.put(&mut ctx, "wo", b"random", Some(Bytes::from_static(b"9")))),
        other => other,
    };
    match stopped {
        Err(Abort::Superseded) => {}
        other => panic!("the lazy start over history went on with a live reading: {other:?}"),
    }
}

/// An instance of `put` with idempotency key `key`, driven by hand as a peer would be.
fn put_instance(w: &World, d: &Arc<Durable>, key: &str) -> Instance {
    Instance::new(d.clone(), of_put(w, key))
}

/// What an instance of `put` with key `key` started by hand is of.
fn of_put(w: &World, key: &str) -> Of {
    Of {
        id: id("put", key),
        book: BOOK,
        function: "put".into(),
        version: w.guests.find("put", None).expect("deployed").0.version,
        input: Some(Bytes::from_static(b"by hand")),
        declared: Arc::default(),
        crash: None,
        key: None,
        defer_init: false,
        forgettable: false,
    }
}

/// A world with node 0, and a fresh instance of `put` with key `key`, initialised by hand.
fn started_by_hand(key: &str) -> (World, Arc<Durable>, Instance, Context) {
    let mut w = World::new(config());
    let d = w.start(0);
    let mut inst = put_instance(&w, &d, key);
    let mut ctx = Context::new();
    assert!(matches!(w.run(inst.init(&mut ctx)), Ok(Started::Fresh)));
    (w, d, inst, ctx)
}

/// Read-optimized writes are taken without a record each: the next record of the step
/// log holds them, with the step that logs them if it may end a group (the result
/// here), so a transfer's two writes and its result cost one append. Each write is
/// visible from that record on, and garbage collection keeps and drops the versions a
/// group names as it does those of single records.
#[test]
fn read_optimized_writes_and_the_result_are_one_record() {
    let (mut w, d, mut inst, mut ctx) = started_by_hand("grouped");
    for (key, value) in [("a", "1"), ("b", "2"), ("a", "3")] {
        let value = Bytes::copy_from_slice(value.as_bytes());
        w.run(inst.put(&mut ctx, "ro", key.as_bytes(), Some(value))).expect("taken");
    }
    let done = w.run(inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"ok")))).expect("finished");
    assert_eq!(done, Outcome::Ok(Bytes::from_static(b"ok")));
    let steps = w.stream(&d, d.tags.step(&id("put", "grouped")));
    assert_eq!(steps.len(), 2, "Init, then one record: {steps:?}");
    match &steps[1] {
        Step::Group(kind::Group { steps }) => {
            let keys: Vec<String> = steps[..3].iter().map(write_key).collect();
            assert_eq!(keys, ["a", "b", "a"]);
            assert!(matches!(steps[3], Step::Result(kind::Result { .. })));
        }
        other => panic!("the writes and the result are {other:?}, not one group"),
    }
    assert_eq!(w.get(&d, "ro", "a").as_deref(), Some("3"), "a's last write in the group");
    assert_eq!(w.get(&d, "ro", "b").as_deref(), Some("2"));
    w.put(&d, "ro", "a", "4");
    w.recover(&d, &mut Recovery::default(), 1);
    assert_eq!(w.get(&d, "ro", "a").as_deref(), Some("4"));
    assert_eq!(w.get(&d, "ro", "b").as_deref(), Some("2"), "b's group record stays in b's write log");
}

/// A write's version is named by the invocation and the step. An execution that crashed
/// after storing the version of a small write (a marker: its record carries the value),
/// before the record, leaves that name taken; a re-execution whose write at that step is
/// large (its value goes to the store, and readers take it from there) must still store
/// its value, since the first version under a name stays. Markers are named apart from
/// values. Before, the re-execution's record named the crashed one's small value, and
/// every reader got that.
#[test]
fn a_large_write_never_finds_its_name_taken_by_a_crashed_execution_s_marker() {
    let large = "L".repeat(record::PUT_INLINE_MAX + 1);
    for effects in 1u64.. {
        let mut w = World::new(config());
        let d = w.start(0);
        let mut ctx = Context::new();
        let mut first = Instance::new(d.clone(), Of { crash: Some(CrashAfter::new(effects)), ..of_put(&w, "renamed") });
        let ran = w.run(async {
            first.init(&mut ctx).await?;
            first.put(&mut ctx, "ro", b"k", Some(Bytes::from_static(b"small"))).await?;
            first.finish(&mut ctx, Outcome::Ok(Bytes::new())).await
        });
        match ran {
            Err(Abort::Crash) => {}
            other => panic!("no crash left a marker without its record (at effect {effects}: {other:?})"),
        }
        let step_log = d.tags.step(&id("put", "renamed"));
        let markers = [true, false].map(|marker| crate::instance::version_of(&id("put", "renamed"), 1, marker));
        if w.stream(&d, step_log).len() != 1 || !w.stored_versions("ro", "k", &markers).contains(&true) {
            continue;
        }
        let mut again = put_instance(&w, &d, "renamed");
        let ran = w.run(async {
            assert!(matches!(again.init(&mut ctx).await?, Started::Running { .. }));
            again.put(&mut ctx, "ro", b"k", Some(Bytes::from(large.clone()))).await?;
            again.finish(&mut ctx, Outcome::Ok(Bytes::new())).await
        });
        assert!(ran.is_ok(), "the re-execution: {ran:?}");
        assert_eq!(w.get(&d, "ro", "k").as_deref(), Some(large.as_str()), "the re-execution's value, not the crashed one's");
        return;
    }
}

/// A read-optimized write of a small value stores only a marker (its record carries the
/// value), without a sync of its own. The marker is how a switch to write-optimized
/// finds the object to migrate (and garbage collection its write log): a machine crash
/// that lost an object's only marker after its record was logged left the object
/// invisible to both, and after the switch every reader missed its value. An object's
/// first marker in a node's life is stored durably; later ones need no sync, since the
/// object keeps a durable version (collection never deletes its visible one).
#[test]
fn a_machine_crash_never_loses_the_only_marker_of_an_object_that_a_switch_migrates() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::ReadOptimized);
    let mut w = World::new(config);
    let d = w.start(0);
    w.put(&d, "sw", "k", "first");
    w.put(&d, "sw", "k", "second");
    w.put(&d, "sw", "other", "x");
    // The machine dies: the log is durable, the store keeps what it synced.
    w.store.lose_unsynced();
    w.crash(0);
    drop(d);
    let d = w.start(0);
    let begun = w.run(d.switch_table(BOOK, "sw", Protocol::WriteOptimized)).expect("the switch begins");
    let switch = begun_switch(&begun, "sw", Protocol::WriteOptimized);
    let mut ctx = Context::new();
    w.run(d.migrate(&mut ctx, &switch)).expect("the migration");
    w.run(d.complete(&mut ctx, &switch)).expect("the switch completes");
    let status = w.run(d.table_status(BOOK, "sw")).expect("a status").expect("a table");
    assert_eq!((status.protocol, status.switching), (Protocol::WriteOptimized, None));
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("second"), "k after the switch");
    assert_eq!(w.get(&d, "sw", "other").as_deref(), Some("x"), "other after the switch");
}

/// Garbage collection of an object written more often than one batch of deletes holds:
/// every version but the visible one is deleted (those that records carry the values of
/// and those stored before their records alike), the write log keeps only its last
/// record, and the object reads as before.
#[test]
fn garbage_collection_deletes_more_versions_than_a_batch() {
    let mut w = World::new(config());
    let d = w.start(0);
    let big = "x".repeat(crate::record::PUT_INLINE_MAX + 1);
    let writes = crate::gc::DELETES_MAX + 40;
    for i in 0..writes {
        let value = if i % 7 == 0 { format!("{i}{big}") } else { i.to_string() };
        w.put(&d, "ro", "hot", &value);
    }
    let object = d.tags.object("ro", b"hot");
    let versions = w.written_versions(&d, object);
    assert_eq!(versions.len(), writes);
    w.recover(&d, &mut Recovery::default(), 1);
    assert_eq!(w.get(&d, "ro", "hot"), Some((writes - 1).to_string()));
    assert_eq!(w.stream(&d, object).len(), 1, "the write log keeps its visible record");
    let stored = w.stored_versions("ro", "hot", &versions);
    for (i, stored) in stored.into_iter().enumerate() {
        assert_eq!(stored, i + 1 == writes, "version {i} of {writes}");
    }
}

/// A collection's deletes are not synced one by one: the store syncs them once, and
/// only then are the records that name them trimmed. So a machine crash never brings
/// back a version that no record names any more (no collection would find it again):
/// a collection whose sync fails trims nothing, and the next one deletes the versions
/// that the crash brought back. Only the object's first write stored its marker: the
/// collection stores the visible one's before it deletes the rest (else the object
/// would be left no version at all, which no later collection or switch would find),
/// without a sync, so the crash loses it with the deletes.
#[test]
fn garbage_collection_trims_a_write_log_only_once_its_deletes_are_synced() {
    let mut w = World::new(config());
    let d = w.start(0);
    for i in 0..5 {
        w.put(&d, "ro", "hot", &i.to_string());
    }
    let object = d.tags.object("ro", b"hot");
    let versions = w.written_versions(&d, object);
    w.store.refuse_syncs(true);
    w.recover(&d, &mut Recovery::default(), 1);
    w.store.lose_unsynced();
    assert_eq!(w.stream(&d, object).len(), 5, "a collection whose sync failed trims nothing");
    let first_only = [true, false, false, false, false];
    assert_eq!(
        w.stored_versions("ro", "hot", &versions),
        first_only,
        "the crash undid the deletes, and lost the re-stored marker"
    );
    w.store.refuse_syncs(false);
    w.recover(&d, &mut Recovery::default(), 1);
    w.store.lose_unsynced();
    assert_eq!(w.stream(&d, object).len(), 1, "the write log keeps its visible record");
    assert_eq!(w.stored_versions("ro", "hot", &versions), [false, false, false, false, true]);
    assert_eq!(w.get(&d, "ro", "hot").as_deref(), Some("4"));
}

/// A peer logged the invocation's cancellation at the place of writes that another
/// instance had taken (the guest saw them succeed) and not logged yet. That instance
/// must stop (`Superseded`) rather than log its writes after the cancellation, and
/// none of them may become visible: the invocation's history is the peer's.
#[test]
fn writes_taken_where_a_peer_logged_the_cancellation_never_become_visible() {
    let (mut w, d, mut taker, mut ctx) = started_by_hand("cancelled");
    for key in ["a", "b"] {
        w.run(taker.put(&mut ctx, "ro", key.as_bytes(), Some(Bytes::from_static(b"1")))).expect("taken");
    }
    // The root is cancelled, and a peer sees it at its first step.
    let root = id("put", "cancelled");
    let stream = d.tags.cancel(&root);
    let request = record::encode(&Step::Cancel(kind::Cancel { root }));
    let tags = [stream, crate::tags::INSTANCES];
    w.run(d.log.cond_append(&mut Context::new(), shadow(BOOK), &tags, request, stream, 0)).expect("requested");
    let mut peer = put_instance(&w, &d, "cancelled");
    let mut peer_ctx = Context::new();
    assert!(matches!(w.run(peer.init(&mut peer_ctx)), Ok(Started::Running { .. })));
    match w.run(peer.put(&mut peer_ctx, "ro", b"a", Some(Bytes::from_static(b"1")))) {
        Err(Abort::Refused(Error::Cancelled)) => {}
        other => panic!("the peer's first write gave {other:?}, not its cancellation"),
    }
    match w.run(taker.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"ok")))) {
        Err(Abort::Superseded) => {}
        other => panic!("the instance whose writes lost their place finished with {other:?}"),
    }
    assert_eq!(w.run(peer.finish(&mut peer_ctx, Outcome::Ok(Bytes::new()))).expect("finished"), Outcome::Cancelled);
    let steps = w.stream(&d, d.tags.step(&id("put", "cancelled")));
    assert!(
        matches!(steps[..], [Step::Init(kind::Init { .. }), Step::Cancelled, Step::Result(kind::Result { .. })]),
        "{steps:?}"
    );
    assert_eq!(w.get(&d, "ro", "a"), None);
    assert_eq!(w.get(&d, "ro", "b"), None);
}

/// A result as large as a result may be fits one record alone, not with the pending
/// writes: those go in a record of their own just before it.
#[test]
fn pending_writes_leave_the_largest_result_a_record_of_its_own() {
    let (mut w, d, mut inst, mut ctx) = started_by_hand("large");
    let key = vec![b'k'; crate::KEY_MAX];
    for n in 0..31u8 {
        let key = [&key[1..], &[n]].concat();
        w.run(inst.put(&mut ctx, "ro", &key, Some(Bytes::from_static(b"v")))).expect("taken");
    }
    let large = Outcome::Ok(Bytes::from(vec![b'r'; crate::PAYLOAD_MAX - 64]));
    assert_eq!(w.run(inst.finish(&mut ctx, large.clone())).expect("finished"), large);
    let steps = w.stream(&d, d.tags.step(&id("put", "large")));
    assert!(
        matches!(steps[..], [Step::Init(kind::Init { .. }), Step::Group(kind::Group { .. }), Step::Result(kind::Result { .. })]),
        "{:?}",
        steps[1]
    );
}

/// The clock readings a guest takes after its last write go in the result's record,
/// before the result (the outcome is the first effect that may depend on them). A peer
/// that read other values there, and went on to its outcome from them, stops.
#[test]
fn the_readings_after_the_last_write_go_with_the_result_and_a_peer_that_read_others_stops() {
    let (mut w, d, mut inst, mut ctx) = started_by_hand("late-clock");
    let mut peer = put_instance(&w, &d, "late-clock");
    let mut peer_ctx = Context::new();
    assert!(matches!(w.run(peer.init(&mut peer_ctx)), Ok(Started::Running { .. })));
    for (i, ctx) in [(&mut inst, &mut ctx), (&mut peer, &mut peer_ctx)] {
        w.run(i.put(ctx, "ro", b"k", Some(Bytes::from_static(b"v")))).expect("taken");
    }
    inst.read_clock(crate::recorder::GuestClock::Wall, 42);
    peer.read_clock(crate::recorder::GuestClock::Wall, 43);
    let done = w.run(inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"42")))).expect("finished");
    assert_eq!(done, Outcome::Ok(Bytes::from_static(b"42")));
    let steps = w.stream(&d, d.tags.step(&id("put", "late-clock")));
    match &steps[..] {
        [Step::Init(kind::Init { .. }), Step::Group(kind::Group { steps })] => match &steps[..] {
            [Step::Put(kind::Put { .. }), Step::Clocks(kind::Clocks { readings }), Step::Result(kind::Result { .. })] => {
                assert_eq!(readings, &[crate::record::Reading::Wall(42)]);
            }
            other => panic!("the group holds {other:?}"),
        },
        other => panic!("the step log is {other:?}"),
    }
    match w.run(peer.finish(&mut peer_ctx, Outcome::Ok(Bytes::from_static(b"43")))) {
        Err(Abort::Superseded) => {}
        other => panic!("the peer that read 43 finished with {other:?}"),
    }
}

/// On a node alone, a root started lazily defers its Init: the reads it takes before
/// its first record go in that record with the Init and the steps up to it, values and
/// all, so a read-only invocation and one that reads, writes and returns cost one
/// append each (two before). A re-execution takes the recorded reads instead of
/// reading again.
#[test]
fn a_deferred_init_goes_in_one_record_with_the_reads_writes_and_result() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    w.put(&d, "ro", "k", "first");
    let retried =
        |function: &str, key: &str, input: &str| InvokeRequest { retry_key: Some(key.into()), ..unkeyed(function, input) };
    assert_eq!(w.invoke(&d, retried("get", "read", "ro k")).as_deref(), Ok("=first"));
    let steps = w.stream(&d, d.tags.step(&id("get", "read")));
    match &steps[..] {
        [Step::Group(kind::Group { steps })] => match &steps[..] {
            [Step::Init(kind::Init { .. }), Step::Read(kind::Read { value: Some(v), .. }), Step::Result(kind::Result { .. })] => {
                assert_eq!(&v[..], b"first")
            }
            other => panic!("the read-only invocation's record holds {other:?}"),
        },
        other => panic!("the read-only invocation logged {other:?}, not one record"),
    }
    w.put(&d, "ro", "k", "second");
    // The same request again gets the logged result, not a new read.
    assert_eq!(w.invoke(&d, retried("get", "read", "ro k")).as_deref(), Ok("=first"));
    assert_eq!(w.invoke(&d, retried("put", "write", "ro k third")).as_deref(), Ok("ok"));
    let steps = w.stream(&d, d.tags.step(&id("put", "write")));
    assert!(
        matches!(&steps[..], [Step::Group(kind::Group { steps })] if matches!(&steps[..], [Step::Init(kind::Init { .. }), Step::Put(kind::Put { .. }), Step::Result(kind::Result { .. })])),
        "the writing invocation logged {steps:?}"
    );
    assert_eq!(w.get(&d, "ro", "k").as_deref(), Some("third"));
}

/// A deferred Init's record is conditional on the transition log of every table the
/// instance used: a switch that began after the instance looked (here one that ran to
/// its end) fails it, and the instance runs again with its Init first. Before, its
/// read-optimized write landed after the switch's migration, in a write log that no
/// write-optimized reader looks at, and was lost to them.
#[test]
fn a_deferred_init_whose_table_switched_since_it_looked_is_never_logged() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::ReadOptimized);
    let mut w = World::new(config);
    let d = w.start_alone(0);
    w.put(&d, "sw", "k", "first");
    let mut inst = Instance::new(d.clone(), Of { defer_init: true, ..of_put(&w, "late") });
    let mut ctx = Context::new();
    let read = w.run(inst.get(&mut ctx, "sw", b"k")).expect("a read");
    assert_eq!(read.as_deref(), Some(&b"first"[..]));
    assert!(inst.init_deferred(), "a read-optimized read defers the Init");
    let begun = w.run(d.switch_table(BOOK, "sw", Protocol::WriteOptimized)).expect("the switch begins");
    let switch = begun_switch(&begun, "sw", Protocol::WriteOptimized);
    let mut sctx = Context::new();
    w.run(d.migrate(&mut sctx, &switch)).expect("the migration");
    w.run(d.complete(&mut sctx, &switch)).expect("the switch completes");
    let ran = w.run(async {
        inst.put(&mut ctx, "sw", b"k", Some(Bytes::from_static(b"late"))).await?;
        inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"ok"))).await
    });
    assert!(matches!(ran, Err(Abort::Superseded)), "the deferred record: {ran:?}");
    assert!(w.stream(&d, d.tags.step(&id("put", "late"))).is_empty(), "nothing of it is logged");
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("first"));
    // Run again as the invocation path does, eagerly: logged, and seen after the switch.
    let mut again = put_instance(&w, &d, "late");
    let ran = w.run(async {
        again.init(&mut ctx).await?;
        again.put(&mut ctx, "sw", b"k", Some(Bytes::from_static(b"late"))).await?;
        again.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"ok"))).await
    });
    assert!(ran.is_ok(), "the eager run: {ran:?}");
    assert_eq!(w.get(&d, "sw", "k").as_deref(), Some("late"));
}

/// On a node alone, an invocation without any key whose caller waits, and that only
/// read (under any protocol but unsafe) before it returned, logs nothing: no effect,
/// nothing replays it, nobody can ask for its result. One that writes still logs its
/// one record, and a retry key (a gateway may send it again) keeps its record too (the
/// test above).
#[test]
fn an_unkeyed_read_only_invocation_on_a_node_alone_logs_nothing() {
    for table in ["ro", "wo", "sym"] {
        let mut w = World::new(config());
        let d = w.start_alone(0);
        w.put(&d, table, "k", "first");
        let before = w.stream(&d, crate::tags::INSTANCES).len();
        assert_eq!(w.invoke(&d, unkeyed("get", &format!("{table} k"))).as_deref(), Ok("=first"));
        assert_eq!(w.stream(&d, crate::tags::INSTANCES).len(), before, "{table}: the read-only invocation logged a record");
        assert_eq!(w.invoke(&d, unkeyed("put", &format!("{table} k second"))).as_deref(), Ok("ok"));
        let after = w.stream(&d, crate::tags::INSTANCES).len();
        // A read-optimized one in its one record; the others log their Init first.
        assert!(after > before, "{table}: the writing invocation logged nothing");
        assert_eq!(w.invoke(&d, unkeyed("get", &format!("{table} k"))).as_deref(), Ok("=second"));
        assert_eq!(w.stream(&d, crate::tags::INSTANCES).len(), after, "{table}");
    }
}

/// A forgettable read-only invocation ends without a record only if no table it read
/// switched since it looked (what its deferred record's conditions check): a switch
/// begun between its read and its end sends it to its record, whose condition fails,
/// and it runs again with its Init first.
#[test]
fn a_forgettable_read_whose_table_switched_before_it_ended_is_not_forgotten() {
    let mut config = config();
    config.tables.insert("sw".into(), Protocol::ReadOptimized);
    let mut w = World::new(config);
    let d = w.start_alone(0);
    w.put(&d, "sw", "k", "first");
    let forgettable = |w: &World, key: &str| Of { defer_init: true, forgettable: true, ..of_put(w, key) };
    let mut ctx = Context::new();
    // Without a switch: nothing logged.
    let mut inst = Instance::new(d.clone(), forgettable(&w, "quiet"));
    let read = w.run(inst.get(&mut ctx, "sw", b"k")).expect("a read");
    assert_eq!(read.as_deref(), Some(&b"first"[..]));
    let done = w.run(inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"=first"))));
    assert!(matches!(done, Ok(Outcome::Ok(_))), "{done:?}");
    assert!(w.stream(&d, d.tags.step(&id("put", "quiet"))).is_empty(), "a quiet read is not logged");
    // A switch begins between the read and the end.
    let mut inst = Instance::new(d.clone(), forgettable(&w, "raced"));
    w.run(inst.get(&mut ctx, "sw", b"k")).expect("a read");
    w.run(d.switch_table(BOOK, "sw", Protocol::WriteOptimized)).expect("the switch begins");
    let done = w.run(inst.finish(&mut ctx, Outcome::Ok(Bytes::from_static(b"=first"))));
    assert!(matches!(done, Err(Abort::Superseded)), "the raced read: {done:?}");
}

/// A node alone reads from its index's end before a deferred Init is logged, so it
/// starts from a position past everything logged before it started (a conditional
/// append that cannot hold): an index still catching up after a restart never serves
/// such a read.
#[test]
fn a_node_alone_reads_from_a_position_past_everything_logged_before_it_started() {
    let mut w = World::new(config());
    let d = w.start_alone(0);
    let mut ctx = Context::new();
    w.run(d.log.append(&mut ctx, shadow(BOOK), &[Tag(5)], Bytes::from_static(b"before"))).expect("appended");
    w.crash(0);
    drop(d);
    let d = w.start_alone(0);
    assert!(d.fresh_from.as_ref().expect("a node alone").covers(&ctx), "{:?} is behind {ctx:?}", d.fresh_from);
}

/// A write-optimized transfer (two reads, two writes, a result) logs its reads together
/// in the record that the first write logs before it acts, not one record each: a
/// logged read waits for the next record, as clock readings do. In a cluster the step
/// log holds the Init, the two reads and the result in three records; on a node alone
/// the deferred Init goes with the reads, in two.
#[test]
fn a_write_optimized_transfer_logs_both_reads_in_one_record_with_its_init_on_a_node_alone() {
    let transfer = guest(|a| {
        Box::pin(async move {
            let from = a.get("wo", b"from").await?.unwrap_or_default();
            let to = a.get("wo", b"to").await?.unwrap_or_default();
            a.put("wo", b"from", to.clone()).await?;
            a.put("wo", b"to", from.clone()).await?;
            Ok([from, to].concat())
        })
    });
    for alone in [false, true] {
        let mut w = World::new(config());
        let d = if alone { w.start_alone(0) } else { w.start(0) };
        w.deploy("transfer", Limits::default(), transfer.clone());
        w.put(&d, "wo", "from", "1");
        w.put(&d, "wo", "to", "2");
        let out = w.invoke(&d, keyed("transfer", "t", "")).expect("transferred");
        assert_eq!(out, "12");
        let records: Vec<Vec<String>> = w
            .stream(&d, d.tags.step(&id("transfer", "t")))
            .into_iter()
            .map(|s| s.into_steps().iter().map(Step::describe).collect())
            .collect();
        // Init, reads, result; on a node alone the Init waits for the reads
        // (`deferred_protocol`).
        let (init, reads) = ("init of transfer version 3", ["read of wo/\"from\"", "read of wo/\"to\""]);
        let expected: Vec<Vec<&str>> = match alone {
            false => vec![vec![init], reads.to_vec(), vec!["result"]],
            true => vec![[&[init][..], &reads].concat(), vec!["result"]],
        };
        assert_eq!(records, expected, "alone {alone}");
        assert_eq!(w.get(&d, "wo", "from").as_deref(), Some("2"));
        assert_eq!(w.get(&d, "wo", "to").as_deref(), Some("1"));
    }
}
