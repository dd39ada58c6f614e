//! `tally:platform/locks`: locks held by invocations (BokiFlow), on the exactly-once
//! core's attempt (`tally_durable::locks`).

use super::tally::platform::locks::Host;
use super::{aborted, GuestError, HostState};

type Outcome<T> = wasmtime::Result<Result<T, GuestError>>;

impl Host for HostState {
    #[tracing::instrument(name = "locks.acquire", level = "debug", skip_all, fields(timeout_ms))]
    async fn acquire(&mut self, lock: String, timeout_ms: u64) -> Outcome<bool> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLocks, || "acquire".to_string());
        match self.inv().attempt.lock_acquire(&lock, timeout_ms).await {
            Ok(held) => Ok(Ok(held)),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "locks.release", level = "debug", skip_all)]
    async fn release(&mut self, lock: String) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostLocks, || "release".to_string());
        match self.inv().attempt.lock_release(&lock).await {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }
}
