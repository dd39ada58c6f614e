//! Durable FIFO queues of the invocation's book (BokiQueue, Boki §5.3).
//!
//! A queue is named by a string (1 to 256 bytes) and split into shards: the messages
//! one invocation pushes go to one shard, in order, and each shard is first in, first
//! out. Every message is popped exactly once, by one invocation, whatever crashes and
//! re-executions happen; a re-execution's [`pop`] returns what the first execution's
//! did.
//!
//! ```no_run
//! use std::time::Duration;
//! use tally_sdk::queues;
//!
//! // A producer.
//! queues::push("jobs", "resize photo-17.jpg")?;
//!
//! // A consumer, waiting up to a second for a job.
//! if let Some(job) = queues::pop("jobs", Duration::from_secs(1))? {
//!     println!("working on {}", String::from_utf8_lossy(&job));
//! }
//!
//! // A consumer of up to eight jobs at a time, with one record of the log.
//! for job in queues::pop_many("jobs", 8, Duration::from_secs(1))? {
//!     println!("working on {}", String::from_utf8_lossy(&job));
//! }
//! # Ok::<(), tally_sdk::Error>(())
//! ```

#[cfg(not(test))]
use crate::bindings::tally::platform::queues as wit;
#[cfg(test)]
use crate::fake::queues as wit;

use crate::context::millis;
use crate::{Error, Result};

/// Pushes `message` (at most 512 KiB) to `queue`.
pub fn push(queue: &str, message: impl AsRef<[u8]>) -> Result<()> {
    wit::push(queue, message.as_ref()).map_err(Error::from_wit)
}

/// Pops the oldest message of one of the shards of `queue`, this invocation's own
/// shard first, or `None` if the queue stayed empty for `timeout`.
///
/// The wait does not spin, and `timeout` (in whole milliseconds) is at most the
/// function's time limit; `Duration::ZERO` looks once without waiting.
pub fn pop(queue: &str, timeout: std::time::Duration) -> Result<Option<Vec<u8>>> {
    wit::pop(queue, millis(timeout)).map_err(Error::from_wit)
}

/// Pops up to `max` (1 to 100) of the oldest messages of one of the shards of `queue`,
/// in order, with one record of the log (where `max` pops would log `max`): waits up
/// to `timeout` for the first, as [`pop`] does, then takes what that shard holds, up
/// to `max`. Empty if the queue stayed empty.
pub fn pop_many(queue: &str, max: u32, timeout: std::time::Duration) -> Result<Vec<Vec<u8>>> {
    wit::pop_many(queue, max, millis(timeout)).map_err(Error::from_wit)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fake::{self, Error as WitError};

    #[test]
    fn calls_pass_their_arguments() {
        fake::ok(());
        push("jobs", "job 1").unwrap();
        fake::ok(());
        push("jobs", [0u8, 255]).unwrap();
        fake::ok(Some(b"job 1".to_vec()));
        assert_eq!(pop("jobs", Duration::from_millis(1_500)), Ok(Some(b"job 1".to_vec())));
        fake::ok(None::<Vec<u8>>);
        assert_eq!(pop("jobs", Duration::ZERO), Ok(None));
        fake::ok(vec![b"job 2".to_vec(), b"job 3".to_vec()]);
        assert_eq!(pop_many("jobs", 8, Duration::from_millis(20)), Ok(vec![b"job 2".to_vec(), b"job 3".to_vec()]));
        assert_eq!(
            fake::calls(),
            [
                "queues.push(\"jobs\", [106, 111, 98, 32, 49])",
                "queues.push(\"jobs\", [0, 255])",
                "queues.pop(\"jobs\", 1500)",
                "queues.pop(\"jobs\", 0)",
                "queues.pop_many(\"jobs\", 8, 20)",
            ]
        );
    }

    #[test]
    fn host_errors_become_sdk_errors() {
        fake::err::<()>(WitError::TooLarge("message".into()));
        assert_eq!(push("jobs", vec![0; 10]), Err(Error::TooLarge("message".into())));
        fake::err::<Option<Vec<u8>>>(WitError::InvalidArgument("timeout past the time limit".into()));
        assert_eq!(pop("jobs", Duration::MAX), Err(Error::InvalidArgument("timeout past the time limit".into())));
        assert_eq!(
            fake::calls(),
            ["queues.push(\"jobs\", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0])", "queues.pop(\"jobs\", 18446744073709551615)"]
        );
    }
}
