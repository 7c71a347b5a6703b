//! The store's time: the wall clock read once, when the node first asks (at its
//! start), carried on by the monotonic clock since.
//!
//! Leases, token expiry and the fence compare times read apart by seconds, on this node
//! and on others. The wall clock can jump (an NTP step): a node whose clock jumped ahead
//! would see every other node's leases as run out, and one whose clock jumped back would
//! write leases the others see as run out, so players would go offline while connected.
//! A step does not move the monotonic clock. The price: a node whose wall clock was
//! already wrong at its start stays as wrong until it restarts.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

/// A wall-clock reading and the monotonic moment it was taken.
struct Anchor {
    wall_us: i64,
    at: Instant,
}

impl Anchor {
    fn now() -> Anchor {
        let at = Instant::now();
        let wall_us = match SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
            Ok(since) => since.as_micros() as i64,
            Err(before) => -(before.duration().as_micros() as i64),
        };
        Anchor { wall_us, at }
    }

    /// Microseconds since the epoch at `moment` (not before the anchor).
    fn us_at(&self, moment: Instant) -> i64 {
        self.wall_us + moment.saturating_duration_since(self.at).as_micros() as i64
    }
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

/// Microseconds since the Unix epoch: fine enough to order an event against a
/// connection opened in the same millisecond.
pub fn now_us() -> i64 {
    ANCHOR.get_or_init(Anchor::now).us_at(Instant::now())
}

/// Milliseconds since the Unix epoch: the store's time unit.
pub fn now_ms() -> i64 {
    now_us().div_euclid(1_000)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn time_moves_on_with_the_monotonic_clock_from_the_anchor() {
        let anchor = Anchor {
            wall_us: 1_000_000,
            at: Instant::now(),
        };
        let later = anchor.at + Duration::from_millis(1_500);
        assert_eq!(anchor.us_at(later), 2_500_000);
        assert_eq!(anchor.us_at(anchor.at), 1_000_000);
    }

    #[test]
    fn starts_at_the_wall_clock_and_never_goes_back() {
        let wall = Anchor::now().wall_us;
        let first = now_us();
        assert!((first - wall).abs() < 1_000_000, "{first} vs {wall}");
        let mut last = first;
        for _ in 0..1_000 {
            let next = now_us();
            assert!(next >= last, "{next} < {last}");
            last = next;
        }
        assert!(now_ms() >= first / 1_000);
    }
}
