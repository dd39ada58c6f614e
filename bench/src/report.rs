//! What every suite prints, and the percentile computation they share.
//!
//! Each measurement goes to stdout as one JSON line the moment it is taken, so a run
//! cut short keeps what it measured and a consumer can stream the lines:
//!
//! ```text
//!   {"bench":"log","case":"n_data=3,clients=64","metric":"append_throughput","value":5120,"unit":"records/s"}
//! ```
//!
//! At the end the same measurements go to stderr as an aligned table for people.

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;

/// One measurement, as printed.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub case: String,
    pub metric: &'static str,
    pub value: f64,
    pub unit: &'static str,
}

/// The measurements of one suite run.
pub struct Report {
    bench: &'static str,
    title: String,
    measurements: Vec<Measurement>,
}

impl Report {
    /// `title` heads the table; put there what holds for every case (record size,
    /// fsync policy).
    pub fn new(bench: &'static str, title: impl Into<String>) -> Report {
        Report { bench, title: title.into(), measurements: Vec::new() }
    }

    /// Prints the measurement as a JSON line and keeps it for the table.
    pub fn record(&mut self, case: &str, metric: &'static str, value: f64, unit: &'static str) -> anyhow::Result<()> {
        // A NaN or an infinity would print as `null`: a bug in the suite's arithmetic.
        assert!(value.is_finite(), "{case} {metric} is {value}");
        let m = Measurement { case: case.to_owned(), metric, value, unit };
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", json_line(self.bench, &m)).and_then(|()| out.flush()).context("writing to stdout")?;
        self.measurements.push(m);
        Ok(())
    }

    /// The value recorded for (case, metric), if any.
    pub fn value(&self, case: &str, metric: &str) -> Option<f64> {
        self.measurements.iter().find(|m| m.case == case && m.metric == metric).map(|m| m.value)
    }

    /// The table of every measurement, in the order they were taken.
    pub fn table(&self) -> String {
        let header = ["case", "metric", "value", "unit"];
        let rows: Vec<[String; 4]> = self
            .measurements
            .iter()
            .map(|m| [m.case.clone(), m.metric.to_owned(), format_value(m.value), m.unit.to_owned()])
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.len());
            }
        }
        let line = |cells: [&str; 4]| {
            let [case, metric, value, unit] = cells;
            let [wc, wm, wv, _] = widths;
            // Numbers align right, so their digits line up.
            format!("{case:<wc$}  {metric:<wm$}  {value:>wv$}  {unit}").trim_end().to_owned() + "\n"
        };
        let mut table = format!("{}: {}\n", self.bench, self.title);
        table += &line(header);
        table += &line(widths.map(|w| "-".repeat(w)).each_ref().map(String::as_str));
        let mut previous_case = None;
        for (row, m) in rows.iter().zip(&self.measurements) {
            // A case's name is printed once, on its first row of a run of rows.
            let case = if previous_case == Some(&m.case) { "" } else { row[0].as_str() };
            previous_case = Some(&m.case);
            table += &line([case, &row[1], &row[2], &row[3]]);
        }
        table
    }

    pub fn print_table(&self) {
        eprint!("\n{}", self.table());
    }
}

/// `{"bench","case","metric","value","unit"}` in that order (a `serde_json::Value`
/// object would sort its keys).
pub fn json_line(bench: &str, m: &Measurement) -> String {
    let string = |s: &str| serde_json::Value::from(s).to_string();
    format!(
        r#"{{"bench":{},"case":{},"metric":{},"value":{},"unit":{}}}"#,
        string(bench),
        string(&m.case),
        string(m.metric),
        format_value(m.value),
        string(m.unit)
    )
}

/// Whole numbers print without a fraction (`850`, not `850.0`); others as Rust prints
/// the `f64`, which reads back to the same value.
fn format_value(value: f64) -> String {
    // Below 2^53 every whole f64 is exactly an i64.
    if value.fract() == 0.0 && value.abs() < (1u64 << 53) as f64 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// `value` rounded to `decimals` decimal places, for values whose last digits are noise.
pub fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// A duration in whole microseconds, saturating at `u32::MAX` (71 minutes).
pub fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// `d` in nanoseconds, saturated at about 4.3 s, for operations of a few microseconds.
pub fn nanos(d: Duration) -> u32 {
    u32::try_from(d.as_nanos()).unwrap_or(u32::MAX)
}

/// The requests of one or more closed loops that completed within their windows.
#[derive(Default)]
pub struct Samples {
    pub latencies_us: Vec<u32>,
    /// The time the counted requests were issued in, over all runs.
    pub window: Duration,
}

impl Samples {
    pub fn extend(&mut self, other: Samples) {
        self.latencies_us.extend(other.latencies_us);
        self.window += other.window;
    }

    /// Requests per second over the windows, and the latencies.
    pub fn finish(self) -> (f64, Latencies) {
        assert!(self.window > Duration::ZERO, "throughput needs a window");
        let throughput = self.latencies_us.len() as f64 / self.window.as_secs_f64();
        (throughput, Latencies::new(self.latencies_us))
    }
}

/// Latency samples in microseconds, sorted once for any number of percentiles.
///
/// Exact rather than bucketed like an HDR histogram: a run keeps at most a few
/// hundred thousand samples, 4 bytes each.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    sorted_us: Vec<u32>,
}

impl Latencies {
    pub fn new(mut samples_us: Vec<u32>) -> Latencies {
        samples_us.sort_unstable();
        Latencies { sorted_us: samples_us }
    }

    pub fn len(&self) -> usize {
        self.sorted_us.len()
    }

    /// The nearest-rank percentile: the smallest sample that at least `percent` of
    /// the samples do not exceed. `None` without samples.
    pub fn percentile(&self, percent: f64) -> Option<u32> {
        assert!((0.0..=100.0).contains(&percent), "a percentile is in 0..=100, not {percent}");
        let n = self.sorted_us.len();
        if n == 0 {
            return None;
        }
        let rank = (percent / 100.0 * n as f64).ceil() as usize;
        Some(self.sorted_us[rank.clamp(1, n) - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        fn check(samples: &[u32], percent: f64, expect: Option<u32>) {
            let latencies = Latencies::new(samples.to_vec());
            assert_eq!(latencies.percentile(percent), expect, "p{percent} of {samples:?}");
        }
        check(&[], 50.0, None);
        check(&[7], 0.0, Some(7));
        check(&[7], 99.0, Some(7));
        check(&[3, 1, 2], 50.0, Some(2));
        check(&[4, 3, 2, 1], 50.0, Some(2));
        check(&[4, 3, 2, 1], 50.1, Some(3));
        check(&[4, 3, 2, 1], 100.0, Some(4));
        let hundred: Vec<u32> = (1..=100).rev().collect();
        check(&hundred, 99.0, Some(99));
        check(&hundred, 99.5, Some(100));
        check(&hundred, 1.0, Some(1));
    }

    #[test]
    fn json_lines_keep_the_field_order_and_print_whole_numbers_plainly() {
        fn check(value: f64, case: &str, expect: &str) {
            let m = Measurement { case: case.into(), metric: "append_throughput", value, unit: "records/s" };
            assert_eq!(json_line("log", &m), expect);
        }
        check(
            5120.0,
            "n_data=3,clients=64",
            r#"{"bench":"log","case":"n_data=3,clients=64","metric":"append_throughput","value":5120,"unit":"records/s"}"#,
        );
        check(
            0.125,
            r#"a "quoted" case"#,
            r#"{"bench":"log","case":"a \"quoted\" case","metric":"append_throughput","value":0.125,"unit":"records/s"}"#,
        );
    }

    #[test]
    fn the_table_aligns_columns_and_names_each_case_once() {
        let mut report = Report::new("log", "1 KiB records");
        report.measurements = vec![
            Measurement { case: "a".into(), metric: "x_p50_us", value: 5.0, unit: "us" },
            Measurement { case: "a".into(), metric: "x_p99_us", value: 1234.0, unit: "us" },
            Measurement { case: "longer".into(), metric: "ratio", value: 0.5, unit: "ratio" },
        ];
        let expect = "\
log: 1 KiB records
case    metric    value  unit
------  --------  -----  -----
a       x_p50_us      5  us
        x_p99_us   1234  us
longer  ratio       0.5  ratio
";
        assert_eq!(report.table(), expect);
    }
}
