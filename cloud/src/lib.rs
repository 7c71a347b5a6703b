//! anyplay-cloud: the game backend that anyplay tests — email-code sign-in,
//! friends, presence, parties (sessions) and gamer cards over HTTP, events over
//! one WebSocket per account, on SQLite (one node) or PostgreSQL (a cluster).
//!
//! Layout:
//! - [`config`]: flags, `ANYPLAY_*` variables and the TOML file, into a `Config`.
//! - [`server`]: a running [`Node`] — listeners, middleware, drain.
//! - `http`: serving a listener's connections within limits (count, head and idle timeouts);
//!   `head_errors`: the contract's JSON answer to a head hyper cannot parse.
//! - [`tls`]: the public listener over TLS (`--tls-cert`, `--tls-key`).
//! - [`routes`]: one module per API topic, plus the operations listener.
//! - [`events`]: the event connections — hub (one per account), socket loop, event types.
//! - [`presence`]: online/offline announcements and connection leases.
//! - [`bus`]: delivery to accounts on other nodes of a cluster (NATS); [`nats_auth`]: signing
//!   in to NATS as a URL or a credentials file says (shared with load).
//! - [`store`]: every durable fact, on SQLite or PostgreSQL, one transaction per write.
//! - [`error`], [`extract`]: the contract's error shape and the extractors that use it.
//! - `defects` (feature `seeded-defects` only): defects built in on purpose for the self-test.
//! - [`mail`], [`ratelimit`], [`metrics`], [`drain`]: the node's supporting parts.
//! - [`ports`]: free loopback ports below the ephemeral range, for whoever starts nodes.
//! - [`duration`]: the one duration grammar (`500ms`, `5s`, `1.5m`, `2h`), shared with load and chaos.

pub(crate) mod bus;
pub mod config;
#[cfg(feature = "seeded-defects")]
pub mod defects;
pub(crate) mod drain;
pub mod duration;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod extract;
pub(crate) mod fence;
pub(crate) mod head_errors;
pub(crate) mod http;
pub(crate) mod mail;
pub mod metrics;
pub mod nats_auth;
pub mod ports;
pub(crate) mod presence;
pub(crate) mod ratelimit;
pub(crate) mod retention;
mod routes;
pub(crate) mod server;
pub mod small_file;
pub(crate) mod state;
pub mod store;
pub mod tls;

pub use config::{Args, Config, MailSinkConfig};
pub use mail::MemoryMail;
pub use server::{serve_until_signalled, Node, NodeError};

/// Listens on `addr` with the longest accept queue the kernel allows (it caps the
/// request at `net.core.somaxconn`). Tokio's default of 1,024 overflows when thousands
/// of players reconnect at once, and a handshake dropped from a full queue is only
/// retried a second later: a storm's slowest connects took 1 s for nothing.
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restarted node can take its port back at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(65_535)
}

/// Raises the open-file limit to its hard maximum: a node holds a socket per player.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    Ok(hard)
}
