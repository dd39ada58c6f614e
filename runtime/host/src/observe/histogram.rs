//! The breakdown's histograms for `/metrics`: one per part, no IDs as labels.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use super::probe::Part;

/// The buckets' upper bounds, in microseconds.
const BOUNDS_US: [u64; 16] =
    [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 10_000_000];

/// Per part: how many executions spent at most each bound in it, their sum and count;
/// in a few shards, each thread adding to one, so that threads recording at once do not
/// fight over the same cache lines (the sums are read across shards, rarely).
pub struct PartHistograms {
    shards: Vec<Shard>,
}

/// One shard's counters, aligned so that no two shards share a cache line.
#[repr(align(128))]
struct Shard {
    buckets: [[AtomicU64; BOUNDS_US.len() + 1]; Part::ALL.len()],
    sum_us: [AtomicU64; Part::ALL.len()],
}

/// Shards of a node's histograms.
const SHARDS: usize = 8;

impl Default for PartHistograms {
    fn default() -> Self {
        let shard = || Shard {
            buckets: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            sum_us: std::array::from_fn(|_| AtomicU64::new(0)),
        };
        PartHistograms { shards: (0..SHARDS).map(|_| shard()).collect() }
    }
}

impl PartHistograms {
    /// One execution's breakdown (parts it spent nothing in are not counted).
    pub fn record(&self, parts: &[(Part, u64)]) {
        let shard = &self.shards[super::thread_shard(SHARDS)];
        for &(part, us) in parts {
            let i = part as usize;
            let bucket = BOUNDS_US.iter().position(|&b| us <= b).unwrap_or(BOUNDS_US.len());
            shard.buckets[i][bucket].fetch_add(1, Ordering::Relaxed);
            shard.sum_us[i].fetch_add(us, Ordering::Relaxed);
        }
    }

    /// The histograms in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let name = "tally_invocation_part_seconds";
        let _ =
            writeln!(out, "# HELP {name} Where executions' wall time went, by part (their own time; parts add up to the whole).");
        let _ = writeln!(out, "# TYPE {name} histogram");
        for part in Part::ALL {
            let i = part as usize;
            let mut cumulative = 0;
            for b in 0..=BOUNDS_US.len() {
                cumulative += self.shards.iter().map(|s| s.buckets[i][b].load(Ordering::Relaxed)).sum::<u64>();
                let le = match BOUNDS_US.get(b) {
                    Some(us) => format!("{}", *us as f64 / 1e6),
                    None => "+Inf".to_string(),
                };
                let _ = writeln!(out, "{name}_bucket{{part=\"{}\",le=\"{le}\"}} {cumulative}", part.name());
            }
            let sum = self.shards.iter().map(|s| s.sum_us[i].load(Ordering::Relaxed)).sum::<u64>() as f64 / 1e6;
            let _ = writeln!(out, "{name}_sum{{part=\"{}\"}} {sum}", part.name());
            let _ = writeln!(out, "{name}_count{{part=\"{}\"}} {cumulative}", part.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_count_every_execution() {
        let h = PartHistograms::default();
        h.record(&[(Part::Guest, 40), (Part::LogWait, 3_000)]);
        h.record(&[(Part::Guest, 60_000_000)]);
        let mut out = String::new();
        h.render(&mut out);
        assert!(out.contains("tally_invocation_part_seconds_bucket{part=\"guest\",le=\"0.00005\"} 1\n"), "{out}");
        assert!(out.contains("tally_invocation_part_seconds_bucket{part=\"guest\",le=\"+Inf\"} 2\n"), "{out}");
        assert!(out.contains("tally_invocation_part_seconds_count{part=\"log\"} 1\n"), "{out}");
        assert!(out.contains("tally_invocation_part_seconds_bucket{part=\"log\",le=\"0.0025\"} 0\n"), "{out}");
        assert!(out.contains("tally_invocation_part_seconds_bucket{part=\"log\",le=\"0.005\"} 1\n"), "{out}");
    }
}
