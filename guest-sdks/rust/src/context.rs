//! What the current invocation is, and durable waits: sleeps and promises.

#[cfg(not(test))]
use crate::bindings::tally::platform::context as wit;
#[cfg(test)]
use crate::fake::context as wit;

/// The invocation's ID. It stays the same when the platform runs the invocation again,
/// so it can key work that must happen once.
pub fn invocation_id() -> String {
    wit::invocation_id()
}

/// The ID of the book the invocation is bound to, which every [`log`](crate::log) call
/// acts on.
pub fn book_id() -> u64 {
    wit::book_id()
}

/// Which execution of the invocation this is: 1 for the first, then 2, 3, ... when the
/// platform runs it again.
pub fn attempt() -> u32 {
    wit::attempt()
}

/// The name the function was deployed under.
pub fn function_name() -> String {
    wit::function_name()
}

/// The key the invocation was addressed to (`?key=` on the gateway), or `None`.
///
/// An exclusive keyed invocation runs alone among the function's invocations with the
/// same key, so a function can keep per-key work (an account, a session) free of races
/// without a lock.
pub fn key() -> Option<String> {
    wit::key()
}

/// Sleeps durably for `duration` (at most a year). The wake time is logged, so a
/// re-execution of the invocation wakes at the same time, and the sleep may outlast
/// the function's time limit and node restarts: a short sleep waits in place, a long
/// one suspends the invocation (a synchronous caller gets `202` with its ID) and runs
/// it again at the wake time, which replays everything before this call and returns.
pub fn sleep(duration: std::time::Duration) -> crate::Result<()> {
    wit::sleep(millis(duration)).map_err(crate::Error::from_wit)
}

/// Sleeps durably until `time` (as [`sleep`]); a time in the past returns at once.
pub fn sleep_until(time: std::time::SystemTime) -> crate::Result<()> {
    let ms = time.duration_since(std::time::UNIX_EPOCH).map_or(0, millis);
    wit::sleep_until(ms).map_err(crate::Error::from_wit)
}

/// Creates a promise that the outside world completes once, with
/// `POST /v1/promises/{id}?book=B` and the value as the body, and returns its ID (the same
/// when the invocation runs again): hand it out (store it, append it to the log), then
/// [`promise_await`] it.
pub fn promise_create() -> crate::Result<String> {
    wit::promise_create().map_err(crate::Error::from_wit)
}

/// The value of promise `id` of this book, waiting durably for it as [`sleep`] does: a
/// long wait suspends the invocation until the completion (or the timeout) runs it
/// again. With `timeout`, fails with `Error::Timeout` once that long has passed; an
/// unknown promise is `Error::NotFound`.
pub fn promise_await(id: &str, timeout: Option<std::time::Duration>) -> crate::Result<Vec<u8>> {
    wit::promise_await(id, timeout.map(millis)).map_err(crate::Error::from_wit)
}

/// A duration in whole milliseconds, as the platform takes waits and timeouts: rounded
/// down, and `u64::MAX` (which the platform refuses as too long) for a longer one.
pub(crate) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::fake::{self, Error as WitError};
    use crate::Error;

    #[test]
    fn key_is_passed_through() {
        fake::reply(Some("alice".to_owned()));
        assert_eq!(key(), Some("alice".to_owned()));
        fake::reply(None::<String>);
        assert_eq!(key(), None);
        assert_eq!(fake::calls(), ["context.key()", "context.key()"]);
    }

    #[test]
    fn waits_take_whole_milliseconds() {
        fake::ok(());
        sleep(Duration::from_micros(2_999)).unwrap();
        fake::ok(());
        sleep(Duration::MAX).unwrap();
        fake::ok(());
        sleep_until(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)).unwrap();
        fake::ok(());
        sleep_until(UNIX_EPOCH - Duration::from_secs(1)).unwrap();
        fake::ok(b"v".to_vec());
        assert_eq!(promise_await("p1", Some(Duration::from_secs(2))), Ok(b"v".to_vec()));
        fake::err::<Vec<u8>>(WitError::Timeout("5 ms".into()));
        assert_eq!(promise_await("p1", None), Err(Error::Timeout("5 ms".into())));
        assert_eq!(
            fake::calls(),
            [
                "context.sleep(2)",
                "context.sleep(18446744073709551615)",
                "context.sleep_until(1700000000123)",
                "context.sleep_until(0)",
                "context.promise_await(\"p1\", Some(2000))",
                "context.promise_await(\"p1\", None)",
            ]
        );
    }
}
