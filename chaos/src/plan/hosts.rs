//! Where a plan's services run: hosts by name, each of a kind, and each service's host.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::Service;

/// The host every service runs on unless the plan says otherwise: the supervisor's machine.
pub const LOCAL: &str = "local";

/// What a host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostKind {
    /// The supervisor's machine and its loopback, as without hosts.
    Local,
    /// A Linux network namespace the run makes, with its own address on the run's bridge.
    Netns,
    /// A Docker engine other than the local one; its services are containers on its host's
    /// network.
    Docker,
}

/// A host as a plan declares it: `local`, `netns`, or a Docker engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "a host is `local`, `netns` or `{docker: URL}` (with `tls: {ca, cert, key}` for a remote engine)"
)]
pub enum Host {
    Kind(HostKind),
    Docker(Engine),
}

impl Host {
    pub fn kind(&self) -> HostKind {
        match self {
            Host::Kind(kind) => *kind,
            Host::Docker(_) => HostKind::Docker,
        }
    }
}

/// A Docker engine: `tcp://HOST:PORT` with TLS (the engine's CA, and the client's
/// certificate and key), or `unix:///path/to/docker.sock`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Engine {
    pub docker: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
}

/// The files a TLS connection to an engine uses (PEM).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl fmt::Display for HostKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostKind::Local => "local",
            HostKind::Netns => "netns",
            HostKind::Docker => "docker",
        })
    }
}

/// How a `partition` cuts its link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// The fault proxy on the link holds or drops its bytes.
    #[default]
    Proxy,
    /// The hosts' kernels drop the packets (nftables in a `netns` host).
    Firewall,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Proxy => "proxy",
            Via::Firewall => "firewall",
        })
    }
}

impl FromStr for Via {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "proxy" => Ok(Via::Proxy),
            "firewall" => Ok(Via::Firewall),
            _ => Err(format!("`{s}` is not a way to cut (proxy or firewall)")),
        }
    }
}

/// The plan's hosts and where each service runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hosts {
    /// As the plan declares them (`local` is there even when not declared).
    pub declared: BTreeMap<String, Host>,
    /// The host of each service that is not on `local`.
    pub placement: BTreeMap<Service, String>,
}

impl Hosts {
    /// The name of the host `service` runs on.
    pub fn of(&self, service: Service) -> &str {
        self.placement.get(&service).map_or(LOCAL, String::as_str)
    }

    /// The kind of the host `service` runs on.
    pub fn kind_of(&self, service: Service) -> HostKind {
        self.kind(self.of(service))
    }

    /// The kind of the host named `host` (`local` for one not declared).
    pub fn kind(&self, host: &str) -> HostKind {
        self.declared.get(host).map_or(HostKind::Local, Host::kind)
    }

    /// The Docker engines that some service runs on, by host name.
    pub fn engines(&self) -> Vec<(&str, &Engine)> {
        self.declared
            .iter()
            .filter_map(|(name, host)| match host {
                Host::Docker(engine) if self.placement.values().any(|h| h == name) => {
                    Some((name.as_str(), engine))
                }
                _ => None,
            })
            .collect()
    }

    /// The services placed on `host`.
    pub fn services_on<'a>(&'a self, host: &'a str) -> impl Iterator<Item = Service> + 'a {
        self.placement
            .iter()
            .filter(move |(_, h)| *h == host)
            .map(|(s, _)| *s)
    }

    /// The `netns` hosts that some service runs on, in name order: what a run makes.
    pub fn namespaces(&self) -> Vec<String> {
        let mut used: Vec<String> = self
            .placement
            .values()
            .filter(|host| self.kind(host) == HostKind::Netns)
            .cloned()
            .collect();
        used.sort();
        used.dedup();
        used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_default_to_local() {
        let hosts = Hosts {
            declared: BTreeMap::from([("db".to_owned(), Host::Kind(HostKind::Netns))]),
            placement: BTreeMap::from([(Service::Postgres, "db".to_owned())]),
        };
        assert_eq!(hosts.of(Service::Node(1)), LOCAL);
        assert_eq!(hosts.kind_of(Service::Node(1)), HostKind::Local);
        assert_eq!(hosts.kind_of(Service::Postgres), HostKind::Netns);
        assert_eq!(hosts.namespaces(), vec!["db".to_owned()]);
        assert_eq!("firewall".parse::<Via>(), Ok(Via::Firewall));
        assert!("carrier-pigeon".parse::<Via>().is_err());
    }
}
