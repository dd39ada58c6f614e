//! `tally:platform/invoke`: exactly-once child invocations on the same book. What makes
//! them exactly-once (the child's ID, its outcome logged as the parent's step, the
//! inherited log context) is the core's `Attempt::call`.

use bytes::Bytes;

use super::tally::platform::invoke::Host;
use super::{aborted, guest_runtime_error, GuestError, HostState};

impl Host for HostState {
    #[tracing::instrument(name = "invoke.call", level = "debug", skip_all, fields(function))]
    async fn call(&mut self, function: String, input: Vec<u8>) -> wasmtime::Result<Result<Vec<u8>, GuestError>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::Children, || format!("call {function}"));
        match self.inv().attempt.call(function, Bytes::from(input)).await {
            Ok(outcome) => Ok(outcome.map_err(guest_runtime_error)),
            Err(abort) => aborted(abort),
        }
    }
}
