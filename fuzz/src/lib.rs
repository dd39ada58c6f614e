//! Fuzz targets for every decoder of bytes that reach Tally from the network or the
//! disk (frames, records, metadata, etcd values, durable records, schedules, state
//! entries, HTTP functions' messages, routes, tokens, the gateway's headers) and for the
//! checks of what guests pass at the WIT boundary.
//!
//! A target is a `fn(&[u8]) -> bool` that must never panic: it decodes the bytes as the
//! real reader does, checks what the decoder promises (what decodes encodes again to
//! what decodes the same; a limit refuses rather than allocates) and says whether the
//! input was accepted. Each target starts from seeds made by encoding real values with
//! the crate's own encoder. Two engines run the same targets:
//!
//! - [`fuzz`] (`engine.rs`), a seeded mutation fuzzer on stable Rust, which the test
//!   command runs for a few seconds per target (`tests/fuzz.rs`);
//! - `cargo fuzz` (libFuzzer, nightly), on demand, from `cargo-fuzz/`.
//!
//! See `README.md` for how to run them and what a failure prints.

mod alloc;
mod engine;
pub mod targets;

use std::time::Duration;

pub use alloc::{Tracking, ALLOC_BYTES_MAX};
pub use engine::{execute, fuzz, hex, minimize, mutate, Failure, Options, Report, Rng};

/// One fuzz target.
#[derive(Clone, Copy)]
pub struct Target {
    /// Also the name of its test and of its `cargo fuzz` target.
    pub name: &'static str,
    /// What the target decodes, and where those bytes come from.
    pub what: &'static str,
    /// Real values, encoded: where mutation starts.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Tokens the mutator inserts (keywords, separators, magic bytes).
    pub dictionary: &'static [&'static [u8]],
    /// Decodes the input and checks the decoder's promises; panics on a violation,
    /// returns whether the input was accepted.
    pub run: fn(&[u8]) -> bool,
}

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    targets::ALL.iter().find(|t| t.name == name)
}

/// Seconds per target when `TALLY_FUZZ_SECONDS` does not say.
pub const SECONDS_DEFAULT: f64 = 3.0;

/// The options of a run: `TALLY_FUZZ_SECONDS` per target (default 3),
/// `TALLY_FUZZ_SEED`, else a seed from the clock, and `TALLY_FUZZ_LAST_INPUT`, a file
/// that holds each input while it runs.
pub fn options_from_env() -> Options {
    let seconds = std::env::var("TALLY_FUZZ_SECONDS")
        .ok()
        .map(|s| s.parse::<f64>().unwrap_or_else(|_| panic!("TALLY_FUZZ_SECONDS={s:?} is not a number of seconds")))
        .unwrap_or(SECONDS_DEFAULT);
    let seed = match std::env::var("TALLY_FUZZ_SEED") {
        Ok(s) => s.parse().unwrap_or_else(|_| panic!("TALLY_FUZZ_SEED={s:?} is not a u64")),
        Err(_) => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            now.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(32)
        }
    };
    let last_input = std::env::var_os("TALLY_FUZZ_LAST_INPUT").map(Into::into);
    Options { seed, duration: Duration::from_secs_f64(seconds), executions_max: u64::MAX, last_input }
}

/// Fuzzes the target named `name` with `opts` and panics with the failure (its input
/// in hex and the seed) if it finds one; prints the report otherwise.
pub fn check(name: &str, opts: Options) -> Report {
    let target = target(name).unwrap_or_else(|| panic!("no fuzz target {name}"));
    // Printed first: a crash that kills the process (a stack overflow) still says how
    // to reproduce it.
    println!("{}", announce(name, &opts));
    match fuzz(target, opts) {
        Ok(report) => {
            println!("{report}");
            report
        }
        Err(failure) => panic!("{failure}"),
    }
}

/// What a run prints before it starts: enough to run it again.
pub fn announce(name: &str, opts: &Options) -> String {
    format!("fuzzing {name} with TALLY_FUZZ_SEED={} for {:.1} s", opts.seed, opts.duration.as_secs_f64())
}
