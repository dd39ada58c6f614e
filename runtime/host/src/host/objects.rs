//! `tally:platform/objects`: durable JSON objects with transactions (BokiStore), on the
//! exactly-once core's attempt (`tally_durable::objects`).

use tally_durable::objects::ObjOp;

use super::tally::platform::objects::Host;
use super::{aborted, GuestError, HostState};

type Outcome<T> = wasmtime::Result<Result<T, GuestError>>;

impl HostState {
    async fn update(&mut self, object: String, op: ObjOp) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "update".to_string());
        match self.inv().attempt.object_update(&object, op).await {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }
}

impl Host for HostState {
    #[tracing::instrument(name = "objects.get", level = "debug", skip_all)]
    async fn get(&mut self, object: String, path: String) -> Outcome<Option<String>> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "get".to_string());
        match self.inv().attempt.object_get(&object, &path).await {
            Ok(text) => Ok(Ok(text)),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "objects.set", level = "debug", skip_all)]
    async fn set(&mut self, object: String, path: String, json: String) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "set".to_string());
        self.update(object, ObjOp::Set { path, json }).await
    }

    #[tracing::instrument(name = "objects.increment", level = "debug", skip_all)]
    async fn increment(&mut self, object: String, path: String, by: i64) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "increment".to_string());
        self.update(object, ObjOp::Incr { path, by }).await
    }

    #[tracing::instrument(name = "objects.push", level = "debug", skip_all)]
    async fn push(&mut self, object: String, path: String, json: String) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "push".to_string());
        self.update(object, ObjOp::Push { path, json }).await
    }

    #[tracing::instrument(name = "objects.remove", level = "debug", skip_all)]
    async fn remove(&mut self, object: String, path: String) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "remove".to_string());
        self.update(object, ObjOp::Remove { path }).await
    }

    #[tracing::instrument(name = "objects.begin", level = "debug", skip_all)]
    async fn begin(&mut self, read_only: bool) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "begin".to_string());
        match self.inv().attempt.txn_begin(read_only).await {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "objects.commit", level = "debug", skip_all)]
    async fn commit(&mut self) -> Outcome<bool> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "commit".to_string());
        match self.inv().attempt.txn_commit().await {
            Ok(committed) => Ok(Ok(committed)),
            Err(abort) => aborted(abort),
        }
    }

    #[tracing::instrument(name = "objects.abort", level = "debug", skip_all)]
    async fn abort(&mut self) -> Outcome<()> {
        let _frame = crate::observe::enter_with(crate::observe::Part::HostObjects, || "abort".to_string());
        match self.inv().attempt.txn_abort() {
            Ok(()) => Ok(Ok(())),
            Err(abort) => aborted(abort),
        }
    }
}
