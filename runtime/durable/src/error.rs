//! What can go wrong with an invocation, each with a stable code. HTTP statuses are the
//! gateway's business, not this crate's.

use tally_log_core::Error as LogError;

use crate::store::StateError;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not a valid Wasm component.
    #[error("invalid component: {0}")]
    InvalidComponent(String),
    /// A valid component of another world (imports Tally does not provide, no `handle`).
    #[error("the component is not of world tally:platform/function: {0}")]
    WrongWorld(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("unknown function {0:?}")]
    FunctionNotFound(String),
    #[error("unknown invocation {0:?}")]
    InvocationNotFound(String),
    #[error("unknown promise {0:?} (in this book)")]
    PromiseNotFound(String),
    #[error("unknown schedule {0:?}")]
    ScheduleNotFound(String),
    /// The invocation was cancelled; a guest gets this from its host calls once it is.
    #[error("the invocation was cancelled")]
    Cancelled,
    /// `size` is unknown when a body was refused before it was read whole.
    #[error("{what} is larger than its limit of {limit} bytes{}", size.map(|s| format!(" ({s} bytes)")).unwrap_or_default())]
    TooLarge { what: &'static str, size: Option<u64>, limit: u64 },
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// The guest trapped (panicked, hit `unreachable`, ...).
    #[error("the function trapped: {0}")]
    Trap(String),
    #[error("the function exceeded its memory limit of {0} bytes")]
    MemoryLimit(u64),
    /// The guest's `handle` returned an error.
    #[error("the function failed: {0}")]
    Failed(String),
    /// The function's concurrency limit, the node's instance pool or its admission
    /// limit stayed full: nothing ran, and trying again later may succeed.
    #[error("too many concurrent invocations of {0}")]
    Busy(String),
    /// The request raced another change of the same thing, or names something that
    /// exists with other contents.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The function exists but cannot run on this node right now (its component could
    /// not be loaded here); another attempt, here later or elsewhere, may succeed.
    #[error("function {0:?} is unavailable on this node: {1}")]
    FunctionUnavailable(String, String),
    #[error("log unavailable: {0}")]
    LogUnavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
    /// A late peer of an invocation that has finished stopped; the logged result stands.
    /// The runtime answers with that result instead, so callers do not see this.
    #[error("the invocation finished meanwhile")]
    Superseded,
    /// The crash-injection test hook stopped the invocation as if its process died.
    #[error("the invocation was stopped by an injected crash")]
    InjectedCrash,
    /// The invocation sleeps durably until `wake_ms` (milliseconds since the Unix
    /// epoch): it was not running when this was answered, and runs on then by itself;
    /// its status and result are at `GET /v1/invocations/{id}`. Not a failure.
    #[error("invocation {id} sleeps until {wake_ms} ms after the Unix epoch; its result will be at /v1/invocations/{id}")]
    Suspended { id: String, wake_ms: u64 },
}

impl Error {
    /// The stable, machine-readable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidComponent(_) => "invalid_component",
            Error::WrongWorld(_) => "wrong_world",
            Error::InvalidArgument(_) => "invalid_argument",
            Error::FunctionNotFound(_) => "function_not_found",
            Error::InvocationNotFound(_) => "invocation_not_found",
            Error::PromiseNotFound(_) => "promise_not_found",
            Error::ScheduleNotFound(_) => "schedule_not_found",
            Error::Cancelled => "cancelled",
            Error::TooLarge { .. } => "too_large",
            Error::Timeout(_) => "timeout",
            Error::Trap(_) => "trap",
            Error::MemoryLimit(_) => "memory_limit",
            Error::Failed(_) => "function_error",
            Error::Busy(_) => "busy",
            Error::Conflict(_) => "conflict",
            Error::FunctionUnavailable(..) => "function_unavailable",
            Error::LogUnavailable(_) => "log_unavailable",
            Error::Internal(_) => "internal",
            Error::Superseded => "superseded",
            Error::InjectedCrash => "injected_crash",
            Error::Suspended { .. } => "suspended",
        }
    }

    /// Whether another attempt of the same invocation may end otherwise: the log, the
    /// store or this node failed, not the request or the guest.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Timeout(_)
                | Error::Busy(_)
                | Error::FunctionUnavailable(..)
                | Error::LogUnavailable(_)
                | Error::Internal(_)
                | Error::Superseded
                | Error::InjectedCrash
        )
    }
}

impl From<LogError> for Error {
    fn from(e: LogError) -> Self {
        match e {
            LogError::InvalidArgument(m) => Error::InvalidArgument(m),
            LogError::TooLarge { what, size, limit } => {
                Error::InvalidArgument(format!("{what} is {size} bytes, the limit is {limit}"))
            }
            LogError::Timeout(ms) => Error::Timeout(ms),
            other => Error::LogUnavailable(other.to_string()),
        }
    }
}

impl From<StateError> for Error {
    fn from(e: StateError) -> Self {
        Error::Internal(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
