//! `tally:platform/queues`: durable FIFO queues (BokiQueue), on the exactly-once core's
//! attempt (`tally_durable::queues`).

use bytes::Bytes;

use super::tally::platform::queues::Host;
use super::{aborted, GuestError, HostState};

type Outcome<T> = wasmtime::Result<Result<T, GuestError>>;

impl Host for HostState {
    #[tracing::instrument(name = "queues.push", level = "debug", skip_all)]
    async fn push(&mut self, queue: String, message: Vec<u8>) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostQueues, || format!("push {queue}"));
        match self.inv().attempt.queue_push(&queue, Bytes::from(message)).await {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "queues.pop", level = "debug", skip_all, fields(timeout_ms))]
    async fn pop(&mut self, queue: String, timeout_ms: u64) -> Outcome<Option<Vec<u8>>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostQueues, || format!("pop {queue}"));
        match self.inv().attempt.queue_pop(&queue, timeout_ms).await {
            Ok(message) => Ok(Ok(message.map(|m| m.to_vec()))),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "queues.pop-many", level = "debug", skip_all, fields(max, timeout_ms))]
    async fn pop_many(&mut self, queue: String, max: u32, timeout_ms: u64) -> Outcome<Vec<Vec<u8>>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostQueues, || format!("pop-many {queue}"));
        match self.inv().attempt.queue_pop_many(&queue, max, timeout_ms).await {
            Ok(messages) => Ok(Ok(messages.into_iter().map(|m| m.to_vec()).collect())),
            Err(abort) => aborted(abort),
        }
    }
}
