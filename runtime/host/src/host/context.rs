//! `tally:platform/context`: what the invocation is, and durable sleeps.

use tally_durable::Wake;

use super::tally::platform::context::Host;
use super::{aborted, GuestError, HostState};

type Outcome<T> = wasmtime::Result<Result<T, GuestError>>;

impl Host for HostState {
    async fn invocation_id(&mut self) -> wasmtime::Result<String> {
        Ok(self.inv().attempt.instance.id.to_string())
    }

    async fn book_id(&mut self) -> wasmtime::Result<u64> {
        Ok(self.inv().attempt.book.0)
    }

    async fn attempt(&mut self) -> wasmtime::Result<u32> {
        Ok(self.inv().attempt.attempt)
    }

    async fn function_name(&mut self) -> wasmtime::Result<String> {
        Ok(self.inv().attempt.version.name.clone())
    }

    #[tracing::instrument(name = "context.sleep", skip_all, fields(ms))]
    async fn sleep(&mut self, ms: u64) -> Outcome<()> {
        match self.inv().attempt.sleep(Wake::After(ms)).await {
            Ok(_) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "context.sleep-until", skip_all, fields(unix_ms))]
    async fn sleep_until(&mut self, unix_ms: u64) -> Outcome<()> {
        match self.inv().attempt.sleep(Wake::At(unix_ms)).await {
            Ok(_) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }
}
