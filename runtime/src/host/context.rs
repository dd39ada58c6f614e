//! `tally:platform/context`: what the invocation is.

use super::tally::platform::context::Host;
use super::HostState;

impl Host for HostState {
    async fn invocation_id(&mut self) -> wasmtime::Result<String> {
        Ok(self.inv.instance.id.clone())
    }

    async fn book_id(&mut self) -> wasmtime::Result<u64> {
        Ok(self.inv.book.0)
    }

    async fn attempt(&mut self) -> wasmtime::Result<u32> {
        Ok(self.inv.attempt)
    }

    async fn function_name(&mut self) -> wasmtime::Result<String> {
        Ok(self.inv.function.clone())
    }
}
