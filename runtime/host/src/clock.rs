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

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
}

impl Spawn for Tokio {
    fn spawn(&self, name: &'static str, task: BoxFuture<'static, ()>) {
        tokio::spawn(task.instrument(tracing::info_span!("task", name)));
    }
}
