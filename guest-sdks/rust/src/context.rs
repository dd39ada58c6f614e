//! What the current invocation is.

use crate::bindings::tally::platform::context as wit;

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

/// Sleeps durably for `duration` (at most a year). The wake time is logged, so a
/// re-execution of the invocation wakes at the same time, and the sleep may outlast
/// the function's time limit and node restarts: a short sleep waits in place, a long
/// one suspends the invocation (a synchronous caller gets `202` with its ID) and runs
/// it again at the wake time, which replays everything before this call and returns.
pub fn sleep(duration: std::time::Duration) -> crate::Result<()> {
    wit::sleep(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)).map_err(crate::Error::from_wit)
}

/// Sleeps durably until `time` (as [`sleep`]); a time in the past returns at once.
pub fn sleep_until(time: std::time::SystemTime) -> crate::Result<()> {
    let ms = time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
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
    let timeout_ms = timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
    wit::promise_await(id, timeout_ms).map_err(crate::Error::from_wit)
}
