//! Tally's benchmark programs: `cargo run --release -p tally-bench -- <suite> [--quick]`.
//! Each prints one JSON object per measurement on stdout
//! (`{"bench","case","metric","value","unit"}`), progress and a readable table on
//! stderr; see `report.rs`.

mod auth;
mod cluster;
mod durable;
mod http;
mod http_fns;
mod index;
mod index_apps;
mod index_read;
mod index_rss;
mod index_tier;
mod invoke;
mod join;
mod libs;
mod log;
mod memory;
mod observe;
mod peers;
mod report;
mod soak;
mod state;
mod webhooks;
mod workflows;

use std::process::ExitCode;

/// The allocator `tally` runs with (see its `main.rs`), so that the nodes this
/// process runs perform as the shipped binary does; the `index` suite counts what one
/// thread holds through it while it measures.
#[global_allocator]
static ALLOCATOR: index::Counting = index::Counting;

const SUITES: &[&str] =
    &["log", "invoke", "state", "cluster", "memory", "durable", "libs", "http", "auth", "soak", "observe", "index"];

/// What every suite is told about the run.
pub struct RunOptions {
    /// A short run: the same cases, shorter windows and fewer samples, for checking
    /// that a suite works rather than for numbers.
    pub quick: bool,
    /// `--only PART`: the parts of a suite to run (the `index` suite's `bytes`, `read`,
    /// `join`, ...); every part when empty.
    pub only: Vec<String>,
}

impl RunOptions {
    /// Whether part `part` of the suite runs.
    pub fn runs(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == part)
    }
}

fn usage() -> String {
    format!("usage: tally-bench <suite> [--quick] [--only PART]...\nsuites: {}", SUITES.join(", "))
}

fn main() -> ExitCode {
    let mut suite = None;
    let mut options = RunOptions { quick: false, only: Vec::new() };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => options.quick = true,
            "--only" => match args.next() {
                Some(part) => options.only.push(part),
                None => {
                    eprintln!("tally-bench: --only needs a part\n{}", usage());
                    return ExitCode::from(2);
                }
            },
            "help" | "--help" | "-h" => {
                eprintln!("{}", usage());
                return ExitCode::SUCCESS;
            }
            _ if arg.starts_with('-') || suite.is_some() => {
                eprintln!("tally-bench: unexpected argument {arg:?}\n{}", usage());
                return ExitCode::from(2);
            }
            _ => suite = Some(arg),
        }
    }
    let Some(suite) = suite else {
        eprintln!("{}", usage());
        return ExitCode::from(2);
    };
    if !SUITES.contains(&suite.as_str()) {
        eprintln!("tally-bench: unknown suite {suite:?}\n{}", usage());
        return ExitCode::from(2);
    }
    // The transport warns about every peer that goes away, which each cluster shutdown
    // does by design; RUST_LOG overrides this default.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,tally_logsvc::net=error".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tally-bench: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match suite.as_str() {
        "log" => runtime.block_on(log::run(&options)),
        "invoke" => runtime.block_on(invoke::run(&options)),
        "state" => runtime.block_on(state::run(&options)),
        "cluster" => runtime.block_on(cluster::run(&options)),
        "memory" => runtime.block_on(memory::run(&options)),
        "durable" => runtime.block_on(durable::run(&options)),
        "libs" => runtime.block_on(libs::run(&options)),
        "http" => runtime.block_on(http_fns::run(&options)),
        "auth" => runtime.block_on(auth::run(&options)),
        "soak" => runtime.block_on(soak::run(&options)),
        "observe" => runtime.block_on(observe::run(&options)),
        "index" => runtime.block_on(index::run(&options)),
        _ => unreachable!("every suite of SUITES has a branch"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tally-bench: {suite}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
