//! `tally:platform/state`: exactly-once reads and writes of the invocation's book's
//! tables, through its attempt (`tally_durable::Attempt`).

use bytes::Bytes;

use super::tally::platform::state::Host;
use super::{aborted, GuestError, HostState};

type Outcome<T> = wasmtime::Result<Result<T, GuestError>>;

impl Host for HostState {
    #[tracing::instrument(name = "state.get", level = "debug", skip_all, fields(table))]
    async fn get(&mut self, table: String, key: Vec<u8>) -> Outcome<Option<Vec<u8>>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostState, || format!("get {table}"));
        match self.inv().attempt.get(&table, &key).await {
            Ok(value) => Ok(Ok(value.map(|b| b.to_vec()))),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "state.put", level = "debug", skip_all, fields(table))]
    async fn put(&mut self, table: String, key: Vec<u8>, value: Vec<u8>) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostState, || format!("put {table}"));
        match self.inv().attempt.put(&table, &key, Bytes::from(value)).await {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "state.delete", level = "debug", skip_all, fields(table))]
    async fn delete(&mut self, table: String, key: Vec<u8>) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostState, || format!("delete {table}"));
        match self.inv().attempt.delete(&table, &key).await {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }
}
