//! The limits a node puts on functions: [`Limits`] of one function (node-wide
//! defaults that a deploy may override) and [`NodeLimits`], what one node allows at
//! most whatever a deploy asks for. The node's configuration file holds both; the host
//! sizes its engine by the one and runs each invocation under the other.

use serde::{Deserialize, Serialize};

/// Limits of one function. Every field has a node-wide default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Linear memory of one instance.
    pub memory_bytes: u64,
    /// Wall time of one invocation, host calls included.
    pub timeout_ms: u64,
    pub request_bytes_max: u64,
    pub response_bytes_max: u64,
    /// Instances of the function running at once on this node; more wait, up to the
    /// timeout.
    pub concurrency_max: u32,
    /// Attempts of an exactly-once invocation whose guest traps (panics, hits
    /// `unreachable`) before the trap is its result, the first included.
    pub retry_attempts: u32,
    /// The wait before the second attempt; it doubles for each one after, up to
    /// `retry_backoff_max_ms`. A long wait suspends the invocation (it holds nothing).
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 128 << 20,
            timeout_ms: 10_000,
            request_bytes_max: 6 << 20,
            response_bytes_max: 6 << 20,
            concurrency_max: 64,
            retry_attempts: 3,
            retry_backoff_ms: 0,
            retry_backoff_max_ms: 60_000,
        }
    }
}

/// What one node allows at most, whatever a deploy asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeLimits {
    /// Instances alive at once over all functions (the pooling allocator's size).
    pub instances_max: u32,
    /// The largest `memory_bytes` a function may ask for.
    pub memory_bytes_max: u64,
    /// The largest component a deploy may upload.
    pub component_bytes_max: u64,
    /// Nested `invoke.call`s.
    pub call_depth_max: u32,
    /// Finished asynchronous invocations kept for `GET /v1/invocations/{id}`.
    pub invocations_kept: usize,
    /// Linear memory of an instance slot kept resident for the next instance, reset by
    /// writing back the pages the last one touched (Linux PAGEMAP_SCAN) instead of
    /// being unmapped and faulted in again. It speeds up runtimes that touch a few MiB
    /// at start (Go: 474 instead of 729 µs per hello; JavaScript and Go about 1.5 and 1.9
    /// times the throughput under load) and slows down ones whose start touches much
    /// more (Python, 13 MiB: 1.44 instead of 1.20 ms); 0 turns it off. Up to this much
    /// per slot in use stays resident.
    pub memory_keep_resident_bytes: u64,
    /// Bytes of full chunks each index of the node's log keeps in memory (the engine's,
    /// and a storage node's liveness index, one per physical log); the chunks filled
    /// first past it go to an unlinked scratch file under the data directory, read back
    /// when a lookup needs them. About 15 bytes a single-tag record: the default keeps
    /// the newest ~2M records' entries of each index in memory.
    pub index_resident_bytes: u64,
    /// The largest `timeout_ms` a function may ask for.
    pub function_timeout_ms_max: u64,
    /// The largest `request_bytes_max` a function may ask for: what one invocation's
    /// input may hold in this node's memory.
    pub function_request_bytes_max: u64,
    /// The largest `response_bytes_max` a function may ask for.
    pub function_response_bytes_max: u64,
    /// Requests out (wasi:http's outgoing handler) in flight at once over every
    /// instance; a call waits for a slot up to `outgoing_timeout_ms_max`.
    pub outgoing_in_flight_max: u32,
    /// The longest a request out may take to connect, to answer and between two parts
    /// of its response (a guest's request options may ask for less).
    pub outgoing_timeout_ms_max: u64,
    /// The largest body a request out may carry.
    pub outgoing_request_bytes_max: u64,
    /// The largest response body a request out may get; a response is logged whole in
    /// one record, so at most [`OUTGOING_RESPONSE_BYTES_CAP`].
    pub outgoing_response_bytes_max: u64,
    /// Names the node answers itself for requests out, before DNS, as `/etc/hosts`
    /// would: `{ "api.internal" = ["10.0.0.7"] }`. The addresses are checked as DNS's
    /// are (an internal one is refused unless the allow-list names it).
    pub outgoing_hosts: std::collections::BTreeMap<String, Vec<std::net::IpAddr>>,
    /// Bytes of functions' logs (`tally logs`) this node keeps, over every function;
    /// the oldest lines go first.
    pub logs_bytes_max: u64,
    /// Bytes of each of stdout and stderr one attempt keeps; the oldest lines go first.
    pub logs_invocation_bytes_max: u64,
    /// Invocations from outside (the gateway's) running at once; more wait their turn
    /// (`tally::shares`: round-robin between books).
    pub invocations_max: u32,
    /// Of those, one book's at most: a flood of one book leaves room for the others.
    pub book_invocations_max: u32,
    /// Requests of one book waiting for a place; more are answered 429.
    pub book_queue_max: u32,
    /// The longest a request waits for a place before it is answered 429.
    pub queue_wait_ms: u64,
    /// Requests a second one token may make (a bucket of one second's worth); 0: no
    /// limit.
    pub caller_rate_max: u32,
    /// SQL queries (`POST /v1/sql`): the time one may take, the rows it may read from
    /// its tables and answer, how many run at once, and the memory of all of them.
    pub sql_time_ms: u64,
    pub sql_scan_rows_max: u64,
    pub sql_rows_max: u32,
    pub sql_concurrent_max: u32,
    pub sql_memory_bytes_max: u64,
}

/// The most `outgoing_response_bytes_max` may be: a logged response, its headers and the
/// record's framing fit in one record of the log.
pub const OUTGOING_RESPONSE_BYTES_CAP: u64 = 768 << 10;

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            instances_max: 256,
            memory_bytes_max: 1 << 30,
            component_bytes_max: 64 << 20,
            call_depth_max: 8,
            invocations_kept: 100_000,
            memory_keep_resident_bytes: 4 << 20,
            index_resident_bytes: 32 << 20,
            function_timeout_ms_max: 15 * 60 * 1000,
            function_request_bytes_max: 64 << 20,
            function_response_bytes_max: 64 << 20,
            outgoing_in_flight_max: 256,
            outgoing_timeout_ms_max: 30_000,
            outgoing_request_bytes_max: 4 << 20,
            outgoing_response_bytes_max: 512 << 10,
            outgoing_hosts: Default::default(),
            logs_bytes_max: 16 << 20,
            logs_invocation_bytes_max: 64 << 10,
            invocations_max: 128,
            book_invocations_max: 64,
            book_queue_max: 256,
            queue_wait_ms: 2_000,
            caller_rate_max: 0,
            sql_time_ms: 10_000,
            sql_scan_rows_max: 5_000_000,
            sql_rows_max: 10_000,
            sql_concurrent_max: 4,
            sql_memory_bytes_max: 256 << 20,
        }
    }
}
