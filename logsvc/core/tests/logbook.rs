//! The LogBook contract (`logbook_conformance`) on the log core's own simulator: the real
//! engines, sequencers and storage nodes over the simulated network and disk, each call
//! on the next engine in turn. The same suite runs against the engine's client over an
//! in-process cluster (`tally-logsvc`) and the exactly-once simulator's log
//! (`tally-durable`).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use tally_log_core::{logbook_conformance, BookId, SimLog, SimOptions};

#[test]
fn the_simulators_engines_keep_the_logbook_contract() {
    // Three engines, two of which index each log: calls in turn cross nodes and go
    // through forwarders. Random clients of their own books run alongside.
    let opts = SimOptions { clients: 3, ..SimOptions::default() };
    for seed in 1..=8 {
        eprintln!("the simulator's log, all liveness phase (no faults), with {opts}; reproduce with seed={seed}");
        let log = SimLog::new(seed, opts.clone());
        ready(logbook_conformance::run_all(&log, BookId(100), "sim"));
    }
}

/// The simulator's log runs each call on the future's first poll.
fn ready<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("a call of the simulator's log waited"),
    }
}
