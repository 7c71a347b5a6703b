//! The in-process fault proxy (toxiproxy-style): a proxy per link of the topology listens on a
//! loopback port and forwards to its upstream; faults are set on it and removed again.
//!
//! - `listener`: the proxy and its controls.
//! - `connection`: one proxied connection (hold, connect, two links, reset).
//! - `link`: one direction of a connection, through the faults.
//! - `splice`: a bulk stream with no fault, moved between sockets inside the kernel.
//! - [`fault`]: the faults, one file each: partition (hold or drop), latency, bandwidth, slow_close,
//!   timeout, limit_data and slicer, each set per direction and on a share of the connections;
//!   and reset, which closes every open connection at once.
//! - `counters`: connections and bytes.
//! - `name`: link names; `set`: every proxy of a topology by link name.

mod connection;
mod counters;
pub(crate) mod fault;
mod link;
mod listener;
mod name;
mod set;
mod splice;

use std::net::SocketAddr;

pub use counters::Stats;
pub use fault::latency::Latency;
pub use fault::{LinkFault, LinkFaultKind, PartitionMode, Toxicity, Ways};
pub use link::Direction;
pub use listener::{Admit, Forward, Proxy};
pub use name::{Endpoint, LinkName};
pub use set::ProxySet;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("a proxy for {0} exists already")]
    Duplicate(LinkName),
    #[error("`{0}` is not a link endpoint (players, node-N, postgres, nats)")]
    UnknownEndpoint(String),
}
