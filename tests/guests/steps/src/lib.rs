//! A function of several exactly-once steps, for the host's crash-injection tests: a
//! crash at any point and a re-execution must leave each counter incremented once.
//!
//! | input                     | behaviour                                              |
//! |---------------------------|--------------------------------------------------------|
//! | `run <table> [sleep_ms]`  | the steps below; returns `a=<a> b=<b> c=<c>`, the new values |
//! | `child <table>`           | increments `c`; returns its new value                  |
//! | `read <table> <key>`      | returns the key's value as stored, or `none`           |
//! | `script <op>;<op>;...`    | runs the ops in order; returns their results joined by `,` |
//!
//! Script ops. State (for randomized tests that compare with a model); an error of the
//! platform fails the script:
//!
//! | op              | does                                              | result            |
//! |-----------------|---------------------------------------------------|-------------------|
//! | `get T K`       | reads key `K` of table `T`                        | the value or `none` |
//! | `put T K V`     | sets it to `V`                                    | `ok`              |
//! | `del T K`       | deletes it                                        | `ok`              |
//! | `inc T K`       | adds 1 to the counter                             | the new value     |
//! | `child T K`     | calls this function with `script inc T K`         | the child's output |
//!
//! Calls and the log (for tests of what the platform refuses); an error of the platform
//! is the op's result, `error:<code>` (`invalid_argument`, `not_found`, `conflict`,
//! `unavailable`, `too_large`, `timeout`, `failed`), so a script can go on and branch
//! on it:
//!
//! | op                  | does                                                  | result        |
//! |---------------------|-------------------------------------------------------|---------------|
//! | `call F INPUT...`   | calls function `F` with the op's other words as input | its output    |
//! | `append NAME DATA`  | appends `DATA` to the stream of `Tag::named(NAME)`    | the seqnum    |
//! | `next NAME S`       | reads the first record of that stream at or after `S` | `<seqnum>:<data>:<aux or none>`, or `none` |
//! | `aux S DATA`        | sets the aux data of record `S` to `DATA`             | `ok`          |
//! | `trim0 S`           | trims the whole book (`Tag::ALL`) before `S`          | `ok`          |
//! | `sleep MS`          | sleeps `MS` milliseconds                              | `ok`          |
//!
//! A word `$N` in an op stands for the result of op `N` (counting from 1), so
//! `call f x; put t k $1` stores what the call returned, its error included.
//!
//! `run` takes four steps, sleeping `sleep_ms` between them when given, so that two
//! concurrent invocations overlap:
//!
//! 1. increments `a` (a `get` and a `put`);
//! 2. calls itself with `child <table>`, which increments `c`;
//! 3. increments `b`;
//! 4. puts `tmp` and deletes it again.
//!
//! Counters are `i64` in decimal text, 0 when absent. Anything else is an error.

use std::time::Duration;

use tally_sdk::{context, invoke, log, state, SeqNum, Tag};

fn handle(input: Vec<u8>) -> Result<Vec<u8>, String> {
    let input = std::str::from_utf8(&input).map_err(|_| "the input is not UTF-8")?;
    let words: Vec<&str> = input.split_whitespace().collect();
    match words[..] {
        ["run", table] => run(table, None),
        ["run", table, sleep_ms] => {
            let sleep_ms = sleep_ms.parse().map_err(|_| format!("sleep_ms {sleep_ms:?} is not a u64"))?;
            run(table, Some(Duration::from_millis(sleep_ms)))
        }
        ["child", table] => Ok(increment(table, "c")?.to_string().into_bytes()),
        ["script", ..] => script(input.trim_start().strip_prefix("script").unwrap_or_default()),
        ["read", table, key] => {
            let value = state::get(table, key).map_err(|error| error.to_string())?;
            Ok(value.unwrap_or_else(|| b"none".to_vec()))
        }
        _ => Err(format!(
            "expected `run <table> [sleep_ms]`, `child <table>` or `read <table> <key>`, \
             found {input:?}"
        )),
    }
}

tally_sdk::handler!(handle);

/// Takes the four steps of `run`, with a pause between them if `pause` is given.
fn run(table: &str, pause: Option<Duration>) -> Result<Vec<u8>, String> {
    let pause = || {
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
    };

    let a = increment(table, "a")?;
    pause();

    // Calling the name this function was deployed under keeps the test independent of
    // how it is deployed.
    let output = invoke::call(&context::function_name(), format!("child {table}")).map_err(|error| error.to_string())?;
    let c: i64 = std::str::from_utf8(&output)
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("the child returned {:?}, not a decimal i64", String::from_utf8_lossy(&output)))?;
    pause();

    let b = increment(table, "b")?;
    pause();

    state::put(table, "tmp", "x").map_err(|error| error.to_string())?;
    state::delete(table, "tmp").map_err(|error| error.to_string())?;

    Ok(format!("a={a} b={b} c={c}").into_bytes())
}

/// Runs a `;`-separated script of ops (see the module doc).
fn script(ops: &str) -> Result<Vec<u8>, String> {
    let err = |error: tally_sdk::Error| error.to_string();
    let mut results: Vec<String> = Vec::new();
    for op in ops.split(';').map(str::trim).filter(|op| !op.is_empty()) {
        let words = op.split_whitespace().map(|word| substitute(word, &results)).collect::<Result<Vec<_>, _>>()?;
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let result = match words[..] {
            ["get", table, key] => match state::get(table, key).map_err(err)? {
                Some(value) => String::from_utf8_lossy(&value).into_owned(),
                None => "none".into(),
            },
            ["put", table, key, value] => {
                state::put(table, key, value).map_err(err)?;
                "ok".into()
            }
            ["del", table, key] => {
                state::delete(table, key).map_err(err)?;
                "ok".into()
            }
            ["inc", table, key] => increment(table, key)?.to_string(),
            ["child", table, key] => {
                let output = invoke::call(&context::function_name(), format!("script inc {table} {key}")).map_err(err)?;
                String::from_utf8_lossy(&output).into_owned()
            }
            ["call", function, ref input @ ..] => {
                reported(invoke::call(function, input.join(" ")).map(|output| String::from_utf8_lossy(&output).into_owned()))
            }
            ["append", name, data] => reported(log::append(&[Tag::named(name)], data).map(|seqnum| seqnum.to_string())),
            ["next", name, from] => reported(log::read_next(Tag::named(name), seqnum(from)?).map(|record| match record {
                Some(record) => format!(
                    "{}:{}:{}",
                    record.seqnum,
                    String::from_utf8_lossy(&record.data),
                    record.aux.map_or_else(|| "none".into(), |aux| String::from_utf8_lossy(&aux).into_owned())
                ),
                None => "none".into(),
            })),
            ["aux", at, data] => reported(log::set_aux_data(seqnum(at)?, data).map(|()| "ok".into())),
            ["trim0", before] => reported(log::trim(Tag::ALL, seqnum(before)?).map(|()| "ok".into())),
            ["sleep", ms] => {
                let ms = ms.parse().map_err(|_| format!("sleep {ms:?}: not a u64"))?;
                std::thread::sleep(Duration::from_millis(ms));
                "ok".into()
            }
            _ => return Err(format!("unknown script op {op:?}")),
        };
        results.push(result);
    }
    Ok(results.join(",").into_bytes())
}

/// `word`, or for `$N` the result of op `N` so far.
fn substitute(word: &str, results: &[String]) -> Result<String, String> {
    let Some(n) = word.strip_prefix('$') else {
        return Ok(word.to_string());
    };
    n.parse::<usize>()
        .ok()
        .and_then(|n| results.get(n.checked_sub(1)?))
        .cloned()
        .ok_or_else(|| format!("{word}: no such earlier op (ops count from 1)"))
}

fn seqnum(word: &str) -> Result<SeqNum, String> {
    word.parse().map_err(|_| format!("{word:?} is not a seqnum"))
}

/// An op's result with a platform error as `error:<code>`.
fn reported(result: tally_sdk::Result<String>) -> String {
    use tally_sdk::Error;
    match result {
        Ok(result) => result,
        Err(error) => {
            let code = match error {
                Error::InvalidArgument(_) => "invalid_argument",
                Error::NotFound(_) => "not_found",
                Error::Conflict { .. } => "conflict",
                Error::Unavailable(_) => "unavailable",
                Error::TooLarge(_) => "too_large",
                Error::Timeout(_) => "timeout",
                Error::Failed(_) => "failed",
            };
            format!("error:{code}")
        }
    }
}

/// Adds 1 to the counter `key` in `table` and returns its new value.
fn increment(table: &str, key: &str) -> Result<i64, String> {
    let value = state::get_i64(table, key)
        .map_err(|error| error.to_string())?
        .unwrap_or(0)
        .checked_add(1)
        .ok_or_else(|| format!("the counter {key:?} in table {table:?} overflows an i64"))?;
    state::put_i64(table, key, value).map_err(|error| error.to_string())?;
    Ok(value)
}
