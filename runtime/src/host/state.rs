//! `tally:platform/state`: exactly-once reads and writes of the invocation's book's
//! tables, through its instance (`crate::durable`).

use bytes::Bytes;

use super::tally::platform::state::Host;
use super::{aborted, GuestError, HostState};

type Outcome<T> = wasmtime::Result<Result<T, GuestError>>;

impl Host for HostState {
    async fn get(&mut self, table: String, key: Vec<u8>) -> Outcome<Option<Vec<u8>>> {
        let inv = &mut self.inv;
        match inv.instance.get(&mut inv.ctx, &table, &key).await {
            Ok(value) => Ok(Ok(value.map(|b| b.to_vec()))),
            Err(abort) => aborted(abort),
        }
    }

    async fn put(&mut self, table: String, key: Vec<u8>, value: Vec<u8>) -> Outcome<()> {
        let inv = &mut self.inv;
        match inv.instance.put(&mut inv.ctx, &table, &key, Some(Bytes::from(value))).await {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }

    async fn delete(&mut self, table: String, key: Vec<u8>) -> Outcome<()> {
        let inv = &mut self.inv;
        match inv.instance.put(&mut inv.ctx, &table, &key, None).await {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }
}
