//! Durable JSON objects with transactions across them (BokiStore, Boki §5.2).
//!
//! An object of the invocation's book is named by a string (1 to 256 bytes) and holds
//! one JSON value, `null` until it is first written. Values go in and out as JSON text:
//! [`get`] returns it, [`set`] and [`push`] take it, and [`json_string`] quotes a
//! string for them. Paths are JSON pointers (RFC 6901): `""` is the whole object,
//! `"/a/0/b~1c"` is field `b/c` of element 0 of field `a`. Writes make missing parent
//! objects.
//!
//! Every call is exactly-once across re-executions of the invocation, as in
//! [`state`](crate::state): a read returns what it returned the first time, a write
//! takes effect once. So make the same calls in the same order when the invocation runs
//! again: decide from the input and from what the platform returns.
//!
//! Outside a transaction, a read sees the object as of the invocation's last logged
//! step (its own writes included), and each write is logged on its own. In a
//! transaction ([`transaction`], or [`begin`] ... [`commit`]), reads see one snapshot of
//! every object of the book, taken when it began, with the transaction's own writes, and
//! writes are buffered until the commit, which logs them in one record. Transactions
//! are serializable: one commits exactly when no object it read was written by someone
//! else since it began; otherwise nothing of it takes effect and it can run again.
//! Objects written but not read never conflict: [`increment`] and [`push`] apply to
//! whatever the field holds when the commit is applied.
//!
//! An operation that does not fit the object as the caller sees it (incrementing a
//! string) fails with [`Error::InvalidArgument`]; one that stops fitting because of a
//! concurrent write does nothing.
//!
//! ```no_run
//! use tally_sdk::objects;
//!
//! // Moves 10 from alice to bob, unless alice has less: the read of alice's balance
//! // and both writes take effect together or not at all.
//! let moved = objects::transaction(|| -> tally_sdk::Result<bool> {
//!     let balance = objects::get_i64("accounts", "/alice")?.unwrap_or(0);
//!     if balance < 10 {
//!         return Ok(false);
//!     }
//!     objects::increment("accounts", "/alice", -10)?;
//!     objects::increment("accounts", "/bob", 10)?;
//!     Ok(true)
//! })?;
//! match moved {
//!     Some(true) => println!("moved"),
//!     Some(false) => println!("alice has less than 10"),
//!     None => println!("other transfers conflicted with every attempt"),
//! }
//! # Ok::<(), tally_sdk::Error>(())
//! ```

#[cfg(not(test))]
use crate::bindings::tally::platform::objects as wit;
#[cfg(test)]
use crate::fake::objects as wit;

use crate::{Error, Result};

/// The JSON text at `path` of `object`, or `None` if nothing is there.
pub fn get(object: &str, path: &str) -> Result<Option<String>> {
    wit::get(object, path).map_err(Error::from_wit)
}

/// The integer at `path` of `object`, as [`increment`] keeps it, or `None` if nothing
/// is there.
///
/// Anything but a JSON integer that fits an `i64` (a string, `1.5`, `1e3`) fails with
/// [`Error::InvalidArgument`].
pub fn get_i64(object: &str, path: &str) -> Result<Option<i64>> {
    match get(object, path)? {
        Some(json) => parse_i64(object, path, &json).map(Some),
        None => Ok(None),
    }
}

/// Sets the value at `path` of `object` to `json`, a JSON text (`"1"`, `"\"text\""`,
/// `"{\"a\":[]}"`).
pub fn set(object: &str, path: &str, json: &str) -> Result<()> {
    wit::set(object, path, json).map_err(Error::from_wit)
}

/// Sets the value at `path` of `object` to an empty JSON object, `{}`.
pub fn make_object(object: &str, path: &str) -> Result<()> {
    set(object, path, "{}")
}

/// Sets the value at `path` of `object` to an empty JSON array, `[]`.
pub fn make_array(object: &str, path: &str) -> Result<()> {
    set(object, path, "[]")
}

/// Adds `by` (which may be negative) to the number at `path` of `object`, 0 when
/// missing; integers saturate at the bounds of an `i64`.
pub fn increment(object: &str, path: &str, by: i64) -> Result<()> {
    wit::increment(object, path, by).map_err(Error::from_wit)
}

/// Appends `json`, a JSON text, to the array at `path` of `object` (an empty one when
/// missing).
pub fn push(object: &str, path: &str, json: &str) -> Result<()> {
    wit::push(object, path, json).map_err(Error::from_wit)
}

/// Removes the field or array element at `path` of `object`; `""` empties the object,
/// as if it had never been written.
pub fn remove(object: &str, path: &str) -> Result<()> {
    wit::remove(object, path).map_err(Error::from_wit)
}

/// `text` as a JSON string, quoted and escaped, for [`set`] and [`push`].
///
/// ```
/// assert_eq!(tally_sdk::objects::json_string("say \"hi\"\n"), r#""say \"hi\"\n""#);
/// ```
pub fn json_string(text: &str) -> String {
    let mut json = String::with_capacity(text.len() + 2);
    json.push('"');
    for c in text.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            '\n' => json.push_str("\\n"),
            '\r' => json.push_str("\\r"),
            '\t' => json.push_str("\\t"),
            '\u{08}' => json.push_str("\\b"),
            '\u{0c}' => json.push_str("\\f"),
            c if c < ' ' => json.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => json.push(c),
        }
    }
    json.push('"');
    json
}

/// Begins a read-write transaction: until [`commit`] or [`abort`], reads see one
/// snapshot of every object and writes are buffered. One transaction at a time: a
/// second `begin` fails with [`Error::InvalidArgument`].
///
/// [`transaction`] runs a closure in one, retrying on conflicts; use this pair for
/// control flow a closure does not fit.
pub fn begin() -> Result<()> {
    wit::begin(false).map_err(Error::from_wit)
}

/// Begins a read-only transaction: reads see one snapshot of every object, writes fail
/// with [`Error::InvalidArgument`], and [`commit`] always returns `true`. See also
/// [`read_only`].
pub fn begin_read_only() -> Result<()> {
    wit::begin(true).map_err(Error::from_wit)
}

/// Ends the transaction: `true` if it committed (its writes took effect), `false` if it
/// conflicted (none did). Either way no transaction is in progress afterwards, and also
/// when the call fails.
pub fn commit() -> Result<bool> {
    wit::commit().map_err(Error::from_wit)
}

/// Drops the transaction: none of its writes take effect.
pub fn abort() -> Result<()> {
    wit::abort().map_err(Error::from_wit)
}

/// Runs `body` in a read-write transaction, again while it conflicts, up to
/// [`Transaction::ATTEMPTS_MAX_DEFAULT`] times: `Some` of the body's value from the
/// attempt that committed, or `None` if every attempt conflicted.
///
/// An error from `body` aborts the transaction and is returned as it is, without
/// another attempt; so is an error of the platform's (from [`begin`] or [`commit`]),
/// converted with `From`. The body may return the SDK's [`Error`] or any error type that
/// converts from it (`anyhow::Error`, an enum of the function's own), which lets it
/// abort for a reason of its own; annotate the closure's return type to name it. Each
/// attempt runs `body` from the start, so it should decide only from what it reads in
/// the transaction. See [`Transaction`] for another number of attempts.
pub fn transaction<T, E: From<Error>>(body: impl FnMut() -> std::result::Result<T, E>) -> std::result::Result<Option<T>, E> {
    Transaction::new().run(body)
}

/// Runs `body` in a read-only transaction and returns its value: every read sees one
/// snapshot of the book's objects. A write fails with [`Error::InvalidArgument`].
///
/// An error from `body` aborts the transaction and is returned as it is; an error of
/// the platform's is converted with `From`, as for [`transaction`].
///
/// # Panics
///
/// If the platform says the transaction conflicted, which a read-only one never does.
pub fn read_only<T, E: From<Error>>(body: impl FnOnce() -> std::result::Result<T, E>) -> std::result::Result<T, E> {
    begin_read_only()?;
    let value = body_or_abort(body)?;
    assert!(commit()?, "the platform says a read-only transaction conflicted, which it never does");
    Ok(value)
}

/// How [`Transaction::run`] runs a transaction; [`transaction`] is
/// `Transaction::new().run`.
///
/// ```no_run
/// use tally_sdk::objects::{self, Transaction};
///
/// // Takes a widget from the stock if there is one left, giving up after 3 attempts
/// // instead of the default 10 when other orders keep conflicting.
/// let taken = Transaction::new().attempts_max(3).run(|| -> tally_sdk::Result<bool> {
///     if objects::get_i64("stock", "/widgets")?.unwrap_or(0) == 0 {
///         return Ok(false);
///     }
///     objects::increment("stock", "/widgets", -1)?;
///     Ok(true)
/// })?;
/// # Ok::<(), tally_sdk::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transaction {
    attempts_max: u32,
}

impl Transaction {
    /// How many times [`transaction`] runs a body that keeps conflicting.
    pub const ATTEMPTS_MAX_DEFAULT: u32 = 10;

    /// Runs up to [`ATTEMPTS_MAX_DEFAULT`](Self::ATTEMPTS_MAX_DEFAULT) attempts.
    pub const fn new() -> Transaction {
        Transaction { attempts_max: Self::ATTEMPTS_MAX_DEFAULT }
    }

    /// Runs up to `attempts_max` attempts.
    ///
    /// # Panics
    ///
    /// If `attempts_max` is 0.
    pub const fn attempts_max(self, attempts_max: u32) -> Transaction {
        assert!(attempts_max > 0, "a transaction makes at least one attempt");
        Transaction { attempts_max }
    }

    /// Runs `body` in a read-write transaction, again while it conflicts, as
    /// [`transaction`] does.
    pub fn run<T, E: From<Error>>(
        self,
        mut body: impl FnMut() -> std::result::Result<T, E>,
    ) -> std::result::Result<Option<T>, E> {
        for _ in 0..self.attempts_max {
            begin()?;
            let value = body_or_abort(&mut body)?;
            if commit()? {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }
}

impl Default for Transaction {
    fn default() -> Transaction {
        Transaction::new()
    }
}

/// Runs the body of a transaction in progress, aborting the transaction on an error.
///
/// The body's error is returned even if the abort fails too: it is the cause, and the
/// abort fails only when no transaction is in progress, because the body ended it.
fn body_or_abort<T, E>(body: impl FnOnce() -> std::result::Result<T, E>) -> std::result::Result<T, E> {
    body().inspect_err(|_| {
        let _ = abort();
    })
}

/// Reads the text [`get_i64`] got; `object` and `path` only name it in the error.
fn parse_i64(object: &str, path: &str, json: &str) -> Result<i64> {
    json.parse().map_err(|_| {
        Error::InvalidArgument(format!(
            "the value at {path:?} of object {object:?} is not an integer that fits an i64: {}",
            crate::state::preview(json.as_bytes()),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{self, Error as WitError};

    #[test]
    fn calls_pass_their_arguments() {
        fake::ok(Some("{\"a\":1}".to_owned()));
        assert_eq!(get("o", ""), Ok(Some("{\"a\":1}".to_owned())));
        fake::ok(None::<String>);
        assert_eq!(get("o", "/b"), Ok(None));
        fake::ok(());
        set("o", "/a~1b/0", "[1]").unwrap();
        fake::ok(());
        increment("o", "/n", -3).unwrap();
        fake::ok(());
        push("o", "/list", "\"x\"").unwrap();
        fake::ok(());
        remove("o", "/list/0").unwrap();
        fake::ok(());
        begin().unwrap();
        fake::ok(());
        begin_read_only().unwrap();
        fake::ok(false);
        assert_eq!(commit(), Ok(false));
        fake::ok(());
        abort().unwrap();
        assert_eq!(
            fake::calls(),
            [
                "objects.get(\"o\", \"\")",
                "objects.get(\"o\", \"/b\")",
                "objects.set(\"o\", \"/a~1b/0\", \"[1]\")",
                "objects.increment(\"o\", \"/n\", -3)",
                "objects.push(\"o\", \"/list\", \"\\\"x\\\"\")",
                "objects.remove(\"o\", \"/list/0\")",
                "objects.begin(false)",
                "objects.begin(true)",
                "objects.commit()",
                "objects.abort()",
            ]
        );
    }

    #[test]
    fn conveniences_set_empty_containers() {
        fake::ok(());
        make_object("o", "/m").unwrap();
        fake::ok(());
        make_array("o", "").unwrap();
        assert_eq!(fake::calls(), ["objects.set(\"o\", \"/m\", \"{}\")", "objects.set(\"o\", \"\", \"[]\")"]);
    }

    #[test]
    fn host_errors_become_sdk_errors() {
        fake::err::<Option<String>>(WitError::InvalidArgument("bad pointer".into()));
        assert_eq!(get("o", "a"), Err(Error::InvalidArgument("bad pointer".into())));
        fake::err::<()>(WitError::TooLarge("object".into()));
        assert_eq!(set("o", "", "1"), Err(Error::TooLarge("object".into())));
        fake::err::<bool>(WitError::Unavailable("no quorum".into()));
        assert_eq!(commit(), Err(Error::Unavailable("no quorum".into())));
        fake::calls();
    }

    fn check_get_i64(json: Option<&str>, expect: std::result::Result<Option<i64>, &str>) {
        fake::ok(json.map(str::to_owned));
        let expect = expect.map_err(|message| Error::InvalidArgument(message.to_owned()));
        assert_eq!(get_i64("stats", "/n"), expect, "JSON {json:?}");
        assert_eq!(fake::calls(), ["objects.get(\"stats\", \"/n\")"]);
    }

    #[test]
    fn get_i64_reads_integers_only() {
        let not_i64 =
            |shown: &str| format!("the value at \"/n\" of object \"stats\" is not an integer that fits an i64: {shown}");
        check_get_i64(None, Ok(None));
        check_get_i64(Some("42"), Ok(Some(42)));
        check_get_i64(Some("-9223372036854775808"), Ok(Some(i64::MIN)));
        check_get_i64(Some("1.5"), Err(&not_i64("1.5")));
        check_get_i64(Some("1e3"), Err(&not_i64("1e3")));
        check_get_i64(Some("\"7\""), Err(&not_i64("\\\"7\\\"")));
        check_get_i64(Some("9223372036854775808"), Err(&not_i64("9223372036854775808")));
    }

    #[test]
    fn json_string_escapes_what_json_requires() {
        let check = |text: &str, expect: &str| assert_eq!(json_string(text), expect, "text {text:?}");
        check("", r#""""#);
        check("plain ünïcode ☃", r#""plain ünïcode ☃""#);
        check("a\"b\\c/d", r#""a\"b\\c/d""#);
        check("\n\r\t\u{08}\u{0c}", r#""\n\r\t\b\f""#);
        check("\u{00}\u{1f}\u{7f}", "\"\\u0000\\u001f\u{7f}\"");
    }

    #[test]
    fn transaction_runs_again_while_it_conflicts() {
        let mut attempts = 0;
        for committed in [false, false, true] {
            fake::ok(());
            fake::ok(Some("5".to_owned()));
            fake::ok(());
            fake::ok(committed);
        }
        let result = transaction(|| -> Result<i64> {
            attempts += 1;
            let n = get_i64("o", "/n")?.unwrap_or(0);
            set("o", "/m", &n.to_string())?;
            Ok(n * 2)
        });
        assert_eq!(result, Ok(Some(10)));
        assert_eq!(attempts, 3);
        let attempt =
            ["objects.begin(false)", "objects.get(\"o\", \"/n\")", "objects.set(\"o\", \"/m\", \"5\")", "objects.commit()"];
        assert_eq!(fake::calls(), attempt.repeat(3));
    }

    #[test]
    fn transaction_gives_up_after_its_attempts() {
        for _ in 0..2 {
            fake::ok(());
            fake::ok(());
            fake::ok(false);
        }
        let result = Transaction::new().attempts_max(2).run(|| increment("o", "/n", 1));
        assert_eq!(result, Ok(None));
        let attempt = ["objects.begin(false)", "objects.increment(\"o\", \"/n\", 1)", "objects.commit()"];
        assert_eq!(fake::calls(), attempt.repeat(2));
    }

    #[test]
    fn transaction_default_attempts() {
        for _ in 0..Transaction::ATTEMPTS_MAX_DEFAULT {
            fake::ok(());
            fake::ok(false);
        }
        assert_eq!(transaction(|| -> Result<()> { Ok(()) }), Ok(None));
        assert_eq!(fake::calls().len(), 2 * Transaction::ATTEMPTS_MAX_DEFAULT as usize);
        assert_eq!(Transaction::default(), Transaction::new());
    }

    #[test]
    #[should_panic(expected = "a transaction makes at least one attempt")]
    fn transaction_makes_at_least_one_attempt() {
        let _ = Transaction::new().attempts_max(0);
    }

    /// A reason of the function's own to abort a transaction, next to the platform's.
    #[derive(Debug, PartialEq)]
    enum Refusal {
        TooPoor(i64),
        Platform(Error),
    }

    impl From<Error> for Refusal {
        fn from(error: Error) -> Refusal {
            Refusal::Platform(error)
        }
    }

    #[test]
    fn an_error_of_the_body_aborts_without_another_attempt() {
        fake::ok(());
        fake::ok(Some("3".to_owned()));
        fake::ok(());
        let result = transaction(|| {
            let balance = get_i64("accounts", "/alice")?.unwrap_or(0);
            if balance < 10 {
                return Err(Refusal::TooPoor(balance));
            }
            Ok(())
        });
        assert_eq!(result, Err(Refusal::TooPoor(3)));
        assert_eq!(fake::calls(), ["objects.begin(false)", "objects.get(\"accounts\", \"/alice\")", "objects.abort()"]);

        // A platform error in the body aborts too, and the body's error wins over the
        // abort's.
        fake::ok(());
        fake::err::<()>(WitError::InvalidArgument("not a number".into()));
        fake::err::<()>(WitError::InvalidArgument("no transaction is in progress".into()));
        let result = transaction(|| increment("o", "/name", 1));
        assert_eq!(result, Err(Error::InvalidArgument("not a number".into())));
        assert_eq!(fake::calls(), ["objects.begin(false)", "objects.increment(\"o\", \"/name\", 1)", "objects.abort()"]);
    }

    #[test]
    fn platform_errors_end_a_transaction_run() {
        fake::err::<()>(WitError::InvalidArgument("a transaction is in progress already".into()));
        let result = transaction(|| -> std::result::Result<(), Refusal> { panic!("the body ran without a transaction") });
        assert_eq!(result, Err(Refusal::Platform(Error::InvalidArgument("a transaction is in progress already".into()))));
        assert_eq!(fake::calls(), ["objects.begin(false)"]);

        // The commit ended the transaction even though it failed: nothing to abort.
        fake::ok(());
        fake::err::<bool>(WitError::Unavailable("log".into()));
        assert_eq!(transaction(|| -> Result<()> { Ok(()) }), Err(Error::Unavailable("log".into())));
        assert_eq!(fake::calls(), ["objects.begin(false)", "objects.commit()"]);
    }

    #[test]
    fn read_only_reads_one_snapshot() {
        fake::ok(());
        fake::ok(Some("1".to_owned()));
        fake::ok(Some("2".to_owned()));
        fake::ok(true);
        let result = read_only(|| -> Result<_> { Ok((get_i64("a", "")?, get_i64("b", "")?)) });
        assert_eq!(result, Ok((Some(1), Some(2))));
        assert_eq!(
            fake::calls(),
            ["objects.begin(true)", "objects.get(\"a\", \"\")", "objects.get(\"b\", \"\")", "objects.commit()"]
        );

        fake::ok(());
        fake::err::<()>(WitError::InvalidArgument("the transaction is read-only".into()));
        fake::ok(());
        assert_eq!(read_only(|| set("a", "", "1")), Err(Error::InvalidArgument("the transaction is read-only".into())));
        assert_eq!(fake::calls(), ["objects.begin(true)", "objects.set(\"a\", \"\", \"1\")", "objects.abort()"]);
    }
}
