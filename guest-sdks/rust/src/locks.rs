//! Locks of the invocation's book (BokiFlow, Boki §5.1).
//!
//! A lock is named by a string (1 to 256 bytes) and held by one invocation at a time.
//! A holder that crashes keeps it while the platform runs it again, and an invocation's
//! locks are released when it finishes, whatever its outcome, so a lock is never left
//! behind.
//!
//! ```no_run
//! use std::time::Duration;
//! use tally_sdk::locks;
//!
//! if locks::acquire("report", Duration::from_secs(5))? {
//!     // ... only one invocation at a time gets here ...
//!     locks::release("report")?;
//! }
//! # Ok::<(), tally_sdk::Error>(())
//! ```

#[cfg(not(test))]
use crate::bindings::tally::platform::locks as wit;
#[cfg(test)]
use crate::fake::locks as wit;

use crate::context::millis;
use crate::{Error, Result};

/// Acquires `lock` for this invocation, waiting up to `timeout` (in whole milliseconds,
/// at most the function's time limit) while another invocation holds it: `false` if
/// the wait timed out. A lock this invocation holds already is `true` at once.
pub fn acquire(lock: &str, timeout: std::time::Duration) -> Result<bool> {
    wit::acquire(lock, millis(timeout)).map_err(Error::from_wit)
}

/// Releases `lock`; [`Error::InvalidArgument`] if this invocation does not hold it.
pub fn release(lock: &str) -> Result<()> {
    wit::release(lock).map_err(Error::from_wit)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fake::{self, Error as WitError};

    #[test]
    fn calls_pass_their_arguments() {
        fake::ok(true);
        assert_eq!(acquire("report", Duration::from_secs(5)), Ok(true));
        fake::ok(false);
        assert_eq!(acquire("report", Duration::from_micros(999)), Ok(false));
        fake::ok(());
        release("report").unwrap();
        assert_eq!(
            fake::calls(),
            ["locks.acquire(\"report\", 5000)", "locks.acquire(\"report\", 0)", "locks.release(\"report\")"]
        );
    }

    #[test]
    fn host_errors_become_sdk_errors() {
        fake::err::<()>(WitError::InvalidArgument("not held".into()));
        assert_eq!(release("report"), Err(Error::InvalidArgument("not held".into())));
        fake::err::<bool>(WitError::Unavailable("log".into()));
        assert_eq!(acquire("report", Duration::ZERO), Err(Error::Unavailable("log".into())));
        assert_eq!(fake::calls(), ["locks.release(\"report\")", "locks.acquire(\"report\", 0)"]);
    }
}
