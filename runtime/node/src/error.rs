//! What can go wrong with a deploy or an invocation: the exactly-once core's error type,
//! which carries a stable code; the gateway maps it to an HTTP status.

pub use tally_durable::Error as RuntimeError;

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
