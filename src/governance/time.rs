//! Time as the gate sees it: UTC unix seconds, RFC 3339 text (`2026-11-29T09:51:13Z`) and
//! short durations (`90s`, `30m`, `12h`, `7d`). Pure: the current time is always passed in.

use thiserror::Error;

/// Unix seconds, UTC.
pub type Timestamp = i64;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TimeError {
    #[error("`{0}` is not a time in the form 2026-11-29T09:51:13Z (UTC, seconds, a literal Z)")]
    Rfc3339(String),
    #[error("`{0}` is not a duration: write a whole number followed by s, m, h or d (e.g. 90s, 30m, 12h, 7d)")]
    Duration(String),
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 0,
    }
}

/// Unix seconds of a UTC civil time, or `None` when a field is out of range.
pub fn unix_from_civil(
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
) -> Option<Timestamp> {
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    Some(
        days_from_civil(year, month, day) * 86_400
            + i64::from(hour) * 3600
            + i64::from(minute) * 60
            + i64::from(second),
    )
}

/// `2026-11-29T09:51:13Z`.
pub fn format_rfc3339(t: Timestamp) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

/// Parses exactly the form [`format_rfc3339`] writes; anything else is refused, so a time has
/// one spelling and a signed payload one byte sequence.
pub fn parse_rfc3339(text: &str) -> Result<Timestamp, TimeError> {
    let err = || TimeError::Rfc3339(text.to_string());
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return Err(err());
    }
    let num = |range: std::ops::Range<usize>| -> Result<u32, TimeError> {
        let part = &text[range];
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(err());
        }
        part.parse().map_err(|_| err())
    };
    let t = unix_from_civil(
        i64::from(num(0..4)?),
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    )
    .ok_or_else(err)?;
    Ok(t)
}

/// Parses `90s`, `30m`, `12h`, `7d` into seconds.
pub fn parse_duration(text: &str) -> Result<i64, TimeError> {
    let err = || TimeError::Duration(text.to_string());
    // Only ASCII is a duration; splitting other text at its last byte could cut a character.
    if !text.is_ascii() {
        return Err(err());
    }
    let (digits, unit) = text.split_at(text.len().saturating_sub(1));
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(err());
    }
    let n: i64 = digits.parse().map_err(|_| err())?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(err()),
    };
    n.checked_mul(scale).ok_or_else(err)
}

/// The shortest exact spelling of a duration in seconds (`7d`, `90s`).
pub fn format_duration(secs: i64) -> String {
    for (unit, scale) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs != 0 && secs % scale == 0 {
            return format!("{}{unit}", secs / scale);
        }
    }
    format!("{secs}s")
}

#[cfg(test)]
mod tests {
    /// Found by the `policy_load` fuzz target: a duration ending in a multi-byte character
    /// (`1̙`, a combining mark) made the split panic; it is refused like any other bad duration.
    #[test]
    fn a_duration_ending_in_a_multibyte_character_is_refused() {
        for text in ["1\u{319}", "7\u{e9}", "\u{1f600}", "1d\u{319}"] {
            assert!(super::parse_duration(text).is_err(), "{text:?}");
        }
        assert_eq!(super::parse_duration("7d").expect("ok"), 604_800);
    }

    use super::*;

    #[test]
    fn rfc3339_round_trips_known_instants() {
        for (text, unix) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2000-02-29T12:00:00Z", 951_825_600),
            ("2026-11-29T09:51:13Z", 1_795_945_873),
            ("2038-01-19T03:14:08Z", 2_147_483_648),
        ] {
            assert_eq!(parse_rfc3339(text), Ok(unix), "{text}");
            assert_eq!(format_rfc3339(unix), text);
        }
    }

    #[test]
    fn rfc3339_refuses_other_spellings() {
        for text in [
            "2026-11-29 09:51:13Z",
            "2026-11-29T09:51:13+00:00",
            "2026-11-29T09:51:13.5Z",
            "2026-02-30T00:00:00Z",
            "2026-11-29T24:00:00Z",
            "+026-11-29T09:51:13Z",
            "",
        ] {
            assert!(parse_rfc3339(text).is_err(), "{text}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("30m"), Ok(1800));
        assert_eq!(parse_duration("12h"), Ok(43_200));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        for bad in ["", "7", "d", "-1d", "1w", "1.5h", " 7d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(604_800), "7d");
        assert_eq!(format_duration(90), "90s");
    }
}
