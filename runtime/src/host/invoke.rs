//! `tally:platform/invoke`: child invocations on the same book. The child starts from a
//! copy of the parent's log context, so it reads everything the parent has seen or
//! written; when it returns, the parent's context moves past everything the child saw.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tally_logsvc::{BookId, Context};

use super::tally::platform::invoke::Host;
use super::{GuestError, HostState};
use crate::error::RuntimeError;

/// A child invocation asked for by a guest.
pub struct ChildCall {
    pub function: String,
    pub input: Bytes,
    pub book: BookId,
    /// The child's nesting: the parent's plus one.
    pub depth: u32,
    /// The parent's deadline, which bounds the child's.
    pub deadline: Instant,
    pub parent_id: String,
    /// A copy of the parent's log context.
    pub ctx: Context,
}

/// A child's output and its final log context.
pub type ChildOutcome = (Result<Vec<u8>, RuntimeError>, Context);

/// Runs child invocations; implemented by the runtime.
pub trait Invoker: Send + Sync {
    /// Runs a child to completion.
    fn call(self: Arc<Self>, call: ChildCall) -> Pin<Box<dyn Future<Output = ChildOutcome> + Send>>;
}

impl Host for HostState {
    async fn call(&mut self, function: String, input: Vec<u8>) -> wasmtime::Result<Result<Vec<u8>, GuestError>> {
        let inv = &self.inv;
        let call = ChildCall {
            function,
            input: Bytes::from(input),
            book: inv.book,
            depth: inv.depth + 1,
            deadline: inv.deadline,
            parent_id: inv.id.clone(),
            ctx: inv.ctx.child(),
        };
        let (result, child_ctx) = inv.invoker.clone().call(call).await;
        self.inv.ctx.merge(&child_ctx);
        Ok(result.map_err(|e| match e {
            RuntimeError::FunctionNotFound(_) => GuestError::NotFound(e.to_string()),
            RuntimeError::InvalidArgument(m) => GuestError::InvalidArgument(m),
            RuntimeError::TooLarge { .. } => GuestError::TooLarge(e.to_string()),
            RuntimeError::Timeout(_) => GuestError::Timeout(e.to_string()),
            RuntimeError::LogUnavailable(m) | RuntimeError::Busy(m) => GuestError::Unavailable(m),
            other => GuestError::Failed(other.to_string()),
        }))
    }
}
