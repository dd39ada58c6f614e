use crate::bindings::tally::platform::types::Error as WitError;
use crate::SeqNum;

/// Why a call to the platform failed: the WIT `error` variant of `tally:platform/types`.
///
/// Errors are values the function can handle; a broken guest or a host bug traps the
/// invocation instead of returning one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The arguments were refused: a tag with the top bit set, tag 0 as the condition
    /// of [`log::cond_append`](crate::log::cond_append), a malformed table name, ...
    /// Also a stored value that is not what the SDK reads it as, such as one that is
    /// not a decimal integer for [`state::get_i64`](crate::state::get_i64), or an
    /// object operation that does not fit the object (incrementing a string).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A named thing does not exist, such as an unknown function for
    /// [`invoke::call`](crate::invoke::call).
    #[error("not found: {0}")]
    NotFound(String),
    /// A conditional append lost: its position in the condition tag's stream is held
    /// by another record.
    #[error("conflict: the position is held by {}", match holder {
        Some(holder) => format!("record {holder}"),
        None => "a trimmed record".to_owned(),
    })]
    Conflict {
        /// The record that holds the position, or `None` if it has since been trimmed.
        holder: Option<SeqNum>,
    },
    /// The log or a node is unavailable right now; retrying later may succeed.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A record, payload or result is larger than its limit.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The operation did not finish in time; it may still have taken effect.
    #[error("timeout: {0}")]
    Timeout(String),
    /// A child invocation failed: its handler returned an error, or it trapped.
    #[error("failed: {0}")]
    Failed(String),
}

/// The result of a call to the platform.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Converts the generated binding type. A method rather than `From`, so the
    /// generated type stays out of the public API.
    pub(crate) fn from_wit(error: WitError) -> Self {
        match error {
            WitError::InvalidArgument(message) => Self::InvalidArgument(message),
            WitError::NotFound(message) => Self::NotFound(message),
            WitError::Conflict(holder) => Self::Conflict { holder: holder.map(SeqNum::new) },
            WitError::Unavailable(message) => Self::Unavailable(message),
            WitError::TooLarge(message) => Self::TooLarge(message),
            WitError::Timeout(message) => Self::Timeout(message),
            WitError::Failed(message) => Self::Failed(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(error: Error, expect: &str) {
        assert_eq!(error.to_string(), expect);
    }

    #[test]
    fn display() {
        check(Error::InvalidArgument("tag 0".into()), "invalid argument: tag 0");
        check(Error::NotFound("f".into()), "not found: f");
        check(Error::Conflict { holder: Some(SeqNum::new(7)) }, "conflict: the position is held by record 7");
        check(Error::Conflict { holder: None }, "conflict: the position is held by a trimmed record");
        check(Error::Unavailable("no quorum".into()), "unavailable: no quorum");
        check(Error::TooLarge("record".into()), "too large: record");
        check(Error::Timeout("append".into()), "timeout: append");
        check(Error::Failed("child trapped".into()), "failed: child trapped");
    }
}
