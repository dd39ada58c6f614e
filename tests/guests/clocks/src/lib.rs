//! Reads the clocks and random numbers between exactly-once steps, for the host's tests
//! of recorded non-determinism: every execution of one invocation must see the same.
//!
//! - `run <table>`: reads the wall clock, the monotonic clock and a random number
//!   (`getrandom`: `wasi:random/random`), stores them under `first`; reads the wall
//!   clock, a random number and a hash with std's randomly keyed hasher
//!   (`wasi:random/insecure-seed`), stores them under `second`; reads the monotonic
//!   clock again. Returns `first=<..> second=<..> elapsed=<ns>`, failing if the
//!   monotonic clock went back.
//! - `read <table> <key>`: the stored value, or `none`.

use std::hash::BuildHasher;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tally_sdk::state;

fn random() -> u64 {
    let mut b = [0; 8];
    getrandom::fill(&mut b).expect("random bytes");
    u64::from_le_bytes(b)
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
        ["read", table, key] => {
            let value = state::get(table, key).map_err(|e| e.to_string())?;
            Ok(value.unwrap_or_else(|| b"none".to_vec()))
        }
        _ => Err(format!("expected `run TABLE` or `read TABLE KEY`, found {input:?}")),
    }
}

tally_sdk::handler!(handle);
