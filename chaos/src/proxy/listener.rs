//! A proxy: listens on a loopback port, forwards each connection to its upstream, and carries the
//! controls that set and remove faults on all its connections at once.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use super::connection;
use super::connection::Buffers;
use super::counters::{Counters, Stats};
use super::fault::{Faults, LinkFault, LinkFaultKind, Toxicity, Ways};
use super::{LinkName, ProxyError};

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

/// Which clients a proxy serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Anyone,
    /// Only connections from this address: a proxy listening where others reach it (a netns
    /// bridge, the LAN toward a Docker host) serves its one peer, not whoever finds the port.
    Only(IpAddr),
}

/// How the upstream learns who a client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    /// From the connection itself: a client on a loopback address of its own reaches a
    /// loopback upstream from that address.
    Source,
    /// From a PROXY protocol v1 header ahead of the client's bytes, for an upstream that
    /// reads one from this proxy (a node on a netns host, which sees only the bridge).
    ProxyHeader,
}

impl Admit {
    fn admits(self, peer: IpAddr) -> bool {
        match self {
            Admit::Anyone => true,
            Admit::Only(only) => peer == only,
        }
    }
}

impl Proxy {
    /// Listens on `listen` (port 0 picks one) and forwards to `upstream`, for anyone.
    pub async fn start(
        name: LinkName,
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> Result<Proxy, ProxyError> {
        Proxy::serving(name, listen, upstream, Admit::Anyone, Forward::Source).await
    }

    /// As [`Proxy::start`], for the clients `admit` lets in (others are closed at once), told
    /// to the upstream as `forward` says.
    pub async fn serving(
        name: LinkName,
        listen: SocketAddr,
        upstream: SocketAddr,
        admit: Admit,
        forward: Forward,
    ) -> Result<Proxy, ProxyError> {
        let bind_error = |source| ProxyError::Bind {
            addr: listen,
            source,
        };
        // Players reconnect through here in storms, like to the node itself.
        let listener = anyplay_cloud::listen(listen).map_err(bind_error)?;
        let listen = listener.local_addr().map_err(bind_error)?;
        let faults = Arc::new(Faults::new());
        let counters = Arc::new(Counters::default());
        let buffers = Buffers::of(name);
        let accepting = tokio::spawn(accept(
            listener,
            admit,
            upstream,
            forward,
            buffers,
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

    /// Sets a lasting fault on the `ways` it covers, for connections open now and those opened
    /// while it is set: all of them, or the share `toxicity` picks. It replaces a fault of its kind.
    pub fn set(&self, fault: LinkFault, ways: Ways, toxicity: Option<Toxicity>) {
        self.faults.set(fault, ways, toxicity);
    }

    /// Removes the fault of `kind` from the directions `ways` covers; what it held flows on (a
    /// drop-cut resets the connections that lost bytes).
    pub fn clear(&self, kind: LinkFaultKind, ways: Ways) {
        self.faults.clear(kind, ways);
    }

    pub fn is_set(&self, kind: LinkFaultKind) -> bool {
        self.faults.is_set(kind)
    }

    /// Removes every lasting fault.
    pub fn heal(&self) {
        self.faults.heal();
    }

    /// Closes every connection open now with a TCP RST on both sides. Later connections pass.
    pub fn reset_all(&self) {
        self.faults.reset.fire();
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
    admit: Admit,
    upstream: SocketAddr,
    forward: Forward,
    buffers: Buffers,
    faults: Arc<Faults>,
    counters: Arc<Counters>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) if !admit.admits(peer.ip()) => {
                    tracing::warn!(%peer, "proxy: closed a connection from a client it does not serve");
                    drop(client);
                }
                Ok((client, _)) => {
                    connections.spawn(connection::serve(
                        client,
                        upstream,
                        forward,
                        buffers,
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
