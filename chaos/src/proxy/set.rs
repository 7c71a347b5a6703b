//! All the proxies of a topology, keyed by the link they sit on.

use std::collections::BTreeMap;

use super::{Endpoint, LinkName, Proxy, ProxyError};

#[derive(Default)]
pub struct ProxySet {
    proxies: BTreeMap<LinkName, Proxy>,
}

impl ProxySet {
    pub fn new() -> Self {
        ProxySet::default()
    }

    pub fn insert(&mut self, proxy: Proxy) -> Result<(), ProxyError> {
        let name = proxy.name();
        if self.proxies.contains_key(&name) {
            return Err(ProxyError::Duplicate(name));
        }
        self.proxies.insert(name, proxy);
        Ok(())
    }

    pub fn get(&self, name: &LinkName) -> Option<&Proxy> {
        self.proxies.get(name)
    }

    /// The proxy between `a` and `b`, whichever way the link was named (a plan's
    /// `partition: [postgres, node-1]` finds `node-1->postgres`).
    pub fn between(&self, a: Endpoint, b: Endpoint) -> Option<&Proxy> {
        self.proxies.values().find(|proxy| proxy.name().joins(a, b))
    }

    /// Every proxy with `end` on one side (`Players`: every player-facing proxy).
    pub fn touching(&self, end: Endpoint) -> impl Iterator<Item = &Proxy> {
        self.proxies
            .values()
            .filter(move |proxy| proxy.name().touches(end))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Proxy> {
        self.proxies.values()
    }

    /// Removes every lasting fault everywhere: the heal phase.
    pub fn heal_all(&self) {
        self.proxies.values().for_each(Proxy::heal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    async fn proxy(from: Endpoint, to: Endpoint) -> Proxy {
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        // Nothing connects in this test, so the upstream is never dialled.
        Proxy::start(LinkName::new(from, to), any, any)
            .await
            .expect("proxy")
    }

    #[tokio::test]
    async fn finds_links_by_either_end() {
        let mut set = ProxySet::new();
        set.insert(proxy(Endpoint::Players, Endpoint::Node(1)).await)
            .expect("insert");
        set.insert(proxy(Endpoint::Players, Endpoint::Node(2)).await)
            .expect("insert");
        set.insert(proxy(Endpoint::Node(1), Endpoint::Postgres).await)
            .expect("insert");
        assert!(matches!(
            set.insert(proxy(Endpoint::Players, Endpoint::Node(1)).await),
            Err(ProxyError::Duplicate(_))
        ));

        let partition = set
            .between(Endpoint::Postgres, Endpoint::Node(1))
            .expect("found");
        assert_eq!(partition.name().to_string(), "node-1->postgres");
        assert!(set.between(Endpoint::Postgres, Endpoint::Node(2)).is_none());
        assert_eq!(set.touching(Endpoint::Players).count(), 2);
        assert_eq!(set.touching(Endpoint::Node(1)).count(), 2);

        partition.set(
            super::super::LinkFault::Partition(super::super::PartitionMode::Hold),
            super::super::Ways::Both,
            None,
        );
        set.heal_all();
        assert!(set
            .iter()
            .all(|proxy| !proxy.is_set(super::super::LinkFaultKind::Partition)));
    }
}
