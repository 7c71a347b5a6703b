//! Where a plan's services run: hosts by name, each of a kind, and each service's host.

use std::collections::BTreeMap;
use std::fmt;
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
}

impl fmt::Display for HostKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostKind::Local => "local",
            HostKind::Netns => "netns",
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
    pub declared: BTreeMap<String, HostKind>,
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
        self.declared.get(host).copied().unwrap_or(HostKind::Local)
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
            declared: BTreeMap::from([("db".to_owned(), HostKind::Netns)]),
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
