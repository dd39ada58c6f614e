//! The simulator's state store: the in-memory store behind a wrapper that fails calls
//! (before or after they take effect, as a backend's timeout would) and splits each call
//! into the poll that does it and the poll that answers, so a crash can fall between.
//! A marker, or a version put without durability (`put_versions(_, false)`), whose
//! caller keeps the value elsewhere, is stored, at random, with a value nobody wrote:
//! what a crash that lost it and another execution's put under the same name could
//! leave. No reader may look at it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;

use crate::store::{Family, MemStateStore, StateError, StateFuture, StateStore, Value, Version, VersionPut};

use super::Rng;

#[derive(Clone, Copy, Debug)]
pub struct StoreFaults {
    pub fail_before: f64,
    pub fail_after: f64,
}

pub struct FaultyStore {
    inner: MemStateStore,
    rng: Mutex<Rng>,
    pub faults: Mutex<StoreFaults>,
    pub failures: Mutex<u64>,
}

impl FaultyStore {
    pub fn new(seed: u64, faults: StoreFaults) -> Arc<FaultyStore> {
        Arc::new(FaultyStore {
            inner: MemStateStore::new(),
            rng: Mutex::new(Rng::new(seed ^ 0x5707e)),
            faults: Mutex::new(faults),
            failures: Mutex::new(0),
        })
    }

    /// A crash of the machine: see [`MemStateStore::lose_unsynced`].
    pub fn lose_unsynced(&self) {
        self.inner.lose_unsynced();
    }

    /// Whether `(table, key)` has a version stored: see [`MemStateStore::has_versions`].
    pub fn has_versions(&self, table: &str, key: &[u8]) -> bool {
        self.inner.has_versions(table, key)
    }

    fn draw(&self) -> (bool, bool) {
        let f = *self.faults.lock().expect("not poisoned");
        let mut rng = self.rng.lock().expect("not poisoned");
        let before = rng.chance(f.fail_before);
        let after = !before && rng.chance(f.fail_after);
        if before || after {
            *self.failures.lock().expect("not poisoned") += 1;
        }
        (before, after)
    }

    fn call<'a, T: Send + Unpin + 'a>(&'a self, op: StateFuture<'a, T>) -> StateFuture<'a, T> {
        let (before, after) = self.draw();
        if before {
            return Box::pin(std::future::ready(Err(injected())));
        }
        Box::pin(Answered { op: Some(op), result: None, after })
    }
}

fn injected() -> StateError {
    StateError::Backend { backend: "simulated", message: "injected failure".into() }
}

/// Runs the operation in its first poll, answers in the next one.
struct Answered<'a, T> {
    op: Option<StateFuture<'a, T>>,
    result: Option<Result<T, StateError>>,
    after: bool,
}

impl<T: Unpin> Future for Answered<'_, T> {
    type Output = Result<T, StateError>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = Pin::into_inner(self);
        if let Some(result) = this.result.take() {
            return Poll::Ready(if this.after { Err(injected()) } else { result });
        }
        let mut op = this.op.take().expect("polled after completion");
        match op.as_mut().poll(cx) {
            Poll::Ready(result) => {
                this.result = Some(result);
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Pending => {
                this.op = Some(op);
                Poll::Pending
            }
        }
    }
}

impl StateStore for FaultyStore {
    fn put_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64, value: Value) -> StateFuture<'a, bool> {
        self.call(self.inner.put_version(table, key, version, value))
    }

    fn put_versions<'a>(&'a self, mut puts: Vec<VersionPut>, durable: bool) -> StateFuture<'a, Vec<bool>> {
        {
            let mut rng = self.rng.lock().expect("not poisoned");
            for p in puts.iter_mut().filter(|p| (p.marker || !durable) && rng.chance(0.5)) {
                p.value = Some(Bytes::from_static(b"a value no execution wrote"));
            }
        }
        self.call(self.inner.put_versions(puts, durable))
    }

    fn get_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(u64, Value)>> {
        self.call(self.inner.get_at(table, key, at))
    }

    fn delete_version<'a>(&'a self, table: &'a str, key: &'a [u8], version: u64) -> StateFuture<'a, bool> {
        self.call(self.inner.delete_version(table, key, version))
    }

    fn sync(&self) -> StateFuture<'_, ()> {
        self.call(self.inner.sync())
    }

    fn put_if_newer<'a>(&'a self, table: &'a str, key: &'a [u8], version: Version, value: Value) -> StateFuture<'a, bool> {
        self.call(self.inner.put_if_newer(table, key, version, value))
    }

    fn put_latest<'a>(&'a self, table: &'a str, key: &'a [u8], value: Value) -> StateFuture<'a, ()> {
        self.call(self.inner.put_latest(table, key, value))
    }

    fn get_latest<'a>(&'a self, table: &'a str, key: &'a [u8]) -> StateFuture<'a, Option<(Version, Value)>> {
        self.call(self.inner.get_latest(table, key))
    }

    fn get_latest_at<'a>(&'a self, table: &'a str, key: &'a [u8], at: u64) -> StateFuture<'a, Option<(Version, Value)>> {
        self.call(self.inner.get_latest_at(table, key, at))
    }

    fn trim_replaced<'a>(&'a self, table: &'a str, floor: u64) -> StateFuture<'a, u64> {
        self.call(self.inner.trim_replaced(table, floor))
    }

    fn list_keys<'a>(
        &'a self,
        table: &'a str,
        family: Family,
        after: Option<&'a [u8]>,
        limit: usize,
    ) -> StateFuture<'a, Vec<Bytes>> {
        self.call(self.inner.list_keys(table, family, after, limit))
    }
}
