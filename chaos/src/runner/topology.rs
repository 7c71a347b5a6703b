//! The topology of a run: PostgreSQL and NATS when the plan has them, the cloud nodes, and
//! a fault proxy on every link (players → node, node → PostgreSQL, node → NATS), brought up
//! in order and driven by the timeline's acts. The services are processes or containers, as
//! the plan's backend says; both listen on the same loopback ports, so nothing else differs.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::backend::docker::DockerBackend;
use crate::backend::placed::Placed;
use crate::backend::process::ProcessBackend;
use crate::backend::Command;
use crate::events::{FriendLimits, RateLimits};
use crate::network::{self, Cut, Network};
use crate::plan::timeline::Peer;
use crate::plan::{
    Act, ActionKind, Backend, DropScope, Host, HostKind, Hosts, ImageSlot, Plan, Route, Service,
    Store, Ways,
};
use crate::proxy::{Admit, Endpoint, Forward, LinkName, Proxy, ProxySet};
use crate::supervisor::service_faults::Disk;
use crate::supervisor::services::scratch::Scratch;
use crate::supervisor::services::{log_path, nats, node, postgres, Placement};
use crate::supervisor::{
    self, FaultNeeds, FaultReadiness, ServiceEvent, ServiceFaultKind, Supervisor,
};
use crate::sync::lock;
use anyplay_cloud::ports::free_port;

use super::builds::Builds;
use super::{images, RunError};

/// The file every node appends its sign-in codes to; the players read it.
pub const MAIL_LOG: &str = "mail.log";

/// A limit the nodes of `plan` hold to: `default` (the cloud's), unless the nodes' environment
/// sets `key` (the variable a node reads; nothing else sets it).
fn node_limit(plan: &Plan, key: &str, default: u32) -> u32 {
    plan.services
        .nodes
        .env
        .get(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The friend limits the nodes of `plan` hold to.
pub fn friend_limits(plan: &Plan) -> FriendLimits {
    let defaults = anyplay_cloud::Config::default().friend_limits;
    let or = |key, default| node_limit(plan, key, default);
    FriendLimits {
        max_friends: or("ANYPLAY_MAX_FRIENDS", defaults.max_friends),
        max_outgoing: or("ANYPLAY_MAX_OUTGOING", defaults.max_outgoing),
        daily_requests_new: or("ANYPLAY_DAILY_REQUESTS_NEW", defaults.daily_requests_new),
    }
}

/// The per-address limits the nodes of `plan` hold to when `rate_limits` turns them on.
pub fn rate_limits(plan: &Plan) -> RateLimits {
    let defaults = anyplay_cloud::Config::default().rate_limits;
    let or = |key, default| node_limit(plan, key, default);
    RateLimits {
        calls_per_minute: or("ANYPLAY_RATE_CALLS_PER_MINUTE", defaults.calls_per_minute),
        auth_email_per_15m: or("ANYPLAY_RATE_AUTH_EMAIL", defaults.auth_email_per_15m),
    }
}

/// How long PostgreSQL and NATS may take to stop when a run ends at once: PostgreSQL's fast
/// shutdown removes its shared memory, a SIGKILLed one leaves it in /dev/shm.
const DEPENDENCY_GRACE_AT_ONCE: Duration = Duration::from_secs(3);

/// How a player, a checker or a person reaches one node.
#[derive(Debug, Clone)]
pub struct NodeAddrs {
    /// `node-N`: the service name, and the node id it puts in welcomes.
    pub name: String,
    pub api: SocketAddr,
    pub ops: SocketAddr,
    /// Where players connect: the node's proxy, or the node itself without one.
    pub players: SocketAddr,
}

pub struct Topology {
    supervisor: Supervisor,
    services: BTreeMap<Service, supervisor::Supervised>,
    proxies: ProxySet,
    pub nodes: Vec<NodeAddrs>,
    /// A node's SIGTERM grace: its drain timeout and 5 s more, as the plan format says.
    stop_grace: Duration,
    pub postgres_url: Option<String>,
    pub nats_url: Option<String>,
    /// PostgreSQL's files outside the run directory, if there: removed once it has stopped.
    /// Last, so that dropping a topology drops (kills) the services first.
    postgres_scratch: Option<Arc<Scratch>>,
    /// The service faults the plan may set, each service made ready for its own.
    service_faults: ServiceFaults,
    hosts: Hosts,
    /// Every version's build, and each node's command without its build (and whether it
    /// runs in a container), for an upgrade.
    builds: Builds,
    node_commands: BTreeMap<u32, (Command, bool)>,
    /// The firewall partitions in place, by the pair they cut, for their heal.
    cuts: Mutex<Vec<((Service, Service), Cut)>>,
    /// The plan's netns hosts; declared after the services, so they are gone before it.
    network: Option<Network>,
}

/// One host of the plan as the run made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    pub name: String,
    pub kind: HostKind,
    pub address: Ipv4Addr,
    pub services: Vec<Service>,
}

fn say_removed(orphans: &[String]) {
    if !orphans.is_empty() {
        eprintln!(
            "  removed {} containers left by a run that died: {}",
            orphans.len(),
            orphans.join(", ")
        );
    }
}

/// Fails, naming each and how to get it, when `engine` lacks an image of `services`.
async fn has_images(
    engine: &DockerBackend,
    plan: &Plan,
    services: &[Service],
    label: &str,
) -> Result<(), RunError> {
    let wanted = images::of_services(plan, services);
    let missing = engine
        .missing_images(wanted.iter().map(|(_, image)| image.as_str()))
        .await
        .map_err(part(format!("{label}the Docker engine")))?;
    if missing.is_empty() {
        return Ok(());
    }
    let missing: Vec<(ImageSlot, &str)> = wanted
        .iter()
        .filter(|(_, image)| missing.contains(&image.as_str()))
        .map(|(slot, image)| (*slot, image.as_str()))
        .collect();
    Err(TopologyError::Refused(format!("{label}{}", images::missing(&missing))).into())
}

/// The IPv4 address of a `tcp://IP:PORT` engine; `None` for a local socket.
fn engine_address(engine: &crate::plan::Engine) -> Option<Ipv4Addr> {
    let address = engine.docker.strip_prefix("tcp://")?;
    match address.parse::<SocketAddr>().ok()?.ip() {
        std::net::IpAddr::V4(ip) => Some(ip),
        std::net::IpAddr::V6(_) => None,
    }
}

/// The address of this machine that packets to `to` leave from (the kernel's route choice,
/// read from a UDP socket that is connected but never sends).
fn source_toward(to: Ipv4Addr) -> Result<Ipv4Addr, RunError> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.connect((to, 9)).map(|()| s))
        .map_err(part(format!("no route to {to}")))?;
    match socket.local_addr().map(|a| a.ip()) {
        Ok(std::net::IpAddr::V4(ip)) => Ok(ip),
        other => Err(TopologyError::Refused(format!(
            "no IPv4 address of this machine reaches {to}: {other:?}"
        ))
        .into()),
    }
}

fn port() -> Result<u16, RunError> {
    free_port().map_err(part("no free loopback port"))
}

/// Why the topology, or the players' way to it, could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A part of it failed, with its own error.
    #[error("{part}: {source}")]
    Part {
        part: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The plan asks what this machine or its topology cannot give.
    #[error("{0}")]
    Refused(String),
}

/// The error of `part`, for `map_err`.
pub fn part<E: std::error::Error + Send + Sync + 'static>(
    part: impl Into<String>,
) -> impl FnOnce(E) -> RunError {
    let part = part.into();
    move |source| {
        TopologyError::Part {
            part,
            source: Box::new(source),
        }
        .into()
    }
}

/// Why an act of the timeline could not be done: recorded in the history, and the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    #[error("the topology has no {0}")]
    NoService(Service),
    #[error("no proxy between node-{node} and {peer}")]
    NoProxy { node: u32, peer: Endpoint },
    #[error("{0} is {1:?}, not ready")]
    NotReady(Service, supervisor::State),
    #[error("players do not go through proxies (load.through_proxy)")]
    PlayersNotProxied,
    #[error("the plan has no netns hosts")]
    NoNetns,
    #[error("{0} is not on a netns host")]
    NotOnNetns(Service),
    #[error("no firewall partition between {0} and {1}")]
    NoCut(Service, Service),
    #[error(transparent)]
    Service(#[from] supervisor::ServiceError),
    #[error(transparent)]
    Network(#[from] network::NetworkError),
}

impl Topology {
    /// A supervisor for the plan's services, and the channel of their events (to be
    /// followed before `start`, so each event is recorded as it happens). For Docker it checks
    /// first, before anything starts, that the engine answers and has every image, and removes
    /// the containers of runs whose supervisor died.
    pub async fn supervisor(
        plan: &Plan,
        dir: &Path,
    ) -> Result<(Supervisor, mpsc::UnboundedReceiver<ServiceEvent>), RunError> {
        let placed_elsewhere: Vec<Service> = plan
            .hosts
            .engines()
            .iter()
            .flat_map(|(host, _)| plan.hosts.services_on(host))
            .collect();
        let own: Arc<dyn crate::backend::Backend> = match plan.backend {
            Backend::Process => Arc::new(ProcessBackend),
            Backend::Docker => {
                let (backend, orphans) = DockerBackend::connect(dir)
                    .await
                    .map_err(part("the Docker engine"))?;
                say_removed(&orphans);
                let here: Vec<Service> = plan
                    .topology()
                    .into_iter()
                    .filter(|s| !placed_elsewhere.contains(s))
                    .collect();
                has_images(&backend, plan, &here, "").await?;
                Arc::new(backend)
            }
        };
        let engines = plan.hosts.engines();
        if engines.is_empty() {
            return Ok(Supervisor::new(own));
        }
        let mut placed = Placed::new(own);
        for (host, engine) in engines {
            let (backend, orphans) = DockerBackend::connect_to(engine, dir)
                .await
                .map_err(part(format!("host {host}")))?;
            say_removed(&orphans);
            let services: Vec<Service> = plan.hosts.services_on(host).collect();
            has_images(&backend, plan, &services, &format!("host {host}: ")).await?;
            let backend: Arc<dyn crate::backend::Backend> = Arc::new(backend);
            for service in services {
                placed.place(service.to_string(), backend.clone());
            }
        }
        Ok(Supervisor::new(Arc::new(placed)))
    }

    /// Starts every service of the plan, dependencies first, each once ready.
    pub async fn start(
        plan: &Plan,
        dir: &Path,
        supervisor: Supervisor,
    ) -> Result<Topology, RunError> {
        let builds = Builds::prepare(plan).await.map_err(part("the versions"))?;
        let mut topology = Topology {
            builds,
            node_commands: BTreeMap::new(),
            supervisor,
            services: BTreeMap::new(),
            proxies: ProxySet::new(),
            nodes: Vec::new(),
            stop_grace: plan.services.nodes.drain_timeout + Duration::from_secs(5),
            postgres_url: None,
            nats_url: None,
            postgres_scratch: None,
            service_faults: ServiceFaults::default(),
            hosts: plan.hosts.clone(),
            cuts: Mutex::new(Vec::new()),
            network: None,
        };
        for thing in network::made::sweep() {
            eprintln!("  removed {thing}, left by a run that died");
        }
        let namespaces = plan.hosts.namespaces();
        if !namespaces.is_empty() {
            topology.network = Some(Network::create(&namespaces).map_err(part("hosts"))?);
        }
        let nodes = plan.services.nodes.count;
        let db_connections = plan.services.nodes.db_connections.unwrap_or(8);
        let faults = ServiceFaults::of(plan)?;
        topology.service_faults = faults.clone();
        let mut upstreams: BTreeMap<Endpoint, (SocketAddr, String)> = BTreeMap::new();

        if let Some(pg) = &plan.services.postgres {
            let settings = postgres::PostgresSettings {
                port: pg.port,
                max_connections: nodes * db_connections,
                args: pg.args.clone(),
                durable: pg.durable.unwrap_or(true),
                placement: topology.placement(Service::Postgres),
            };
            let disk = faults.disk(Service::Postgres);
            let prepared = match topology.runs(Service::Postgres, plan) {
                Backend::Process => postgres::prepare_on_disk(dir, &settings, disk).await,
                Backend::Docker => postgres::container_on_disk(
                    dir,
                    &settings,
                    &images::image(plan, ImageSlot::Postgres),
                    disk,
                ),
            }
            .map_err(part("postgres"))?;
            topology.postgres_scratch = prepared.scratch;
            // The disk (if any) is the one `prepare` mounted under the cluster.
            let mut spec = prepared.spec;
            spec.faults = faults.readiness(Service::Postgres, spec.faults.disk.take());
            topology.add(Service::Postgres, spec).await?;
            let at = SocketAddr::from((settings.placement.address, prepared.port));
            topology.postgres_url = Some(prepared.url.clone());
            upstreams.insert(
                Endpoint::Postgres,
                (at, prepared.url.replace(&at.to_string(), "{addr}")),
            );
        }
        if let Some(n) = &plan.services.nats {
            let settings = nats::NatsSettings {
                port: n.port,
                args: n.args.clone(),
                placement: topology.placement(Service::Nats),
            };
            let prepared = match topology.runs(Service::Nats, plan) {
                Backend::Process => nats::prepare(dir, &settings),
                Backend::Docker => {
                    nats::container(dir, &settings, &images::image(plan, ImageSlot::Nats))
                }
            }
            .map_err(part("nats"))?;
            let spec = prepared
                .spec
                .ready_for(faults.readiness(Service::Nats, None));
            topology.add(Service::Nats, spec).await?;
            topology.nats_url = Some(prepared.url.clone());
            upstreams.insert(
                Endpoint::Nats,
                (
                    SocketAddr::from((settings.placement.address, prepared.port)),
                    "nats://{addr}".to_string(),
                ),
            );
        }

        let mail_log = dir.join(MAIL_LOG);
        crate::run_files::create(&mail_log).map_err(part(mail_log.display().to_string()))?;
        for n in 1..=nodes {
            let service = Service::Node(n);
            let name = service.to_string();
            let at = topology.placement(service);
            let (api, ops) = (
                SocketAddr::from((at.address, port()?)),
                SocketAddr::from((at.address, port()?)),
            );
            // Each node reaches its dependencies through a proxy of its own, so one node's
            // link can be cut or slowed alone; between two netns hosts the link is direct,
            // and their firewalls cut it.
            let mut url_of = BTreeMap::new();
            for (peer, (upstream, url)) in &upstreams {
                let peer_service = match peer {
                    Endpoint::Postgres => Service::Postgres,
                    _ => Service::Nats,
                };
                let direct = topology.on_netns(service) && topology.on_netns(peer_service);
                let reach = match direct {
                    true => *upstream,
                    false => {
                        topology
                            .proxy(
                                Endpoint::Node(n),
                                *peer,
                                topology.nearest(service)?,
                                *upstream,
                            )
                            .await?
                    }
                };
                url_of.insert(*peer, url.replace("{addr}", &reach.to_string()));
            }
            let players = if plan.load.through_proxy {
                topology
                    .proxy(
                        Endpoint::Players,
                        Endpoint::Node(n),
                        Ipv4Addr::LOCALHOST,
                        api,
                    )
                    .await?
            } else {
                api
            };
            // A node that may meet `disk_full` keeps its database on a disk of its own size.
            let disk = match faults.disk(Service::Node(n)) {
                Some(bytes) => Some(Arc::new(
                    Disk::mount(&dir.join(format!("{name}-data")), bytes, None)
                        .map_err(part(name.clone()))?,
                )),
                None => None,
            };
            let data_dir = disk
                .as_ref()
                .map_or(dir.to_owned(), |d| d.path().to_owned());
            let database_url = match plan.store {
                Store::Sqlite => format!("sqlite:{}", data_dir.join("cloud.db").display()),
                Store::Postgres => {
                    url_of
                        .get(&Endpoint::Postgres)
                        .cloned()
                        .ok_or(TopologyError::Refused(
                            "store: postgres needs services.postgres".into(),
                        ))?
                }
            };
            // Its build (the program, and `node` first for the built-in cloud) comes last.
            let mut command = Command::new("", log_path(dir, &name))
                .args(["--listen".to_string(), api.to_string()])
                .args(["--ops-listen".to_string(), ops.to_string()])
                .args(["--node-id".to_string(), name.clone()])
                // Not on the command line, which anyone on the host may read: it holds
                // PostgreSQL's password.
                .env("ANYPLAY_DATABASE_URL", database_url)
                .args(["--mail-log".to_string(), mail_log.display().to_string()])
                .args([
                    "--drain-timeout".to_string(),
                    format!("{}ms", plan.services.nodes.drain_timeout.as_millis()),
                ])
                .args(["--db-connections".to_string(), db_connections.to_string()])
                .cwd(dir)
                .netns(at.netns);
            if let Some(url) = url_of.get(&Endpoint::Nats) {
                command = command.args(["--nats-url".to_string(), url.clone()]);
            }
            if topology.on_netns(service) {
                // Its player proxies name each player (`Forward::ProxyHeader`), from the bridge.
                command = command.args([
                    "--proxy-protocol-from".to_string(),
                    topology.nearest(service)?.to_string(),
                ]);
            }
            if !plan.load.rate_limits {
                // Every player comes from 127.0.0.1: per-IP limits would throttle the load.
                command = command.arg("--no-rate-limits");
            }
            for (key, value) in &plan.services.nodes.env {
                command = command.env(key.clone(), value.clone());
            }
            let version = plan.services.nodes.version;
            let in_container = topology.runs(service, plan) == Backend::Docker;
            let built = topology.builds.of(version, in_container).command(&command);
            topology.node_commands.insert(n, (command, in_container));
            let spec = node::spec(&name, built, ops)
                .ready_for(faults.readiness(Service::Node(n), disk))
                .build(version.to_string());
            topology.add(Service::Node(n), spec).await?;
            topology.nodes.push(NodeAddrs {
                name,
                api,
                ops,
                players,
            });
        }
        Ok(topology)
    }

    async fn add(
        &mut self,
        service: Service,
        spec: supervisor::ServiceSpec,
    ) -> Result<(), RunError> {
        let handle = self
            .supervisor
            .add(spec)
            .await
            .map_err(part(service.to_string()))?;
        handle
            .start()
            .await
            .map_err(part(format!("{service} did not start")))?;
        self.services.insert(service, handle);
        Ok(())
    }

    /// Whether `service` runs as a process or a container: the plan's backend, but always a
    /// container on a Docker host.
    fn runs(&self, service: Service, plan: &Plan) -> Backend {
        match self.hosts.kind_of(service) {
            HostKind::Docker => Backend::Docker,
            _ => plan.backend,
        }
    }

    /// Where `service` listens, and the namespace it runs in: a netns host's address; a
    /// Docker host's own (its containers use its network), loopback for a local socket.
    fn placement(&self, service: Service) -> Placement {
        let host = self.hosts.of(service);
        if let Some(Host::Docker(engine)) = self.hosts.declared.get(host) {
            return Placement {
                address: engine_address(engine).unwrap_or(Ipv4Addr::LOCALHOST),
                netns: None,
            };
        }
        match self.network.as_ref().and_then(|n| n.host(host)) {
            Some(host) => Placement {
                address: host.address,
                netns: Some(host.path()),
            },
            None => Placement::default(),
        }
    }

    /// The hosts the plan places services on, when it declares any (none: all on loopback).
    pub fn hosts(&self) -> Vec<HostInfo> {
        if self.hosts.declared.is_empty() {
            return Vec::new();
        }
        let mut hosts: BTreeMap<&str, HostInfo> = BTreeMap::new();
        for &service in self.services.keys() {
            let name = self.hosts.of(service);
            hosts
                .entry(name)
                .or_insert_with(|| HostInfo {
                    name: name.to_owned(),
                    kind: self.hosts.kind(name),
                    address: self.placement(service).address,
                    services: Vec::new(),
                })
                .services
                .push(service);
        }
        hosts.into_values().collect()
    }

    fn on_netns(&self, service: Service) -> bool {
        self.hosts.kind_of(service) == HostKind::Netns
    }

    /// The supervisor's address that `service` reaches: loopback, the bridge from a netns, or
    /// the address this machine reaches a Docker host's engine from.
    fn nearest(&self, service: Service) -> Result<Ipv4Addr, RunError> {
        match self.hosts.kind_of(service) {
            HostKind::Netns => Ok(self
                .network
                .as_ref()
                .map_or(Ipv4Addr::LOCALHOST, |n| n.gateway)),
            HostKind::Docker => source_toward(self.placement(service).address),
            HostKind::Local => Ok(Ipv4Addr::LOCALHOST),
        }
    }

    /// A proxy from `from` to `to` (which listens at `upstream`), listening on `listen`;
    /// returns where it listens. A node's proxy serves that node alone: it may listen where
    /// other hosts reach it, and NATS serves whoever reaches it.
    async fn proxy(
        &mut self,
        from: Endpoint,
        to: Endpoint,
        listen: Ipv4Addr,
        upstream: SocketAddr,
    ) -> Result<SocketAddr, RunError> {
        let admit = match from {
            Endpoint::Node(n) => Admit::Only(self.placement(Service::Node(n)).address.into()),
            _ => Admit::Anyone,
        };
        // A node on a netns host sees every player as the bridge: the proxy names each.
        let forward = match to {
            Endpoint::Node(n) if self.on_netns(Service::Node(n)) => Forward::ProxyHeader,
            _ => Forward::Source,
        };
        let proxy = Proxy::serving(
            LinkName::new(from, to),
            (listen, 0).into(),
            upstream,
            admit,
            forward,
        )
        .await
        .map_err(part(format!("the proxy {from}<->{to}")))?;
        let at = proxy.listen_addr();
        self.proxies
            .insert(proxy)
            .map_err(part(format!("the proxy {from}<->{to}")))?;
        Ok(at)
    }

    fn service(&self, service: Service) -> Result<&supervisor::Supervised, ActError> {
        self.services
            .get(&service)
            .ok_or(ActError::NoService(service))
    }

    /// Every fault proxy of the topology.
    pub(crate) fn proxies(&self) -> &ProxySet {
        &self.proxies
    }

    fn route(&self, route: Route) -> Result<&Proxy, ActError> {
        let peer = match route.peer {
            Peer::Postgres => Endpoint::Postgres,
            Peer::Nats => Endpoint::Nats,
            Peer::Players => Endpoint::Players,
        };
        self.proxies
            .between(Endpoint::Node(route.node), peer)
            .ok_or(ActError::NoProxy {
                node: route.node,
                peer,
            })
    }

    /// Whether a service is up (running and ready, or paused) now.
    pub fn is_running(&self, service: Service) -> bool {
        self.services.get(&service).is_some_and(|s| {
            matches!(
                s.state(),
                supervisor::State::Running | supervisor::State::Paused
            )
        })
    }

    /// Does one act of the timeline; the error says what went wrong, for the event log.
    pub async fn apply(&self, act: Act) -> Result<(), ActError> {
        match act {
            Act::Kill(s) => self.service(s)?.kill().await.map(drop)?,
            Act::Stop(s) => self.service(s)?.stop(self.stop_grace).await.map(drop)?,
            Act::Start(s) => self.service(s)?.start().await?,
            Act::Install { service, version } => {
                let Service::Node(n) = service else {
                    return Err(ActError::NoService(service));
                };
                let (base, in_container) = self
                    .node_commands
                    .get(&n)
                    .ok_or(ActError::NoService(service))?;
                let command = self.builds.of(version, *in_container).command(base);
                self.service(service)?
                    .retarget(command, version.to_string())
                    .await?
            }
            // `start` returns once the readiness probe passed.
            Act::WaitReady(s) => match self.service(s)?.state() {
                supervisor::State::Running => {}
                state => return Err(ActError::NotReady(s, state)),
            },
            Act::Pause(s) => self.service(s)?.pause().await?,
            Act::Resume(s) => self.service(s)?.resume().await?,
            Act::Drop(DropScope::AllPlayers) => {
                let mut any = false;
                for proxy in self
                    .proxies
                    .iter()
                    .filter(|p| p.name().from == Endpoint::Players)
                {
                    proxy.reset_all();
                    any = true;
                }
                if !any {
                    return Err(ActError::PlayersNotProxied);
                }
            }
            Act::Drop(DropScope::Node(n)) => self
                .route(Route {
                    node: n,
                    peer: Peer::Players,
                })?
                .reset_all(),
            Act::Impair {
                route,
                fault,
                ways,
                toxicity,
            } => self.route(route)?.set(fault, ways, toxicity),
            Act::Heal { route, fault, ways } => self.route(route)?.clear(fault.kind(), ways),
            Act::Cut { from, to, ways } => self.cut(from, to, ways)?,
            Act::Mend { from, to } => self.mend(from, to)?,
            Act::Squeeze { service, fault } => self.service(service)?.apply(fault).await?,
            Act::Release { service, fault } => {
                let kind = fault.kind();
                self.service(service)?.clear(kind).await?
            }
        }
        Ok(())
    }

    /// Drops the packets between two services on netns hosts, as the plan's ways say.
    fn cut(&self, from: Service, to: Service, ways: Ways) -> Result<(), ActError> {
        let network = self.network.as_ref().ok_or(ActError::NoNetns)?;
        let peer = network
            .host(self.hosts.of(to))
            .ok_or(ActError::NotOnNetns(to))?;
        let cut = Cut {
            host: self.hosts.of(from).to_owned(),
            peer: peer.address,
            outgoing: ways != Ways::Down,
            incoming: ways != Ways::Up,
            table: format!("anyplay_{from}_{to}").replace('-', "_"),
        };
        network.cut(&cut)?;
        lock(&self.cuts).push(((from, to), cut));
        Ok(())
    }

    fn mend(&self, from: Service, to: Service) -> Result<(), ActError> {
        let cut = {
            let mut cuts = lock(&self.cuts);
            let at = cuts
                .iter()
                .position(|(pair, _)| *pair == (from, to))
                .ok_or(ActError::NoCut(from, to))?;
            cuts.remove(at).1
        };
        let network = self.network.as_ref().ok_or(ActError::NoNetns)?;
        Ok(network.mend(&cut)?)
    }

    /// Removes every firewall partition in place.
    fn mend_all(&self) {
        let pairs: Vec<(Service, Service)> = lock(&self.cuts).iter().map(|(p, _)| *p).collect();
        for (from, to) in pairs {
            if let Err(e) = self.mend(from, to) {
                tracing::warn!("healing the partition of {from} and {to}: {e}");
            }
        }
    }

    /// Ends every service at once (a second interrupt): the nodes killed without a drain,
    /// PostgreSQL and NATS given [`DEPENDENCY_GRACE_AT_ONCE`]; and still removes what the run
    /// made: the process exits next, so nothing is left to a drop.
    pub async fn kill_all(&self) {
        self.proxies.heal_all();
        self.mend_all();
        for (service, handle) in &self.services {
            if matches!(service, Service::Node(_)) {
                let _ = handle.kill().await;
            }
        }
        self.supervisor.shutdown_all(DEPENDENCY_GRACE_AT_ONCE).await;
        self.release().await;
    }

    /// Undoes every lasting fault: links heal and paused services go on (an interrupted timeline
    /// leaves them as they were).
    pub async fn heal(&self) {
        self.proxies.heal_all();
        self.mend_all();
        for (service, handle) in &self.services {
            for kind in &self.service_faults.kinds(*service) {
                if let Err(e) = handle.clear(*kind).await {
                    tracing::warn!("clearing the {kind} of {service}: {e}");
                }
            }
            if handle.state() == supervisor::State::Paused {
                if let Err(e) = handle.resume().await {
                    tracing::warn!("resuming {service}: {e}");
                }
            }
        }
    }

    /// Heals every link, then stops every service (nodes drain first, then their dependencies).
    pub async fn shutdown(&self) {
        self.proxies.heal_all();
        let (nodes, dependencies): (Vec<_>, Vec<_>) = self
            .services
            .iter()
            .partition(|(s, _)| matches!(s, Service::Node(_)));
        for (service, handle) in nodes.into_iter().chain(dependencies) {
            if matches!(
                handle.state(),
                supervisor::State::Running
                    | supervisor::State::Paused
                    | supervisor::State::Starting
            ) {
                let grace = match service {
                    Service::Node(_) => self.stop_grace,
                    _ => Duration::from_secs(10),
                };
                if let Err(e) = handle.stop(grace).await {
                    tracing::warn!("stopping {service}: {e}");
                }
            }
        }
        self.supervisor.shutdown_all(Duration::from_secs(5)).await;
        self.release().await;
    }

    /// Removes what the run made beside its services, once they have ended: their leftovers
    /// (containers, cgroups, disks), PostgreSQL's scratch directory and the network.
    async fn release(&self) {
        self.supervisor.clean_up().await;
        if let Some(scratch) = &self.postgres_scratch {
            scratch.remove();
        }
        if let Some(network) = &self.network {
            network.remove();
        }
    }
}

/// The service faults a plan may set, by service: what each must be made ready for before
/// it starts, and what a heal clears.
#[derive(Debug, Clone, Default)]
struct ServiceFaults(BTreeMap<Service, BTreeSet<ActionKind>>);

/// The size of the filesystem a `disk_full` fills: room for PostgreSQL's small WAL and a
/// run's data, and a fill that takes a moment, not minutes.
const DISK_BYTES: u64 = 256 << 20;

impl ServiceFaults {
    /// The plan's service faults, once this machine is known to have what they need (root,
    /// the cgroup controllers, libfaketime): refused before anything starts otherwise.
    fn of(plan: &Plan) -> Result<ServiceFaults, RunError> {
        supervisor::service_faults::remove_leftovers();
        let faults = ServiceFaults(plan.service_faults());
        if plan.backend == Backend::Docker && faults.has(Service::Postgres, ActionKind::Clock) {
            // The image's entrypoint starts as root and drops to `postgres`: libfaketime, loaded
            // in both, makes its shared semaphore as root, which PostgreSQL then cannot open.
            return Err(TopologyError::Refused(
                "`clock: postgres` runs on the process backend only: in a container the entrypoint starts as root, and libfaketime's shared semaphore made there keeps PostgreSQL from starting".into(),
            ).into());
        }
        let any = |kinds: &[ActionKind]| {
            faults
                .0
                .values()
                .any(|have| kinds.iter().any(|k| have.contains(k)))
        };
        FaultNeeds {
            cgroup: plan.backend == Backend::Process && any(&[ActionKind::Cpu, ActionKind::Memory]),
            disk: any(&[ActionKind::DiskFull]),
            clock: any(&[ActionKind::Clock]),
        }
        .check()
        .map_err(part("the plan's service faults"))?;
        Ok(faults)
    }

    fn has(&self, service: Service, kind: ActionKind) -> bool {
        self.0
            .get(&service)
            .is_some_and(|kinds| kinds.contains(&kind))
    }

    /// The size of the disk `service` keeps its data on, when it may meet `disk_full`.
    fn disk(&self, service: Service) -> Option<u64> {
        self.has(service, ActionKind::DiskFull)
            .then_some(DISK_BYTES)
    }

    fn readiness(&self, service: Service, disk: Option<Arc<Disk>>) -> FaultReadiness {
        FaultReadiness {
            cgroup: self.has(service, ActionKind::Cpu) || self.has(service, ActionKind::Memory),
            disk,
            clock: self.has(service, ActionKind::Clock),
        }
    }

    /// The supervisor's kinds of the faults `service` may meet, for a heal to clear.
    fn kinds(&self, service: Service) -> Vec<ServiceFaultKind> {
        let kinds = self.0.get(&service).into_iter().flatten();
        kinds
            .filter_map(|kind| match kind {
                ActionKind::Cpu => Some(ServiceFaultKind::Cpu),
                ActionKind::Memory => Some(ServiceFaultKind::Memory),
                ActionKind::DiskFull => Some(ServiceFaultKind::DiskFull),
                ActionKind::Clock => Some(ServiceFaultKind::Clock),
                _ => None,
            })
            .collect()
    }
}
