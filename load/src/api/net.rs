//! Spreading the players' connections over loopback source addresses (`--source-ips`), so that
//! one machine holds more players than one address's ephemeral ports allow; or one address for
//! each player (`--rate-limits`), so that the cloud's per-address limits count each alone.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::Range;
use std::str::FromStr;

use tokio::net::{TcpSocket, TcpStream};

use crate::api::client::http_client;

/// More addresses than this is surely a typo.
const MAX_ADDRESSES: usize = 65_536;

/// `--rate-limits`: the player numbered `i` in the run calls from 127.64.0.0 + `i`.
const PER_PLAYER_BASE: u32 = u32::from_be_bytes([127, 64, 0, 0]);
/// Players a run with an address each may have.
pub const PER_PLAYER_ADDRESSES: usize = 65_536;
/// Bursts past the limits call from 127.128.0.0 on, where no player is: each fleet (a load
/// agent's share too) has [`BURSTS_PER_FLEET`] addresses from its first player's number on.
const BURST_BASE: u32 = u32::from_be_bytes([127, 128, 0, 0]);
pub const BURSTS_PER_FLEET: u64 = 64;
/// A slow reader's flood (`--slow-readers` with `--rate-limits`) calls from 127.160.0.0 on:
/// [`FLOODS_PER_FLEET`] floods a fleet, [`FLOOD_ADDRESSES`] addresses a flood, so that none of
/// them goes past the call limit.
const FLOOD_BASE: u32 = u32::from_be_bytes([127, 160, 0, 0]);
pub const FLOODS_PER_FLEET: u64 = 64;
pub const FLOOD_ADDRESSES: u64 = 16;
/// An event socket's receive buffer (the kernel doubles it), set before connecting: the
/// window it offers never shrinks after, so a player that comes to read slowly later holds
/// no more than this unread once narrowed. Yet large enough that a backlog (a link fault
/// healed) comes as fast as the link brings it: 4 KiB took one at a few kB a second.
const EVENT_RECV_BUFFER: u32 = 32 * 1024;
/// A slow reader's, from its first slow read: it must leave its events in the cloud's
/// outbound queue, not in its own kernel.
const SLOW_READER_RECV_BUFFER: usize = 4 * 1024;

/// Loopback source addresses, used round-robin by player index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceIps(Vec<Ipv4Addr>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceIpsError {
    #[error("{0:?} is not an IPv4 address")]
    NotAnAddress(String),
    #[error("{0} is not a loopback address (only 127.0.0.0/8 may be used)")]
    NotLoopback(Ipv4Addr),
    #[error("the range {0}-{1} is empty")]
    Empty(Ipv4Addr, Ipv4Addr),
    #[error("more than {MAX_ADDRESSES} addresses")]
    TooMany,
}

impl FromStr for SourceIps {
    type Err = SourceIpsError;

    /// `127.0.0.2-127.0.0.40`, a comma-separated list, or both mixed.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse = |part: &str| {
            let ip: Ipv4Addr = part
                .trim()
                .parse()
                .map_err(|_| SourceIpsError::NotAnAddress(part.to_string()))?;
            if ip.is_loopback() {
                Ok(ip)
            } else {
                Err(SourceIpsError::NotLoopback(ip))
            }
        };
        let mut ips = Vec::new();
        for part in s.split(',') {
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (parse(lo)?, parse(hi)?);
                    if u32::from(hi) < u32::from(lo) {
                        return Err(SourceIpsError::Empty(lo, hi));
                    }
                    if (u32::from(hi) - u32::from(lo)) as usize >= MAX_ADDRESSES {
                        return Err(SourceIpsError::TooMany);
                    }
                    ips.extend((u32::from(lo)..=u32::from(hi)).map(Ipv4Addr::from));
                }
                None => ips.push(parse(part)?),
            }
        }
        if ips.len() > MAX_ADDRESSES {
            return Err(SourceIpsError::TooMany);
        }
        Ok(SourceIps(ips))
    }
}

impl fmt::Display for SourceIps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0.first(), self.0.last()) {
            (Some(first), Some(last)) => write!(f, "{first}-{last} ({} addresses)", self.0.len()),
            _ => f.write_str("none"),
        }
    }
}

impl SourceIps {
    pub fn addresses(&self) -> &[Ipv4Addr] {
        &self.0
    }

    /// One address for each player numbered in `players` (`--rate-limits`).
    pub fn one_per_player(players: Range<usize>) -> SourceIps {
        SourceIps(
            players
                .map(|i| Ipv4Addr::from(PER_PLAYER_BASE + i as u32))
                .collect(),
        )
    }
}

/// The address burst `k` of the fleet whose first player is `first` calls from: one that no
/// player and no other burst of the run uses (`k` below [`BURSTS_PER_FLEET`]).
pub fn burst_address(first: usize, k: u64) -> Ipv4Addr {
    Ipv4Addr::from(BURST_BASE + (first as u64 * BURSTS_PER_FLEET + k) as u32)
}

/// The `j`-th address (below [`FLOOD_ADDRESSES`]) of flood `k` (below [`FLOODS_PER_FLEET`]) of the
/// fleet whose first player is `first`.
pub fn flood_address(first: usize, k: u64, j: u64) -> Ipv4Addr {
    Ipv4Addr::from(
        FLOOD_BASE + ((first as u64 * FLOODS_PER_FLEET + k) * FLOOD_ADDRESSES + j) as u32,
    )
}

/// The HTTP clients (one per source address) and the socket factory the players share.
pub struct Net {
    sources: Vec<Option<IpAddr>>,
    clients: Vec<reqwest::Client>,
    /// The number of the fleet's first player: players take the addresses in turn from it.
    first: usize,
}

impl Net {
    /// One client bound to each source address, or one unbound client without `--source-ips`;
    /// the player numbered `first` takes the first address.
    pub fn new(source_ips: Option<&SourceIps>, first: usize) -> Result<Net, reqwest::Error> {
        let sources: Vec<Option<IpAddr>> = match source_ips {
            Some(ips) if !ips.0.is_empty() => {
                ips.0.iter().map(|ip| Some(IpAddr::V4(*ip))).collect()
            }
            _ => vec![None],
        };
        let clients = sources
            .iter()
            .map(|ip| http_client(*ip))
            .collect::<Result<_, _>>()?;
        Ok(Net {
            sources,
            clients,
            first,
        })
    }

    fn slot(&self, player: usize) -> usize {
        player.wrapping_sub(self.first) % self.clients.len()
    }

    /// The HTTP client of player `player`.
    pub fn http(&self, player: usize) -> &reqwest::Client {
        &self.clients[self.slot(player)]
    }

    /// A TCP connection for player `player`'s event socket, from its source address.
    pub async fn connect(&self, player: usize, to: SocketAddr) -> std::io::Result<TcpStream> {
        let socket = if to.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // Before connecting: the window is offered at the handshake.
        socket.set_recv_buffer_size(EVENT_RECV_BUFFER)?;
        if let Some(ip) = self.sources[self.slot(player)] {
            socket.bind(SocketAddr::new(ip, 0))?;
        }
        socket.connect(to).await
    }
}

/// Narrows the receive buffer of an event connection whose player starts reading it slowly:
/// the window it offers closes once that much waits unread, and the cloud's queue fills.
pub fn narrow_for_slow_reading(stream: &TcpStream) -> std::io::Result<()> {
    nix::sys::socket::setsockopt(
        stream,
        nix::sys::socket::sockopt::RcvBuf,
        &SLOW_READER_RECV_BUFFER,
    )
    .map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_lists_parse_and_only_loopback_is_taken() {
        let ips: SourceIps = "127.0.0.2-127.0.0.40".parse().expect("range");
        assert_eq!(ips.addresses().len(), 39);
        assert_eq!(ips.addresses()[0], Ipv4Addr::new(127, 0, 0, 2));
        let ips: SourceIps = "127.0.0.2,127.0.1.1-127.0.1.2".parse().expect("list");
        assert_eq!(ips.addresses().len(), 3);
        assert!(matches!(
            "10.0.0.1".parse::<SourceIps>(),
            Err(SourceIpsError::NotLoopback(_))
        ));
        assert!(matches!(
            "127.0.0.9-127.0.0.2".parse::<SourceIps>(),
            Err(SourceIpsError::Empty(..))
        ));
        assert!(matches!(
            "127.0.0.x".parse::<SourceIps>(),
            Err(SourceIpsError::NotAnAddress(_))
        ));
    }

    /// The peer of an event socket, with a send buffer bounded as a node bounds it.
    async fn accept(listener: &tokio::net::TcpListener) -> TcpStream {
        let (server, _) = listener.accept().await.expect("accept");
        nix::sys::socket::setsockopt(&server, nix::sys::socket::sockopt::SndBuf, &8192)
            .expect("send buffer");
        server
    }

    /// Bytes `server` gets off its hands towards a peer that reads nothing, before its writes
    /// block.
    async fn taken_unread(server: &TcpStream) -> usize {
        let (mut taken, chunk) = (0, [0u8; 1024]);
        while let Ok(Ok(())) =
            tokio::time::timeout(std::time::Duration::from_millis(500), server.writable()).await
        {
            match server.try_write(&chunk) {
                Ok(n) => taken += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("write: {e}"),
            }
        }
        taken
    }

    /// Narrowed for a slow reader, even after a backlog went through it, an event socket holds
    /// less unread than one reading normally offers: its own 8 KiB and the window it offered
    /// before (the sender's 16 KiB come on top).
    #[tokio::test]
    async fn a_slow_readers_socket_holds_little_unread() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listener");
        let to = listener.local_addr().expect("address");
        let net = Net::new(None, 0).expect("net");
        let mut reader = net.connect(0, to).await.expect("connect");
        let mut server = accept(&listener).await;
        const BACKLOG: usize = 1_000_000;
        let writing = tokio::spawn(async move {
            server.write_all(&vec![7; BACKLOG]).await.expect("write");
            server
        });
        let mut read = vec![0; BACKLOG];
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            reader.read_exact(&mut read),
        )
        .await
        .expect("the backlog arrives")
        .expect("read");
        let server = writing.await.expect("writer");
        let normal = net.connect(1, to).await.expect("connect");
        let twin = accept(&listener).await;
        narrow_for_slow_reading(&reader).expect("narrowed");
        let (held_slowly, held_normally) = (taken_unread(&server).await, taken_unread(&twin).await);
        drop(normal);
        assert!(
            held_slowly <= 56 * 1024,
            "a slow reader's socket took {held_slowly} bytes"
        );
        assert!(
            held_slowly < held_normally,
            "a slow reader's socket took {held_slowly} bytes, a normal one's {held_normally}"
        );
    }

    #[tokio::test]
    async fn event_sockets_leave_from_the_players_source_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listener");
        let to = listener.local_addr().expect("address");
        let net = Net::new(Some(&"127.0.0.2-127.0.0.3".parse().expect("range")), 0).expect("net");
        for (player, expected) in [
            (0, [127, 0, 0, 2]),
            (1, [127, 0, 0, 3]),
            (2, [127, 0, 0, 2]),
        ] {
            let _client = net.connect(player, to).await.expect("connect");
            let (_, from) = listener.accept().await.expect("accept");
            assert_eq!(from.ip(), IpAddr::from(expected));
        }
    }

    #[tokio::test]
    async fn with_an_address_each_a_share_of_a_run_calls_from_its_players_own() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listener");
        let to = listener.local_addr().expect("address");
        let net = Net::new(Some(&SourceIps::one_per_player(300..302)), 300).expect("net");
        for (player, expected) in [(300, [127, 64, 1, 44]), (301, [127, 64, 1, 45])] {
            let _client = net.connect(player, to).await.expect("connect");
            let (_, from) = listener.accept().await.expect("accept");
            assert_eq!(from.ip(), IpAddr::from(expected));
        }
        assert_eq!(burst_address(0, 0), Ipv4Addr::new(127, 128, 0, 0));
        assert_eq!(burst_address(300, 1), Ipv4Addr::new(127, 128, 75, 1));
        let last = burst_address(PER_PLAYER_ADDRESSES - 1, BURSTS_PER_FLEET - 1);
        assert!(last.is_loopback(), "{last}");
    }
}
