//! A proxy: listens on a loopback port, forwards each connection to its upstream, and carries the
//! controls that set and remove faults on all its connections at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use super::connection;
use super::counters::{Counters, Stats};
use super::fault::Faults;
use super::link::Direction;
use super::{Latency, LinkName, ProxyError};

/// Pause after a failed accept (out of file descriptors), instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// One running proxy. Dropping it closes its listener and every connection through it.
pub struct Proxy {
    name: LinkName,
    listen: SocketAddr,
    upstream: SocketAddr,
    faults: Arc<Faults>,
    counters: Arc<Counters>,
    accepting: JoinHandle<()>,
}

impl Proxy {
    /// Listens on `listen` (port 0 picks one) and forwards to `upstream`.
    pub async fn start(
        name: LinkName,
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> Result<Proxy, ProxyError> {
        let bind_error = |source| ProxyError::Bind {
            addr: listen,
            source,
        };
        let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
        let listen = listener.local_addr().map_err(bind_error)?;
        let faults = Arc::new(Faults::new());
        let counters = Arc::new(Counters::default());
        let accepting = tokio::spawn(accept(
            listener,
            upstream,
            Arc::clone(&faults),
            Arc::clone(&counters),
        ));
        Ok(Proxy {
            name,
            listen,
            upstream,
            faults,
            counters,
            accepting,
        })
    }

    pub fn name(&self) -> LinkName {
        self.name
    }

    /// Where clients connect.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Partitions the link: nothing flows either way and new connections are held unconnected.
    pub fn cut(&self) {
        self.faults.cut.set(true);
    }

    /// Heals the partition; everything held flows on, in order.
    pub fn remove_cut(&self) {
        self.faults.cut.set(false);
    }

    pub fn is_cut(&self) -> bool {
        self.faults.cut.is_cut()
    }

    /// Delays each chunk in both directions (a round trip gains twice the delay).
    pub fn set_latency(&self, latency: Latency) {
        self.set_latency_one_way(Direction::Upstream, latency);
        self.set_latency_one_way(Direction::Downstream, latency);
    }

    pub fn set_latency_one_way(&self, direction: Direction, latency: Latency) {
        self.faults.latency(direction).set(Some(latency));
    }

    /// Removes the latency in both directions; held chunks go at once.
    pub fn remove_latency(&self) {
        self.faults.latency(Direction::Upstream).set(None);
        self.faults.latency(Direction::Downstream).set(None);
    }

    /// Closes every connection open now with a TCP RST on both sides. Later connections pass.
    pub fn reset_all(&self) {
        self.faults.reset.fire();
    }

    /// Removes every lasting fault (cut and latency).
    pub fn heal(&self) {
        self.remove_cut();
        self.remove_latency();
    }

    pub fn stats(&self) -> Stats {
        self.counters.stats()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Dropping the accept task's JoinSet aborts every connection task with it.
        self.accepting.abort();
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    faults: Arc<Faults>,
    counters: Arc<Counters>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(connection::serve(
                        client,
                        upstream,
                        Arc::clone(&faults),
                        Arc::clone(&counters),
                    ));
                }
                Err(error) => {
                    tracing::warn!(%error, "proxy: accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set does not grow for the whole run.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}
