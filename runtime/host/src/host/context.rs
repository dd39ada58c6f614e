//! `tally:platform/context`: what the invocation is, and durable sleeps.

use tally_durable::Wake;

use super::tally::platform::context::Host;
use super::{aborted, guest_runtime_error, GuestError, HostState};

type Outcome<T> = wasmtime::Result<Result<T, GuestError>>;

impl Host for HostState {
    async fn invocation_id(&mut self) -> wasmtime::Result<String> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "invocation_id".to_string());
        Ok(self.inv().attempt.instance.id.to_string())
    }

    async fn book_id(&mut self) -> wasmtime::Result<u64> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "book_id".to_string());
        Ok(self.inv().attempt.book.0)
    }

    async fn attempt(&mut self) -> wasmtime::Result<u32> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "attempt".to_string());
        Ok(self.inv().attempt.attempt)
    }

    async fn function_name(&mut self) -> wasmtime::Result<String> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "function_name".to_string());
        Ok(self.inv().attempt.version.name.clone())
    }

    async fn key(&mut self) -> wasmtime::Result<Option<String>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "key".to_string());
        Ok(self.inv().attempt.key().map(str::to_string))
    }

    #[tracing::instrument(name = "context.sleep", level = "debug", skip_all, fields(ms))]
    async fn sleep(&mut self, ms: u64) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "sleep".to_string());
        match self.inv().attempt.sleep(Wake::After(ms)).await {
            Ok(_) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "context.promise-create", level = "debug", skip_all)]
    async fn promise_create(&mut self) -> Outcome<String> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "promise_create".to_string());
        match self.inv().attempt.create_promise().await {
            Ok(id) => Ok(Ok(id)),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "context.promise-await", level = "debug", skip_all)]
    async fn promise_await(&mut self, id: String, timeout_ms: Option<u64>) -> Outcome<Vec<u8>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "promise_await".to_string());
        match self.inv().attempt.await_promise(&id, timeout_ms).await {
            Ok(r) => Ok(r.map(|v| v.to_vec()).map_err(guest_runtime_error)),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "context.sleep-until", level = "debug", skip_all, fields(unix_ms))]
    async fn sleep_until(&mut self, unix_ms: u64) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostContext, || "sleep_until".to_string());
        match self.inv().attempt.sleep(Wake::At(unix_ms)).await {
            Ok(_) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }
}
