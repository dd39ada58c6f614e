//! The narrow interfaces through which the core reaches the world: the shared log (the
//! log core's `LogBook`, whose documentation is its contract), time, background tasks and
//! the functions it runs (the state store is [`crate::StateStore`]).
//!
//! Each has two implementations: the real one (`tally-logsvc`'s `LogClient` implements
//! `LogBook` itself; tokio and the wasmtime host in `tally-host`) and the simulator's
//! (`crate::sim`), which runs the same core deterministically from a seed. Nothing in
//! this crate reads a clock, spawns a thread or opens a socket: it cannot, since its
//! dependencies allow none of it.
//!
//! Ownership (`Peers`, `owner`): the recovery scan (with garbage collection), `auto`, the
//! completion of unfinished switches and the schedules run for a book on its owner only,
//! the member with the highest rendezvous hash of (book, member). A node that loses a book
//! drops its scan state; one that gains it reads the book's streams from their start. In a
//! cluster the members are the engines of the current term (`TermPeers` in
//! crate `tally`), so a dead node's books move to the others once the controller seals it
//! out; `tally dev` owns everything (`Alone`, or `OwnsAll` in partial mode). The owner resumes listed switches still
//! under way every `recovery_interval_ms`, whichever node began them.

use std::collections::BTreeMap;
use std::sync::Arc;

use tally_log_core::BookId;

use crate::config::Protocol;
use crate::id::InstanceId;
use crate::record::meta::TraceRef;

pub use tally_log_core::{BoxFuture, LogBook, LogResult};

/// The most tags a record carries (the engine's default `tags_max`, which the
/// simulator's log enforces too).
pub const TAGS_MAX: usize = 64;

/// Time, for the core's schedules (recovery, garbage collection, `auto`, switches).
pub trait Clock: Send + Sync {
    /// Milliseconds of a monotonic clock with an arbitrary origin.
    fn now_ms(&self) -> u64;

    /// Milliseconds since the Unix epoch: durable sleeps wake by it, on whichever node
    /// and after whatever restart (the simulator's counts from its start).
    fn wall_ms(&self) -> u64;

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
    pub retry: RetryPolicy,
}

/// How an invocation whose guest traps is run again: `attempts` in all (the first
/// included), waiting `backoff_ms` before the second, twice as long before each one
/// after, at most `backoff_max_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub backoff_ms: u64,
    pub backoff_max_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 3, backoff_ms: 0, backoff_max_ms: 60_000 }
    }
}

impl RetryPolicy {
    /// The wait before attempt `next` (2 for the first retry).
    pub fn backoff_before(&self, next: u32) -> u64 {
        let doublings = next.saturating_sub(2).min(63);
        self.backoff_ms.saturating_mul(1 << doublings).min(self.backoff_max_ms)
    }
}

/// What the node measures of executions (their latency breakdown and trace), kept
/// with their Init and Result records ([`crate::Meta`]). The core measures nothing
/// itself: it says where an instance's execution begins and ends, and asks what to keep.
/// The simulator observes nothing ([`Unobserved`]).
pub trait Observe: Send + Sync {
    /// Runs `run`, one execution of instance `id` (a root or a child, on whichever node),
    /// inside its measurements: what [`Observe::trace`] and [`Observe::parts`] answer
    /// while it runs.
    fn scope<'a>(&self, id: &InstanceId, run: BoxFuture<'a, ()>) -> BoxFuture<'a, ()> {
        let _ = id;
        run
    }

    /// Whether the measurements already running on this task (a request's) take
    /// execution `id` as theirs: then it runs without a [`Observe::scope`] of its own.
    fn claims(&self, id: &InstanceId) -> bool {
        let _ = id;
        false
    }

    /// The trace of the execution that calls this, kept with its Init and Result.
    fn trace(&self) -> Option<TraceRef> {
        None
    }

    /// Where the calling execution's time went so far, in microseconds per part,
    /// kept with its Result.
    fn parts(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// The calling execution found its instance's Init logged by an earlier one, whose
    /// trace that record keeps: a re-execution links to it.
    fn recorded(&self, first: &TraceRef) {
        let _ = first;
    }
}

/// Observes nothing.
pub struct Unobserved;

impl Observe for Unobserved {}

/// Which books this node looks after. The recovery scan (with garbage collection),
/// `auto` and the completion of switches left unfinished run for a book on its owner
/// only, so a cluster does that work once, not once per node; when a node leaves the
/// membership its books get other owners, which take the work over.
///
/// Views may disagree for a while (two owners, or none, while membership changes):
/// that repeats or delays work, never breaks exactly-once, since re-executions are
/// peers whose conditional appends keep one history and GC trims only what every
/// reader has passed.
pub trait Peers: Send + Sync {
    fn owns(&self, book: BookId) -> bool;

    /// Whether this node runs every invocation and its log engine orders and indexes
    /// every append before answering it (one function node over one engine: `tally
    /// dev`). Then a read at the end of its index, from a position past its start, sees
    /// every invocation that finished before the read began, so a root may read before
    /// its Init is logged and defer the Init (`Instance::begin`). Elsewhere an index may
    /// lag the log, and only an append gives an invocation a position that fresh.
    fn alone(&self) -> bool {
        false
    }
}

/// A node alone: it owns every book (`tally dev`, a single function node).
pub struct Alone;

impl Peers for Alone {
    fn owns(&self, _book: BookId) -> bool {
        true
    }

    fn alone(&self) -> bool {
        true
    }
}

/// The only function node, whose engine's index may lag its appends (`tally dev` in
/// partial mode, whose local index follows the index tier's updates, which arrive after
/// the append they order has answered and out of order across shards): it owns every
/// book, but a read from a position past its start may miss an invocation that finished,
/// so its roots log their Init first, as in a cluster.
pub struct OwnsAll;

impl Peers for OwnsAll {
    fn owns(&self, _book: BookId) -> bool {
        true
    }
}

/// The owner of `book` among `members` by rendezvous hashing: the member whose hash
/// with the book is highest. Books spread evenly, and when a member leaves only its
/// books move (to the member with the next highest hash). `None` without members.
pub fn owner(book: BookId, members: &[u64]) -> Option<u64> {
    members.iter().copied().max_by_key(|&m| (mix(book.0 ^ mix(m)), m))
}

/// SplitMix64's finalizer: a fixed, well-spread mixing of 64 bits.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_spread_evenly_and_only_a_leavers_books_move() {
        let members = [3u64, 9, 10, 42];
        let mut counts = BTreeMap::new();
        let mut moved = 0;
        for b in 0..40_000u64 {
            let o = owner(BookId(b), &members).expect("members");
            *counts.entry(o).or_insert(0u32) += 1;
            let without_10 = owner(BookId(b), &[3, 9, 42]).expect("members");
            if o != 10 {
                assert_eq!(without_10, o, "book {b} moved though its owner stayed");
            } else {
                moved += 1;
            }
        }
        assert!(counts.values().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        assert_eq!(moved, counts[&10]);
        assert_eq!(owner(BookId(1), &[]), None);
        assert_eq!(owner(BookId(1), &[7]), Some(7));
    }
}
