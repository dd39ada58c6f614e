//! `tally-fuzz`: the fuzz targets from the command line, for runs longer than the test
//! command's, replays, and seed corpora for `cargo fuzz`.
//!
//! ```text
//! tally-fuzz list                     the targets and what each decodes
//! tally-fuzz run [TARGET...]          fuzz them (all by default): TALLY_FUZZ_SECONDS
//!                                     each (3), from TALLY_FUZZ_SEED (else the clock);
//!                                     TALLY_FUZZ_LAST_INPUT=FILE keeps each input there
//!                                     while it runs (a crash that kills the process)
//! tally-fuzz replay TARGET HEX        run one input, as a failure printed it
//! tally-fuzz seeds DIR                write every target's seeds to DIR/TARGET/
//! ```

use std::process::ExitCode;

use tally_fuzz::targets::ALL;

#[global_allocator]
static ALLOC: tally_fuzz::Tracking = tally_fuzz::Tracking;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["list"] => {
            for t in ALL {
                println!("{:18} {}", t.name, t.what);
            }
            ExitCode::SUCCESS
        }
        ["run", names @ ..] => run(names),
        ["replay", name, hex] => replay(name, hex),
        ["seeds", dir] => seeds(dir),
        _ => {
            eprintln!("usage: tally-fuzz list | run [TARGET...] | replay TARGET HEX | seeds DIR");
            ExitCode::FAILURE
        }
    }
}

fn run(names: &[&str]) -> ExitCode {
    let opts = tally_fuzz::options_from_env();
    let chosen: Vec<&str> = if names.is_empty() { ALL.iter().map(|t| t.name).collect() } else { names.to_vec() };
    for name in chosen {
        let Some(target) = tally_fuzz::target(name) else {
            eprintln!("no target {name}; `tally-fuzz list` names them");
            return ExitCode::FAILURE;
        };
        eprintln!("{}", tally_fuzz::announce(name, &opts));
        match tally_fuzz::fuzz(target, opts.clone()) {
            Ok(report) => println!("{report}"),
            Err(failure) => {
                eprintln!("{failure}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn replay(name: &str, hex: &str) -> ExitCode {
    let Some(target) = tally_fuzz::target(name) else {
        eprintln!("no target {name}");
        return ExitCode::FAILURE;
    };
    let input: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect();
    let Some(input) = input.filter(|_| hex.len().is_multiple_of(2)) else {
        eprintln!("{hex:?} is not hex");
        return ExitCode::FAILURE;
    };
    match tally_fuzz::execute(target, &input) {
        Ok(accepted) => {
            println!("{name}: no failure ({})", if accepted { "accepted" } else { "refused" });
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{name} panicked: {message}");
            ExitCode::FAILURE
        }
    }
}

fn seeds(dir: &str) -> ExitCode {
    for t in ALL {
        let target_dir = std::path::Path::new(dir).join(t.name);
        let written = std::fs::create_dir_all(&target_dir).and_then(|()| {
            (t.seeds)().iter().enumerate().try_for_each(|(i, seed)| std::fs::write(target_dir.join(format!("seed-{i}")), seed))
        });
        if let Err(e) = written {
            eprintln!("writing {}: {e}", target_dir.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
