//! Partitions `via: firewall`: an nftables table in one host's namespace that drops the packets
//! to and/or from another host's address. The kernel drops them as a cut cable would: nothing
//! is reset, and TCP retransmits until the table is deleted (the heal) or gives up.

use std::net::Ipv4Addr;

use super::command::run;
use super::{Network, NetworkError};

/// One cut as installed: in which namespace, against which address, which ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The host whose namespace holds the table.
    pub host: String,
    /// The other host's address.
    pub peer: Ipv4Addr,
    /// Packets from `host` to `peer` are dropped.
    pub outgoing: bool,
    /// Packets from `peer` to `host` are dropped.
    pub incoming: bool,
    /// The table's name, unique per cut (`anyplay_node_1_postgres`).
    pub table: String,
}

impl Cut {
    /// The nftables script that installs the table.
    fn script(&self) -> String {
        let mut chains = String::new();
        if self.outgoing {
            chains.push_str(&format!(
                "  chain out {{ type filter hook output priority 0; ip daddr {} drop; }}\n",
                self.peer
            ));
        }
        if self.incoming {
            chains.push_str(&format!(
                "  chain in {{ type filter hook input priority 0; ip saddr {} drop; }}\n",
                self.peer
            ));
        }
        format!("table ip {} {{\n{chains}}}\n", self.table)
    }
}

impl Network {
    /// Installs `cut` in its host's namespace.
    pub fn cut(&self, cut: &Cut) -> Result<(), NetworkError> {
        let namespace = self.namespace(&cut.host)?;
        run(
            "ip",
            &["netns", "exec", namespace, "nft", "-f", "-"],
            Some(&cut.script()),
        )
    }

    /// Deletes `cut`'s table: the link carries packets again.
    pub fn mend(&self, cut: &Cut) -> Result<(), NetworkError> {
        let namespace = self.namespace(&cut.host)?;
        run(
            "ip",
            &[
                "netns", "exec", namespace, "nft", "delete", "table", "ip", &cut.table,
            ],
            None,
        )
    }

    fn namespace(&self, host: &str) -> Result<&str, NetworkError> {
        self.hosts
            .get(host)
            .map(|h| h.namespace.as_str())
            .ok_or_else(|| NetworkError::Unavailable(format!("`{host}` is not a netns host")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_way_cut_has_one_chain() {
        let cut = Cut {
            host: "a".into(),
            peer: Ipv4Addr::new(10, 213, 7, 3),
            outgoing: true,
            incoming: false,
            table: "anyplay_node_1_postgres".into(),
        };
        let script = cut.script();
        assert!(
            script.starts_with("table ip anyplay_node_1_postgres {"),
            "{script}"
        );
        assert!(script.contains("hook output priority 0; ip daddr 10.213.7.3 drop;"));
        assert!(!script.contains("hook input"), "{script}");
    }
}
