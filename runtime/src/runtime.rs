//! The runtime: invocations of registered functions on a book, with their limits,
//! child invocations, asynchronous invocations and metrics.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tally_logsvc::{BookId, Context, LogClient};

use crate::config::{Config, Limits, Protocol};
use crate::durable::record::{self, Outcome};
use crate::durable::{CrashAfter, Durable, Instance, Of, IDEMPOTENCY_KEY_MAX};
use crate::error::{Result, RuntimeError};
use crate::host::{ChildCall, ChildOutcome, Invocation, Invoker, WasmHost};
use crate::metrics::Metrics;
use crate::registry::{Registry, VersionInfo};

/// How often the registry replays manifests appended by other nodes.
const REGISTRY_POLL: Duration = Duration::from_secs(1);

/// Where an asynchronous invocation stands.
#[derive(Clone, Debug)]
pub enum InvocationStatus {
    Running,
    Succeeded { output: Bytes },
    Failed { code: &'static str, message: String, http_status: u16 },
}

impl InvocationStatus {
    fn of(result: Result<Vec<u8>>) -> InvocationStatus {
        match result {
            Ok(output) => InvocationStatus::Succeeded { output: Bytes::from(output) },
            Err(e) => InvocationStatus::Failed { code: e.code(), message: e.to_string(), http_status: e.status() },
        }
    }
}

/// Asynchronous invocations, the oldest finished ones forgotten past a bound.
#[derive(Default)]
struct Invocations {
    by_id: HashMap<String, InvocationStatus>,
    finished: VecDeque<String>,
}

pub struct Runtime {
    pub config: Config,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    host: Arc<WasmHost>,
    log: LogClient,
    pub durable: Arc<Durable>,
    invocations: Mutex<Invocations>,
    /// Root invocations running on this node (the recovery scan leaves them alone).
    running: Mutex<HashSet<String>>,
    id_prefix: u64,
    next_id: AtomicU64,
}

impl Runtime {
    /// A runtime over the engine of this node: `log` for guests, `platform` for the
    /// registry. Replays the registry before it returns.
    pub async fn start(config: Config, log: LogClient, platform: LogClient) -> anyhow::Result<Arc<Runtime>> {
        config.validate()?;
        let metrics = Arc::new(Metrics::default());
        let host = Arc::new(WasmHost::new(&config.node, config.data_dir.join("artifacts"), metrics.clone())?);
        let durable = Durable::start(&config, platform.clone()).await?;
        let registry = Registry::new(platform, host.clone());
        registry.sync().await?;
        let rt = Arc::new(Runtime {
            config,
            registry,
            metrics,
            host,
            log,
            durable,
            invocations: Mutex::new(Invocations::default()),
            running: Mutex::new(HashSet::new()),
            id_prefix: RandomState::new().hash_one(Instant::now()),
            next_id: AtomicU64::new(1),
        });
        // Deploys made through other nodes show up here within REGISTRY_POLL; a name this
        // node has never seen is looked up at once (see `Registry::lookup`).
        let weak = Arc::downgrade(&rt);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(REGISTRY_POLL);
            loop {
                tick.tick().await;
                let Some(rt) = weak.upgrade() else { return };
                if let Err(e) = rt.registry.sync().await {
                    tracing::warn!("registry refresh: {e}");
                }
            }
        });
        let state = &rt.config.state;
        crate::durable::recovery::spawn(Arc::downgrade(&rt), Duration::from_millis(state.recovery_interval_ms));
        crate::durable::switch::spawn_auto(Arc::downgrade(&rt), Duration::from_millis(state.auto_interval_ms));
        crate::durable::switch::resume(&rt).await?;
        Ok(rt)
    }

    /// Whether a root invocation with this ID is running on this node.
    pub fn is_running(&self, id: &str) -> bool {
        self.running.lock().expect("not poisoned").contains(id)
    }

    /// The user log client of this node (the gateway's book listing uses it).
    pub fn log(&self) -> &LogClient {
        &self.log
    }

    /// A new invocation ID, unique across nodes and restarts with high probability.
    fn new_invocation_id(&self) -> String {
        format!("{:016x}{:08x}", self.id_prefix, self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Deploys with the node's default limits changed by `overrides`.
    pub async fn deploy(
        &self,
        name: &str,
        component: Bytes,
        limits: Limits,
        tables: BTreeMap<String, Protocol>,
    ) -> Result<VersionInfo> {
        let limit = self.config.node.component_bytes_max;
        if component.len() as u64 > limit {
            return Err(RuntimeError::TooLarge { what: "the component", size: Some(component.len() as u64), limit });
        }
        self.config.check_limits(&limits).map_err(RuntimeError::InvalidArgument)?;
        let info = self.registry.deploy(name, component, limits, tables).await?;
        self.metrics.deployed();
        Ok(info)
    }

    /// Invokes `function` on `book` from outside (the gateway).
    pub async fn invoke(self: &Arc<Self>, function: &str, book: BookId, input: Bytes) -> Result<Vec<u8>> {
        self.invoke_with(function, book, input, InvokeOptions::default()).await
    }

    /// Invokes with options: an idempotency key makes the invocation exactly-once
    /// across client retries (a retry gets the logged result without a second run).
    pub async fn invoke_with(
        self: &Arc<Self>,
        function: &str,
        book: BookId,
        input: Bytes,
        opts: InvokeOptions,
    ) -> Result<Vec<u8>> {
        let (id, eager) = match &opts.idempotency_key {
            Some(key) => (idempotent_id(function, key)?, true),
            None => (self.new_invocation_id(), false),
        };
        let crash = self.crash_hook(opts.crash_after)?;
        let run = Run { eager, crash, ..Run::root(function.to_string(), book, input, id) };
        self.run(run).await.0
    }

    /// The crash-injection hook for a request that asks for one.
    fn crash_hook(&self, crash_after: Option<u64>) -> Result<Option<Arc<CrashAfter>>> {
        match crash_after {
            None => Ok(None),
            Some(_) if !self.config.state.crash_injection => Err(RuntimeError::InvalidArgument(
                "crash injection is a test hook; enable it with [state] crash_injection = true".into(),
            )),
            Some(n) => Ok(Some(CrashAfter::new(n))),
        }
    }

    /// Starts an exactly-once invocation in the background and returns its ID. Its
    /// result is logged, so its status outlives this node.
    pub fn invoke_async(self: &Arc<Self>, function: String, book: BookId, input: Bytes) -> String {
        let id = self.new_invocation_id();
        self.invocations.lock().expect("not poisoned").by_id.insert(id.clone(), InvocationStatus::Running);
        let rt = self.clone();
        let key = id.clone();
        tokio::spawn(async move {
            let run = Run { eager: true, ..Run::root(function, book, input, key.clone()) };
            let (result, _) = rt.run(run).await;
            let status = InvocationStatus::of(result);
            let mut inv = rt.invocations.lock().expect("not poisoned");
            inv.by_id.insert(key.clone(), status);
            inv.finished.push_back(key);
            while inv.finished.len() > rt.config.node.invocations_kept {
                let old = inv.finished.pop_front().expect("not empty");
                inv.by_id.remove(&old);
            }
        });
        id
    }

    /// The status of an invocation started on `book`: kept in memory for asynchronous
    /// invocations of this node, otherwise read from the invocation's step log.
    pub async fn invocation(&self, book: BookId, id: &str) -> Result<InvocationStatus> {
        let kept = self.invocations.lock().expect("not poisoned").by_id.get(id).cloned();
        if let Some(status) = kept {
            return Ok(status);
        }
        match self.durable.status(book, id).await? {
            None => Err(RuntimeError::InvocationNotFound(id.to_string())),
            Some(None) => Ok(InvocationStatus::Running),
            Some(Some(outcome)) => Ok(InvocationStatus::of(outcome.into_result())),
        }
    }

    /// Runs one invocation: checks, then attempts until one has a final outcome. An
    /// attempt that used exactly-once state logs that outcome as the result; one that
    /// trapped runs again at once (up to `retries` times); one that failed transiently
    /// (timed out, log or store unavailable) is left to the recovery scan. Returns the
    /// outcome and the invocation's final log context.
    pub(crate) async fn run(self: &Arc<Self>, run: Run) -> (Result<Vec<u8>>, Context) {
        if !run.root {
            return self.run_attempts(run).await;
        }
        let id = run.id.clone();
        self.running.lock().expect("not poisoned").insert(id.clone());
        let outcome = self.run_attempts(run).await;
        self.running.lock().expect("not poisoned").remove(&id);
        outcome
    }

    async fn run_attempts(self: &Arc<Self>, mut run: Run) -> (Result<Vec<u8>>, Context) {
        let started = Instant::now();
        let loaded = match self.registry.lookup(&run.function).await {
            Ok(l) => l,
            Err(e) => return (Err(e), run.ctx),
        };
        let limits = loaded.info.limits;
        let function = run.function.clone();
        let checks = if run.book.is_reserved() {
            Err(RuntimeError::InvalidArgument(format!("book {:#x} is reserved for the platform", run.book.0)))
        } else if run.input.len() as u64 > limits.request_bytes_max {
            Err(RuntimeError::TooLarge {
                what: "the request",
                size: Some(run.input.len() as u64),
                limit: limits.request_bytes_max,
            })
        } else if run.depth > self.config.node.call_depth_max {
            Err(RuntimeError::InvalidArgument(format!("calls nest deeper than {}", self.config.node.call_depth_max)))
        } else {
            Ok(())
        };
        if let Err(e) = checks {
            self.metrics.finished(&function, &Err::<(), _>(e.clone()), started.elapsed(), false);
            return (Err(e), run.ctx);
        }
        loop {
            let of = Of {
                id: run.id.clone(),
                book: run.book,
                function: function.clone(),
                root: run.root,
                input: run.input.clone(),
                declared: loaded.info.tables.clone(),
                crash: run.crash.clone(),
            };
            let mut instance = Instance::new(self.durable.clone(), of);
            if run.eager {
                match instance.init(&mut run.ctx).await {
                    Ok(None) => {}
                    Ok(Some(logged)) => {
                        self.metrics.replayed();
                        return (logged.into_result(), run.ctx);
                    }
                    Err(abort) => return (Err(abort.into_error()), run.ctx),
                }
            }
            if run.attempt > 1 {
                self.metrics.reexecuted();
            }
            let attempt_started = Instant::now();
            let own = attempt_started + Duration::from_millis(limits.timeout_ms);
            let deadline = run.parent_deadline.map_or(own, |d| d.min(own));
            let permit = match tokio::time::timeout_at(deadline.into(), loaded.permits.acquire()).await {
                Ok(Ok(p)) => p,
                _ => {
                    let e = RuntimeError::Busy(function.clone());
                    self.metrics.finished(&function, &Err::<(), _>(e.clone()), started.elapsed(), false);
                    return (Err(e), run.ctx);
                }
            };
            let inv = Invocation {
                function: function.clone(),
                book: run.book,
                instance,
                attempt: run.attempt,
                depth: run.depth,
                ctx: run.ctx,
                log: self.log.clone(),
                invoker: self.clone(),
                deadline,
            };
            self.metrics.started();
            let (result, mut inv) = self.host.run(&loaded.pre, &limits, inv, &run.input).await;
            drop(permit);
            self.metrics.finished(&function, &result, attempt_started.elapsed(), true);
            run.ctx = inv.ctx;
            if !inv.instance.initialized() {
                // Nothing durable happened: the outcome is the attempt's, as it is.
                return (result, run.ctx);
            }
            let outcome = match result {
                Err(RuntimeError::Trap(m)) if run.attempt > self.config.state.retries => Outcome::Trap(record::cut(&m)),
                Err(RuntimeError::Trap(m)) => {
                    tracing::info!(function, id = run.id, attempt = run.attempt, "running again after a trap: {m}");
                    run.attempt += 1;
                    run.eager = true;
                    continue;
                }
                other => match Outcome::of_final(&other) {
                    Some(outcome) => outcome,
                    None => return (other, run.ctx),
                },
            };
            return match inv.instance.finish(&mut run.ctx, outcome).await {
                Ok(logged) => (logged.into_result(), run.ctx),
                Err(abort) => (Err(abort.into_error()), run.ctx),
            };
        }
    }
}

/// Options of an invocation from outside.
#[derive(Clone, Debug, Default)]
pub struct InvokeOptions {
    /// The client's key for the invocation (the `Idempotency-Key` header).
    pub idempotency_key: Option<String>,
    /// Test hook: stop the invocation after this many effects (`Tally-Crash-After`).
    pub crash_after: Option<u64>,
}

/// The instance ID of an invocation with an idempotency key: scoped to the function
/// (and, through the step log's tag, to the book).
fn idempotent_id(function: &str, key: &str) -> Result<String> {
    if key.is_empty() || key.len() > IDEMPOTENCY_KEY_MAX || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(RuntimeError::InvalidArgument(format!(
            "an idempotency key is 1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters"
        )));
    }
    Ok(format!("key:{function}:{key}"))
}

impl Run {
    /// A first attempt of an invocation from outside, initialised lazily.
    pub(crate) fn root(function: String, book: BookId, input: Bytes, id: String) -> Run {
        Run {
            function,
            book,
            input,
            ctx: Context::new(),
            depth: 0,
            parent_deadline: None,
            id,
            eager: false,
            root: true,
            crash: None,
            attempt: 1,
        }
    }

    /// A root invocation run again by the recovery scan.
    pub(crate) fn again(function: String, book: BookId, input: Bytes, id: String, attempt: u32) -> Run {
        Run { eager: true, attempt, ..Run::root(function, book, input, id) }
    }
}

/// One invocation to run, from outside, as a child, or again after a crash.
pub(crate) struct Run {
    pub function: String,
    pub book: BookId,
    pub input: Bytes,
    pub ctx: Context,
    pub depth: u32,
    pub parent_deadline: Option<Instant>,
    pub id: String,
    /// Initialise the instance before running the guest (otherwise at its first
    /// `state` or `invoke` call): needed when the ID may have history.
    pub eager: bool,
    /// Not a child invocation (the recovery scan runs only roots again).
    pub root: bool,
    pub crash: Option<Arc<CrashAfter>>,
    pub attempt: u32,
}

impl Invoker for Runtime {
    fn call(self: Arc<Self>, call: ChildCall) -> Pin<Box<dyn Future<Output = ChildOutcome> + Send>> {
        Box::pin(async move {
            let run = Run {
                function: call.function,
                book: call.book,
                input: call.input,
                ctx: call.ctx,
                depth: call.depth,
                parent_deadline: Some(call.deadline),
                id: call.id,
                eager: true,
                root: false,
                crash: call.crash,
                attempt: 1,
            };
            self.run(run).await
        })
    }
}
