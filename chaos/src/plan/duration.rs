//! Durations as plans write them: a whole number followed by `ms`, `s` or `m`.

use std::time::Duration;

/// Parses `500ms`, `5s` or `2m`; the error says what was expected.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let bad = || format!("`{text}` is not a duration (write e.g. 500ms, 5s or 2m)");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let millis = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        _ => None,
    }
    .ok_or_else(bad)?;
    Ok(Duration::from_millis(millis))
}

/// The exact plan spelling of `d` (`2m`, `5s`, `500ms`), so a written plan reads back equal.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms != 0 && ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1_000 == 0 {
        format!("{}s", ms / 1_000)
    } else {
        format!("{ms}ms")
    }
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
    fn parses_the_three_units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_anything_else() {
        for bad in [
            "",
            "5",
            "s",
            "1h",
            "1.5s",
            "-1s",
            "5 s",
            "5sec",
            "99999999999999999999m",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn formats_round_trip() {
        for text in ["500ms", "5s", "2m", "0s", "90s", "1500ms"] {
            let d = parse(text).unwrap();
            assert_eq!(parse(&format(d)), Ok(d));
        }
        assert_eq!(format(Duration::from_secs(120)), "2m");
        assert_eq!(format(Duration::from_secs(90)), "90s");
    }

    #[test]
    fn seconds_drop_trailing_zeros() {
        assert_eq!(seconds(Duration::from_secs(90)), "90s");
        assert_eq!(seconds(Duration::from_millis(92_500)), "92.5s");
        assert_eq!(seconds(Duration::ZERO), "0s");
    }
}
