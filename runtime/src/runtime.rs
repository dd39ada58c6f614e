//! The runtime: invocations of registered functions on a book, with their limits,
//! child invocations, asynchronous invocations and metrics.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tally_logsvc::{BookId, Context, LogClient};

use crate::config::{Config, Limits};
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
    invocations: Mutex<Invocations>,
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
        let registry = Registry::new(platform, host.clone());
        registry.sync().await?;
        let rt = Arc::new(Runtime {
            config,
            registry,
            metrics,
            host,
            log,
            invocations: Mutex::new(Invocations::default()),
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
        Ok(rt)
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
    pub async fn deploy(&self, name: &str, component: Bytes, limits: Limits) -> Result<VersionInfo> {
        let limit = self.config.node.component_bytes_max;
        if component.len() as u64 > limit {
            return Err(RuntimeError::TooLarge { what: "the component", size: Some(component.len() as u64), limit });
        }
        self.config.check_limits(&limits).map_err(RuntimeError::InvalidArgument)?;
        let info = self.registry.deploy(name, component, limits).await?;
        self.metrics.deployed();
        Ok(info)
    }

    /// Invokes `function` on `book` from outside (the gateway).
    pub async fn invoke(self: &Arc<Self>, function: &str, book: BookId, input: Bytes) -> Result<Vec<u8>> {
        let id = self.new_invocation_id();
        self.run(function, book, input, Context::new(), 0, None, id).await.0
    }

    /// Starts an invocation in the background and returns its ID.
    pub fn invoke_async(self: &Arc<Self>, function: String, book: BookId, input: Bytes) -> String {
        let id = self.new_invocation_id();
        self.invocations.lock().expect("not poisoned").by_id.insert(id.clone(), InvocationStatus::Running);
        let rt = self.clone();
        let key = id.clone();
        tokio::spawn(async move {
            let (result, _) = rt.run(&function, book, input, Context::new(), 0, None, key.clone()).await;
            let status = match result {
                Ok(output) => InvocationStatus::Succeeded { output: Bytes::from(output) },
                Err(e) => InvocationStatus::Failed { code: e.code(), message: e.to_string(), http_status: e.status() },
            };
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

    pub fn invocation(&self, id: &str) -> Result<InvocationStatus> {
        let inv = self.invocations.lock().expect("not poisoned");
        inv.by_id.get(id).cloned().ok_or_else(|| RuntimeError::InvocationNotFound(id.to_string()))
    }

    /// Runs one invocation: checks, a permit of the function's concurrency, then a
    /// fresh instance. Returns the outcome and the invocation's final log context.
    #[allow(clippy::too_many_arguments)]
    async fn run(
        self: &Arc<Self>,
        function: &str,
        book: BookId,
        input: Bytes,
        ctx: Context,
        depth: u32,
        parent_deadline: Option<Instant>,
        id: String,
    ) -> (Result<Vec<u8>>, Context) {
        let started = Instant::now();
        let loaded = match self.registry.lookup(function).await {
            Ok(l) => l,
            Err(e) => return (Err(e), ctx),
        };
        let limits = loaded.info.limits;
        let checks = if book.is_reserved() {
            Err(RuntimeError::InvalidArgument(format!("book {:#x} is reserved for the platform", book.0)))
        } else if input.len() as u64 > limits.request_bytes_max {
            Err(RuntimeError::TooLarge { what: "the request", size: Some(input.len() as u64), limit: limits.request_bytes_max })
        } else if depth > self.config.node.call_depth_max {
            Err(RuntimeError::InvalidArgument(format!("calls nest deeper than {}", self.config.node.call_depth_max)))
        } else {
            Ok(())
        };
        if let Err(e) = checks {
            self.metrics.finished(function, &Err::<(), _>(e.clone()), started.elapsed(), false);
            return (Err(e), ctx);
        }
        let own = started + Duration::from_millis(limits.timeout_ms);
        let deadline = parent_deadline.map_or(own, |d| d.min(own));
        let permit = match tokio::time::timeout_at(deadline.into(), loaded.permits.acquire()).await {
            Ok(Ok(p)) => p,
            _ => {
                let e = RuntimeError::Busy(function.to_string());
                self.metrics.finished(function, &Err::<(), _>(e.clone()), started.elapsed(), false);
                return (Err(e), ctx);
            }
        };
        let inv = Invocation {
            function: function.to_string(),
            book,
            id,
            attempt: 1,
            depth,
            ctx,
            log: self.log.clone(),
            invoker: self.clone(),
            deadline,
        };
        self.metrics.started();
        let (result, ctx) = self.host.run(&loaded.pre, &limits, inv, &input).await;
        drop(permit);
        self.metrics.finished(function, &result, started.elapsed(), true);
        (result, ctx)
    }
}

impl Invoker for Runtime {
    fn call(self: Arc<Self>, call: ChildCall) -> Pin<Box<dyn Future<Output = ChildOutcome> + Send>> {
        Box::pin(async move {
            let id = format!("{}.{}", call.parent_id, self.next_id.fetch_add(1, Ordering::Relaxed));
            self.run(&call.function, call.book, call.input, call.ctx, call.depth, Some(call.deadline), id).await
        })
    }
}
