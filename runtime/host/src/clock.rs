//! The exactly-once core's `Clock` and `Spawn` on tokio. The clock is here, beside
//! the wasmtime host, because the host turns an attempt's `deadline_ms`, a time on this
//! clock, into the `Instant` its epoch callback and timeouts wait for: both must count
//! from the same origin.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tally_durable::{BoxFuture, Clock, Spawn};
use tracing::Instrument;

/// tokio's clock (milliseconds since the process's first use of it) and tasks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tokio;

pub(crate) fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// The wall clock in nanoseconds since the Unix epoch (0 before it, saturating in 2554).
pub(crate) fn wall_ns() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

/// The guests' monotonic clock, in nanoseconds: the wall clock at the process's clock
/// origin, plus the monotonic time since. It never goes back within a process, and
/// nodes agree on it as far as their wall clocks agree, so a re-execution that moves to
/// another node or a restarted process reads on from about where the recorded readings
/// it replayed left off (the core keeps it from going back).
pub(crate) fn monotonic_ns() -> u64 {
    static ORIGIN_WALL_NS: OnceLock<u64> = OnceLock::new();
    let base = *ORIGIN_WALL_NS.get_or_init(|| {
        origin();
        wall_ns()
    });
    base.saturating_add(u64::try_from(origin().elapsed().as_nanos()).unwrap_or(u64::MAX))
}

impl Tokio {
    /// The instant of a time on the core's clock.
    pub fn instant(ms: u64) -> Instant {
        origin() + Duration::from_millis(ms)
    }
}

impl Clock for Tokio {
    fn now_ms(&self) -> u64 {
        origin().elapsed().as_millis() as u64
    }

    fn wall_ms(&self) -> u64 {
        wall_ns() / 1_000_000
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
}

impl Spawn for Tokio {
    fn spawn(&self, name: &'static str, task: BoxFuture<'static, ()>) {
        tokio::spawn(task.instrument(tracing::info_span!("task", name)));
    }
}
