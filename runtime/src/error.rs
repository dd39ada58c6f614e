//! What can go wrong with a deploy or an invocation, each with a stable code and the
//! HTTP status the gateway answers with.

use tally_logsvc::Error as LogError;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// Not a valid Wasm component.
    #[error("invalid component: {0}")]
    InvalidComponent(String),
    /// A valid component of another world (imports we do not provide, or no `handle`).
    #[error("the component is not of world tally:platform/function: {0}")]
    WrongWorld(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("unknown function {0:?}")]
    FunctionNotFound(String),
    #[error("unknown invocation {0:?}")]
    InvocationNotFound(String),
    /// `size` is unknown when the body was refused before it was read whole.
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
    #[error("too many concurrent invocations of {0:?}")]
    Busy(String),
    /// The request raced another change of the same thing.
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("log unavailable: {0}")]
    LogUnavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
    /// The crash-injection test hook stopped the invocation as if its process died.
    #[error("the invocation was stopped by an injected crash")]
    InjectedCrash,
}

impl RuntimeError {
    /// The stable, machine-readable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            RuntimeError::InvalidComponent(_) => "invalid_component",
            RuntimeError::WrongWorld(_) => "wrong_world",
            RuntimeError::InvalidArgument(_) => "invalid_argument",
            RuntimeError::FunctionNotFound(_) => "function_not_found",
            RuntimeError::InvocationNotFound(_) => "invocation_not_found",
            RuntimeError::TooLarge { .. } => "too_large",
            RuntimeError::Timeout(_) => "timeout",
            RuntimeError::Trap(_) => "trap",
            RuntimeError::MemoryLimit(_) => "memory_limit",
            RuntimeError::Failed(_) => "function_error",
            RuntimeError::Busy(_) => "busy",
            RuntimeError::Conflict(_) => "conflict",
            RuntimeError::LogUnavailable(_) => "log_unavailable",
            RuntimeError::Internal(_) => "internal",
            RuntimeError::InjectedCrash => "injected_crash",
        }
    }

    /// The HTTP status for the error.
    pub fn status(&self) -> u16 {
        match self {
            RuntimeError::InvalidComponent(_) | RuntimeError::WrongWorld(_) | RuntimeError::InvalidArgument(_) => 400,
            RuntimeError::FunctionNotFound(_) | RuntimeError::InvocationNotFound(_) => 404,
            RuntimeError::TooLarge { .. } => 413,
            RuntimeError::Busy(_) => 429,
            RuntimeError::Conflict(_) => 409,
            RuntimeError::Trap(_) | RuntimeError::MemoryLimit(_) | RuntimeError::Failed(_) | RuntimeError::Internal(_) => 500,
            RuntimeError::InjectedCrash => 500,
            RuntimeError::LogUnavailable(_) => 503,
            RuntimeError::Timeout(_) => 504,
        }
    }
}

impl From<LogError> for RuntimeError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::InvalidArgument(m) => RuntimeError::InvalidArgument(m),
            LogError::TooLarge { what, size, limit } => {
                RuntimeError::InvalidArgument(format!("{what} is {size} bytes, the limit is {limit}"))
            }
            LogError::Timeout(ms) => RuntimeError::Timeout(ms),
            other => RuntimeError::LogUnavailable(other.to_string()),
        }
    }
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
