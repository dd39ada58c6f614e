//! Cron expressions, for schedules: the five fields of Vixie cron, in UTC.
//!
//! ```text
//!   minute  hour  day-of-month  month  day-of-week
//!   0-59    0-23  1-31          1-12   0-7 (0 and 7 are Sunday)
//! ```
//!
//! A field is `*` or a comma-separated list of `N`, `A-B`, `*/S`, `A-B/S` and `A/S`
//! (from A to the field's end, every S); months and days of the week also take their
//! English three-letter names (`jan`, `mon`), in any case. `@yearly` (`@annually`),
//! `@monthly`, `@weekly`, `@daily` (`@midnight`) and `@hourly` stand for their usual
//! expressions. As in Vixie cron, when both day fields are restricted a day matches if
//! either does (`0 0 1 * mon`: the first of the month and every Monday); when one is
//! `*`, only the other counts. Time zones other than UTC are not supported.

use crate::error::{Error, Result};

/// A parsed cron expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u64,
    /// Bits 1..=31.
    days: u64,
    /// Bits 1..=12.
    months: u64,
    /// Bits 0..=6, Sunday is 0.
    weekdays: u64,
    days_star: bool,
    weekdays_star: bool,
}

const MINUTE_MS: u64 = 60_000;
const DAY_MS: u64 = 86_400_000;
/// Days searched for a match before a schedule is declared never to fire: past 8
/// years every day-month-weekday combination has recurred (28 February 29ths in 400
/// years, one at least every 8).
const SEARCH_DAYS: u64 = 8 * 366 + 1;

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Cron {
    pub fn parse(text: &str) -> Result<Cron> {
        let bad = |m: String| Error::InvalidArgument(format!("cron expression {text:?}: {m}"));
        let expanded = match text.trim().to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_string(),
            "@monthly" => "0 0 1 * *".to_string(),
            "@weekly" => "0 0 * * 0".to_string(),
            "@daily" | "@midnight" => "0 0 * * *".to_string(),
            "@hourly" => "0 * * * *".to_string(),
            other if other.starts_with('@') => return Err(bad("unknown macro".into())),
            other => other.to_string(),
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(bad(format!(
                "{} fields; a cron expression has five (minute hour day-of-month month day-of-week)",
                fields.len()
            )));
        };
        let weekdays = field(weekday, "day of the week", 0, 7, &WEEKDAYS).map_err(bad)?;
        // 7 is Sunday too.
        let weekdays = (weekdays | (weekdays >> 7)) & 0x7f;
        Ok(Cron {
            minutes: field(minute, "minute", 0, 59, &[]).map_err(bad)?,
            hours: field(hour, "hour", 0, 23, &[]).map_err(bad)?,
            days: field(day, "day of the month", 1, 31, &[]).map_err(bad)?,
            months: field(month, "month", 1, 12, &MONTHS).map_err(bad)?,
            weekdays,
            days_star: day == "*",
            weekdays_star: weekday == "*",
        })
    }

    /// The first time this expression names strictly after `after_ms` (milliseconds
    /// since the Unix epoch, on a minute's boundary), or `None` if it names none in the
    /// next eight years (`0 0 30 2 *`: February 30th) or past the end of time.
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        let first = (after_ms / MINUTE_MS).checked_add(1)?.checked_mul(MINUTE_MS)?;
        let mut minute_of_day = (first % DAY_MS) / MINUTE_MS;
        for day in (first / DAY_MS..).take(SEARCH_DAYS as usize) {
            if self.day_matches(day) {
                if let Some(m) = self.first_minute_from(minute_of_day) {
                    return day.checked_mul(DAY_MS)?.checked_add(m * MINUTE_MS);
                }
            }
            minute_of_day = 0;
        }
        None
    }

    fn day_matches(&self, day: u64) -> bool {
        let (_, month, dom) = civil_from_days(day);
        if self.months & (1 << month) == 0 {
            return false;
        }
        let weekday = (day + 4) % 7; // 1970-01-01 was a Thursday.
        let by_day = self.days & (1 << dom) != 0;
        let by_weekday = self.weekdays & (1 << weekday) != 0;
        match (self.days_star, self.weekdays_star) {
            (true, true) => true,
            (true, false) => by_weekday,
            (false, true) => by_day,
            (false, false) => by_day || by_weekday,
        }
    }

    /// The first matching minute of a day at or after minute `from` of it.
    fn first_minute_from(&self, from: u64) -> Option<u64> {
        (from / 60..24).filter(|h| self.hours & (1 << h) != 0).find_map(|h| {
            let start = if h == from / 60 { from % 60 } else { 0 };
            (start..60).find(|m| self.minutes & (1 << m) != 0).map(|m| h * 60 + m)
        })
    }
}

/// The bit set of one field, bits `lo..=hi`.
fn field(text: &str, what: &str, lo: u64, hi: u64, names: &[&str]) -> std::result::Result<u64, String> {
    let value = |s: &str| -> std::result::Result<u64, String> {
        if let Some(i) = names.iter().position(|n| *n == s) {
            // Months count from 1, days of the week from 0.
            return Ok(i as u64 + lo);
        }
        let v: u64 = s.parse().map_err(|_| format!("{what} {s:?} is not a number"))?;
        if v < lo || v > hi {
            return Err(format!("{what} {v} is outside {lo}-{hi}"));
        }
        Ok(v)
    };
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u64 = s.parse().map_err(|_| format!("step {s:?} of the {what} is not a number"))?;
                if step == 0 {
                    return Err(format!("a step of the {what} is 0"));
                }
                (r, Some(step))
            }
            None => (item, None),
        };
        let (from, to) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `A/S` runs to the field's end; a plain `A` is one value.
                None => {
                    let a = value(r)?;
                    (a, if step.is_some() { hi } else { a })
                }
            },
        };
        if from > to {
            return Err(format!("{what} range {range:?} runs backwards"));
        }
        // A step may be any `u64`: past the field's end, it names `from` only.
        let mut v = Some(from);
        while let Some(at) = v.filter(|at| *at <= to) {
            bits |= 1 << at;
            v = at.checked_add(step.unwrap_or(1));
        }
    }
    Ok(bits)
}

/// (year, month 1-12, day 1-31) of a day counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds since the epoch of a UTC date and time, by counting days the slow
    /// way (independent of `civil_from_days`).
    fn at(year: u64, month: u64, day: u64, hour: u64, minute: u64) -> u64 {
        let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
        let lengths = |y: u64| [31, if leap(y) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let mut days = (1970..year).map(|y| if leap(y) { 366 } else { 365 }).sum::<u64>();
        days += lengths(year)[..(month - 1) as usize].iter().sum::<u64>();
        days += day - 1;
        (days * 24 * 60 + hour * 60 + minute) * MINUTE_MS
    }

    fn next(expr: &str, after: u64) -> Option<u64> {
        Cron::parse(expr).unwrap().next_after(after)
    }

    #[test]
    fn the_next_time_is_the_first_matching_minute_strictly_after() {
        let t = at(2026, 11, 26, 9, 30);
        assert_eq!(next("* * * * *", t), Some(t + MINUTE_MS));
        assert_eq!(next("* * * * *", t + 1), Some(t + MINUTE_MS));
        assert_eq!(next("30 9 * * *", t), Some(at(2026, 11, 27, 9, 30)));
        assert_eq!(next("0 2 * * *", t), Some(at(2026, 11, 27, 2, 0)));
        assert_eq!(next("@hourly", t), Some(at(2026, 11, 26, 10, 0)));
        assert_eq!(next("*/15 * * * *", t), Some(at(2026, 11, 26, 9, 45)));
        assert_eq!(next("5-10/2 * * * *", t), Some(at(2026, 11, 26, 10, 5)));
        assert_eq!(next("50/5 * * * *", at(2026, 11, 26, 9, 56)), Some(at(2026, 11, 26, 10, 50)));
        // Across a month and a year.
        assert_eq!(next("0 0 1 * *", t), Some(at(2026, 12, 1, 0, 0)));
        assert_eq!(next("@yearly", t), Some(at(2027, 1, 1, 0, 0)));
        assert_eq!(next("0 12 * feb,MAR *", t), Some(at(2027, 2, 1, 12, 0)));
        // 2026-11-26 is a Thursday.
        assert_eq!(next("0 9 * * mon-fri", t), Some(at(2026, 11, 27, 9, 0)));
        assert_eq!(next("0 9 * * sat,sun", t), Some(at(2026, 11, 28, 9, 0)));
        assert_eq!(next("0 9 * * 7", t), Some(at(2026, 11, 29, 9, 0)));
        assert_eq!(next("@weekly", t), Some(at(2026, 11, 29, 0, 0)));
        // Both day fields restricted: either matches (the 1st, or a Monday).
        assert_eq!(next("0 0 1 * mon", t), Some(at(2026, 11, 30, 0, 0)));
        assert_eq!(next("0 0 1 * mon", at(2026, 11, 30, 0, 0)), Some(at(2026, 12, 1, 0, 0)));
        // Leap days: the next February 29th is in 2028.
        assert_eq!(next("0 0 29 2 *", t), Some(at(2028, 2, 29, 0, 0)));
        assert_eq!(next("0 0 29 2 *", at(2096, 3, 1, 0, 0)), Some(at(2104, 2, 29, 0, 0)));
        // Days that never come.
        assert_eq!(next("0 0 30 2 *", t), None);
        assert_eq!(next("0 0 31 4,6,9,11 *", t), None);
        assert_eq!(next("* * * * *", u64::MAX - 1), None);
    }

    #[test]
    fn civil_dates_agree_with_counting_days() {
        for day in (0..200 * 366).step_by(13) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(at(y, m, d, 0, 0), day * DAY_MS, "{y}-{m}-{d}");
        }
    }

    /// Found by the `cron` fuzz target: a step past the end of `u64` overflowed the
    /// walk over the field (a panic in a debug build; in a release build it wrapped and
    /// named minutes 0 to 5).
    #[test]
    fn a_step_past_the_field_names_its_start_only() {
        assert_eq!(Cron::parse("5/18446744073709551615 * * * *").unwrap(), Cron::parse("5 * * * *").unwrap());
        assert_eq!(Cron::parse("* * */18446744073709551615 * *").unwrap(), Cron::parse("* * 1 * *").unwrap());
    }

    #[test]
    fn malformed_expressions_are_refused_with_what_is_wrong() {
        for (expr, says) in [
            ("* * * *", "4 fields"),
            ("* * * * * *", "6 fields"),
            ("60 * * * *", "minute 60 is outside 0-59"),
            ("* 24 * * *", "hour 24"),
            ("* * 0 * *", "day of the month 0"),
            ("* * * 13 *", "month 13"),
            ("* * * * 8", "day of the week 8"),
            ("*/0 * * * *", "step of the minute is 0"),
            ("5-1 * * * *", "runs backwards"),
            ("x * * * *", "\"x\" is not a number"),
            ("* * * foo *", "month \"foo\""),
            ("1,,2 * * * *", "\"\" is not a number"),
            ("@often", "unknown macro"),
            ("", "0 fields"),
        ] {
            let e = Cron::parse(expr).unwrap_err().to_string();
            assert!(e.contains(says), "{expr:?}: {e}");
        }
    }
}
