//! Spreading the players' connections over loopback source addresses (`--source-ips`), so that
//! one machine holds more players than one address's ephemeral ports allow.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

use tokio::net::{TcpSocket, TcpStream};

use crate::client::http_client;

/// More addresses than this is surely a typo.
const MAX_ADDRESSES: usize = 65_536;

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
}

/// The HTTP clients (one per source address) and the socket factory the players share.
pub struct Net {
    sources: Vec<Option<IpAddr>>,
    clients: Vec<reqwest::Client>,
}

impl Net {
    /// One client bound to each source address, or one unbound client without `--source-ips`.
    pub fn new(source_ips: Option<&SourceIps>) -> Result<Net, reqwest::Error> {
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
        Ok(Net { sources, clients })
    }

    /// The HTTP client of player `player`.
    pub fn http(&self, player: usize) -> &reqwest::Client {
        &self.clients[player % self.clients.len()]
    }

    /// A TCP connection for player `player`'s event socket, from its source address.
    pub async fn connect(&self, player: usize, to: SocketAddr) -> std::io::Result<TcpStream> {
        match self.sources[player % self.sources.len()] {
            None => TcpStream::connect(to).await,
            Some(ip) => {
                let socket = if to.is_ipv4() {
                    TcpSocket::new_v4()?
                } else {
                    TcpSocket::new_v6()?
                };
                socket.bind(SocketAddr::new(ip, 0))?;
                socket.connect(to).await
            }
        }
    }
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

    #[tokio::test]
    async fn event_sockets_leave_from_the_players_source_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listener");
        let to = listener.local_addr().expect("address");
        let net = Net::new(Some(&"127.0.0.2-127.0.0.3".parse().expect("range"))).expect("net");
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
}
