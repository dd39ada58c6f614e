//! The wasmtime host: one engine with the pooling allocator and epoch interruption, a
//! linker with WASI and the `tally:platform` imports, compilation with an on-disk
//! artifact cache, and one invocation = one fresh instance in its own store.
//!
//! Limits: linear memory through a resource limiter (a denied growth is remembered, so
//! the trap that follows is reported as the memory limit); wall time through one shared
//! ticker thread that advances the engine's epoch every [`TICK`] while an instance runs,
//! whose deadline callback yields to the executor each tick and traps past the deadline;
//! time spent in host calls (waiting on the log, a child invocation) is bounded by the
//! same deadline.
//!
//! An ended instance's store is dropped in a task of its own ([`reap`]), after the
//! invocation has its answer: the drop resets the instance's memory and tables for the
//! next instance in its pool slot.
//!
//! One file per WIT interface beside this one (`log.rs`, `invoke.rs`, `context.rs`,
//! `state.rs`, `objects.rs`, `queues.rs`, `locks.rs`): each checks its arguments, then calls the guest's log client or the
//! exactly-once core's attempt (`tally_durable::Attempt`). `recorded.rs` replaces
//! WASI's clocks and random with the attempt's, which every execution of an invocation
//! reads alike.
//!
//! Their spans, as the log client's, are at debug level: at info, the default, every host
//! call would allocate its span in the subscriber's registry and enter and leave it on
//! every poll, a cost on every call of a busy node.
//!
//! Memory between instances: a pool slot keeps up to `memory_keep_resident_bytes` of its
//! linear memory resident; the kernel's PAGEMAP_SCAN finds the pages the last instance
//! wrote, and only those are restored in place (the rest is released). That needs wasmtime
//! 50.0.2 or later (pinned in `runtime/host/Cargo.toml`): 50.0.1's scan counted every
//! untouched page as written, so every reset restored all accessible memory up to the
//! limit.
//!
//! The reap task also makes the WASI context (random generators seeded, output pipes) of a
//! later instance, kept among at most `SPARES_MAX` spares, each used once. The guests'
//! monotonic clock counts from the process's clock origin, not from its context's making,
//! so a spare's age tells an instance nothing. The ticker parks after a second in which no
//! instance ran or started, so an idle node never wakes for it and a busy one never pays
//! for waking it; the whole call runs under a tokio timeout to the invocation's deadline
//! too.
//!
//! `/metrics` shows the time of each part (`tally_instantiate_seconds`,
//! `tally_invocation_seconds`, `tally_instance_reset_seconds`), each instance's peak linear
//! memory over all its memories (`tally_instance_memory_bytes`, counted by the store's
//! limiter) and the memory idle slots hold (`tally_idle_memory_resident_bytes`).

mod context;
mod http;
mod invoke;
mod locks;
mod log;
mod objects;
mod outgoing;
mod output;
mod queues;
mod recorded;
mod settings;
mod state;

pub use output::Line;
pub use settings::SettingsSource;
#[cfg(feature = "fuzzing")]
pub(crate) use {http::to_hyper, outgoing::origin};

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tally_durable::{Abort, Attempt, Error as RuntimeError, Result};
use tally_logsvc::LogClient;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::WasiHttpCtx;

use crate::clock::Tokio;
use crate::limits::{Limits, NodeLimits};
use crate::metrics::Metrics;
use crate::outbound::Outbound;
use output::GuestOutput;

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "function",
    imports: { default: async | trappable },
    exports: { default: async },
});

use self::tally::platform::types::Error as GuestError;

/// The epoch period: the granularity of timeouts and of yielding to the executor.
pub const TICK: Duration = Duration::from_millis(5);

/// A compiled function, ready to instantiate: a component of world `function`
/// (`handle(bytes) -> bytes`), or an HTTP function (`wasi:http/incoming-handler`,
/// `http.rs`).
pub enum Prepared {
    Handle(FunctionPre<HostState>),
    Http(ProxyPre<HostState>),
}

impl Prepared {
    /// Whether the function serves HTTP requests (`wasi:http/incoming-handler`).
    pub fn is_http(&self) -> bool {
        matches!(self, Prepared::Http(_))
    }
}

/// What one invocation attempt is: the exactly-once core's attempt (instance, context,
/// deadline) and the guest's own log client.
pub struct Invocation {
    pub attempt: Attempt,
    /// User privileges: platform books and tags are refused.
    pub log: LogClient,
    /// Where the function's settings are read.
    pub settings: Arc<dyn SettingsSource>,
}

/// Denies memory growth beyond the function's limit, and remembers that it did; counts
/// the instance's linear memory (all its memories: the ones it was created with too).
struct MemoryLimiter {
    limit: usize,
    hit: bool,
    /// Bytes of linear memory now, and at most, over the instance's memories.
    total: usize,
    peak: usize,
}

impl MemoryLimiter {
    fn new(limit: usize) -> MemoryLimiter {
        MemoryLimiter { limit, hit: false, total: 0, peak: 0 }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit = true;
            return Ok(false);
        }
        self.total = self.total.saturating_add(desired.saturating_sub(current));
        self.peak = self.peak.max(self.total);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// The data of one store: WASI (no files, no network, captured output), the limiter
/// and the invocation.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    outgoing: outgoing::Outgoing,
    limiter: MemoryLimiter,
    stderr: GuestOutput,
    stdout: GuestOutput,
    /// Taken out when the instance has ended, before its store is dropped.
    inv: Option<Invocation>,
    /// The settings this execution read, once it read them.
    settings: Option<Arc<crate::settings::Values>>,
}

impl HostState {
    /// The invocation this instance runs: there until the instance has ended, so
    /// always there for a host call.
    fn inv(&mut self) -> &mut Invocation {
        self.inv.as_mut().expect("a running instance has its invocation")
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// The error a deadline callback raises past the deadline.
#[derive(Debug)]
struct DeadlinePassed;

impl std::fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the invocation's deadline passed")
    }
}

impl std::error::Error for DeadlinePassed {}

/// Advances the engine's epoch every [`TICK`] while instances run, until dropped. It
/// parks only after [`IDLE_TICKS`] ticks in which no instance ran or started, so an
/// idle node does not wake for it, while a busy one never pays for waking it (a
/// futex wake, often a cross-core interrupt, was 2-3 µs of every invocation when it
/// parked between invocations).
struct Ticker {
    shared: Arc<TickerShared>,
    thread: std::thread::Thread,
}

/// Ticks without an instance before the ticker parks: one second.
const IDLE_TICKS: u32 = 200;

struct TickerShared {
    stop: AtomicBool,
    /// Instances running now ([`Running`] guards).
    running: AtomicUsize,
    /// Instances started so far: activity between two ticks.
    started: AtomicU64,
    /// The ticker is parked, or about to park: a new instance must unpark it.
    parked: AtomicBool,
    /// Idle ticks before parking: [`IDLE_TICKS`] but in tests.
    idle_ticks: u32,
    /// Ticks and parks so far, for tests.
    ticks: AtomicU64,
    parks: AtomicU64,
}

impl Ticker {
    fn start(engine: Engine, idle_ticks: u32) -> Ticker {
        let shared = Arc::new(TickerShared {
            stop: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            idle_ticks,
            ticks: AtomicU64::new(0),
            parks: AtomicU64::new(0),
        });
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("tally-epoch".into())
            .spawn(move || theirs.tick(&engine))
            .expect("spawning the epoch ticker");
        Ticker { shared, thread: thread.thread().clone() }
    }

    /// Keeps the epoch advancing while the guard lives: one per running instance.
    fn running(&self) -> Running<'_> {
        // SeqCst pairs with `tick`: either the ticker sees this instance before it
        // parks, or this sees `parked` and unparks it (an unpark before the park makes
        // the park return at once).
        self.shared.running.fetch_add(1, Ordering::SeqCst);
        self.shared.started.fetch_add(1, Ordering::Relaxed);
        if self.shared.parked.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
        Running(&self.shared)
    }
}

impl TickerShared {
    fn tick(&self, engine: &Engine) {
        let mut idle = 0;
        let mut seen = self.started.load(Ordering::Relaxed);
        while !self.stop.load(Ordering::Acquire) {
            let started = self.started.load(Ordering::Relaxed);
            if self.running.load(Ordering::Acquire) == 0 && started == seen {
                idle += 1;
            } else {
                idle = 0;
                seen = started;
            }
            if idle >= self.idle_ticks {
                self.parked.store(true, Ordering::SeqCst);
                if self.running.load(Ordering::SeqCst) == 0 && !self.stop.load(Ordering::Acquire) {
                    self.parks.fetch_add(1, Ordering::Relaxed);
                    std::thread::park();
                }
                self.parked.store(false, Ordering::SeqCst);
                idle = 0;
                seen = self.started.load(Ordering::Relaxed);
                continue;
            }
            std::thread::sleep(TICK);
            engine.increment_epoch();
            self.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// An instance running: see [`Ticker::running`].
struct Running<'a>(&'a TickerShared);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Drops an ended instance's store, resetting its pool slot for the next instance (a
/// page scan and restoring the pages it wrote), and makes a WASI context for a later
/// instance, in a task of its own: on a runtime worker that task normally runs when
/// the invocation's task next waits, so after the answer has been written, and on the
/// same thread.
fn reap(metrics: Arc<Metrics>, spares: Arc<Spares>, function: String, store: Store<HostState>) {
    tokio::spawn(async move {
        let started = Instant::now();
        drop(store);
        metrics.reset(&function, started.elapsed());
        spares.refill();
    });
}

/// An instance's WASI: no files, no network, stdout and stderr captured.
struct Wasi {
    ctx: WasiCtx,
    stdout: GuestOutput,
    stderr: GuestOutput,
}

impl Wasi {
    /// Keeps at most `output_bytes_max` of each of stdout and stderr.
    fn new(output_bytes_max: usize) -> Wasi {
        let stdout = GuestOutput::new(output_bytes_max);
        let stderr = GuestOutput::new(output_bytes_max);
        // The guest reads its clocks and random bytes through `recorded.rs`; the context's
        // own monotonic clock times what WASI waits for (`subscribe-instant`), on the
        // same scale.
        let ctx = WasiCtx::builder().stdout(stdout.clone()).stderr(stderr.clone()).monotonic_clock(Monotonic).build();
        Wasi { ctx, stdout, stderr }
    }
}

/// The guests' monotonic clock ([`crate::clock::monotonic_ns`]). WASI's default counts
/// from the context's making, which for a spare context would tell an instance how long
/// ago another instance ended.
struct Monotonic;

impl wasmtime_wasi::HostMonotonicClock for Monotonic {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        crate::clock::monotonic_ns()
    }
}

/// WASI contexts made ahead, off the invocation's path (seeding a context's random
/// generators and its pipes was a tenth of an invocation of hello). Each is fresh and
/// serves one instance only: no instance sees another's generators or output.
#[derive(Default)]
struct Spares {
    wasi: std::sync::Mutex<Vec<Wasi>>,
    /// Bytes of each output stream an instance keeps.
    output_bytes_max: usize,
}

/// Spare contexts kept at most: enough for a burst of concurrent instances.
const SPARES_MAX: usize = 64;

/// Bytes of each pooled table kept resident between instances (8 KiB: a thousand
/// function references, more than a guest's table usually holds).
const TABLE_KEEP_RESIDENT: usize = 8 << 10;

impl Spares {
    fn take(&self) -> Wasi {
        let spare = self.wasi.lock().expect("spares lock").pop();
        spare.unwrap_or_else(|| Wasi::new(self.output_bytes_max))
    }

    fn refill(&self) {
        if self.wasi.lock().expect("spares lock").len() < SPARES_MAX {
            let wasi = Wasi::new(self.output_bytes_max);
            self.wasi.lock().expect("spares lock").push(wasi);
        }
    }
}

pub struct WasmHost {
    engine: Engine,
    linker: Linker<HostState>,
    artifacts: PathBuf,
    /// Distinguishes artifacts of incompatible engine builds and settings.
    compat: u64,
    metrics: Arc<Metrics>,
    ticker: Ticker,
    spares: Arc<Spares>,
    outgoing: Arc<outgoing::OutgoingNode>,
}

impl WasmHost {
    /// An engine sized by `node`, caching compiled artifacts under `artifacts`.
    pub fn new(node: &NodeLimits, artifacts: PathBuf, metrics: Arc<Metrics>) -> anyhow::Result<WasmHost> {
        let mut pool = PoolingAllocationConfig::default();
        let n = node.instances_max;
        pool.total_component_instances(n)
            .total_core_instances(n.saturating_mul(8))
            .total_memories(n.saturating_mul(2))
            .total_tables(n.saturating_mul(8))
            .total_stacks(n)
            .max_memories_per_component(4)
            .max_memory_size(node.memory_bytes_max as usize)
            // Batch decommits: each madvise costs a TLB shootdown on every core.
            .decommit_batch_size(16)
            // A slot's first memory_keep_resident_bytes are reset by writing back only
            // the pages the last instance touched (Linux's PAGEMAP_SCAN, where the
            // kernel has it), and stay resident: the next instance does not fault them
            // in again.
            .linear_memory_keep_resident(node.memory_keep_resident_bytes as usize)
            // Likewise a table's first pages: reset by a memset, they stay resident, so
            // an instance's first call through its table takes no copy-on-write fault
            // (each a TLB shootdown on every core).
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            .pagemap_scan(wasmtime::Enabled::Auto);
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true).epoch_interruption(true).allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        outgoing::add_to_linker(&mut linker)?;
        recorded::add_to_linker(&mut linker)?;
        settings::add_to_linker(&mut linker)?;
        Function::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)?;
        std::fs::create_dir_all(&artifacts)?;
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        let compat = h.finish();
        let ticker = Ticker::start(engine.clone(), IDLE_TICKS);
        metrics.watch_pool(engine.clone());
        let outgoing = Arc::new(outgoing::OutgoingNode::new(node));
        let spares =
            Arc::new(Spares { wasi: std::sync::Mutex::default(), output_bytes_max: node.logs_invocation_bytes_max as usize });
        Ok(WasmHost { engine, linker, artifacts, compat, metrics, ticker, spares, outgoing })
    }

    /// Validates a component against the world and compiles it, or loads the artifact
    /// compiled earlier for the same bytes (`sha256` is their hash).
    pub async fn prepare(&self, bytes: &[u8], sha256: &str) -> Result<Prepared> {
        let path = self.artifacts.join(format!("{sha256}-{:016x}.cwasm", self.compat));
        if path.exists() {
            // SAFETY: the file is an artifact this host wrote for this engine
            // configuration (the name carries the compatibility hash), in its own data
            // directory; a corrupt one fails to load and is compiled again.
            match unsafe { Component::deserialize_file(&self.engine, &path) } {
                Ok(component) => return self.link(&component),
                Err(e) => tracing::warn!(path = %path.display(), "recompiling a bad artifact: {e:#}"),
            }
        }
        let engine = self.engine.clone();
        let owned = bytes.to_vec();
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &owned))
            .await
            .map_err(|e| RuntimeError::Internal(format!("compiling: {e}")))?
            .map_err(|e| RuntimeError::InvalidComponent(format!("{e:#}")))?;
        let pre = self.link(&component)?;
        // The artifact cache is an optimisation: failing to write it only costs a
        // compilation on the next start.
        if let Err(e) = self.store_artifact(&component, &path) {
            tracing::warn!(path = %path.display(), "not caching the artifact: {e:#}");
        }
        Ok(pre)
    }

    fn store_artifact(&self, component: &Component, path: &std::path::Path) -> anyhow::Result<()> {
        let bytes = component.serialize()?;
        // A name of this process's own: nodes of one machine may share the directory.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// A component that exports `handle` is a function of world `function`; one that
    /// exports `wasi:http/incoming-handler` instead is an HTTP function.
    fn link(&self, component: &Component) -> Result<Prepared> {
        let pre = self.linker.instantiate_pre(component).map_err(|e| RuntimeError::WrongWorld(format!("{e:#}")))?;
        if let Ok(function) = FunctionPre::new(pre.clone()) {
            return Ok(Prepared::Handle(function));
        }
        ProxyPre::new(pre).map(Prepared::Http).map_err(|e| {
            RuntimeError::WrongWorld(format!(
                "the component exports neither tally:platform's `handle` nor wasi:http/incoming-handler: {e:#}"
            ))
        })
    }

    /// Runs one invocation in a fresh instance; returns its outcome, the invocation, with
    /// its final log context and exactly-once instance, and what the guest printed.
    pub async fn run(
        &self,
        pre: &Prepared,
        limits: &Limits,
        outbound: &Arc<Outbound>,
        inv: Invocation,
    ) -> (Result<Vec<u8>>, Invocation, Output) {
        let Wasi { ctx: wasi, stdout, stderr } = self.spares.take();
        let deadline = Tokio::instant(inv.attempt.deadline_ms);
        let function = inv.attempt.version.name.clone();
        let input = inv.attempt.input.clone();
        let state = HostState {
            wasi,
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            outgoing: outgoing::Outgoing::new(self.outgoing.clone(), outbound.clone(), self.metrics.clone(), function.clone()),
            limiter: MemoryLimiter::new(limits.memory_bytes as usize),
            stderr,
            stdout,
            inv: Some(inv),
            settings: None,
        };
        let _running = self.ticker.running();
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline {
                Err(DeadlinePassed.into())
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        let wall = deadline.saturating_duration_since(Instant::now());
        let mut instantiated = None;
        let outcome = tokio::time::timeout(wall, async {
            match pre {
                Prepared::Handle(pre) => {
                    let started = Instant::now();
                    let making = crate::observe::enter(crate::observe::Part::Instantiate);
                    let instance = pre.instantiate_async(&mut store).await?;
                    drop(making);
                    instantiated = Some(started.elapsed());
                    let _guest = crate::observe::enter(crate::observe::Part::Guest);
                    instance.call_handle(&mut store, &input).await
                }
                Prepared::Http(pre) => http::serve(pre, &mut store, &input, limits.response_bytes_max, &mut instantiated).await,
            }
        })
        .await;
        let state = store.data();
        if let Some(took) = instantiated {
            self.metrics.instance(&function, took, state.limiter.peak);
        }
        let timeout_ms = limits.timeout_ms;
        let unlogged = state.outgoing.failed.lock().expect("failed lock").take();
        let result = match outcome {
            // A call's outcome could not be logged: the attempt ends with why.
            _ if unlogged.is_some() => Err(unlogged.unwrap_or(RuntimeError::Internal(String::new()))),
            Err(_) => Err(RuntimeError::Timeout(timeout_ms)),
            Ok(Ok(Ok(output))) if output.len() as u64 > limits.response_bytes_max => Err(RuntimeError::TooLarge {
                what: "the response",
                size: Some(output.len() as u64),
                limit: limits.response_bytes_max,
            }),
            Ok(Ok(Ok(output))) => Ok(output),
            Ok(Ok(Err(message))) => Err(RuntimeError::Failed(message)),
            Ok(Err(e)) if e.downcast_ref::<DeadlinePassed>().is_some() => Err(RuntimeError::Timeout(timeout_ms)),
            Ok(Err(e)) if e.downcast_ref::<http::ResponseTooLarge>().is_some() => {
                Err(RuntimeError::TooLarge { what: "the response", size: None, limit: limits.response_bytes_max })
            }
            Ok(Err(e)) if e.downcast_ref::<Abort>().is_some() => match e.downcast::<Abort>() {
                Ok(abort) => Err(abort.into_error()),
                Err(e) => Err(RuntimeError::Trap(e.to_string())),
            },
            Ok(Err(_)) if state.limiter.hit => Err(RuntimeError::MemoryLimit(limits.memory_bytes)),
            // The node's instance pool is full: nothing ran, and another attempt may.
            Ok(Err(e)) if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() => {
                Err(RuntimeError::Busy(format!("{function} (this node's instance pool is full: {e})")))
            }
            Ok(Err(e)) => Err(RuntimeError::Trap(trap_message(&e, &state.stderr))),
        };
        let output = Output::of(store.data_mut());
        let inv = store.data_mut().inv.take().expect("the invocation is taken once");
        reap(self.metrics.clone(), self.spares.clone(), function, store);
        (result, inv, output)
    }
}

/// The trap and the end of what the guest wrote to stderr (where a Rust panic puts its
/// message), without the wasm backtrace.
fn trap_message(e: &wasmtime::Error, stderr: &GuestOutput) -> String {
    let trap = match e.downcast_ref::<wasmtime::Trap>() {
        Some(t) => t.to_string(),
        None => e.root_cause().to_string(),
    };
    let mut lines = stderr.tail(3);
    lines.retain(|l| !l.starts_with("note: run with `RUST_BACKTRACE"));
    if lines.is_empty() {
        return trap;
    }
    // A panic is two lines: "thread '..' panicked at file:line:col:" and the message.
    let tail = lines[lines.len().saturating_sub(2)..].join(" ");
    format!("{trap}; stderr: {tail}")
}

/// What an attempt's guest printed, and what the platform has to tell about it (`tally`
/// lines: refusals and failures of its requests out, output let go past the bound).
#[derive(Debug, Default)]
pub struct Output {
    pub stdout: Vec<Line>,
    pub stderr: Vec<Line>,
    pub tally: Vec<Line>,
}

impl Output {
    fn of(state: &mut HostState) -> Output {
        let now = crate::clock::wall_ns() / 1_000_000;
        let (stdout, stdout_dropped) = state.stdout.take();
        let (stderr, stderr_dropped) = state.stderr.take();
        let refused = std::mem::take(&mut *state.outgoing.refusals.lock().expect("refusals lock"));
        let mut tally: Vec<Line> = refused.into_iter().map(|text| Line { at_ms: now, text }).collect();
        for (stream, dropped) in [("stdout", stdout_dropped), ("stderr", stderr_dropped)] {
            if dropped > 0 {
                let text = format!("{dropped} bytes of {stream} went past this attempt's bound (the oldest lines)");
                tally.push(Line { at_ms: now, text });
            }
        }
        Output { stdout, stderr, tally }
    }
}

/// The guest's view of a runtime error returned by a host call.
pub(super) fn guest_runtime_error(e: RuntimeError) -> GuestError {
    match e {
        RuntimeError::FunctionNotFound(_) | RuntimeError::PromiseNotFound(_) => GuestError::NotFound(e.to_string()),
        RuntimeError::InvalidArgument(m) => GuestError::InvalidArgument(m),
        RuntimeError::TooLarge { .. } => GuestError::TooLarge(e.to_string()),
        RuntimeError::Timeout(_) => GuestError::Timeout(e.to_string()),
        RuntimeError::LogUnavailable(m) | RuntimeError::Busy(m) => GuestError::Unavailable(m),
        other => GuestError::Failed(other.to_string()),
    }
}

/// What a host call returns when an exactly-once operation stops: a refused argument
/// is the guest's error; anything else ends the attempt (the runtime runs it again).
fn aborted<T>(abort: Abort) -> wasmtime::Result<std::result::Result<T, GuestError>> {
    match abort {
        Abort::Refused(e) => Ok(Err(guest_runtime_error(e))),
        other => Err(other.into()),
    }
}

/// The guest's view of a log error.
fn guest_error(e: tally_logsvc::Error) -> GuestError {
    use tally_logsvc::Error as E;
    match e {
        E::InvalidArgument(m) => GuestError::InvalidArgument(m),
        E::TooLarge { .. } => GuestError::TooLarge(e.to_string()),
        E::Conflict { holder } => GuestError::Conflict(holder.map(|s| s.0)),
        E::Timeout(_) => GuestError::Timeout(e.to_string()),
        other => GuestError::Unavailable(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_ticker_parks_only_when_idle_and_an_instance_wakes_it() {
        let engine = Engine::new(wasmtime::Config::new().epoch_interruption(true)).expect("an engine");
        let ticker = Ticker::start(engine, 20);
        let shared = ticker.shared.clone();
        // Short instances with gaps shorter than the idle period, as at one client:
        // the ticker keeps ticking and never parks between them.
        let busy_until = Instant::now() + TICK * 40;
        while Instant::now() < busy_until {
            drop(ticker.running());
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(shared.parks.load(Ordering::Relaxed), 0, "parked between instances");
        assert!(shared.ticks.load(Ordering::Relaxed) > 0, "ticked while busy");
        // Idle: it parks, and stops ticking.
        wait_for("the ticker to park", || shared.parks.load(Ordering::Relaxed) == 1);
        let ticks = shared.ticks.load(Ordering::Relaxed);
        std::thread::sleep(TICK * 4);
        assert!(shared.ticks.load(Ordering::Relaxed) <= ticks + 1, "ticks while parked");
        // An instance wakes it: the epoch advances while it runs, past a deadline.
        let running = ticker.running();
        wait_for("a tick for the new instance", || shared.ticks.load(Ordering::Relaxed) >= ticks + 3);
        drop(running);
        drop(ticker);
    }
}
