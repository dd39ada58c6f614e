//! The narrow interfaces through which the core reaches the world: the shared log, time,
//! background tasks and the functions it runs (the state store is [`crate::StateStore`]).
//!
//! Each has two implementations: the real one (the engine's `LogClient` in
//! `tally-runtime`; tokio and the wasmtime host in `tally-host`) and the simulator's
//! (`crate::sim`), which runs the same core deterministically from a seed. Nothing in
//! this crate reads a clock, spawns a thread or opens a socket: it cannot, since its
//! dependencies allow none of it.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::{BookId, Context, Error as LogError, LogRecord, SeqNum, Tag};

use crate::attempt::Attempt;
use crate::config::Protocol;
use crate::error::Result;

/// The future every interface method returns: boxed, so the traits stay object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub type LogResult<T> = std::result::Result<T, LogError>;

/// The shared log with the platform's privileges (reserved books and tags allowed).
///
/// The contract is the LogBook API's: every call moves `ctx` forward to the index
/// position it was served at (a conditional append that failed with
/// [`LogError::Conflict`] too), so a later call with the same context sees everything
/// an earlier one saw. A conditional append lands only at offset `cond_position` of
/// `cond_tag`'s stream, and otherwise names the record there (`holder`, `None` if it
/// was trimmed). A failed call may or may not have taken effect.
pub trait Log: Send + Sync {
    fn append<'a>(&'a self, ctx: &'a mut Context, book: BookId, tags: &'a [Tag], data: Bytes)
        -> BoxFuture<'a, LogResult<SeqNum>>;

    fn cond_append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
        cond_tag: Tag,
        cond_position: u64,
    ) -> BoxFuture<'a, LogResult<SeqNum>>;

    /// The first live record of `tag`'s stream at or above `min`.
    fn read_next<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        min: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>>;

    /// The last live record of `tag`'s stream at or below `max`.
    fn read_prev<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>>;

    /// Removes the records of `tag`'s stream below `seqnum`.
    fn trim<'a>(&'a self, ctx: &'a mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> BoxFuture<'a, LogResult<()>>;
}

/// Time, for the core's schedules (recovery, garbage collection, `auto`, switches).
pub trait Clock: Send + Sync {
    /// Milliseconds of a monotonic clock with an arbitrary origin.
    fn now_ms(&self) -> u64;

    /// Completes `ms` milliseconds from now.
    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()>;
}

/// Background tasks. A task runs until it returns or the node stops; every task the core
/// spawns has a stable name and says in its doc what cancelling it loses (nothing that
/// the log does not hold: the node's next start resumes it).
pub trait Spawn: Send + Sync {
    fn spawn(&self, name: &'static str, task: BoxFuture<'static, ()>);
}

/// One deployed version of a function, as the core needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionVersion {
    pub name: String,
    /// Names the version for ever, on every node (the registry's manifest seqnum).
    pub version: u64,
    pub timeout_ms: u64,
    pub request_bytes_max: u64,
    /// The protocols the version declares, per table (see [`crate::Protocol`]).
    pub tables: Arc<BTreeMap<String, Protocol>>,
}

/// The functions this node can run: the registry and the guest runtime.
pub trait Functions: Send + Sync {
    /// The current version of `name`, or `None` if no function has that name.
    fn current<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<FunctionVersion>>>;

    /// Version `version` of `name`, replaced or deleted since or not, or `None` if it
    /// never existed.
    fn version<'a>(&'a self, name: &'a str, version: u64) -> BoxFuture<'a, Result<Option<FunctionVersion>>>;

    /// Runs one attempt: the version's `handle` on the attempt's input, its `state` and
    /// `invoke` calls going to the attempt's instance. The host bounds it by
    /// `attempt.deadline_ms` and by the function's concurrency, and gives the attempt back.
    fn run(&self, attempt: Attempt) -> BoxFuture<'_, (Result<Vec<u8>>, Attempt)>;
}
