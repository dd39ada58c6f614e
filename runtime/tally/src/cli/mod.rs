//! The `tally` binary's commands that are not the node: what it prints for people, and
//! `tally new` and `tally build` for every guest language.

pub mod build;
pub mod cluster;
pub mod config;
pub mod dev;
pub mod inspect;
pub mod logs;
pub mod new;
pub mod output;
pub mod schedule;
pub mod sdk;
pub mod token;
pub mod tools;

/// A duration on the command line in milliseconds: a number of milliseconds, or a
/// number with `ms`, `s`, `m`, `h` or `d`.
pub fn duration_ms(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit_ms: u64 = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => anyhow::bail!("{text:?}: unknown unit {other:?} (ms, s, m, h or d)"),
    };
    let n: u64 = number.parse().map_err(|_| anyhow::anyhow!("{text:?} is not a duration (like 500ms, 10s, 5m, 1h, 1d)"))?;
    n.checked_mul(unit_ms).ok_or_else(|| anyhow::anyhow!("{text:?} is too long"))
}

/// 64-bit FNV-1a: a hash that names cache directories after their contents or paths,
/// stable across Rust versions (unlike the standard library's hashers).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_take_a_unit_or_milliseconds() {
        for (text, ms) in
            [("1500", 1500), ("500ms", 500), ("10s", 10_000), ("5m", 300_000), ("1h", 3_600_000), ("2d", 172_800_000)]
        {
            assert_eq!(super::duration_ms(text).unwrap(), ms, "{text}");
        }
        for bad in ["", "s", "1.5s", "1w", "-1s", "99999999999999999999d"] {
            assert!(super::duration_ms(bad).is_err(), "{bad}");
        }
    }
}
