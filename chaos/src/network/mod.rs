//! The `netns` hosts of a run: one Linux bridge in the supervisor's network namespace and one
//! namespace per host, joined to the bridge by a veth pair, each with an address of its own in
//! a private /24 that is used only inside what the run made (no default route leads out).
//! Services on a host run inside its namespace; the supervisor (and the players it plays)
//! reach them over the bridge, where it holds the first address.
//!
//! A partition `via: firewall` is an nftables table in one host's namespace that drops the
//! packets to and from the other host's address, as a cut cable would; deleting it heals.
//! Everything is noted in a [`made`] record before it is made, removed at the end, and removed
//! by the next run when this one's supervisor died.

mod command;
mod firewall;
pub(crate) mod made;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use command::run;
pub use firewall::Cut;
use made::{forward_rule, Record, Thing};

/// What can go wrong making or changing a run's network.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("`{command}` failed: {message}")]
    Command { command: String, message: String },
    #[error("cannot write {}: {source}", path.display())]
    Record {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Unavailable(String),
}

/// One `netns` host as the run made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetnsHost {
    /// The namespace's name (`ip netns`), which `/run/netns/<name>` opens.
    pub namespace: String,
    pub address: Ipv4Addr,
}

impl NetnsHost {
    /// The file a process joins to enter the namespace.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.namespace)
    }
}

/// The bridge and namespaces of one run; removed on [`Network::remove`] or drop.
#[derive(Debug)]
pub struct Network {
    /// The supervisor's address on the bridge: where services in namespaces reach it.
    pub gateway: Ipv4Addr,
    hosts: BTreeMap<String, NetnsHost>,
    record: Record,
}

/// Tells the runs of one supervisor apart (a selftest runs several at once).
static RUNS: AtomicU32 = AtomicU32::new(0);

impl Network {
    /// Checks that this machine can make namespaces (root, `ip` and `nft`), before anything
    /// starts.
    pub fn check_available() -> Result<(), NetworkError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(NetworkError::Unavailable(
                "netns hosts need root (network namespaces, bridges and nftables)".into(),
            ));
        }
        for (program, package) in [("ip", "iproute2"), ("nft", "nftables")] {
            if command::locate(program).is_none() {
                return Err(NetworkError::Unavailable(format!(
                    "netns hosts need `{program}`: install it (apt-get install {package})"
                )));
            }
        }
        Ok(())
    }

    /// Makes the bridge and one namespace per host, named after the plan's hosts.
    pub fn create(hosts: &[String]) -> Result<Network, NetworkError> {
        Self::check_available()?;
        let serial = RUNS.fetch_add(1, Ordering::Relaxed);
        // Six hex digits keep every interface name within Linux's 15 characters.
        let tag = format!("{:06x}", (std::process::id() ^ (serial << 22)) & 0xff_ffff);
        let subnet = free_subnet(&tag)?;
        let host = |k: u8| Ipv4Addr::new(10, 213, subnet, k);
        let record = Record::create(&tag)?;
        let mut network = Network {
            gateway: host(1),
            hosts: BTreeMap::new(),
            record,
        };
        let bridge = format!("apbr-{tag}");
        network.make(Thing::Bridge(bridge.clone()), || {
            run("ip", &["link", "add", &bridge, "type", "bridge"], None)
        })?;
        let gateway = format!("{}/24", network.gateway);
        run("ip", &["addr", "add", &gateway, "dev", &bridge], None)?;
        run("ip", &["link", "set", &bridge, "up"], None)?;
        // Docker's `FORWARD DROP` would drop bridged traffic between the namespaces too.
        if command::locate("iptables").is_some() {
            network.make(Thing::ForwardAccept(bridge.clone()), || {
                run("iptables", &forward_rule("-I", &bridge), None)
            })?;
        }
        for (k, name) in hosts.iter().enumerate() {
            let number = u8::try_from(k + 2)
                .ok()
                .filter(|n| *n < 255)
                .ok_or_else(|| NetworkError::Unavailable("at most 253 netns hosts".into()))?;
            let namespace = format!("anyplay-{tag}-{name}");
            network.make(Thing::Netns(namespace.clone()), || {
                run("ip", &["netns", "add", &namespace], None)
            })?;
            let veth = format!("apv-{tag}-{k}");
            run(
                "ip",
                &[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns",
                    &namespace,
                ],
                None,
            )?;
            run("ip", &["link", "set", &veth, "master", &bridge, "up"], None)?;
            let address = host(number);
            let inside = |args: &[&str]| {
                let mut all = vec!["-n", namespace.as_str()];
                all.extend_from_slice(args);
                run("ip", &all, None)
            };
            inside(&["addr", "add", &format!("{address}/24"), "dev", "eth0"])?;
            inside(&["link", "set", "eth0", "up"])?;
            inside(&["link", "set", "lo", "up"])?;
            network
                .hosts
                .insert(name.clone(), NetnsHost { namespace, address });
        }
        Ok(network)
    }

    /// Notes `thing`, then makes it.
    fn make(
        &mut self,
        thing: Thing,
        make: impl FnOnce() -> Result<(), NetworkError>,
    ) -> Result<(), NetworkError> {
        self.record.note(&thing)?;
        make()
    }

    pub fn host(&self, name: &str) -> Option<&NetnsHost> {
        self.hosts.get(name)
    }

    /// Removes everything the run made (the namespaces take their veths and tables along).
    pub fn remove(&self) {
        for thing in self.record.undo_all() {
            tracing::debug!("removed {thing}");
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A third octet for `10.213.X.0/24` that no interface of this machine uses yet, starting at
/// one drawn from the run's tag (runs at once rarely collide, and a collision is skipped).
fn free_subnet(tag: &str) -> Result<u8, NetworkError> {
    let used = std::process::Command::new(
        command::locate("ip").ok_or_else(|| NetworkError::Unavailable("no `ip`".into()))?,
    )
    .args(["-4", "-o", "addr", "show"])
    .output()
    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    .unwrap_or_default();
    let start = u32::from_str_radix(tag, 16).unwrap_or(0) % 250;
    (0..250)
        .map(|k| ((start + k) % 250 + 1) as u8)
        .find(|x| !used.contains(&format!(" 10.213.{x}.")))
        .ok_or_else(|| NetworkError::Unavailable("every 10.213.X.0/24 is in use".into()))
}
