//! The per-IP call limit: a fixed window per source address.
//!
//! One node (SQLite) counts in memory. Nodes that share a PostgreSQL store count in
//! it, one upsert per call, so the limit holds across the whole cloud as the
//! contract asks. The sign-in email limit is not here: it is counted from the
//! challenges in the store.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::{now_ms, Backend, Store, StoreResult};

/// What a per-source limit counts for a peer: its IPv4 address (an IPv4-mapped IPv6 address
/// too), or the /64 of its IPv6 address, the block one subscriber gets, so that one host
/// cannot take a fresh allowance with each of its 2^64 addresses.
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

pub enum RateLimiter {
    Memory(MemoryWindows),
    Shared { limit: u32, window: Duration },
}

impl RateLimiter {
    /// In the store when several nodes share it, else in memory.
    pub fn for_store(backend: Backend, limit: u32, window: Duration) -> RateLimiter {
        match backend {
            Backend::Sqlite => RateLimiter::Memory(MemoryWindows::new(limit, window)),
            Backend::Postgres => RateLimiter::Shared { limit, window },
        }
    }

    /// Counts one call; `Ok(Err(retry_after))` when the address is over its limit.
    pub async fn check(&self, store: &Store, ip: IpAddr) -> StoreResult<Result<(), Duration>> {
        match self {
            RateLimiter::Memory(windows) => Ok(windows.check(ip, Instant::now())),
            RateLimiter::Shared { limit, window } => {
                let now = now_ms();
                let window_ms = window.as_millis() as i64;
                let start = now - now.rem_euclid(window_ms);
                let calls = store.count_call(&ip.to_string(), start).await?;
                Ok(if calls > i64::from(*limit) {
                    Err(Duration::from_millis((start + window_ms - now) as u64))
                } else {
                    Ok(())
                })
            }
        }
    }
}

pub struct MemoryWindows {
    limit: u32,
    window: Duration,
    slots: Mutex<HashMap<IpAddr, Slot>>,
}

struct Slot {
    started: Instant,
    count: u32,
}

impl MemoryWindows {
    pub fn new(limit: u32, window: Duration) -> MemoryWindows {
        MemoryWindows {
            limit,
            window,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn check(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
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
    fn an_ipv6_source_counts_by_its_64_and_a_mapped_ipv4_as_itself() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_of(a), source_of(b));
        assert_eq!(source_of(a), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        assert_ne!(source_of(a), source_of(other));
        let mapped: IpAddr = "::ffff:127.0.0.9".parse().unwrap();
        assert_eq!(source_of(mapped), IpAddr::from([127, 0, 0, 9]));
        let v4: IpAddr = [127, 64, 0, 1].into();
        assert_eq!(source_of(v4), v4);
        // One window for the whole /64.
        let limiter = MemoryWindows::new(1, Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(limiter.check(source_of(a), t0).is_ok());
        assert!(limiter.check(source_of(b), t0).is_err());
    }

    #[test]
    fn the_window_refills() {
        let limiter = MemoryWindows::new(2, Duration::from_secs(60));
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
