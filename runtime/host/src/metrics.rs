//! Counters of the runtime, rendered in the Prometheus text format for `GET /metrics`.
//!
//! The host updates them and the gateway renders them: per function, invocations by
//! outcome, wall time, instantiation time, reset time, each instance's peak linear
//! memory (over all its memories, counted by the store's limiter) and the times of its
//! requests out (the wait, the exchange, the log); per node, instances running, deploys,
//! re-executions and results replayed from the log.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tally_durable::Error as RuntimeError;

#[derive(Default)]
struct FunctionCounters {
    /// Invocations by outcome: "ok" or an error code.
    outcomes: BTreeMap<&'static str, u64>,
    seconds_sum: f64,
    count: u64,
    /// Over the instances made: their instantiation times and their peak linear
    /// memories, summed.
    instantiate_seconds_sum: f64,
    memory_bytes_sum: u64,
    instances: u64,
    /// Over the instances reset: the time their stores' drops took.
    reset_seconds_sum: f64,
    resets: u64,
    /// Over the requests out that were sent: the wait before sending (for the
    /// invocation's Init and the step gate), the exchange, and the logging of what it got.
    outgoing_wait_seconds_sum: f64,
    outgoing_send_seconds_sum: f64,
    outgoing_log_seconds_sum: f64,
    outgoing_sent: u64,
}

#[derive(Default)]
pub struct Metrics {
    functions: Mutex<BTreeMap<String, FunctionCounters>>,
    running: AtomicI64,
    deploys: AtomicU64,
    /// Attempts of exactly-once invocations after the first (a trap, or the scan).
    reexecutions: AtomicU64,
    /// The engine whose instance pool the gauges describe, once a host runs.
    engine: OnceLock<wasmtime::Engine>,
    /// Where executions' time went, by part (`observe/`).
    pub parts: std::sync::Arc<crate::observe::PartHistograms>,
}

impl Metrics {
    pub fn started(&self) {
        self.running.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a finished invocation; `ran` says whether it had started an instance.
    pub fn finished<T>(&self, function: &str, result: &Result<T, RuntimeError>, took: Duration, ran: bool) {
        if ran {
            self.running.fetch_sub(1, Ordering::Relaxed);
        }
        let outcome = match result {
            Ok(_) => "ok",
            Err(e) => e.code(),
        };
        self.update(function, |c| {
            *c.outcomes.entry(outcome).or_default() += 1;
            c.seconds_sum += took.as_secs_f64();
            c.count += 1;
        });
    }

    fn update(&self, function: &str, change: impl FnOnce(&mut FunctionCounters)) {
        let mut functions = self.functions.lock().expect("not poisoned");
        if !functions.contains_key(function) {
            functions.insert(function.to_string(), FunctionCounters::default());
        }
        change(functions.get_mut(function).expect("inserted above"));
    }

    /// Records one instance of `function` once its invocation is over: the time it took
    /// to make, and the most linear memory it had.
    pub fn instance(&self, function: &str, took: Duration, peak_bytes: usize) {
        self.update(function, |c| {
            c.instantiate_seconds_sum += took.as_secs_f64();
            c.memory_bytes_sum += peak_bytes as u64;
            c.instances += 1;
        });
    }

    /// A request out of `function` that was sent (not one a re-execution replayed): how
    /// long it waited to be sent, the exchange, and its record.
    pub fn sent_out(&self, function: &str, wait: Duration, send: Duration, log: Duration) {
        self.update(function, |c| {
            c.outgoing_wait_seconds_sum += wait.as_secs_f64();
            c.outgoing_send_seconds_sum += send.as_secs_f64();
            c.outgoing_log_seconds_sum += log.as_secs_f64();
            c.outgoing_sent += 1;
        });
    }

    pub fn reexecuted(&self) {
        self.reexecutions.fetch_add(1, Ordering::Relaxed);
    }

    /// An ended instance's store dropped (its pool slot reset) in `took`.
    pub fn reset(&self, function: &str, took: Duration) {
        self.update(function, |c| {
            c.reset_seconds_sum += took.as_secs_f64();
            c.resets += 1;
        });
    }

    /// Renders the gauges of `engine`'s instance pool from now on.
    pub(crate) fn watch_pool(&self, engine: wasmtime::Engine) {
        let _ = self.engine.set(engine);
    }

    pub fn deployed(&self) {
        self.deploys.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every counter; `replayed` is the exactly-once
    /// core's count of invocations answered with a logged result, without running.
    pub fn render(&self, replayed: u64) -> String {
        let mut out = String::new();
        let functions = self.functions.lock().expect("not poisoned");
        out.push_str("# HELP tally_invocations_total Invocations by function and outcome.\n");
        out.push_str("# TYPE tally_invocations_total counter\n");
        for (name, c) in functions.iter() {
            for (outcome, n) in &c.outcomes {
                let _ = writeln!(out, "tally_invocations_total{{function=\"{name}\",outcome=\"{outcome}\"}} {n}");
            }
        }
        summary(&mut out, &functions, "tally_invocation_seconds", "Wall time of invocations.", |c| (c.seconds_sum, c.count));
        out.push_str("# HELP tally_instances_running Instances running now.\n");
        out.push_str("# TYPE tally_instances_running gauge\n");
        let _ = writeln!(out, "tally_instances_running {}", self.running.load(Ordering::Relaxed));
        out.push_str("# HELP tally_deploys_total Deploys accepted by this node.\n");
        out.push_str("# TYPE tally_deploys_total counter\n");
        let _ = writeln!(out, "tally_deploys_total {}", self.deploys.load(Ordering::Relaxed));
        summary(&mut out, &functions, "tally_instantiate_seconds", "Time to make a fresh instance of a function.", |c| {
            (c.instantiate_seconds_sum, c.instances)
        });
        summary(
            &mut out,
            &functions,
            "tally_instance_memory_bytes",
            "The most linear memory an instance had, over its memories.",
            |c| (c.memory_bytes_sum as f64, c.instances),
        );
        summary(
            &mut out,
            &functions,
            "tally_instance_reset_seconds",
            "Time to drop an ended instance's store and reset its pool slot, after the invocation's answer.",
            |c| (c.reset_seconds_sum, c.resets),
        );
        for (name, help, of) in [
            (
                "tally_outgoing_wait_seconds",
                "Time a request out waited to be sent (the invocation's Init, the step gate).",
                (|c: &FunctionCounters| (c.outgoing_wait_seconds_sum, c.outgoing_sent)) as fn(&FunctionCounters) -> (f64, u64),
            ),
            ("tally_outgoing_send_seconds", "Time of a request out's exchange, connection included.", |c| {
                (c.outgoing_send_seconds_sum, c.outgoing_sent)
            }),
            ("tally_outgoing_log_seconds", "Time to log what a request out got (its record).", |c| {
                (c.outgoing_log_seconds_sum, c.outgoing_sent)
            }),
        ] {
            summary(&mut out, &functions, name, help, of);
        }
        out.push_str("# HELP tally_reexecutions_total Attempts of exactly-once invocations after their first.\n");
        out.push_str("# TYPE tally_reexecutions_total counter\n");
        let _ = writeln!(out, "tally_reexecutions_total {}", self.reexecutions.load(Ordering::Relaxed));
        out.push_str("# HELP tally_replayed_results_total Invocations answered with a logged result, without running.\n");
        out.push_str("# TYPE tally_replayed_results_total counter\n");
        let _ = writeln!(out, "tally_replayed_results_total {replayed}");
        if let Some(pool) = self.engine.get().and_then(wasmtime::Engine::pooling_allocator_metrics) {
            out.push_str("# HELP tally_idle_memory_resident_bytes Linear memory left resident in idle instance slots, reset for the next instance.\n");
            out.push_str("# TYPE tally_idle_memory_resident_bytes gauge\n");
            let _ = writeln!(out, "tally_idle_memory_resident_bytes {}", pool.unused_memory_bytes_resident());
        }
        self.parts.render(&mut out);
        out
    }
}

/// One summary per function: its `_sum` and `_count` as `of` gives them.
fn summary(
    out: &mut String,
    functions: &BTreeMap<String, FunctionCounters>,
    name: &str,
    help: &str,
    of: impl Fn(&FunctionCounters) -> (f64, u64),
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} summary");
    for (function, c) in functions {
        let (sum, count) = of(c);
        let _ = writeln!(out, "{name}_sum{{function=\"{function}\"}} {sum}");
        let _ = writeln!(out, "{name}_count{{function=\"{function}\"}} {count}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_per_function_and_outcome() {
        let m = Metrics::default();
        m.started();
        m.finished::<()>("hello", &Ok(()), Duration::from_millis(2), true);
        m.finished::<()>("hello", &Err(RuntimeError::Timeout(5)), Duration::from_millis(5), false);
        let text = m.render(0);
        assert!(text.contains("tally_invocations_total{function=\"hello\",outcome=\"ok\"} 1"), "{text}");
        assert!(text.contains("tally_invocations_total{function=\"hello\",outcome=\"timeout\"} 1"), "{text}");
        assert!(text.contains("tally_invocation_seconds_count{function=\"hello\"} 2"), "{text}");
        assert!(text.contains("tally_instances_running 0"), "{text}");
    }

    #[test]
    fn renders_the_times_of_calls_out_per_function() {
        let m = Metrics::default();
        m.sent_out("web", Duration::from_millis(1), Duration::from_millis(2), Duration::from_millis(3));
        let text = m.render(0);
        assert!(text.contains("tally_outgoing_wait_seconds_sum{function=\"web\"} 0.001"), "{text}");
        assert!(text.contains("tally_outgoing_send_seconds_sum{function=\"web\"} 0.002"), "{text}");
        assert!(text.contains("tally_outgoing_log_seconds_sum{function=\"web\"} 0.003"), "{text}");
        assert!(text.contains("tally_outgoing_log_seconds_count{function=\"web\"} 1"), "{text}");
    }

    #[test]
    fn renders_instantiation_and_memory_per_function() {
        let m = Metrics::default();
        m.instance("hello", Duration::from_millis(3), 1 << 20);
        m.instance("hello", Duration::from_millis(1), 3 << 20);
        let text = m.render(0);
        assert!(text.contains("tally_instantiate_seconds_sum{function=\"hello\"} 0.004"), "{text}");
        assert!(text.contains("tally_instantiate_seconds_count{function=\"hello\"} 2"), "{text}");
        assert!(text.contains("tally_instance_memory_bytes_sum{function=\"hello\"} 4194304"), "{text}");
        assert!(text.contains("tally_instance_memory_bytes_count{function=\"hello\"} 2"), "{text}");
    }
}
