//! The breakdown's histograms for `/metrics`: one per part, no IDs as labels.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use super::probe::Part;

/// The buckets' upper bounds, in microseconds.
const BOUNDS_US: [u64; 16] =
    [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 10_000_000];

/// Per part: how many executions spent at most each bound in it, their sum and count.
pub struct PartHistograms {
    buckets: Vec<[AtomicU64; BOUNDS_US.len() + 1]>,
    sum_us: Vec<AtomicU64>,
}

impl Default for PartHistograms {
    fn default() -> Self {
        PartHistograms {
            buckets: Part::ALL.iter().map(|_| std::array::from_fn(|_| AtomicU64::new(0))).collect(),
            sum_us: Part::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl PartHistograms {
    /// One execution's breakdown (parts it spent nothing in are not counted).
    pub fn record(&self, parts: &[(Part, u64)]) {
        for &(part, us) in parts {
            let i = part as usize;
            let bucket = BOUNDS_US.iter().position(|&b| us <= b).unwrap_or(BOUNDS_US.len());
            self.buckets[i][bucket].fetch_add(1, Ordering::Relaxed);
            self.sum_us[i].fetch_add(us, Ordering::Relaxed);
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
            for (b, count) in self.buckets[i].iter().enumerate() {
                cumulative += count.load(Ordering::Relaxed);
                let le = match BOUNDS_US.get(b) {
                    Some(us) => format!("{}", *us as f64 / 1e6),
                    None => "+Inf".to_string(),
                };
                let _ = writeln!(out, "{name}_bucket{{part=\"{}\",le=\"{le}\"}} {cumulative}", part.name());
            }
            let sum = self.sum_us[i].load(Ordering::Relaxed) as f64 / 1e6;
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
