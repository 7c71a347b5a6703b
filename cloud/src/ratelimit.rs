//! Per-IP call limit: a fixed window per source address, kept in memory.
//!
//! The sign-in email limit is not here: it is counted from the challenges in the
//! store, so it holds across every node that shares the store.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct RateLimiter {
    limit: u32,
    window: Duration,
    slots: Mutex<HashMap<IpAddr, Slot>>,
}

struct Slot {
    started: Instant,
    count: u32,
}

impl RateLimiter {
    pub fn new(limit: u32, window: Duration) -> RateLimiter {
        RateLimiter {
            limit,
            window,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one call; `Err(retry_after)` when the address is over its limit.
    pub fn check(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.len() > 100_000 {
            // Bound memory under a spray of addresses: forget finished windows.
            slots.retain(|_, s| now.duration_since(s.started) < self.window);
        }
        let slot = slots.entry(ip).or_insert(Slot {
            started: now,
            count: 0,
        });
        if now.duration_since(slot.started) >= self.window {
            *slot = Slot {
                started: now,
                count: 0,
            };
        }
        if slot.count >= self.limit {
            return Err(self.window.saturating_sub(now.duration_since(slot.started)));
        }
        slot.count += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_refills() {
        let limiter = RateLimiter::new(2, Duration::from_secs(60));
        let ip: IpAddr = [127, 0, 0, 1].into();
        let t0 = Instant::now();
        assert!(limiter.check(ip, t0).is_ok());
        assert!(limiter.check(ip, t0).is_ok());
        let retry = limiter.check(ip, t0 + Duration::from_secs(10)).unwrap_err();
        assert_eq!(retry, Duration::from_secs(50));
        let other: IpAddr = [127, 0, 0, 2].into();
        assert!(limiter.check(other, t0).is_ok());
        assert!(limiter.check(ip, t0 + Duration::from_secs(60)).is_ok());
    }
}
