//! The one way anyplay writes a duration — node configuration, chaos plans and load flags
//! alike: a decimal number and a unit, `500ms`, `5s`, `1.5m`, `2h`.
//!
//! The value must come to a whole number of milliseconds, so that [`format`] spells every
//! parsed duration back to text that parses to the same value.

use std::time::Duration;

const UNITS: [(&str, u64); 4] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];

/// Why a text is not a duration; each message names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("`{0}` is not a duration (write e.g. 500ms, 5s, 1.5m or 2h)")]
    Malformed(String),
    #[error("`{0}` is not a whole number of milliseconds")]
    Fraction(String),
    #[error("`{0}` is too long a duration")]
    Overflow(String),
}

/// Parses a decimal number followed by `ms`, `s`, `m` or `h`.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    let malformed = || DurationError::Malformed(text.into());
    let number_end = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_end);
    let unit_ms = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|&(_, ms)| ms)
        .ok_or_else(malformed)?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || (number.contains('.') && !digits(fraction)) {
        return Err(malformed());
    }
    let overflow = || DurationError::Overflow(text.into());
    let fraction_ms =
        fraction_ms(fraction, unit_ms).ok_or_else(|| DurationError::Fraction(text.into()))?;
    whole
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_ms)?.checked_add(fraction_ms))
        .map(Duration::from_millis)
        .ok_or_else(overflow)
}

/// The milliseconds of the digits after the point, if they come to a whole number.
fn fraction_ms(fraction: &str, unit_ms: u64) -> Option<u64> {
    let fraction = fraction.trim_end_matches('0');
    // No unit is more than 10^7 ms, so seven digits are as fine as a whole millisecond goes.
    if fraction.len() > 7 {
        return None;
    }
    let scale = 10u64.pow(fraction.len() as u32);
    let numerator = fraction.parse::<u64>().unwrap_or(0) * unit_ms;
    (numerator % scale == 0).then_some(numerator / scale)
}

/// Like [`parse`], but a bare number counts as seconds: for flags whose name carries the unit.
pub fn parse_seconds(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        parse(&format!("{trimmed}s"))
    } else {
        parse(text)
    }
}

/// The shortest spelling of `d` in the largest unit that holds it whole (`2m`, `5s`,
/// `500ms`), which [`parse`] reads back equal.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    let (name, unit_ms) = UNITS
        .iter()
        .rev()
        .find(|(_, unit_ms)| ms % u128::from(*unit_ms) == 0)
        .unwrap_or(&UNITS[0]);
    format!("{}{name}", ms / u128::from(*unit_ms))
}

/// Seconds for tables: `90s`, `92.5s`.
pub fn seconds(d: Duration) -> String {
    let secs = format!("{:.3}", d.as_secs_f64());
    format!("{}s", secs.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit_whole_and_decimal() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0.25m"), Ok(Duration::from_secs(15)));
        assert_eq!(parse("0.001s"), Ok(Duration::from_millis(1)));
        assert_eq!(parse("1.5000000000000s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse(" 5s "), Ok(Duration::from_secs(5)));
    }

    #[test]
    fn refuses_anything_else() {
        for bad in [
            "", "5", "s", "ms", "1.5", "-1s", "+1s", "5 s", "5sec", "5S", "1d", ".5s", "5.s",
            "1.2.3s", "1e3s",
        ] {
            assert_eq!(
                parse(bad),
                Err(DurationError::Malformed(bad.trim().into())),
                "{bad:?}"
            );
        }
        for bad in ["0.0001s", "1.5ms", "0.00000001h"] {
            assert_eq!(
                parse(bad),
                Err(DurationError::Fraction(bad.into())),
                "{bad:?}"
            );
        }
        for bad in [
            "99999999999999999999m",
            "18446744073709551615s",
            "5124095576030432h",
        ] {
            assert_eq!(
                parse(bad),
                Err(DurationError::Overflow(bad.into())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_refusal_names_the_text_and_what_is_expected() {
        let message = parse("soon").unwrap_err().to_string();
        assert!(
            message.contains("`soon`") && message.contains("500ms"),
            "{message}"
        );
    }

    #[test]
    fn a_bare_number_is_seconds_where_the_flag_says_so() {
        assert_eq!(parse_seconds("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_seconds("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "-1", "soon", "0.0001", "1."] {
            assert!(parse_seconds(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn formats_round_trip() {
        for text in [
            "500ms", "5s", "2m", "1h", "0s", "90s", "1500ms", "1.5s", "0.5h", "61m", "3601s",
        ] {
            let d = parse(text).unwrap();
            assert_eq!(parse(&format(d)), Ok(d), "{text}");
        }
        assert_eq!(format(Duration::from_secs(120)), "2m");
        assert_eq!(format(Duration::from_secs(90)), "90s");
        assert_eq!(format(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format(Duration::from_secs(7200)), "2h");
        assert_eq!(format(Duration::ZERO), "0s");
    }

    #[test]
    fn seconds_drop_trailing_zeros() {
        assert_eq!(seconds(Duration::from_secs(90)), "90s");
        assert_eq!(seconds(Duration::from_millis(92_500)), "92.5s");
        assert_eq!(seconds(Duration::ZERO), "0s");
    }
}
