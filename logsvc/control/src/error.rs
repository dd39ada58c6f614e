//! The control plane's one error type.

/// What can go wrong talking to the control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No etcd member could be reached, had a leader, or answered within 2 s (or, rarely,
    /// etcd refused the request, e.g. too many requests). Transient: the same call may
    /// succeed later. A write whose message says it may have been applied may have
    /// been; read back to find out.
    #[error("etcd: {0}")]
    Etcd(String),
    /// A compare-and-swap found another revision than the one it expected: another
    /// writer got there first. Reload and decide again.
    #[error("superseded: another writer changed the value since the expected revision")]
    Superseded,
    /// A value stored in etcd could not be decoded.
    #[error("corrupt value in etcd: {0}")]
    Corrupt(String),
    /// The caller passed something this crate refuses (a bad cluster name, a TTL out of
    /// range, a value too large to store).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// Whether retrying the same call later may succeed (etcd unreachable or slow).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Etcd(_))
    }
}

/// The control plane's result.
pub type Result<T> = std::result::Result<T, Error>;
