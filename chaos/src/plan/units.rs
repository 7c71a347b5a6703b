//! The lasting faults a plan sets on a link (through the fault proxy) or on a service (its CPU,
//! memory, disk or clock), with the units a plan writes them in.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use anyplay_cloud::duration;

pub use crate::supervisor::ServiceFault;

// A plan's link faults are the proxy's own, in the proxy's units.
pub use crate::proxy::{LinkFault, PartitionMode, Ways};

/// A link fault's parameters after its kind and link, as plans and timelines print them:
/// ` drop up on 30% of connections`.
pub(super) fn write_details(
    f: &mut fmt::Formatter<'_>,
    fault: &LinkFault,
    ways: Ways,
    share: Option<f64>,
) -> fmt::Result {
    match fault {
        // A partition's mode is only worth a word when it is not the default.
        LinkFault::Partition(PartitionMode::Hold) => {}
        fault => write!(f, " {fault}")?,
    }
    if ways != Ways::Both {
        write!(f, " {ways}")?;
    }
    match share {
        Some(share) => write!(f, " on {:.0}% of connections", share * 100.0),
        None => Ok(()),
    }
}

/// A service fault's value as a plan writes it: `0.2 cores`, `150MB`, `full`, `+30s`.
impl fmt::Display for ServiceFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ServiceFault::Cpu { cores } => write!(f, "{cores} cores"),
            ServiceFault::Memory { bytes } => write!(f, "{}", Bytes(bytes)),
            ServiceFault::DiskFull => f.write_str("full"),
            ServiceFault::Clock { offset_ms } => write!(f, "{}", ClockOffset::of_millis(offset_ms)),
        }
    }
}

/// A size in bytes, written `150MB` (10^6), `150MiB` (2^20), `64KB`, `2GiB` or a plain number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bytes(pub u64);

const UNITS: &[(&str, u64)] = &[
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("B", 1),
];

impl FromStr for Bytes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a size (e.g. 150MB, 256MiB, 1GB)");
        let (number, unit) = UNITS
            .iter()
            .find_map(|(name, unit)| s.strip_suffix(name).map(|n| (n, *unit)))
            .unwrap_or((s, 1));
        let number: u64 = number.trim().parse().map_err(|_| bad())?;
        number.checked_mul(unit).map(Bytes).ok_or_else(bad)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The largest unit that divides it (decimal first, as plans mostly write them), so
        // the text reads back to the same number.
        let (name, unit) = [3, 4, 5, 0, 1, 2]
            .into_iter()
            .map(|k| UNITS[k])
            .find(|(_, unit)| self.0 != 0 && self.0 % unit == 0)
            .unwrap_or(("B", 1));
        write!(f, "{}{name}", self.0 / unit)
    }
}

/// A signed jump of the wall clock: `30s` or `+30s` ahead, `-30s` behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    pub behind: bool,
    pub by: Duration,
}

impl ClockOffset {
    /// The offset of `ms` milliseconds, behind when negative.
    pub fn of_millis(ms: i64) -> ClockOffset {
        ClockOffset {
            behind: ms < 0,
            by: Duration::from_millis(ms.unsigned_abs()),
        }
    }

    /// Milliseconds, negative when behind.
    pub fn millis(self) -> i64 {
        let ms = i64::try_from(self.by.as_millis()).unwrap_or(i64::MAX);
        if self.behind {
            -ms
        } else {
            ms
        }
    }
}

impl FromStr for ClockOffset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (behind, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let by = duration::parse(rest).map_err(|e| format!("`{s}`: {e}"))?;
        Ok(ClockOffset { behind, by })
    }
}

impl fmt::Display for ClockOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.behind { '-' } else { '+' };
        write!(f, "{sign}{}", duration::format(self.by))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_decimal_and_binary_units_and_print_back() {
        for (text, bytes) in [
            ("150MB", 150_000_000),
            ("150MiB", 150 << 20),
            ("64KB", 64_000),
            ("2GiB", 2 << 30),
            ("4096", 4096),
            ("10B", 10),
        ] {
            let parsed: Bytes = text.parse().unwrap();
            assert_eq!(parsed, Bytes(bytes), "{text}");
            assert_eq!(parsed.to_string().parse::<Bytes>().unwrap(), parsed);
            assert_eq!(parsed.to_string(), text.replace("4096", "4KiB"));
        }
        for bad in ["", "MB", "-5MB", "1.5GB", "12 parsecs", "99999999999GiB"] {
            assert!(bad.parse::<Bytes>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn clock_offsets_take_a_sign() {
        let ahead: ClockOffset = "30s".parse().unwrap();
        assert_eq!(ahead.millis(), 30_000);
        assert_eq!("+30s".parse::<ClockOffset>().unwrap(), ahead);
        let behind: ClockOffset = "-1.5s".parse().unwrap();
        assert_eq!(behind.millis(), -1_500);
        assert_eq!(behind.to_string().parse::<ClockOffset>().unwrap(), behind);
        assert!("-".parse::<ClockOffset>().is_err());
        assert!("soon".parse::<ClockOffset>().is_err());
    }

    #[test]
    fn directions_and_modes_are_words() {
        assert_eq!("up".parse::<Ways>(), Ok(Ways::Up));
        assert_eq!("down".parse::<Ways>(), Ok(Ways::Down));
        assert!("sideways".parse::<Ways>().is_err());
        assert_eq!("drop".parse::<PartitionMode>(), Ok(PartitionMode::Drop));
        assert!("lose".parse::<PartitionMode>().is_err());
    }
}
