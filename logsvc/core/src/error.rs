//! The crate's one error type. Messages are lowercase and say what went wrong.

use serde::{Deserialize, Serialize};

use crate::types::SeqNum;

/// Errors cross the network in forwarded requests, so they serialise.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Error {
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("too large: {what} is {size} bytes, the limit is {limit} bytes")]
    TooLarge { what: String, size: usize, limit: usize },
    /// A conditional append found its offset taken; `holder` is the record there, if
    /// it is still in the index.
    #[error("conflict: the conditional offset is held by {holder:?}")]
    Conflict { holder: Option<SeqNum> },
    #[error("log unavailable: {0}")]
    Unavailable(String),
    #[error("timed out after {0} ms")]
    Timeout(u64),
    #[error("storage: {0}")]
    Storage(String),
    #[error("transport: {0}")]
    Transport(String),
    #[error("the engine has stopped")]
    Stopped,
    /// An indexer whose configuration (of `term`) maps the forwarded request's book to
    /// another log refused it without effect. The forwarding engine routes it again
    /// under that configuration; its callers never see this error.
    #[error("book {book} is in log {log} in term {term} (a log was added)")]
    Moved { book: u64, log: u8, term: u16 },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
