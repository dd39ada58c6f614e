//! Runs the exactly-once layer's deterministic simulator over many seeds; exits
//! non-zero on the first violation.
//! `cargo run --release -p tally-durable --features sim --bin durable-sim -- --seeds N --seed S`

use std::process::ExitCode;
use std::time::Instant;

use tally_durable::sim::{run_seeds, SimOptions, SimStats};

const USAGE: &str = "usage: durable-sim [--seeds N] [--seed S] [--nodes N] [--clients N] [--invocations N] \
[--crash P] [--machine-crash P] [--pause P] [--log-fail P] [--store-fail P] [--peer P]";

fn main() -> ExitCode {
    let mut seeds = 100u64;
    let mut first = 0u64;
    let mut opts = SimOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            eprintln!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        let Some(value) = args.next() else {
            eprintln!("{flag} needs a value\n{USAGE}");
            return ExitCode::from(2);
        };
        let ok = match flag.as_str() {
            "--seeds" => value.parse().map(|v| seeds = v).is_ok(),
            "--seed" => value.parse().map(|v| first = v).is_ok(),
            "--nodes" => value.parse().map(|v| opts.nodes = v).is_ok(),
            "--clients" => value.parse().map(|v| opts.clients = v).is_ok(),
            "--invocations" => value.parse().map(|v| opts.invocations = v).is_ok(),
            "--crash" => value.parse().map(|v| opts.crash = v).is_ok(),
            "--machine-crash" => value.parse().map(|v| opts.machine_crash = v).is_ok(),
            "--pause" => value.parse().map(|v| opts.pause = v).is_ok(),
            "--log-fail" => value.parse().map(|v| opts.log_fail = v).is_ok(),
            "--store-fail" => value.parse().map(|v| opts.store_fail = v).is_ok(),
            "--peer" => value.parse().map(|v| opts.peer = v).is_ok(),
            _ => false,
        };
        if !ok {
            eprintln!("bad argument {flag} {value}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    eprintln!("durable-sim: seeds {first}..{} with {opts}", first + seeds);
    // How long the run took, for the person who started it: the binary's own IO.
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now();
    let mut total = SimStats::default();
    for seed in first..first + seeds {
        match run_seeds(seed, 1, &opts) {
            Ok(stats) => total.add(&stats[0]),
            Err(v) => {
                eprintln!("durable-sim: seed {seed} failed with {opts}\n{v}");
                return ExitCode::FAILURE;
            }
        }
    }
    eprintln!("durable-sim: {seeds} seeds passed in {:.1}s: {total}", started.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}
