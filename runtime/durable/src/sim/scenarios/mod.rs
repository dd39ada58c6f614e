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
//!
//! This file is the harness; the scenarios are grouped by what they exercise:
//! re-executions (`reexecution.rs`), invocations, peers and recovery (`invocations.rs`),
//! writes, their versions, collection and switches (`writes.rs`), a node alone
//! (`alone.rs`), and schedules (`schedules.rs`). The simulator's log keeps the LogBook contract (the one test here).

mod alone;
mod invocations;
mod queues;
mod reexecution;
mod riders;
mod schedules;
mod snapshots;
mod writes;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use bytes::Bytes;
use tally_log_core::{BookId, Context, SeqNum, Tag};

use crate::abort::Abort;
use crate::attempt::Attempt;
use crate::attempt::Functions;
use crate::config::{Protocol, StateConfig};
use crate::env::{BoxFuture, Clock, FunctionVersion};
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::instance::{Instance, Of, Started};
use crate::invoke::{InvocationStatus, InvokeRequest};
use crate::node::Durable;
use crate::record::kind;
use crate::record::{self, Step};
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
    /// The wait before a trapped attempt's retry (`RetryPolicy::backoff_ms`).
    retry_backoff_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { timeout_ms: 100, request_bytes_max: 1 << 20, retry_backoff_ms: 0 }
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
            retry: crate::env::RetryPolicy { backoff_ms: limits.retry_backoff_ms, ..Default::default() },
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
        history_kept_ms: 0,
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

/// The switch of `table` of [`BOOK`] to `to` that `begun` (what `Tables::switch`
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
            // Woken by what the log applied: polled again before the executor may move
            // the clock on to its next timer.
            if flag.0.load(Ordering::SeqCst) {
                continue;
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
        let (store, st) = (self.store.clone(), crate::table::store_table(BOOK, table));
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
                d.core.clock.sleep(20).await;
                status = d.invocation(&mut Context::new(), BOOK, &id).await;
            }
            status
        })
    }

    /// The live records of `tag` in [`BOOK`]'s shadow, in log order.
    fn stream(&mut self, d: &Arc<Durable>, tag: Tag) -> Vec<Step> {
        self.run(async {
            let (mut ctx, mut at, mut out) = (Context::new(), SeqNum(0), Vec::new());
            while let Some(r) = d.core.log.read_next(&mut ctx, shadow(BOOK), tag, at).await.expect("a read") {
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

/// An instance of `put` with idempotency key `key`, driven by hand as a peer would be.
fn put_instance(w: &World, d: &Arc<Durable>, key: &str) -> Instance {
    Instance::new(d.core.clone(), of_put(w, key))
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
