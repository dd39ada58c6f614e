//! Times host calls from inside a guest, for the benches: what one call costs a
//! function, without HTTP or instantiation around it.
//!
//! Input `read-next N`: appends one 1 KiB record to the book under the tag `probe`,
//! then reads it back with `log::read_next` N times (after it is cached, so each read
//! is a cache hit), timing every call on the guest's monotonic clock. Input `clock N`:
//! times N readings of the monotonic clock itself (each one a host call that the
//! exactly-once core keeps for its log). Input `append N`: times N exactly-once
//! appends of 1 KiB records under the tag `probe` (each durable before it returns).
//! The output is `p50_ns p99_ns mean_ns` of those calls. A clock reading is logged
//! before the next effect, so each timed append also logs the readings around it (a
//! Clocks step: two appends a call); input `append-loop N` reads the clock only before
//! and after N appends and outputs their mean, `mean_ns`, which is one append's cost.
//! Input `spin MS` keeps the guest busy for MS milliseconds of its monotonic clock and
//! outputs `spun` (the breakdown's tests: the time is the guest's own).

use std::time::Instant;

use tally_sdk::{log, Tag};

const PROBE: Tag = Tag::named("probe");

fn handle(input: Vec<u8>) -> Result<Vec<u8>, String> {
    let input = std::str::from_utf8(&input).map_err(|_| "the input is not UTF-8")?;
    let words: Vec<&str> = input.split_whitespace().collect();
    match words[..] {
        ["read-next", n] => {
            let n: usize = n.parse().map_err(|_| format!("the count {n:?} is not a number"))?;
            read_next(n.clamp(1, 1_000_000))
        }
        ["clock", n] => {
            let n: usize = n.parse().map_err(|_| format!("the count {n:?} is not a number"))?;
            let times = (0..n.clamp(1, 1_000_000))
                .map(|_| {
                    let started = Instant::now();
                    started.elapsed().as_nanos() as u64
                })
                .collect();
            Ok(summary(times))
        }
        ["append", n] => {
            let n: usize = n.parse().map_err(|_| format!("the count {n:?} is not a number"))?;
            let mut times = Vec::with_capacity(n);
            for _ in 0..n.clamp(1, 100_000) {
                let started = Instant::now();
                log::append(&[PROBE], [b'a'; 1024]).map_err(|e| e.to_string())?;
                times.push(started.elapsed().as_nanos() as u64);
            }
            Ok(summary(times))
        }
        ["append-loop", n] => {
            let n: usize = n.parse().map_err(|_| format!("the count {n:?} is not a number"))?;
            let n = n.clamp(1, 100_000);
            let started = Instant::now();
            for _ in 0..n {
                log::append(&[PROBE], [b'a'; 1024]).map_err(|e| e.to_string())?;
            }
            Ok(format!("{}", started.elapsed().as_nanos() as u64 / n as u64).into_bytes())
        }
        ["spin", ms] => {
            let ms: u64 = ms.parse().map_err(|_| format!("the time {ms:?} is not a number"))?;
            let started = Instant::now();
            let mut x = 1u64;
            while started.elapsed().as_millis() < u128::from(ms.min(10_000)) {
                for _ in 0..1000 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
            }
            std::hint::black_box(x);
            Ok(b"spun".to_vec())
        }
        _ => Err(format!("expected `read-next N`, `clock N`, `append N`, `append-loop N` or `spin MS`, found {input:?}")),
    }
}

tally_sdk::handler!(handle);

fn read_next(n: usize) -> Result<Vec<u8>, String> {
    let seqnum = log::append(&[PROBE], [b'p'; 1024]).map_err(|e| e.to_string())?;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let record = log::read_next(PROBE, seqnum).map_err(|e| e.to_string())?;
        times.push(started.elapsed().as_nanos() as u64);
        match record {
            Some(r) if r.seqnum == seqnum && r.data.len() == 1024 => {}
            other => return Err(format!("read back {:?} instead of the probe record", other.map(|r| r.seqnum))),
        }
    }
    Ok(summary(times))
}

/// `p50 p99 mean` of nanosecond timings.
fn summary(mut times: Vec<u64>) -> Vec<u8> {
    let n = times.len();
    let mean = times.iter().sum::<u64>() / n as u64;
    times.sort_unstable();
    let at = |p: usize| times[(n * p / 100).min(n - 1)];
    format!("{} {} {mean}", at(50), at(99)).into_bytes()
}
