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

use crate::store::{cluster_now_ms, Backend, Store, StoreResult};

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

/// The window of the per-address call limit (`calls_per_minute`).
pub const CALL_WINDOW: Duration = Duration::from_secs(60);

pub enum RateLimiter {
    Memory(MemoryWindows),
    /// Counted in the store; a source past its limit is remembered here until its window
    /// ends, so that its further calls are refused without store work.
    Shared {
        limit: u32,
        window: Duration,
        refused: Refusals,
    },
}

impl RateLimiter {
    /// In the store when several nodes share it, else in memory.
    pub fn for_store(backend: Backend, limit: u32, window: Duration) -> RateLimiter {
        match backend {
            Backend::Sqlite => RateLimiter::Memory(MemoryWindows::new(limit, window)),
            Backend::Postgres => RateLimiter::Shared {
                limit,
                window,
                refused: Refusals::default(),
            },
        }
    }

    /// Counts one call; `Ok(Err(retry_after))` when the address is over its limit.
    pub async fn check(&self, store: &Store, ip: IpAddr) -> StoreResult<Result<(), Duration>> {
        match self {
            RateLimiter::Memory(windows) => Ok(windows.check(ip, Instant::now())),
            RateLimiter::Shared {
                limit,
                window,
                refused,
            } => {
                let key = ip.to_string();
                if let Some(wait) = refused.remaining(&key, Instant::now()) {
                    return Ok(Err(wait));
                }
                // The nodes share the windows: on the cluster's clock, they agree where one
                // ends.
                let now = cluster_now_ms();
                let window_ms = window.as_millis() as i64;
                let start = now - now.rem_euclid(window_ms);
                let calls = store.count_call(&key, start).await?;
                Ok(if calls > i64::from(*limit) {
                    let wait = Duration::from_millis((start + window_ms - now) as u64);
                    refused.remember(key, wait);
                    Err(wait)
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
    slots: Mutex<Slots>,
}

/// How many addresses are kept before finished windows are forgotten.
const KEPT: usize = 100_000;

struct Slots {
    by_ip: HashMap<IpAddr, Slot>,
    /// When finished windows were last forgotten: at most once a window, so that a spray of
    /// addresses costs one scan a window, not one per call.
    swept: Instant,
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
            slots: Mutex::new(Slots {
                by_ip: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    fn check(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.by_ip.len() > KEPT && now.saturating_duration_since(slots.swept) >= self.window {
            // Bound memory under a spray of addresses: forget finished windows.
            slots
                .by_ip
                .retain(|_, s| now.saturating_duration_since(s.started) < self.window);
            slots.swept = now;
        }
        let slot = slots.by_ip.entry(ip).or_insert(Slot {
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

/// Refusals a node remembers until their wait is over: a limit counted in the store cannot
/// free up before then (its window only ends), so a call in between is refused from memory.
#[derive(Default)]
pub struct Refusals(Mutex<RefusedUntil>);

#[derive(Default)]
struct RefusedUntil {
    by_key: HashMap<String, Instant>,
    /// When ended refusals were last forgotten (as [`Slots::swept`]).
    swept: Option<Instant>,
}

impl Refusals {
    /// How long `key` stays refused from `now`, if it is.
    pub fn remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let refused = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let until = *refused.by_key.get(key)?;
        (until > now).then(|| until - now)
    }

    /// Refuses `key` for `wait` from now.
    pub fn remember(&self, key: String, wait: Duration) {
        let now = Instant::now();
        let mut refused = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let due = refused
            .swept
            .is_none_or(|at| now.saturating_duration_since(at) >= Duration::from_secs(1));
        if refused.by_key.len() > KEPT && due {
            refused.by_key.retain(|_, until| *until > now);
            refused.swept = Some(now);
        }
        refused.by_key.insert(key, now + wait);
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

    /// Regression: past `KEPT` addresses, every call scanned them all under the lock.
    #[test]
    fn a_spray_of_addresses_is_swept_once_a_window() {
        let window = Duration::from_secs(60);
        let limiter = MemoryWindows::new(5, window);
        let t0 = Instant::now();
        let ip = |n: u32| IpAddr::from(std::net::Ipv4Addr::from((10u32 << 24) + n));
        for n in 0..=KEPT as u32 {
            assert!(limiter.check(ip(n), t0).is_ok());
        }
        let swept = |limiter: &MemoryWindows| limiter.slots.lock().unwrap().swept;
        let before = swept(&limiter);
        // Within the window: no scan, however many calls.
        for n in 0..1000 {
            let _ = limiter.check(ip(n), t0 + Duration::from_secs(1));
        }
        assert_eq!(swept(&limiter), before);
        // A window later, one sweep forgets the finished windows.
        let later = t0 + window;
        assert!(limiter.check(ip(7), later).is_ok());
        let slots = limiter.slots.lock().unwrap();
        assert_eq!(slots.swept, later);
        assert_eq!(slots.by_ip.len(), 1);
    }

    #[test]
    fn a_refusal_is_remembered_until_its_wait_is_over() {
        let refusals = Refusals::default();
        refusals.remember("127.0.0.1".into(), Duration::from_secs(30));
        let now = Instant::now();
        let left = refusals.remaining("127.0.0.1", now).expect("refused");
        assert!(left <= Duration::from_secs(30) && left > Duration::from_secs(29));
        assert_eq!(refusals.remaining("127.0.0.2", now), None);
        assert_eq!(
            refusals.remaining("127.0.0.1", now + Duration::from_secs(31)),
            None
        );
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
