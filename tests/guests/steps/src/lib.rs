//! A function of several exactly-once steps, for the host's crash-injection tests: a
//! crash at any point and a re-execution must leave each counter incremented once.
//!
//! This is the reference of `tests/guests/STEPS.md`, which the `steps` guest of every SDK
//! language implements: `run`, `child`, `read` and a `script` of ops over the SDK's
//! calls, so that the host's tests give every language the same inputs and compare the
//! outputs.

use std::time::Duration;

use tally_sdk::{context, invoke, locks, log, objects, queues, state, SeqNum, Tag};

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

/// Runs a `;`-separated script of ops (STEPS.md).
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
            ["append", names, data] => reported(log::append(&tags(names), data).map(|seqnum| seqnum.to_string())),
            ["rawappend", tag, data] => {
                let tag = tag.parse().map_err(|_| format!("{tag:?} is not a tag number"))?;
                reported(log::append(&[Tag::new(tag)], data).map(|seqnum| seqnum.to_string()))
            }
            ["cond", name, position, data] => {
                let position = position.parse().map_err(|_| format!("{position:?} is not a position"))?;
                let tag = named(name);
                let tags: &[Tag] = if tag == Tag::ALL { &[] } else { &[tag] };
                reported(log::cond_append(tags, data, tag, position).map(|seqnum| seqnum.to_string()))
            }
            ["next", name, from] => reported(log::read_next(named(name), seqnum(from)?).map(shown)),
            ["prev", name, upto] => reported(log::read_prev(named(name), seqnum(upto)?).map(shown)),
            ["tail", name] => reported(log::check_tail(named(name)).map(shown)),
            ["tags", name, from] => reported(log::read_next(named(name), seqnum(from)?).map(|record| match record {
                Some(record) if record.tags.is_empty() => "-".into(),
                Some(record) => record.tags.iter().map(Tag::to_string).collect::<Vec<_>>().join("+"),
                None => "none".into(),
            })),
            ["aux", at, data] => reported(log::set_aux_data(seqnum(at)?, data).map(|()| "ok".into())),
            ["trim", name, before] => reported(log::trim(named(name), seqnum(before)?).map(|()| "ok".into())),
            ["trim0", before] => reported(log::trim(Tag::ALL, seqnum(before)?).map(|()| "ok".into())),
            ["tag", name] => named(name).to_string(),
            ["ctx"] => format!("{}/{}/{}", context::function_name(), context::book_id(), context::attempt()),
            ["id"] => context::invocation_id(),
            ["sleep", ms] => {
                let ms = ms.parse().map_err(|_| format!("sleep {ms:?}: not a u64"))?;
                std::thread::sleep(Duration::from_millis(ms));
                "ok".into()
            }
            ["nap", ms] => {
                let ms = ms.parse().map_err(|_| format!("nap {ms:?}: not a u64"))?;
                reported(context::sleep(Duration::from_millis(ms)).map(|()| "ok".into()))
            }
            ["promise"] => reported(context::promise_create()),
            ["await", id] => reported(context::promise_await(id, None).map(|value| String::from_utf8_lossy(&value).into_owned())),
            ["await", id, ms] => {
                let ms = ms.parse().map_err(|_| format!("await {ms:?}: not a u64"))?;
                let value = context::promise_await(id, Some(Duration::from_millis(ms)));
                reported(value.map(|value| String::from_utf8_lossy(&value).into_owned()))
            }
            ["oget", object, path] => {
                reported(objects::get(object, pointer(path)).map(|json| json.unwrap_or_else(|| "none".into())))
            }
            ["oset", object, path, json] => reported(objects::set(object, pointer(path), json).map(|()| "ok".into())),
            ["oinc", object, path, by] => {
                let by = by.parse().map_err(|_| format!("oinc {by:?}: not an i64"))?;
                reported(objects::increment(object, pointer(path), by).map(|()| "ok".into()))
            }
            ["opush", object, path, json] => reported(objects::push(object, pointer(path), json).map(|()| "ok".into())),
            ["orm", object, path] => reported(objects::remove(object, pointer(path)).map(|()| "ok".into())),
            ["begin"] => reported(objects::begin().map(|()| "ok".into())),
            ["beginro"] => reported(objects::begin_read_only().map(|()| "ok".into())),
            ["commit"] => reported(objects::commit().map(|committed| if committed { "committed" } else { "conflict" }.into())),
            ["abort"] => reported(objects::abort().map(|()| "ok".into())),
            ["qpush", queue, data] => reported(queues::push(queue, data).map(|()| "ok".into())),
            ["qpop", queue, ms] => {
                let ms = ms.parse().map_err(|_| format!("qpop {ms:?}: not a u64"))?;
                reported(queues::pop(queue, Duration::from_millis(ms)).map(|message| match message {
                    Some(message) => String::from_utf8_lossy(&message).into_owned(),
                    None => "none".into(),
                }))
            }
            ["qpopn", queue, n, ms] => {
                let n: u64 = n.parse().map_err(|_| format!("qpopn {n:?}: not a u64"))?;
                let ms = ms.parse().map_err(|_| format!("qpopn {ms:?}: not a u64"))?;
                let max = n.min(u32::MAX.into()) as u32;
                reported(queues::pop_many(queue, max, Duration::from_millis(ms)).map(|messages| match &messages[..] {
                    [] => "none".into(),
                    _ => messages.iter().map(|m| String::from_utf8_lossy(m)).collect::<Vec<_>>().join("+"),
                }))
            }
            ["lock", lock, ms] => {
                let ms = ms.parse().map_err(|_| format!("lock {ms:?}: not a u64"))?;
                reported(locks::acquire(lock, Duration::from_millis(ms)).map(|acquired| acquired.to_string()))
            }
            ["unlock", lock] => reported(locks::release(lock).map(|()| "ok".into())),
            ["key"] => context::key().unwrap_or_else(|| "none".into()),
            ["chain", name, ref rest @ ..] => chain(name, rest)?,
            ["fail", ref message @ ..] => return Err(message.join(" ")),
            ["crash"] => panic!("crash requested by the script"),
            _ => return Err(format!("unknown script op {op:?}")),
        };
        results.push(result);
    }
    Ok(results.join(",").into_bytes())
}

/// One link of a chain of functions on one book (STEPS.md): appends this function's
/// name to the stream of `name` once, counts itself in table `chain`, and calls the
/// next link.
fn chain(name: &str, rest: &[&str]) -> Result<String, String> {
    let tag = named(name);
    let me = context::function_name();
    let before = stream(tag)?;
    let mine = before.iter().position(|data| *data == me);
    let seen = joined(&before[..mine.unwrap_or(before.len())]);
    if mine.is_none() {
        if let Err(error) = log::cond_append(&[tag], &me, tag, before.len() as u64) {
            return Ok(reported(Err(error)));
        }
    }
    increment("chain", &me)?;
    let Some((next, rest)) = rest.split_first() else {
        return Ok(format!("{me}:{seen}"));
    };
    let input = format!("script chain {name} {}", rest.join(" "));
    let output = match invoke::call(next, input.trim_end()) {
        Ok(output) => String::from_utf8_lossy(&output).into_owned(),
        Err(error) => return Ok(reported(Err(error))),
    };
    Ok(format!("{me}:{seen} > {output} < {}", joined(&stream(tag)?)))
}

/// The data of every record in a stream, in order.
fn stream(tag: Tag) -> Result<Vec<String>, String> {
    let mut records = Vec::new();
    let mut next = Some(SeqNum::MIN);
    while let Some(min) = next {
        let Some(record) = log::read_next(tag, min).map_err(|error| error.to_string())? else { break };
        records.push(String::from_utf8_lossy(&record.data).into_owned());
        next = record.seqnum.checked_next();
    }
    Ok(records)
}

/// Stream data joined by `+`, `-` for none.
fn joined(data: &[String]) -> String {
    if data.is_empty() {
        "-".into()
    } else {
        data.join("+")
    }
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

/// A JSON pointer, with `.` for `""` (the whole object), which a script cannot write.
fn pointer(word: &str) -> &str {
    match word {
        "." => "",
        path => path,
    }
}

/// The tag of a name, with `*` for the whole book.
fn named(name: &str) -> Tag {
    match name {
        "*" => Tag::ALL,
        name => Tag::named(name),
    }
}

/// The tags of a comma-separated list of names, `-` for none.
fn tags(names: &str) -> Vec<Tag> {
    match names {
        "-" => Vec::new(),
        names => names.split(',').map(named).collect(),
    }
}

fn seqnum(word: &str) -> Result<SeqNum, String> {
    match word {
        "max" => Ok(SeqNum::MAX),
        word => word.parse().map_err(|_| format!("{word:?} is not a seqnum")),
    }
}

/// A record read by `next`, `prev` or `tail`: `<seqnum>:<data>:<aux or none>`.
fn shown(record: Option<log::Record>) -> String {
    match record {
        Some(record) => format!(
            "{}:{}:{}",
            record.seqnum,
            String::from_utf8_lossy(&record.data),
            record.aux.map_or_else(|| "none".into(), |aux| String::from_utf8_lossy(&aux).into_owned())
        ),
        None => "none".into(),
    }
}

/// An op's result with a platform error as `error:<code>`.
fn reported(result: tally_sdk::Result<String>) -> String {
    use tally_sdk::Error;
    match result {
        Ok(result) => result,
        Err(error) => match error {
            Error::InvalidArgument(_) => "error:invalid_argument".into(),
            Error::NotFound(_) => "error:not_found".into(),
            Error::Conflict { holder: Some(holder) } => format!("error:conflict:{holder}"),
            Error::Conflict { holder: None } => "error:conflict:none".into(),
            Error::Unavailable(_) => "error:unavailable".into(),
            Error::TooLarge(_) => "error:too_large".into(),
            Error::Timeout(_) => "error:timeout".into(),
            Error::Failed(_) => "error:failed".into(),
        },
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
