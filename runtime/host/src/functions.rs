//! The functions the exactly-once core runs on this node: versions from the registry,
//! attempts in the wasmtime host under each version's concurrency limit and deadline.

use std::sync::Arc;
use std::time::Instant;

use tally_durable::{Attempt, BoxFuture, Error as RuntimeError, FunctionVersion, Functions, Result};
use tally_logsvc::LogClient;

use crate::clock::Tokio;
use crate::host::{Invocation, SettingsSource, WasmHost};
use crate::logs::{LogSource, LogStore};
use crate::metrics::Metrics;
use crate::registry::{Loaded, Registry};
use crate::settings::Values;

pub struct HostFunctions {
    pub registry: Arc<Registry>,
    pub host: Arc<WasmHost>,
    pub metrics: Arc<Metrics>,
    /// The guests' log client (user privileges).
    pub log: LogClient,
    /// What guests print, and the platform's lines about them.
    pub logs: Arc<LogStore>,
}

fn version_of(l: &Loaded) -> FunctionVersion {
    FunctionVersion {
        name: l.name.clone(),
        version: l.info.seqnum,
        timeout_ms: l.info.limits.timeout_ms,
        request_bytes_max: l.info.limits.request_bytes_max,
        tables: l.info.tables.clone(),
        retry: tally_durable::RetryPolicy {
            attempts: l.info.limits.retry_attempts,
            backoff_ms: l.info.limits.retry_backoff_ms,
            backoff_max_ms: l.info.limits.retry_backoff_max_ms,
        },
    }
}

impl HostFunctions {
    async fn run_attempt(&self, attempt: Attempt) -> (Result<Vec<u8>>, Attempt) {
        let function = attempt.version.name.clone();
        let started = Instant::now();
        let loaded = match self.registry.version(&function, attempt.version.version).await {
            Ok(Some(l)) => l,
            Ok(None) => {
                let e = RuntimeError::FunctionUnavailable(function, format!("version {} is unknown", attempt.version.version));
                return (Err(e), attempt);
            }
            Err(e) => return (Err(e), attempt),
        };
        if attempt.attempt > 1 {
            self.metrics.reexecuted();
        }
        crate::observe::annotate("tally.function", || function.clone());
        crate::observe::annotate("tally.version", || loaded.info.version.to_string());
        crate::observe::annotate("tally.book", || attempt.book.0.to_string());
        crate::observe::annotate("tally.attempt", || attempt.attempt.to_string());
        let deadline = Tokio::instant(attempt.deadline_ms);
        let queued = crate::observe::enter(crate::observe::Part::Queue);
        let permit = match tokio::time::timeout_at(deadline.into(), loaded.permits.acquire()).await {
            Ok(Ok(p)) => p,
            _ => {
                let e = RuntimeError::Busy(function.clone());
                self.metrics.finished(&function, &Err::<(), _>(e.clone()), started.elapsed(), false);
                return (Err(e), attempt);
            }
        };
        drop(queued);
        self.metrics.started();
        let inv = Invocation { attempt, log: self.log.clone(), settings: self.registry.clone() };
        let (result, inv, output) = self.host.run(&loaded.pre, &loaded.info.limits, &loaded.info.outbound, inv).await;
        drop(permit);
        let attempt = &inv.attempt;
        let source = LogSource {
            function: function.clone(),
            version: loaded.info.version,
            book: attempt.book.0,
            id: attempt.instance.id.to_string(),
            attempt: attempt.attempt,
        };
        self.logs.push(&source, "stdout", output.stdout);
        self.logs.push(&source, "stderr", output.stderr);
        self.logs.push(&source, "tally", output.tally);
        self.metrics.finished(&function, &result, started.elapsed(), true);
        (result, inv.attempt)
    }
}

impl SettingsSource for Registry {
    fn current(&self, function: &str) -> u64 {
        self.settings_version(function)
    }

    fn at<'a>(&'a self, function: &'a str, version: u64) -> BoxFuture<'a, Result<Arc<Values>>> {
        Box::pin(self.settings_at(function, version))
    }
}

impl Functions for HostFunctions {
    fn current<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<FunctionVersion>>> {
        Box::pin(async move {
            match self.registry.lookup(name).await {
                Ok(l) => Ok(Some(version_of(&l))),
                Err(RuntimeError::FunctionNotFound(_)) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn version<'a>(&'a self, name: &'a str, version: u64) -> BoxFuture<'a, Result<Option<FunctionVersion>>> {
        Box::pin(async move { Ok(self.registry.version(name, version).await?.map(|l| version_of(&l))) })
    }

    fn run(&self, attempt: Attempt) -> BoxFuture<'_, (Result<Vec<u8>>, Attempt)> {
        Box::pin(self.run_attempt(attempt))
    }
}
