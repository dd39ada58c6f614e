//! `tally:platform/context`: what the invocation is.

use super::tally::platform::context::Host;
use super::HostState;

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
}
