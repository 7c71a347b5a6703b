//! Free loopback ports for nodes, services and proxies, chosen below the kernel's ephemeral range:
//! a run (or a test suite) opens thousands of outgoing connections, and one of them must never
//! sit on a port that a server binds (again, after a restart) later. Used by chaos and by the
//! tests that start nodes; here because every other crate depends on this one.

use std::collections::BTreeSet;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use rand::Rng;

/// The lowest port handed out: clear of well-known and common development ports.
const LOWEST: u16 = 20_000;
/// Linux's default ephemeral start, for machines where it cannot be read.
const DEFAULT_EPHEMERAL_START: u16 = 32_768;

/// Ports handed out by this process, so two services never get the same one.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A loopback port that nothing listens on now and that this process has not handed out before.
pub fn free_port() -> io::Result<u16> {
    let range = pick_range(ephemeral_start());
    // A set of numbers stays valid whoever panicked holding it.
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    let span = range.end - range.start;
    let offset = rand::rng().random_range(0..span);
    for step in 0..span {
        let port = range.start + (offset + step) % span;
        if !handed_out.contains(&port) && bindable(port) {
            handed_out.insert(port);
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no free loopback port in {range:?}"),
    ))
}

fn bindable(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| parse_range_start(&text))
        .unwrap_or(DEFAULT_EPHEMERAL_START)
}

/// The first number of `ip_local_port_range` ("32768\t60999\n").
fn parse_range_start(text: &str) -> Option<u16> {
    text.split_whitespace().next()?.parse().ok()
}

/// Ports from [`LOWEST`] up to the ephemeral start, or, when the ephemeral range starts too low to
/// leave room, the ports above it.
fn pick_range(ephemeral_start: u16) -> Range<u16> {
    if ephemeral_start >= LOWEST + 1_000 {
        LOWEST..ephemeral_start
    } else {
        LOWEST.max(ephemeral_start)..u16::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_ephemeral_start() {
        assert_eq!(parse_range_start("32768\t60999\n"), Some(32_768));
        assert_eq!(parse_range_start("garbage"), None);
        assert_eq!(parse_range_start(""), None);
    }

    #[test]
    fn stays_below_the_ephemeral_range() {
        assert_eq!(pick_range(32_768), 20_000..32_768);
        assert_eq!(pick_range(1_024), 20_000..u16::MAX);
        assert_eq!(pick_range(50_000), 20_000..50_000);
    }

    #[test]
    fn hands_out_distinct_bindable_ports() {
        let ports: Vec<u16> = (0..20).map(|_| free_port().expect("a port")).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        let range = pick_range(ephemeral_start());
        for port in ports {
            assert!(range.contains(&port));
            assert!(bindable(port));
        }
    }
}
