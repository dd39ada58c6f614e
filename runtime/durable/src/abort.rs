//! [`Abort`], why an attempt stops inside a protocol operation, the limits and name
//! rules every operation checks first (state keys and values, books, payloads),
//! and [`CrashAfter`], the hook that stops an attempt as if its process died.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tally_log_core::{BookId, Error as LogError};

use crate::error::Error;
use crate::store::StateError;

/// The largest input or output of an exactly-once invocation: both are logged, in one
/// record each (the engine's limit is 1 MiB).
pub const PAYLOAD_MAX: usize = 960 << 10;
/// The largest state value (a logged read carries it in one record).
pub const VALUE_MAX: usize = 512 << 10;
/// The longest state key.
pub const KEY_MAX: usize = 1024;

/// Why an attempt stops inside a protocol operation.
#[derive(Debug)]
pub enum Abort {
    /// The guest's arguments were refused; the guest gets the error and goes on.
    Refused(Error),
    /// The log or the store failed; the attempt stops and the invocation runs again.
    Transient(Error),
    /// The re-execution took another path than the recorded history.
    NonDeterministic(String),
    /// This execution is a late peer of an invocation that has finished: it stops, and
    /// the invocation's logged result stands.
    Superseded,
    /// The crash-injection hook fired.
    Crash,
    /// The invocation cannot run under its ID (its key named another request, or its
    /// result is no longer kept): the attempt ends with this error, which the caller
    /// gets, also when the guest met it at a lazy start inside a host call.
    Ended(Error),
    /// The guest sleeps durably until `wake_ms` (wall clock): the attempt ends, and the
    /// invocation runs again then, replaying to the sleep.
    Suspended { wake_ms: u64 },
}

impl Abort {
    pub(crate) fn internal(message: impl Into<String>) -> Abort {
        Abort::Transient(Error::Internal(message.into()))
    }

    /// The error the attempt ends with.
    pub fn into_error(self) -> Error {
        match self {
            Abort::Refused(e) | Abort::Transient(e) | Abort::Ended(e) => e,
            Abort::NonDeterministic(m) => Error::Trap(format!("non-deterministic re-execution: {m}")),
            Abort::Superseded => Error::Superseded,
            Abort::Crash => Error::InjectedCrash,
            // The runtime names the root invocation when it answers.
            Abort::Suspended { wake_ms } => Error::Suspended { id: String::new(), wake_ms },
        }
    }
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Abort::Refused(e) | Abort::Transient(e) | Abort::Ended(e) => e.fmt(f),
            Abort::NonDeterministic(m) => write!(f, "non-deterministic re-execution: {m}"),
            Abort::Superseded => f.write_str("the invocation finished meanwhile"),
            Abort::Crash => f.write_str("injected crash"),
            Abort::Suspended { wake_ms } => write!(f, "sleeping until {wake_ms} ms after the Unix epoch"),
        }
    }
}

impl std::error::Error for Abort {}

impl From<LogError> for Abort {
    fn from(e: LogError) -> Self {
        Abort::Transient(Error::from(e))
    }
}

impl From<StateError> for Abort {
    fn from(e: StateError) -> Self {
        Abort::Transient(Error::from(e))
    }
}

impl From<Error> for Abort {
    fn from(e: Error) -> Self {
        Abort::Transient(e)
    }
}

/// Refuses a platform book where a user book is expected.
pub(crate) fn check_book(book: BookId) -> Result<(), Error> {
    if book.is_reserved() {
        return Err(Error::InvalidArgument(format!("book {:#x} is reserved for the platform", book.0)));
    }
    Ok(())
}

/// Aborts an instance after a number of effects, as if its process died there.
#[derive(Debug)]
pub struct CrashAfter(AtomicU64);

impl CrashAfter {
    pub fn new(effects: u64) -> Arc<CrashAfter> {
        Arc::new(CrashAfter(AtomicU64::new(effects)))
    }

    /// Counts one effect; true when this one is the last before the crash.
    pub(crate) fn hit(&self) -> bool {
        self.0.try_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok_and(|before| before == 1)
    }
}
