//! Test support: the cloud under test in two topologies — one node on SQLite, or
//! two nodes on PostgreSQL and NATS — and players that sign up through a node's
//! mail log and talk HTTP and WebSocket to it.
//!
//! - [`cloud`]: `TestCloud`, its topologies and its players (which node serves what).
//! - [`node`]: one `anyplay-cloud` process on free loopback ports.
//! - [`database`]: a throwaway PostgreSQL database for one test.
//! - [`events`]: a client's event connection.
//! - [`proxy`]: a TCP proxy that a test can pause, to cut a node off its database.
//! - [`raw`]: misbehaving clients on bare TCP: partial requests, hand-made WebSocket frames.
//! - [`nats`]: a NATS server of a test's own, to kill.
//! - [`clock`]: a node's wall clock that a test steps (libfaketime).

mod clock;
mod cloud;
mod database;
mod events;
mod nats;
mod node;
mod proxy;
pub mod raw;

use std::time::Duration;

pub use clock::SteppedClock;
pub use cloud::{Player, TestCloud, Through, Topology};
pub use events::{End, Events};
pub use nats::TestNats;
pub use node::TestNode;
pub use proxy::{address_of, via, TcpProxy};

/// Generous bound for anything that should happen "at once" on a loaded 2-core machine.
pub const SOON: Duration = Duration::from_secs(10);

/// Turns `async fn name(topology: Topology)` test bodies into two
/// `#[tokio::test]`s, `name::single` and `name::pair`, so each runs on one
/// SQLite node and on a two-node cluster.
macro_rules! each_topology {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn single() {
                super::$name(crate::support::Topology::Single).await
            }

            #[tokio::test]
            async fn pair() {
                super::$name(crate::support::Topology::Pair).await
            }
        }
    )+};
}
pub(crate) use each_topology;
