//! Durable key-value state with exactly-once semantics (Halfmoon, SOSP '23).
//!
//! Values live under byte-string keys in named tables of the invocation's book. Every
//! operation is exactly-once across re-executions of the invocation: when the platform
//! runs a function again after a crash, with the same
//! [`invocation_id`](crate::context::invocation_id), each [`get`] returns what it
//! returned the first time and each [`put`] and [`delete`] takes effect once. Operations
//! are told apart by their order within the invocation, so a function should make the
//! same calls in the same order when it runs again: decide from the input and from what
//! the platform returns, not from clocks or randomness.
//!
//! Each table has a protocol, chosen at deploy or in the node's configuration:
//! `read-optimized` (log-free reads), `write-optimized` (log-free writes), `symmetric`
//! (logs both), `unsafe` (no logging, no guarantee) or `auto`. The protocol changes the
//! cost of each operation, not the code that calls it.
//!
//! Operations are not transactions: two invocations that read and then write the same
//! key concurrently may lose an update.
//!
//! Table names are 1 to 64 of `a-z 0-9 - _`; keys are 1 to 1024 bytes; values are at
//! most 512 KiB. Anything else is refused with [`Error::InvalidArgument`] or
//! [`Error::TooLarge`].
//!
//! ```no_run
//! use tally_sdk::state;
//!
//! // Adds 1 to the visits of a page, once per invocation however often it runs.
//! let visits = state::get_i64("pages", "index.html")?.unwrap_or(0) + 1;
//! state::put_i64("pages", "index.html", visits)?;
//! # Ok::<(), tally_sdk::Error>(())
//! ```

use crate::bindings::tally::platform::state as wit;
use crate::{Error, Result};

/// The value of `key` in `table`, or `None` if the key is absent.
pub fn get(table: &str, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
    wit::get(table, key.as_ref()).map_err(Error::from_wit)
}

/// Sets the value of `key` in `table` to `value`.
pub fn put(table: &str, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
    wit::put(table, key.as_ref(), value.as_ref()).map_err(Error::from_wit)
}

/// Removes `key` from `table`; nothing happens if it is absent.
pub fn delete(table: &str, key: impl AsRef<[u8]>) -> Result<()> {
    wit::delete(table, key.as_ref()).map_err(Error::from_wit)
}

/// The value of `key` in `table` read as an integer in decimal text, as [`put_i64`]
/// writes it, or `None` if the key is absent.
///
/// A value that is not a decimal `i64` fails with [`Error::InvalidArgument`].
pub fn get_i64(table: &str, key: impl AsRef<[u8]>) -> Result<Option<i64>> {
    let key = key.as_ref();
    match get(table, key)? {
        Some(value) => parse_i64(table, key, &value).map(Some),
        None => Ok(None),
    }
}

/// Sets the value of `key` in `table` to `value` in decimal text, which
/// [`get_i64`] reads back and other languages can read too.
pub fn put_i64(table: &str, key: impl AsRef<[u8]>, value: i64) -> Result<()> {
    put(table, key, value.to_string())
}

/// Reads a value written by [`put_i64`]; `table` and `key` only name it in the error.
fn parse_i64(table: &str, key: &[u8], value: &[u8]) -> Result<i64> {
    std::str::from_utf8(value).ok().and_then(|text| text.parse().ok()).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "the value of key \"{}\" in table {table:?} is not a decimal i64: \"{}\"",
            key.escape_ascii(),
            preview(value),
        ))
    })
}

/// The start of a value, escaped, for an error message: a value may be up to 512 KiB.
pub(crate) fn preview(value: &[u8]) -> String {
    const PREVIEW_BYTES_MAX: usize = 32;
    match value.get(..PREVIEW_BYTES_MAX) {
        Some(start) if start.len() < value.len() => format!("{}...", start.escape_ascii()),
        _ => value.escape_ascii().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(value: &[u8], expect: std::result::Result<i64, &str>) {
        let actual = parse_i64("accounts", b"alice", value);
        let expect = expect.map_err(|message| Error::InvalidArgument(message.to_owned()));
        assert_eq!(actual, expect, "value {:?}", value.escape_ascii().to_string());
    }

    #[test]
    fn parse_i64_reads_what_put_i64_writes() {
        for value in [0, 1, -1, 42, i64::MIN, i64::MAX] {
            check(value.to_string().as_bytes(), Ok(value));
        }
    }

    #[test]
    fn parse_i64_refuses_anything_else() {
        let not_i64 = |shown: &str| format!("the value of key \"alice\" in table \"accounts\" is not a decimal i64: \"{shown}\"");
        check(b"", Err(&not_i64("")));
        check(b" 1", Err(&not_i64(" 1")));
        check(b"1\n", Err(&not_i64("1\\n")));
        check(b"1.5", Err(&not_i64("1.5")));
        check(b"9223372036854775808", Err(&not_i64("9223372036854775808")));
        check(b"\xff", Err(&not_i64("\\xff")));
        check(&[b'x'; 33], Err(&not_i64(&format!("{}...", "x".repeat(32)))));
    }
}
