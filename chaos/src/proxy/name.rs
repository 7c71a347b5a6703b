//! Names of proxied links: which two members of the topology a proxy sits between.

use std::fmt;
use std::str::FromStr;

use super::ProxyError;

/// A member of the topology at one end of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// The load's players.
    Players,
    /// `node-N`, 1-based.
    Node(u32),
    Postgres,
    Nats,
}

/// A proxied link, from the side that connects to the side that listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkName {
    pub from: Endpoint,
    pub to: Endpoint,
}

impl LinkName {
    pub fn new(from: Endpoint, to: Endpoint) -> Self {
        LinkName { from, to }
    }

    /// True when the link joins `a` and `b`, in either order.
    pub fn joins(&self, a: Endpoint, b: Endpoint) -> bool {
        (self.from, self.to) == (a, b) || (self.from, self.to) == (b, a)
    }

    pub fn touches(&self, end: Endpoint) -> bool {
        self.from == end || self.to == end
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Players => f.write_str("players"),
            Endpoint::Node(n) => write!(f, "node-{n}"),
            Endpoint::Postgres => f.write_str("postgres"),
            Endpoint::Nats => f.write_str("nats"),
        }
    }
}

impl FromStr for Endpoint {
    type Err = ProxyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "players" => Ok(Endpoint::Players),
            "postgres" => Ok(Endpoint::Postgres),
            "nats" => Ok(Endpoint::Nats),
            _ => text
                .strip_prefix("node-")
                .and_then(|n| n.parse().ok())
                .filter(|n| *n >= 1)
                .map(Endpoint::Node)
                .ok_or_else(|| ProxyError::UnknownEndpoint(text.to_owned())),
        }
    }
}

impl fmt::Display for LinkName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{}", self.from, self.to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_round_trip() {
        for text in ["players", "node-1", "node-12", "postgres", "nats"] {
            let endpoint: Endpoint = text.parse().expect(text);
            assert_eq!(endpoint.to_string(), text);
        }
        for bad in ["node-0", "node-", "node-x", "nodes", "random-node", ""] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
    }

    #[test]
    fn links_join_either_way() {
        let link = LinkName::new(Endpoint::Node(1), Endpoint::Postgres);
        assert_eq!(link.to_string(), "node-1->postgres");
        assert!(link.joins(Endpoint::Postgres, Endpoint::Node(1)));
        assert!(link.joins(Endpoint::Node(1), Endpoint::Postgres));
        assert!(!link.joins(Endpoint::Node(2), Endpoint::Postgres));
        assert!(link.touches(Endpoint::Node(1)));
        assert!(!link.touches(Endpoint::Nats));
    }
}
