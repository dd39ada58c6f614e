//! The fuzzer: a seeded mutation loop over one target, on stable Rust.
//!
//! ```text
//!   pool = the target's seeds (real values, encoded)      rng = splitmix64(seed)
//!   until the time is up:
//!     input = mutate(pick(pool))   1 to 4 stacked mutations, spliced with another entry
//!     run target(input)            a panic, or one allocation past 64 MiB, is a failure:
//!                                  seed, execution, input in hex
//!     accepted?  -> pool (bounded; a random entry is replaced once full)
//! ```
//!
//! Inputs depend on the seed (and the target's seeds) alone, never on the clock: a
//! failure replays with its seed (`TALLY_FUZZ_SEED`), whatever the machine's speed, given
//! time to reach the execution that failed. A failing input is shrunk before it is
//! printed ([`minimize`]: chunks removed while the failure stays), and printed whole. The only feedback is whether the decoder accepted an input: accepted
//! mutants join the pool, so mutations stack on valid inputs and go deeper than one step
//! from the seeds, without the coverage instrumentation that needs nightly Rust
//! (`cargo fuzz` has it, over the same targets).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crate::{alloc, Target};

/// An input grows to this many bytes at most: past a decoder's limits and deep enough
/// for nesting, small enough that an execution stays cheap.
const INPUT_BYTES_MAX: usize = 256 << 10;
/// Accepted mutants the pool keeps besides the seeds.
const POOL_MAX: usize = 1024;

/// splitmix64: a tiny generator whose whole state is one `u64`, so a seed names a run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// A length for a chunk, mostly short.
    fn chunk_len(&mut self, max: usize) -> usize {
        let cap = match self.below(4) {
            0 => 1,
            1 => 4,
            2 => 16,
            _ => 256,
        };
        1 + self.below(cap.min(max.max(1)))
    }
}

/// Values that break decoders: boundaries of every width, both byte orders.
const INTERESTING: [u64; 16] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    i64::MAX as u64,
    1 << 63,
    u64::MAX,
];

/// Text that breaks parsers of numbers and names.
const INTERESTING_TEXT: [&str; 16] = [
    "0",
    "-1",
    "1",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "",
    "\u{0}",
    "é",
];

/// The mutations, each applied in place to `data`; `other` is another pool entry to
/// splice with, `dict` the target's tokens.
fn mutate_once(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8], dict: &[&[u8]]) {
    let len = data.len();
    match rng.below(14) {
        // Flip a bit.
        0 if len > 0 => {
            let at = rng.below(len);
            data[at] ^= 1 << rng.below(8);
        }
        // A random byte.
        1 if len > 0 => {
            let at = rng.below(len);
            data[at] = rng.next_u64() as u8;
        }
        // Overwrite with an interesting value of 1, 2, 4 or 8 bytes, either byte order.
        2 | 3 if len > 0 => {
            let bytes = interesting_bytes(rng);
            let at = rng.below(len);
            let n = bytes.len().min(len - at);
            data[at..at + n].copy_from_slice(&bytes[..n]);
        }
        // Insert an interesting value.
        4 => {
            let bytes = interesting_bytes(rng);
            let at = rng.below(len + 1);
            data.splice(at..at, bytes);
        }
        // Add or subtract a little at a place: lengths and counts off by a few.
        5 if len > 0 => {
            let at = rng.below(len);
            let delta = 1 + rng.below(16) as u8;
            data[at] = if rng.one_in(2) { data[at].wrapping_add(delta) } else { data[at].wrapping_sub(delta) };
        }
        // Truncate.
        6 if len > 0 => data.truncate(rng.below(len)),
        // Remove a chunk.
        7 if len > 0 => {
            let at = rng.below(len);
            let n = rng.chunk_len(len - at).min(len - at);
            data.drain(at..at + n);
        }
        // Extend with random bytes or zeros.
        8 => {
            let n = rng.chunk_len(64);
            let zeros = rng.one_in(2);
            data.extend((0..n).map(|_| if zeros { 0 } else { rng.next_u64() as u8 }));
        }
        // Duplicate a chunk, now and then many times over (nesting, long lists).
        9 if len > 0 => {
            let at = rng.below(len);
            let n = rng.chunk_len(len - at).min(len - at);
            let chunk = data[at..at + n].to_vec();
            let times = if rng.one_in(8) { 1 + rng.below(4096) } else { 1 + rng.below(4) };
            let to = rng.below(len + 1);
            data.splice(to..to, chunk.iter().copied().cycle().take(n * times));
        }
        // Splice: a prefix of this entry with a suffix of another.
        10 if !other.is_empty() => {
            let cut = rng.below(len + 1);
            let from = rng.below(other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        // Insert or overwrite with a token of the target's, or a number as text; now
        // and then a token many times over (a list of it, or nesting).
        11 | 12 => {
            let token: &[u8] = match (dict.is_empty(), rng.one_in(3)) {
                (false, false) => dict[rng.below(dict.len())],
                _ => INTERESTING_TEXT[rng.below(INTERESTING_TEXT.len())].as_bytes(),
            };
            let at = rng.below(len + 1);
            if rng.one_in(16) {
                let times = 1 + rng.below(4096);
                data.splice(at..at, token.iter().copied().cycle().take(token.len() * times));
            } else if rng.one_in(2) {
                data.splice(at..at, token.iter().copied());
            } else {
                let end = (at + token.len()).min(len);
                data.splice(at..end, token.iter().copied());
            }
        }
        // A number written in text replaced by another: the digits around a place.
        13 if len > 0 => {
            let at = rng.below(len);
            let start = data[..at].iter().rposition(|b| !b.is_ascii_digit()).map_or(0, |i| i + 1);
            let end = data[at..].iter().position(|b| !b.is_ascii_digit()).map_or(len, |i| at + i);
            let number = INTERESTING_TEXT[rng.below(12)].as_bytes();
            data.splice(start..end, number.iter().copied());
        }
        // The mutation drawn did not fit (an empty input): add a byte.
        _ => data.push(rng.next_u64() as u8),
    }
}

fn interesting_bytes(rng: &mut Rng) -> Vec<u8> {
    let value = INTERESTING[rng.below(INTERESTING.len())];
    let value = if rng.one_in(4) { value.wrapping_sub(1 + rng.below(2) as u64) } else { value };
    let width = [1, 2, 4, 8][rng.below(4)];
    match rng.one_in(2) {
        true => value.to_le_bytes()[..width].to_vec(),
        false => value.to_be_bytes()[8 - width..].to_vec(),
    }
}

/// A new input from pool entry `base`: 1 to 4 stacked mutations.
pub fn mutate(rng: &mut Rng, base: &[u8], other: &[u8], dict: &[&[u8]]) -> Vec<u8> {
    let mut data = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        mutate_once(rng, &mut data, other, dict);
    }
    data.truncate(INPUT_BYTES_MAX);
    data
}

/// How long and from which seed to fuzz.
#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub duration: Duration,
    /// Stops after this many executions even if time is left (the seeds count).
    pub executions_max: u64,
    /// Each input is written here before it runs, so that a crash that kills the process
    /// (a stack overflow, an abort) leaves it behind (slow: for replays).
    pub last_input: Option<std::path::PathBuf>,
}

/// A clean run.
#[derive(Clone, Debug)]
pub struct Report {
    pub target: &'static str,
    pub seed: u64,
    pub executions: u64,
    pub elapsed: Duration,
    /// Inputs the decoder accepted, seeds included.
    pub accepted: u64,
    pub pool: usize,
    /// The slowest execution, and how long it took.
    pub slowest: Duration,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} executions in {:.1} s ({:.0}/s), {:.0}% accepted, pool {}, slowest {:.1} ms, seed={}",
            self.target,
            self.executions,
            self.elapsed.as_secs_f64(),
            self.executions as f64 / self.elapsed.as_secs_f64().max(1e-9),
            100.0 * self.accepted as f64 / self.executions.max(1) as f64,
            self.pool,
            self.slowest.as_secs_f64() * 1e3,
            self.seed,
        )
    }
}

/// A panic of the target: everything needed to replay it.
#[derive(Clone, Debug)]
pub struct Failure {
    pub target: &'static str,
    pub seed: u64,
    /// The execution that failed, counting from 1 (seeds first).
    pub execution: u64,
    pub input: Vec<u8>,
    /// A shorter input that fails the same way ([`minimize`]).
    pub minimized: Vec<u8>,
    pub message: String,
}

/// Inputs longer than this are printed only minimized; the seed replays them whole.
const PRINTED_BYTES_MAX: usize = 4 << 10;

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} panicked at execution {}: {}", self.target, self.execution, self.message)?;
        match self.input.len() <= PRINTED_BYTES_MAX {
            true => writeln!(f, "input ({} bytes): {}", self.input.len(), hex(&self.input))?,
            false => writeln!(f, "input ({} bytes): not printed, the seed replays it", self.input.len())?,
        }
        writeln!(f, "minimized ({} bytes): {}", self.minimized.len(), hex(&self.minimized))?;
        write!(f, "reproduce with TALLY_FUZZ_SEED={} (same target)", self.seed)
    }
}

/// What tells two panics apart well enough to shrink an input without wandering to
/// another bug: the start of the message, without the numbers in it.
fn signature(message: &str) -> String {
    message.chars().filter(|c| !c.is_ascii_digit()).take(40).collect()
}

/// Attempts [`minimize`] makes at most.
const MINIMIZE_EXECUTIONS_MAX: usize = 4096;

/// A shorter input on which `target` panics as it does on `input`: chunks removed, from
/// halves down to single bytes, while the panic stays.
pub fn minimize(target: &Target, input: &[u8], message: &str) -> Vec<u8> {
    let want = signature(message);
    // Panics are expected here: the hook stays quiet meanwhile.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut best = input.to_vec();
    let mut chunk = best.len().div_ceil(2);
    let mut budget = MINIMIZE_EXECUTIONS_MAX;
    while chunk > 0 && budget > 0 {
        let mut at = 0;
        while at < best.len() && budget > 0 {
            budget -= 1;
            let mut candidate = best.clone();
            candidate.drain(at..(at + chunk).min(best.len()));
            match execute(target, &candidate) {
                Err(m) if signature(&m) == want => best = candidate,
                _ => at += chunk,
            }
        }
        chunk /= 2;
    }
    std::panic::set_hook(hook);
    best
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `input` through the target: whether it was accepted, or the panic's message.
pub fn execute(target: &Target, input: &[u8]) -> Result<bool, String> {
    catch_unwind(AssertUnwindSafe(|| (target.run)(input))).map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

/// Fuzzes `target`: its seeds first, then mutants until the time or the executions are
/// up. Stops at the first panic.
pub fn fuzz(target: &Target, opts: Options) -> Result<Report, Box<Failure>> {
    let started = Instant::now();
    let mut rng = Rng::new(opts.seed);
    let seeds = (target.seeds)();
    assert!(!seeds.is_empty(), "{} has no seeds", target.name);
    let mut report = Report {
        target: target.name,
        seed: opts.seed,
        executions: 0,
        elapsed: Duration::ZERO,
        accepted: 0,
        pool: 0,
        slowest: Duration::ZERO,
    };
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let run = |input: Vec<u8>, report: &mut Report, pool: &mut Vec<Vec<u8>>, rng: &mut Rng| {
        report.executions += 1;
        if let Some(path) = &opts.last_input {
            std::fs::write(path, &input).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        }
        let at = Instant::now();
        alloc::take_peak();
        let outcome = execute(target, &input).and_then(|accepted| match alloc::take_peak() {
            peak if peak > alloc::ALLOC_BYTES_MAX => {
                Err(format!("allocated {peak} bytes at once, past {} (a length taken on trust?)", alloc::ALLOC_BYTES_MAX))
            }
            _ => Ok(accepted),
        });
        report.slowest = report.slowest.max(at.elapsed());
        match outcome {
            Ok(true) => {
                report.accepted += 1;
                match pool.len() < seeds.len() + POOL_MAX {
                    true => pool.push(input),
                    // Seeds stay; a mutant takes the place of another.
                    false => {
                        let at = seeds.len() + rng.below(POOL_MAX);
                        pool[at] = input;
                    }
                }
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(message) => Err(Box::new(Failure {
                target: target.name,
                seed: opts.seed,
                execution: report.executions,
                minimized: minimize(target, &input, &message),
                input,
                message,
            })),
        }
    };
    // Seeds are real values, encoded: all of them stay in the pool, accepted or not (a
    // target over several decoders accepts each seed in one of them only).
    for seed in &seeds {
        run(seed.clone(), &mut report, &mut pool, &mut rng)?;
    }
    assert!(report.accepted > 0, "{}: no seed is accepted, the target is broken", target.name);
    pool.retain(|p| !seeds.contains(p));
    pool.splice(0..0, seeds.iter().cloned());
    while started.elapsed() < opts.duration && report.executions < opts.executions_max {
        let base = &pool[rng.below(pool.len())];
        let other = &pool[rng.below(pool.len())];
        let input = mutate(&mut rng, base, other, target.dictionary);
        run(input, &mut report, &mut pool, &mut rng)?;
    }
    report.elapsed = started.elapsed();
    report.pool = pool.len();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts_all(_: &[u8]) -> bool {
        true
    }

    fn panics_on_ff_ff(data: &[u8]) -> bool {
        assert!(!data.windows(2).any(|w| w == [0xff, 0xff]), "found ff ff");
        true
    }

    const SEEDS: fn() -> Vec<Vec<u8>> = || vec![b"hello".to_vec(), vec![0, 1, 2]];

    #[test]
    fn a_seed_names_the_inputs_whatever_the_time() {
        let target = Target { name: "all", what: "", seeds: SEEDS, dictionary: &[], run: accepts_all };
        let inputs = |seed| {
            let mut rng = Rng::new(seed);
            (0..200).map(|_| mutate(&mut rng, b"hello", &[9, 9], &[b"tok"])).collect::<Vec<_>>()
        };
        assert_eq!(inputs(7), inputs(7));
        assert_ne!(inputs(7), inputs(8));
        let opts = Options { seed: 7, duration: Duration::from_secs(60), executions_max: 500, last_input: None };
        let report = fuzz(&target, opts).unwrap();
        assert_eq!((report.executions, report.accepted), (500, 500));
    }

    #[test]
    fn a_panic_is_reported_with_its_input_and_seed() {
        let target = Target { name: "ffff", what: "", seeds: SEEDS, dictionary: &[], run: panics_on_ff_ff };
        let opts = Options { seed: 3, duration: Duration::from_secs(60), executions_max: 1_000_000, last_input: None };
        let failure = fuzz(&target, opts.clone()).unwrap_err();
        assert!(failure.message.contains("found ff ff"), "{failure}");
        assert!(failure.input.windows(2).any(|w| w == [0xff, 0xff]));
        assert_eq!(failure.minimized, [0xff, 0xff], "shrunk to what fails");
        let text = failure.to_string();
        assert!(text.contains("TALLY_FUZZ_SEED=3") && text.contains(&hex(&failure.input)), "{text}");
        // The same seed fails at the same execution with the same input.
        let again = fuzz(&target, opts).unwrap_err();
        assert_eq!((again.execution, again.input), (failure.execution, failure.input));
    }
}
