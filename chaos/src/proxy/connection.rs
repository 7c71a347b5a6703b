//! One proxied connection: held or refused while the proxy is cut, then joined to the upstream by
//! two links; closed on both sides with an RST when the proxy resets or its stream lost bytes, and
//! with a FIN when limit_data or timeout says so.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use nix::sys::socket::sockopt;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use super::counters::Counters;
use super::fault::connection::{ConnectionFaults, Ending};
use super::fault::reset::abort;
use super::fault::Faults;
use super::link::{self, Direction};
use super::{Endpoint, Forward, LinkName};

/// The kernel buffers of a link's sockets. A players link bounds the buffers that carry a node's
/// events to a player (towards the player, and from the node) as the node bounds its own event
/// sockets' send buffers: a player that reads slowly must fill the node's outbound queue, as it
/// would without the proxy, not megabytes the proxy's sockets would buffer on its behalf. Other
/// links keep the kernel's autotuned buffers, for their throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Buffers {
    Autotuned,
    /// Bytes asked of the kernel (which doubles them) for each bounded buffer.
    Bounded(u32),
}

impl Buffers {
    /// As much as the node's default event send buffer.
    const PLAYERS: u32 = 8 * 1024;

    pub(crate) fn of(link: LinkName) -> Buffers {
        if link.touches(Endpoint::Players) {
            Buffers::Bounded(Self::PLAYERS)
        } else {
            Buffers::Autotuned
        }
    }

    /// The largest read at once with no fault set: a bounded link holds no more than its
    /// buffers in hand either, on the way it bounds (the node's events, downstream); the
    /// player's own bytes upstream go through autotuned buffers and read as on any link.
    fn largest_read(self, direction: Direction) -> usize {
        match (self, direction) {
            (Buffers::Bounded(bytes), Direction::Downstream) => bytes as usize,
            _ => link::STRAIGHT_CHUNK,
        }
    }
}

/// How a joined connection ended.
enum Outcome {
    /// Both sides ended their streams, or one failed.
    Finished(io::Result<()>),
    /// `reset_all`.
    ResetAll,
    /// A lasting fault ended it.
    Fault(Ending),
}

pub(crate) async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    forward: Forward,
    buffers: Buffers,
    shared: Arc<Faults>,
    counters: Arc<Counters>,
) {
    let open = counters.opened();
    let faults = ConnectionFaults::new(&shared, open.serial());
    let mut reset = shared.reset.subscribe();
    let source = client.peer_addr().ok();
    let connected = tokio::select! {
        connected = connect(upstream, source, forward, buffers, &faults) => connected,
        () = reset.fired() => return abort(client),
    };
    let mut server = match connected {
        Ok(Some(server)) => server,
        Ok(None) => {
            counters.refused();
            return abort(client);
        }
        Err(error) => {
            // The client sees what it would see without the proxy: a refused (reset) connection.
            tracing::debug!(%error, %upstream, "proxy: upstream unreachable");
            return abort(client);
        }
    };
    let mut client = client;
    if let Buffers::Bounded(bytes) = buffers {
        let bytes = bytes as usize;
        if let Err(error) = nix::sys::socket::setsockopt(&client, sockopt::SndBuf, &bytes) {
            tracing::debug!(%error, "proxy: could not bound a send buffer");
        }
    }
    // Chunks go out as they come; Nagle would add delays no fault asked for.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);

    let outcome = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let both = async {
            tokio::try_join!(
                link::run(
                    Direction::Upstream,
                    client_read,
                    server_write,
                    buffers.largest_read(Direction::Upstream),
                    &faults,
                    &counters
                ),
                link::run(
                    Direction::Downstream,
                    server_read,
                    client_write,
                    buffers.largest_read(Direction::Downstream),
                    &faults,
                    &counters
                ),
            )
        };
        tokio::select! {
            result = both => Outcome::Finished(result.map(drop)),
            () = reset.fired() => Outcome::ResetAll,
            ending = faults.ended() => Outcome::Fault(ending),
        }
    };
    match outcome {
        Outcome::Finished(Ok(())) => {}
        Outcome::Finished(Err(error)) => {
            tracing::debug!(%error, %upstream, "proxy: connection ended");
        }
        Outcome::ResetAll => {
            abort(client);
            abort(server);
        }
        Outcome::Fault(Ending::Reset) => {
            counters.faulted();
            abort(client);
            abort(server);
        }
        Outcome::Fault(Ending::Close) => {
            counters.faulted();
            // FIN after what was written; the streams close when dropped.
            let _ = client.shutdown().await;
            let _ = server.shutdown().await;
        }
    }
}

/// Connects once no hold-cut keeps the connection back (a partitioned upstream must not see new
/// connections); `None` when a drop-cut refuses it. A client on a loopback address of its own
/// (a player with its own address, for the cloud's per-address limits) reaches a loopback
/// upstream from that same address, as it would without the proxy.
async fn connect(
    upstream: SocketAddr,
    client: Option<SocketAddr>,
    forward: Forward,
    buffers: Buffers,
    faults: &ConnectionFaults<'_>,
) -> io::Result<Option<TcpStream>> {
    if !faults.may_connect().await {
        return Ok(None);
    }
    let socket = if upstream.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // Before connecting: the window the upstream sees is set at the handshake.
    if let Buffers::Bounded(bytes) = buffers {
        socket.set_recv_buffer_size(bytes)?;
    }
    let kept = client.filter(|c| forward == Forward::Source && keeps_source(c.ip(), upstream));
    if let Some(client) = kept {
        socket.bind(SocketAddr::new(client.ip(), 0))?;
    }
    let mut server = socket.connect(upstream).await?;
    if forward == Forward::ProxyHeader {
        // Ahead of the client's bytes and of every fault: it is this proxy's word, not traffic.
        server
            .write_all(proxy_header(client, upstream).as_bytes())
            .await?;
    }
    Ok(Some(server))
}

/// The PROXY v1 line that names `client` to `upstream`.
fn proxy_header(client: Option<SocketAddr>, upstream: SocketAddr) -> String {
    use ppp::v1::Addresses;
    let addresses = match (client, upstream) {
        (Some(SocketAddr::V4(c)), SocketAddr::V4(u)) => {
            Addresses::new_tcp4(*c.ip(), *u.ip(), c.port(), u.port())
        }
        (Some(SocketAddr::V6(c)), SocketAddr::V6(u)) => {
            Addresses::new_tcp6(*c.ip(), *u.ip(), c.port(), u.port())
        }
        _ => Addresses::Unknown,
    };
    addresses.to_string()
}

/// Whether the proxy connects upstream from the client's own address: a loopback one other
/// than 127.0.0.1 (which every unbound client has), to a loopback upstream.
fn keeps_source(client: IpAddr, upstream: SocketAddr) -> bool {
    let shared = IpAddr::V4(Ipv4Addr::LOCALHOST);
    client.is_ipv4() && client.is_loopback() && client != shared && upstream.ip().is_loopback()
}
