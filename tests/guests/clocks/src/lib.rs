//! Reads the clocks and random numbers between exactly-once steps, for the host's tests
//! of recorded non-determinism: every execution of one invocation must see the same.
//!
//! - `run <table>`: reads the wall clock, the monotonic clock and a random number
//!   (`getrandom`: `wasi:random/random`), stores them under `first`; reads the wall
//!   clock, a random number and a hash with std's randomly keyed hasher
//!   (`wasi:random/insecure-seed`), stores them under `second`; reads the monotonic
//!   clock again. Returns `first=<..> second=<..> elapsed=<ns>`, failing if the
//!   monotonic clock went back.
//! - `log <table>`: appends `a` under tag `events` and stores its seqnum under `a`;
//!   reads the stream `events` whole and cond-appends `b` at its end (the number of
//!   records it read), storing the seqnum (or `conflict`) under `b`; appends `c`.
//!   Returns `a=<seqnum> b=<seqnum or conflict> c=<seqnum> n=<records read>`.
//! - `events`: the data of the stream `events`, joined by `,`.
//! - `nap <ms>`: sleeps durably for `ms`, then appends `nap` under tag `naps`. Returns
//!   `woke=<wall clock ms after the sleep> naps=<records in naps before the append>`.
//! - `naps`: the number of records under tag `naps`.
//! - `approve <wait_ms> <timeout_ms>`: creates a promise, appends its ID under tag
//!   `promises`, sleeps durably `wait_ms`, then awaits the promise for at most
//!   `timeout_ms` (0: no timeout). Returns `approved:<value>` or `timeout`.
//! - `setting <key> <ms>`: reads the environment variable `key` (a setting of the
//!   function), sleeps durably for `ms`, reads it again. Returns `<key>=<first> then
//!   <second>`: the same in every execution, whatever was set since.
//! - `doze <ms>`: sleeps durably for `ms`; returns `woke=<wall clock ms after it>`
//!   (the benches' timer, with nothing else in the way).
//! - `read <table> <key>`: the stored value, or `none`.
//! - `flaky <n>`: traps in attempts before the `n`-th (`context::attempt`); then
//!   returns `attempt=<attempt> at=<wall clock ms>`.
//! - `journey <table> <sleep_ms>`: everything a durable invocation may do between
//!   crashes: reads the wall clock and a random number and stores them under `first`,
//!   appends the reading under tag `journey`, sleeps durably `sleep_ms`, creates a
//!   promise and awaits it for 50 ms (nobody completes it). Returns
//!   `first=<stored> promise=<id> await=<timeout or the value>`.

use std::hash::BuildHasher;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tally_sdk::{context, log, state, Error, SeqNum, Tag};

fn random() -> u64 {
    let mut b = [0; 8];
    getrandom::fill(&mut b).expect("random bytes");
    u64::from_le_bytes(b)
}

/// The data of every record of `tag`, in order.
fn stream(tag: Tag) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut from = SeqNum::MIN;
    while let Some(r) = log::read_next(tag, from).map_err(|e| e.to_string())? {
        out.push(r.data);
        match r.seqnum.checked_next() {
            Some(next) => from = next,
            None => break,
        }
    }
    Ok(out)
}

fn wall() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_nanos()
}

fn handle(input: Vec<u8>) -> Result<Vec<u8>, String> {
    let input = String::from_utf8(input).map_err(|_| "the input is not UTF-8")?;
    let words: Vec<&str> = input.split_whitespace().collect();
    match words[..] {
        ["run", table] => {
            let started = Instant::now();
            let first = format!("{}:{}", wall(), random());
            state::put(table, "first", &first).map_err(|e| e.to_string())?;
            let hash = std::collections::hash_map::RandomState::new().hash_one(42u64);
            let second = format!("{}:{}:{hash}", wall(), random());
            state::put(table, "second", &second).map_err(|e| e.to_string())?;
            let now = Instant::now();
            if now < started {
                return Err("the monotonic clock went back".into());
            }
            Ok(format!("first={first} second={second} elapsed={}", (now - started).as_nanos()).into_bytes())
        }
        ["log", table] => {
            let events = Tag::named("events");
            let a = log::append(&[events], "a").map_err(|e| e.to_string())?.get();
            state::put(table, "a", a.to_string()).map_err(|e| e.to_string())?;
            let n = stream(events)?.len() as u64;
            let b = match log::cond_append(&[events], "b", events, n) {
                Ok(s) => s.get().to_string(),
                Err(Error::Conflict { .. }) => "conflict".to_string(),
                Err(e) => return Err(e.to_string()),
            };
            state::put(table, "b", &b).map_err(|e| e.to_string())?;
            let c = log::append(&[events], "c").map_err(|e| e.to_string())?.get();
            Ok(format!("a={a} b={b} c={c} n={n}").into_bytes())
        }
        ["nap", ms] => {
            let ms: u64 = ms.parse().map_err(|_| format!("the duration {ms:?} is not a number"))?;
            context::sleep(std::time::Duration::from_millis(ms)).map_err(|e| e.to_string())?;
            let woke = wall() / 1_000_000;
            let naps = stream(Tag::named("naps"))?.len();
            log::append(&[Tag::named("naps")], "nap").map_err(|e| e.to_string())?;
            Ok(format!("woke={woke} naps={naps}").into_bytes())
        }
        ["journey", table, sleep_ms] => {
            let sleep_ms: u64 = sleep_ms.parse().map_err(|_| format!("the duration {sleep_ms:?} is not a number"))?;
            let first = format!("{}/{}", wall(), random());
            state::put(table, "first", &first).map_err(|e| e.to_string())?;
            log::append(&[Tag::named("journey")], &first).map_err(|e| e.to_string())?;
            context::sleep(std::time::Duration::from_millis(sleep_ms)).map_err(|e| e.to_string())?;
            let promise = context::promise_create().map_err(|e| e.to_string())?;
            let awaited = match context::promise_await(&promise, Some(std::time::Duration::from_millis(50))) {
                Ok(value) => String::from_utf8_lossy(&value).into_owned(),
                Err(Error::Timeout(_)) => "timeout".to_string(),
                Err(e) => return Err(e.to_string()),
            };
            Ok(format!("first={first} promise={promise} await={awaited}").into_bytes())
        }
        ["flaky", n] => {
            let n: u32 = n.parse().map_err(|_| format!("the attempt {n:?} is not a number"))?;
            let attempt = context::attempt();
            assert!(attempt >= n, "flaky attempt {attempt} of {n}");
            Ok(format!("attempt={attempt} at={}", wall() / 1_000_000).into_bytes())
        }
        ["setting", key, ms] => {
            let before = std::env::var(key).unwrap_or_default();
            let ms: u64 = ms.parse().map_err(|_| format!("the duration {ms:?} is not a number"))?;
            context::sleep(std::time::Duration::from_millis(ms)).map_err(|e| e.to_string())?;
            let after = std::env::var(key).unwrap_or_default();
            Ok(format!("{key}={before} then {after}").into_bytes())
        }
        ["doze", ms] => {
            let ms: u64 = ms.parse().map_err(|_| format!("the duration {ms:?} is not a number"))?;
            context::sleep(std::time::Duration::from_millis(ms)).map_err(|e| e.to_string())?;
            Ok(format!("woke={}", wall() / 1_000_000).into_bytes())
        }
        ["approve", wait_ms, timeout_ms] => {
            let number = |w: &str| w.parse::<u64>().map_err(|_| format!("{w:?} is not a number"));
            let (wait_ms, timeout_ms) = (number(wait_ms)?, number(timeout_ms)?);
            let promise = context::promise_create().map_err(|e| e.to_string())?;
            log::append(&[Tag::named("promises")], &promise).map_err(|e| e.to_string())?;
            if wait_ms > 0 {
                context::sleep(std::time::Duration::from_millis(wait_ms)).map_err(|e| e.to_string())?;
            }
            let timeout = (timeout_ms > 0).then(|| std::time::Duration::from_millis(timeout_ms));
            match context::promise_await(&promise, timeout) {
                Ok(value) => Ok(format!("approved:{}", String::from_utf8_lossy(&value)).into_bytes()),
                Err(Error::Timeout(_)) => Ok(b"timeout".to_vec()),
                Err(e) => Err(e.to_string()),
            }
        }
        ["naps"] => Ok(stream(Tag::named("naps"))?.len().to_string().into_bytes()),
        ["events"] => {
            let data: Vec<String> =
                stream(Tag::named("events"))?.into_iter().map(|d| String::from_utf8_lossy(&d).into_owned()).collect();
            Ok(data.join(",").into_bytes())
        }
        ["read", table, key] => {
            let value = state::get(table, key).map_err(|e| e.to_string())?;
            Ok(value.unwrap_or_else(|| b"none".to_vec()))
        }
        _ => Err(format!("expected `run TABLE` or `read TABLE KEY`, found {input:?}")),
    }
}

tally_sdk::handler!(handle);
