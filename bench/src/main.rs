//! Tally's benchmark programs: `cargo run --release -p tally-bench -- <suite>`.
//! Each prints one JSON object per measurement on stdout
//! (`{"bench","case","metric","value","unit"}`) and a readable table on stderr.

use std::process::ExitCode;

const SUITES: &[&str] = &[];

fn main() -> ExitCode {
    let suite = std::env::args().nth(1).unwrap_or_default();
    eprintln!("tally-bench: unknown suite {suite:?}; suites: {SUITES:?} (the log suite arrives with the loopback cluster)");
    ExitCode::from(2)
}
