//! The faults a proxy applies, one file each (toxiproxy's toxics), shared by all its connections.
//!
//! - [`cut`]: a partition that holds data and connections until removed.
//! - [`latency`]: a delay with jitter per chunk, order kept.
//! - [`reset`]: close every open connection with a TCP RST.

pub(crate) mod cut;
pub mod latency;
pub(crate) mod reset;

use super::link::Direction;
use cut::Cut;
use latency::LatencyFault;
use reset::Reset;

#[derive(Debug)]
pub(crate) struct Faults {
    /// Both directions and new connections at once, as a partition does.
    pub(crate) cut: Cut,
    pub(crate) reset: Reset,
    upstream_latency: LatencyFault,
    downstream_latency: LatencyFault,
}

impl Faults {
    pub(crate) fn new() -> Self {
        Faults {
            cut: Cut::new(),
            reset: Reset::new(),
            upstream_latency: LatencyFault::new(),
            downstream_latency: LatencyFault::new(),
        }
    }

    pub(crate) fn latency(&self, direction: Direction) -> &LatencyFault {
        match direction {
            Direction::Upstream => &self.upstream_latency,
            Direction::Downstream => &self.downstream_latency,
        }
    }
}
