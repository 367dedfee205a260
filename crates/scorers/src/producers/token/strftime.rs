//! `strftime_now(format)`, the one clock of Hugging Face chat templates (Llama 3.1 and later
//! print "Today Date: 26 Jul 2024" with it), for the formats templates use.
//!
//! transformers calls Python's `datetime.now().strftime(format)` in the server's local time;
//! Shepherd formats the current UTC time (model servers usually run in UTC), so a server in
//! another time zone renders a different date around midnight. Supported directives: `%d %-d
//! %e %m %-m %Y %y %b %B %a %A %H %I %M %S %p %j %%`; any other is an error.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::{Error, ErrorKind};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// The `strftime_now` template function.
pub(super) fn strftime_now(format: &str) -> Result<String, Error> {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    strftime(format, i64::try_from(seconds).unwrap_or(0))
}

/// A civil UTC date and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DateTime {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// 0 = Monday.
    weekday: u32,
    /// 1-based day of the year.
    yearday: u32,
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days since 1970-01-01 → (year, month 1-12, day 1-31), by Howard Hinnant's civil calendar
/// algorithm.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

impl DateTime {
    fn from_unix(seconds: i64) -> Self {
        let days = seconds.div_euclid(86_400);
        let secs = u32::try_from(seconds.rem_euclid(86_400)).unwrap_or(0);
        let (year, month, day) = civil_from_days(days);
        let before: u32 = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
            .iter()
            .take(month.saturating_sub(1) as usize)
            .sum();
        let leap_day = u32::from(month > 2 && is_leap(year));
        DateTime {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
            // 1970-01-01 was a Thursday.
            weekday: u32::try_from((days + 3).rem_euclid(7)).unwrap_or(0),
            yearday: before + leap_day + day,
        }
    }
}

/// Formats the UTC time `seconds` after the Unix epoch.
fn strftime(format: &str, seconds: i64) -> Result<String, Error> {
    let t = DateTime::from_unix(seconds);
    let month = MONTHS[(t.month.clamp(1, 12) - 1) as usize];
    let weekday = WEEKDAYS[t.weekday.min(6) as usize];
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut directive = chars.next();
        let unpadded = directive == Some('-');
        if unpadded {
            directive = chars.next();
        }
        let _ = match (directive, unpadded) {
            (Some('d'), false) => write!(out, "{:02}", t.day),
            (Some('d'), true) => write!(out, "{}", t.day),
            (Some('e'), false) => write!(out, "{:2}", t.day),
            (Some('m'), false) => write!(out, "{:02}", t.month),
            (Some('m'), true) => write!(out, "{}", t.month),
            (Some('Y'), false) => write!(out, "{}", t.year),
            (Some('y'), false) => write!(out, "{:02}", t.year.rem_euclid(100)),
            (Some('b'), false) => write!(out, "{}", &month[..3]),
            (Some('B'), false) => write!(out, "{month}"),
            (Some('a'), false) => write!(out, "{}", &weekday[..3]),
            (Some('A'), false) => write!(out, "{weekday}"),
            (Some('H'), false) => write!(out, "{:02}", t.hour),
            (Some('I'), false) => write!(out, "{:02}", (t.hour + 11) % 12 + 1),
            (Some('M'), false) => write!(out, "{:02}", t.minute),
            (Some('S'), false) => write!(out, "{:02}", t.second),
            (Some('p'), false) => write!(out, "{}", if t.hour < 12 { "AM" } else { "PM" }),
            (Some('j'), false) => write!(out, "{:03}", t.yearday),
            (Some('%'), false) => write!(out, "%"),
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("strftime_now: unsupported format {format:?}"),
                ));
            }
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn formats_known_instants() {
        // 2024-07-26T13:05:09Z, a Friday, day 208 of a leap year.
        let t = 1_721_999_109;
        assert_eq!(strftime("%d %b %Y", t).unwrap(), "26 Jul 2024");
        assert_eq!(
            strftime("%A %B %-d %y %H:%M:%S %I%p %j %%", t).unwrap(),
            "Friday July 26 24 13:05:09 01PM 208 %"
        );
        assert_eq!(strftime("%Y-%m-%d %a", 0).unwrap(), "1970-01-01 Thu");
        // 2000-02-29 (a leap day) and 2100-03-01 (2100 is not a leap year).
        assert_eq!(
            strftime("%Y-%m-%d %j", 951_782_400).unwrap(),
            "2000-02-29 060"
        );
        assert_eq!(
            strftime("%Y-%m-%d %j", 4_107_542_400).unwrap(),
            "2100-03-01 060"
        );
        assert!(strftime("%Q", t).is_err());
        assert!(strftime_now("%d %b %Y").is_ok());
    }
}
