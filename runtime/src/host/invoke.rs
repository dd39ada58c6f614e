//! `tally:platform/invoke`: exactly-once child invocations on the same book.
//!
//! The child's instance ID is the parent's ID and step (`<id>.<step>`), so a
//! re-execution of the parent calls the same child instance, which answers from its own
//! step log; the child's final outcome is logged as the parent's step, so later
//! re-executions of the parent take it from there without calling at all. A child that
//! failed transiently (timed out, log unavailable) ends the parent's attempt instead of
//! being logged: the parent runs again and calls the child again.
//!
//! The child starts from a copy of the parent's log context, so it reads everything the
//! parent has seen or written; when it returns, the parent's context moves past
//! everything the child saw.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tally_logsvc::{BookId, Context};

use super::tally::platform::invoke::Host;
use super::{aborted, guest_runtime_error, GuestError, HostState};
use crate::durable::record::Outcome;
use crate::durable::{Abort, CrashAfter};
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
    /// The child's instance ID.
    pub id: String,
    /// A copy of the parent's log context.
    pub ctx: Context,
    /// The parent's crash-injection hook, shared (one process dies with its children).
    pub crash: Option<Arc<CrashAfter>>,
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
        let inv = &mut self.inv;
        let id = match inv.instance.child(&mut inv.ctx).await {
            Ok(Ok(logged)) => return Ok(logged.into_result().map_err(guest_runtime_error)),
            Ok(Err(id)) => id,
            Err(abort) => return aborted(abort),
        };
        let call = ChildCall {
            function,
            input: Bytes::from(input),
            book: inv.book,
            depth: inv.depth + 1,
            deadline: inv.deadline,
            id,
            ctx: inv.ctx.child(),
            crash: inv.instance.crash(),
        };
        let (result, child_ctx) = inv.invoker.clone().call(call).await;
        inv.ctx.merge(&child_ctx);
        let outcome = match result {
            Err(RuntimeError::InjectedCrash) => return aborted(Abort::Crash),
            // Refused before the child ran: nothing happened, nothing to log.
            Err(e @ (RuntimeError::FunctionNotFound(_) | RuntimeError::InvalidArgument(_))) => {
                return Ok(Err(guest_runtime_error(e)))
            }
            Err(RuntimeError::Trap(m)) => Outcome::Trap(crate::durable::record::cut(&m)),
            other => match Outcome::of_final(&other) {
                Some(outcome) => outcome,
                None => return aborted(Abort::Transient(other.expect_err("Ok is final"))),
            },
        };
        match inv.instance.child_finished(&mut inv.ctx, outcome).await {
            Ok(logged) => Ok(logged.into_result().map_err(guest_runtime_error)),
            Err(abort) => aborted(abort),
        }
    }
}
