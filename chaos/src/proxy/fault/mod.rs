//! The faults a proxy applies (toxiproxy's toxics), one file each, plus the state they share.
//!
//! Lasting faults, set with [`Proxy::set`](super::Proxy::set) on one or both directions and on a
//! share of the connections ([`Toxicity`]), until cleared:
//! - [`partition`]: a partition that either holds data and new connections, or drops data and refuses
//!   new connections (resetting, at the end, every connection whose stream lost bytes).
//! - [`latency`]: a delay with jitter per chunk, order kept.
//! - [`bandwidth`]: a rate limit per connection and direction.
//! - [`slow_close`]: the end of a stream is passed on only after a delay.
//! - [`timeout`]: nothing flows; the connection is closed after a while, or held until cleared.
//! - [`limit_data`]: a connection is closed once a number of bytes has passed.
//! - [`slicer`]: data is written in small pieces with a pause between them.
//!
//! One-off: [`reset`] closes every open connection with a TCP RST.
//!
//! `settings` holds what is set on a proxy; `connection` is one connection's view of it.

pub(crate) mod bandwidth;
pub(crate) mod connection;
pub(crate) mod latency;
pub(crate) mod limit_data;
pub(crate) mod partition;
pub(crate) mod reset;
mod settings;
pub(crate) mod slicer;
pub(crate) mod slow_close;
pub(crate) mod timeout;
mod toxicity;

use std::time::Duration;

use tokio::sync::watch;

use super::link::Direction;
use latency::Latency;
use reset::Reset;
use settings::Settings;
pub use toxicity::Toxicity;

/// Which way(s) a fault acts: `Up` is client to upstream (players to a node, a node to PostgreSQL
/// or NATS), `Down` is back. Plans write `direction: up | down`, both when absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Ways {
    #[default]
    Both,
    Up,
    Down,
}

impl Ways {
    pub fn covers(self, direction: Direction) -> bool {
        matches!(
            (self, direction),
            (Ways::Both, _) | (Ways::Up, Direction::Upstream) | (Ways::Down, Direction::Downstream)
        )
    }
}

impl From<Direction> for Ways {
    fn from(direction: Direction) -> Self {
        match direction {
            Direction::Upstream => Ways::Up,
            Direction::Downstream => Ways::Down,
        }
    }
}

/// What a partition does with the data and connections it meets (a plan's `mode: hold | drop`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PartitionMode {
    /// Nothing is read (TCP keeps the bytes) and new connections wait; all flows on afterwards.
    #[default]
    Hold,
    /// Bytes are read and thrown away and new connections are refused, as a firewall DROP.
    Drop,
}

impl std::str::FromStr for Ways {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "up" => Ok(Ways::Up),
            "down" => Ok(Ways::Down),
            _ => Err(format!("unknown direction `{s}` (up or down)")),
        }
    }
}

impl std::fmt::Display for Ways {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Ways::Both => "both ways",
            Ways::Up => "up",
            Ways::Down => "down",
        })
    }
}

impl std::str::FromStr for PartitionMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "hold" => Ok(PartitionMode::Hold),
            "drop" => Ok(PartitionMode::Drop),
            _ => Err(format!("unknown mode `{s}` (hold or drop)")),
        }
    }
}

impl std::fmt::Display for PartitionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PartitionMode::Hold => "hold",
            PartitionMode::Drop => "drop",
        })
    }
}

/// A lasting fault on a link. A proxy has at most one of each kind per direction; setting a kind
/// again replaces it on the directions it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    Partition(PartitionMode),
    Latency(Latency),
    /// Kilobits per second (1 kbps = 125 bytes/s), per connection and direction, as toxiproxy's
    /// bandwidth is per connection. 0 counts as 1.
    Bandwidth {
        kbps: u32,
    },
    /// The end of a stream (EOF, passed on as a shutdown to the other side) is held back `delay`.
    SlowClose {
        delay: Duration,
    },
    /// Data stops (held, not read); the connection is closed `after` the fault reached it (`None`:
    /// never, and clearing the fault lets the held data flow); with `reset`, by an RST on both
    /// sides (Toxiproxy's reset_peer), else by a FIN.
    Timeout {
        after: Option<Duration>,
        reset: bool,
    },
    /// Each connection is closed (both sides, FIN) right after exactly `bytes` have passed in the
    /// covered direction(s), counted from when the fault reached it.
    LimitData {
        bytes: u64,
    },
    /// Data is written in pieces of `bytes` ± `variation` (0 counts as 1), drawn per piece,
    /// `delay` between pieces.
    Slicer {
        bytes: usize,
        variation: usize,
        delay: Duration,
    },
}

/// As plans and timelines print a fault's parameters: `drop`, `100±20ms`, `128 kbps`.
impl std::fmt::Display for LinkFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use anyplay_cloud::duration::format;
        match self {
            LinkFault::Partition(mode) => write!(f, "{mode}"),
            LinkFault::Latency(l) => {
                write!(f, "{}±{}ms", l.delay.as_millis(), l.jitter.as_millis())
            }
            LinkFault::Bandwidth { kbps } => write!(f, "{kbps} kbps"),
            LinkFault::SlowClose { delay } => write!(f, "closes {} late", format(*delay)),
            LinkFault::Timeout {
                after: Some(after),
                reset,
            } => {
                let how = if *reset { "reset" } else { "closed" };
                write!(f, "{how} after {}", format(*after))
            }
            LinkFault::Timeout { after: None, .. } => f.write_str("never closed"),
            LinkFault::LimitData { bytes } => write!(f, "{bytes} bytes"),
            LinkFault::Slicer {
                bytes,
                variation: 0,
                delay,
            } => write!(f, "{bytes}-byte pieces {} apart", format(*delay)),
            LinkFault::Slicer {
                bytes,
                variation,
                delay,
            } => write!(
                f,
                "{bytes}±{variation}-byte pieces {} apart",
                format(*delay)
            ),
        }
    }
}

/// The kinds of [`LinkFault`], one slot each on a proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LinkFaultKind {
    Partition,
    Latency,
    Bandwidth,
    SlowClose,
    Timeout,
    LimitData,
    Slicer,
}

impl LinkFaultKind {
    pub const ALL: [LinkFaultKind; 7] = [
        LinkFaultKind::Partition,
        LinkFaultKind::Latency,
        LinkFaultKind::Bandwidth,
        LinkFaultKind::SlowClose,
        LinkFaultKind::Timeout,
        LinkFaultKind::LimitData,
        LinkFaultKind::Slicer,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

impl LinkFault {
    pub fn kind(&self) -> LinkFaultKind {
        match self {
            LinkFault::Partition(_) => LinkFaultKind::Partition,
            LinkFault::Latency(_) => LinkFaultKind::Latency,
            LinkFault::Bandwidth { .. } => LinkFaultKind::Bandwidth,
            LinkFault::SlowClose { .. } => LinkFaultKind::SlowClose,
            LinkFault::Timeout { .. } => LinkFaultKind::Timeout,
            LinkFault::LimitData { .. } => LinkFaultKind::LimitData,
            LinkFault::Slicer { .. } => LinkFaultKind::Slicer,
        }
    }
}

/// Everything set on one proxy, shared by all its connections.
#[derive(Debug)]
pub(crate) struct Faults {
    settings: watch::Sender<Settings>,
    pub(crate) reset: Reset,
}

impl Faults {
    pub(crate) fn new() -> Self {
        Faults {
            settings: watch::Sender::new(Settings::default()),
            reset: Reset::new(),
        }
    }

    pub(crate) fn set(&self, fault: LinkFault, ways: Ways, toxicity: Option<Toxicity>) {
        self.settings
            .send_modify(|settings| settings.set(fault, ways, toxicity));
    }

    pub(crate) fn clear(&self, kind: LinkFaultKind, ways: Ways) {
        self.settings
            .send_if_modified(|settings| settings.clear(kind, ways));
    }

    pub(crate) fn heal(&self) {
        self.settings.send_if_modified(Settings::heal);
    }

    pub(crate) fn is_set(&self, kind: LinkFaultKind) -> bool {
        self.settings.borrow().is_set(kind)
    }

    pub(crate) fn watch(&self) -> watch::Receiver<Settings> {
        self.settings.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ways_cover_their_directions() {
        assert!(Ways::Both.covers(Direction::Upstream));
        assert!(Ways::Both.covers(Direction::Downstream));
        assert!(Ways::Up.covers(Direction::Upstream));
        assert!(!Ways::Up.covers(Direction::Downstream));
        assert!(Ways::Down.covers(Direction::Downstream));
        assert!(!Ways::Down.covers(Direction::Upstream));
    }

    #[test]
    fn kinds_index_their_slots() {
        for (index, kind) in LinkFaultKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), index);
        }
    }
}
