//! From the raw YAML shapes to the typed [`Plan`]: defaults filled, durations and targets
//! parsed, the topology's rules enforced; every refusal names its line and key.
//!
//! Topology rules (decided here, stated once): `store: postgres` and a declared
//! `services.postgres` go together; a cluster (more than one node) needs both PostgreSQL and
//! NATS; NATS only links nodes that share PostgreSQL, so it is refused with `store: sqlite`.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::time::Duration;

use anyplay_cloud::duration;

use super::hosts::LOCAL;
use super::raw::{
    locate, KeyPath, RawDependency, RawEntry, RawNodeHosts, RawNodes, RawPlan, RawServices,
};
use super::timeline::{pairs_of, services_of};

use super::{
    Abort, Action, ActionKind, Agents, Backend, Client, Dependency, During, Engine, Entry,
    Failover, Host, HostKind, Hosts, LatencyGate, Limits, Load, Nodes, Plan, PlanError, Quantile,
    Reconnect, Service, ServiceFault, Services, Store, Target, Version, VersionName,
};
use crate::events::Op;

mod versions;

/// Defaults for keys a plan may leave out.
const DEFAULT_SEED: u64 = 1;
const DEFAULT_SETTLE: Duration = Duration::from_secs(30);
const DEFAULT_LOGIN_RATE: u32 = 200;
const DEFAULT_FRIENDS: u32 = 10;
/// The most nodes one supervisor starts: each holds its own store connections and proxies.
const MAX_NODES: u32 = 64;

pub fn validate(raw: RawPlan, src: &str) -> Result<Plan, PlanError> {
    validate_as(raw, src, false)
}

/// Validates a plan that a run recorded, to judge that run again: limits are taken as the
/// run was held to them, even where a later rule would refuse them.
pub fn validate_recorded(raw: RawPlan, src: &str) -> Result<Plan, PlanError> {
    validate_as(raw, src, true)
}

fn validate_as(raw: RawPlan, src: &str, recorded: bool) -> Result<Plan, PlanError> {
    let cx = Cx { src, recorded };
    let root = KeyPath::default();

    if raw.name.is_empty()
        || !raw
            .name
            .chars()
            .all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-'))
    {
        return Err(cx.err(
            &root.key("name"),
            format!("`{}` is not a plan name ([a-z0-9-]+)", raw.name),
        ));
    }
    let store = raw.store.unwrap_or_default();
    let backend = raw.backend.unwrap_or_default();
    let raw_services = raw.services.unwrap_or_default();
    let hosts = cx.hosts(&raw.hosts, &raw_services, backend)?;
    let versions = cx.versions(&raw.versions)?;
    let services = Services {
        postgres: raw_services.postgres.map(dependency),
        nats: match raw_services.nats {
            Some(nats) if nats.durable.is_some() => {
                let path = root.key("services").key("nats").key("durable");
                return Err(cx.err(&path, "only postgres has `durable`".into()));
            }
            nats => nats.map(dependency),
        },
        nodes: cx.nodes(raw_services.nodes.unwrap_or_default(), &versions)?,
    };
    let runs = versions::Runs {
        versions: &versions,
        hosts: &hosts,
        backend,
        count: services.nodes.count,
    };
    let version_path = root.key("services").key("nodes").key("version");
    cx.runnable(services.nodes.version, Target::Nodes, &runs, &version_path)?;
    cx.topology(store, raw.store.is_some(), &services)?;
    let load = cx.load(raw.load, &services)?;
    cx.limits_counted_per_player(&load, &hosts, services.nodes.count)?;

    let timeline_path = root.key("timeline");
    let mut timeline = Vec::with_capacity(raw.timeline.len());
    for (i, entry) in raw.timeline.iter().enumerate() {
        let path = timeline_path.index(i);
        let entry = cx.entry(entry, &path)?;
        cx.reachable(&entry.action, &services, store, &load, &path)?;
        cx.placed(&entry.action, &hosts, services.nodes.count, &path)?;
        cx.agents_keep_their_nats(&entry.action, &load, &path)?;
        cx.upgrade_runnable(&entry.action, &runs, &path)?;
        timeline.push(entry);
    }

    let mut clients = Vec::with_capacity(raw.clients.len());
    let mut names = BTreeSet::new();
    for (i, client) in raw.clients.into_iter().enumerate() {
        let path = root.key("clients").index(i);
        // The name becomes a directory and a log file name, and a check `client:<name>`.
        let fine = !client.name.is_empty()
            && client
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !fine {
            return Err(cx.err(
                &path.key("name"),
                format!("`{}` is not a client name ([A-Za-z0-9_-]+)", client.name),
            ));
        }
        if !names.insert(client.name.clone()) {
            return Err(cx.err(
                &path.key("name"),
                format!("a client named `{}` is already listed", client.name),
            ));
        }
        if client.cmd.trim().is_empty() {
            return Err(cx.err(&path.key("cmd"), "empty command".to_owned()));
        }
        if client.cmd.contains('\0') {
            return Err(cx.err(
                &path.key("cmd"),
                "a command cannot hold a NUL character".to_owned(),
            ));
        }
        if let Some(code) = client.expect_exit.filter(|c| !(0..=255).contains(c)) {
            return Err(cx.err(
                &path.key("expect_exit"),
                format!("an exit code is 0 to 255, not {code}"),
            ));
        }
        clients.push(Client {
            name: client.name,
            cmd: client.cmd,
            expect_exit: client.expect_exit.unwrap_or(0),
        });
    }

    let settle = match &raw.settle {
        Some(text) => cx.duration(text, &root.key("settle"))?,
        None => DEFAULT_SETTLE,
    };
    let checks = cx.limits(
        raw.checks.unwrap_or_default(),
        services.nodes.drain_timeout,
        &timeline,
    )?;

    let abort = raw
        .abort
        .as_ref()
        .map(|abort| cx.abort(abort, &root.key("abort")))
        .transpose()?;

    Ok(Plan {
        name: raw.name,
        description: raw.description.unwrap_or_default(),
        seed: raw.seed.unwrap_or(DEFAULT_SEED),
        backend,
        store,
        hosts,
        versions,
        services,
        load,
        timeline,
        clients,
        settle,
        checks,
        abort,
    })
}

fn dependency(raw: RawDependency) -> Dependency {
    Dependency {
        image: raw.image,
        port: raw.port,
        args: raw.args.unwrap_or_default(),
        durable: raw.durable,
    }
}

/// The source text, to put a line on every refusal.
pub(super) struct Cx<'a> {
    src: &'a str,
    /// A run's recorded plan, judged again: its limits stand as the run had them.
    recorded: bool,
}

impl Cx<'_> {
    pub(super) fn err(&self, path: &KeyPath, message: String) -> PlanError {
        PlanError::Invalid {
            line: locate(self.src, path),
            key: path.to_string(),
            message,
        }
    }

    pub(super) fn duration(&self, text: &str, path: &KeyPath) -> Result<Duration, PlanError> {
        duration::parse(text).map_err(|e| self.err(path, e.to_string()))
    }

    /// The declared hosts and each service's, every name checked.
    fn hosts(
        &self,
        declared: &BTreeMap<String, Host>,
        services: &RawServices,
        backend: Backend,
    ) -> Result<Hosts, PlanError> {
        let root = KeyPath::default();
        for (name, host) in declared {
            let kind = host.kind();
            let path = root.key("hosts").key(name);
            // The name goes into a namespace's name, with the run's tag before it.
            let fine = !name.is_empty()
                && name.len() <= 24
                && name
                    .chars()
                    .all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-'));
            if !fine {
                return Err(self.err(
                    &path,
                    format!("`{name}` is not a host name ([a-z0-9-]+, at most 24)"),
                ));
            }
            if name == LOCAL && kind != HostKind::Local {
                return Err(self.err(&path, "`local` is the supervisor's own machine".into()));
            }
            match host {
                Host::Kind(HostKind::Netns) if backend == Backend::Docker => {
                    return Err(self.err(
                        &path,
                        "a netns host runs processes: it needs `backend: process`".into(),
                    ));
                }
                Host::Kind(HostKind::Docker) => {
                    return Err(self.err(
                        &path,
                        "a docker host names its engine: `{docker: tcp://HOST:2376, tls: {ca: …, cert: …, key: …}}` or `{docker: unix:///path/docker.sock}`".into(),
                    ));
                }
                Host::Docker(engine) => self.engine(engine, &path)?,
                Host::Kind(_) => {}
            }
        }
        let mut hosts = Hosts {
            declared: declared.clone(),
            placement: BTreeMap::new(),
        };
        let services_path = root.key("services");
        let mut place = |service: Service, host: &str, path: KeyPath| {
            if host != LOCAL && !declared.contains_key(host) {
                let names: Vec<&str> = declared.keys().map(String::as_str).collect();
                return Err(self.err(
                    &path,
                    format!(
                        "no host named `{host}` under hosts (declared: {})",
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            }
            if host != LOCAL {
                hosts.placement.insert(service, host.to_owned());
            }
            Ok(())
        };
        for (service, dependency) in [
            (Service::Postgres, &services.postgres),
            (Service::Nats, &services.nats),
        ] {
            if let Some(host) = dependency.as_ref().and_then(|d| d.host.as_deref()) {
                let path = services_path.key(&service.to_string()).key("host");
                place(service, host, path)?;
            }
        }
        let nodes = services.nodes.clone().unwrap_or_default();
        let count = nodes.count.unwrap_or(1);
        let path = services_path.key("nodes").key("host");
        match &nodes.host {
            None => {}
            Some(RawNodeHosts::All(host)) => {
                for n in 1..=count {
                    place(Service::Node(n), host, path.clone())?;
                }
            }
            Some(RawNodeHosts::Each(list)) => {
                if list.len() != count as usize {
                    return Err(self.err(
                        &path,
                        format!(
                            "{} hosts for {count} nodes: name one host for all, or one per node",
                            list.len()
                        ),
                    ));
                }
                for (k, host) in list.iter().enumerate() {
                    place(Service::Node(k as u32 + 1), host, path.index(k))?;
                }
            }
        }
        Ok(hosts)
    }

    /// A Docker engine's address: TLS over TCP (a plain TCP engine is root on its machine for
    /// anyone who reaches it), or a local socket.
    fn engine(&self, engine: &Engine, path: &KeyPath) -> Result<(), PlanError> {
        let docker = path.key("docker");
        if let Some(address) = engine.docker.strip_prefix("tcp://") {
            if address.parse::<std::net::SocketAddr>().is_err() {
                return Err(self.err(
                    &docker,
                    format!("`{address}` is not IP:PORT (e.g. tcp://10.0.0.5:2376)"),
                ));
            }
            if engine.tls.is_none() {
                return Err(self.err(
                    path,
                    "a tcp:// engine needs `tls: {ca, cert, key}`: without it, anyone who reaches the engine is root on its machine".into(),
                ));
            }
        } else if !engine.docker.starts_with("unix:///") {
            return Err(self.err(
                &docker,
                format!(
                    "`{}` is not an engine address (tcp://IP:PORT or unix:///path)",
                    engine.docker
                ),
            ));
        }
        Ok(())
    }

    /// Refuses a fault that the hosts of its services cannot carry: a firewall partition
    /// needs two `netns` hosts; the fault proxy is not on a link between two
    /// `netns` hosts (it is direct there).
    fn placed(
        &self,
        action: &Action,
        hosts: &Hosts,
        count: u32,
        path: &KeyPath,
    ) -> Result<(), PlanError> {
        let key = path.key(action.kind().name());
        let netns = |s: Service| hosts.kind_of(s) == HostKind::Netns;
        match action {
            Action::Firewall { link, .. } => {
                for (a, b) in pairs_of(*link, count) {
                    let (host_a, host_b) = (hosts.of(a), hosts.of(b));
                    if host_a == host_b {
                        return Err(self.err(
                            &key,
                            format!("{a} and {b} are both on host `{host_a}`: a firewall cuts between hosts"),
                        ));
                    }
                    // Services on `local` share the supervisor's addresses with the players
                    // and the proxies: no rule could cut one of them alone.
                    if let Some(local) = [a, b].into_iter().find(|s| !netns(*s)) {
                        return Err(self.err(
                            &key,
                            format!("{local} is on host `{}`: a firewall partition cuts between netns hosts", hosts.of(local)),
                        ));
                    }
                }
            }
            Action::Link { link, .. } => {
                let (node, peer) = link.ends();
                let peer = match peer {
                    Target::Postgres => Service::Postgres,
                    Target::Nats => Service::Nats,
                    _ => return Ok(()),
                };
                for node in services_of(node, count) {
                    if netns(node) && netns(peer) {
                        return Err(self.err(
                            &key,
                            format!(
                                "{node} and {peer} are on netns hosts, linked directly (no fault proxy): partition them `via: firewall`"
                            ),
                        ));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn nodes(
        &self,
        raw: RawNodes,
        versions: &BTreeMap<VersionName, Version>,
    ) -> Result<Nodes, PlanError> {
        let path = KeyPath::default().key("services").key("nodes");
        let count = raw.count.unwrap_or(1);
        if !(1..=MAX_NODES).contains(&count) {
            return Err(self.err(
                &path.key("count"),
                format!("a topology has 1 to {MAX_NODES} nodes, not {count}"),
            ));
        }
        if raw.db_connections == Some(0) {
            return Err(self.err(
                &path.key("db_connections"),
                "a node needs at least one store connection".into(),
            ));
        }
        let drain_timeout = match &raw.drain_timeout {
            Some(text) => self.duration(text, &path.key("drain_timeout"))?,
            None => super::DEFAULT_DRAIN_TIMEOUT,
        };
        let env = match &raw.env {
            Some(env) => self.env(env, &path.key("env"))?,
            None => BTreeMap::new(),
        };
        let version = match &raw.version {
            Some(text) => self.version_named(text, versions, &path.key("version"))?,
            None => VersionName::BUILT_IN,
        };
        Ok(Nodes {
            count,
            drain_timeout,
            db_connections: raw.db_connections,
            env,
            image: raw.image,
            version,
        })
    }

    /// An `env:` map: its values strings, numbers or booleans, kept as text.
    fn env(
        &self,
        raw: &BTreeMap<String, serde_yaml::Value>,
        path: &KeyPath,
    ) -> Result<BTreeMap<String, String>, PlanError> {
        let mut env = BTreeMap::new();
        for (key, value) in raw {
            let text = match value {
                serde_yaml::Value::String(s) => s.clone(),
                serde_yaml::Value::Number(n) => n.to_string(),
                serde_yaml::Value::Bool(b) => b.to_string(),
                _ => {
                    return Err(self.err(
                        &path.key(key),
                        "an environment value is a string, number or boolean".into(),
                    ))
                }
            };
            if key.is_empty() || key.contains(['=', '\0']) || text.contains('\0') {
                return Err(self.err(
                    &path.key(key),
                    "an environment variable has a name without `=` and neither holds a NUL character".into(),
                ));
            }
            env.insert(key.clone(), text);
        }
        Ok(env)
    }

    fn topology(
        &self,
        store: Store,
        store_written: bool,
        services: &Services,
    ) -> Result<(), PlanError> {
        let root = KeyPath::default();
        let count = services.nodes.count;
        let services_path = root.key("services");
        // Point at `store:` when the plan wrote it, else at what makes the need.
        let store_or = |other: KeyPath| {
            if store_written {
                root.key("store")
            } else {
                other
            }
        };
        if count > 1 && store != Store::Postgres {
            return Err(self.err(
                &store_or(services_path.key("nodes").key("count")),
                format!("a cluster of {count} nodes needs `store: postgres` (and postgres and nats under services)"),
            ));
        }
        match (store, services.postgres.is_some()) {
            (Store::Postgres, false) => {
                return Err(self.err(
                    &store_or(services_path.key("postgres")),
                    "`store: postgres` needs `postgres: {}` under services".into(),
                ))
            }
            (Store::Sqlite, true) => {
                return Err(self.err(
                    &services_path.key("postgres"),
                    "postgres is declared but the store is sqlite (write `store: postgres`)".into(),
                ))
            }
            _ => {}
        }
        if count > 1 && services.nats.is_none() {
            return Err(self.err(
                &services_path.key("nats"),
                format!("a cluster of {count} nodes needs `nats: {{}}` under services"),
            ));
        }
        if store == Store::Sqlite && services.nats.is_some() {
            return Err(self.err(
                &services_path.key("nats"),
                "nats links nodes that share postgres; with `store: sqlite` it has nothing to do"
                    .into(),
            ));
        }
        Ok(())
    }

    fn load(
        &self,
        raw: Option<super::raw::RawLoad>,
        services: &Services,
    ) -> Result<Load, PlanError> {
        let path = KeyPath::default().key("load");
        let Some(raw) = raw else {
            return Err(self.err(
                &path,
                "missing: every run plays players (load: {players: N})".into(),
            ));
        };
        if raw.players == 0 {
            return Err(self.err(
                &path.key("players"),
                "a run needs at least one player".into(),
            ));
        }
        let login_rate = raw.login_rate.unwrap_or(DEFAULT_LOGIN_RATE);
        if login_rate == 0 {
            return Err(self.err(
                &path.key("login_rate"),
                "players log in at one per second or more".into(),
            ));
        }
        let rate = |value: Option<f64>, key: &str| match value {
            Some(rate) if !(rate.is_finite() && rate >= 0.0) => Err(self.err(
                &path.key(key),
                format!("must be 0 or more per second, got {rate}"),
            )),
            rate => Ok(rate.unwrap_or(0.0)),
        };
        let friend_rate = rate(raw.friend_rate, "friend_rate")?;
        let churn_rate = rate(raw.churn_rate, "churn_rate")?;
        let block_rate = rate(raw.block_rate, "block_rate")?;
        let privacy_rate = rate(raw.privacy_rate, "privacy_rate")?;
        let logout_rate = rate(raw.logout_rate, "logout_rate")?;
        let share = |value: Option<f64>, key: &str| match value {
            Some(share) if !(0.0..=1.0).contains(&share) => Err(self.err(
                &path.key(key),
                format!("must be a share from 0 to 1, got {share}"),
            )),
            share => Ok(share.unwrap_or(0.0)),
        };
        let second_devices = share(raw.second_devices, "second_devices")?;
        let slow_readers = share(raw.slow_readers, "slow_readers")?;
        let leader_leaves_first = share(raw.leader_leaves_first, "leader_leaves_first")?;
        let agents = self.agents(&raw, services, &path)?;
        Ok(Load {
            agents,
            friend_rate,
            churn_rate,
            block_rate,
            privacy_rate,
            logout_rate,
            second_devices,
            slow_readers,
            leader_leaves_first,
            rate_limits: raw.rate_limits.unwrap_or(false),
            players: raw.players,
            login_rate,
            friends: raw.friends.unwrap_or(DEFAULT_FRIENDS),
            reconnect: raw.reconnect.unwrap_or(Reconnect::Spec),
            presence_rate: raw.presence_rate.unwrap_or(0),
            session_rate: raw.session_rate.unwrap_or(0),
            cards_rate: raw.cards_rate.unwrap_or(0),
            through_proxy: raw.through_proxy.unwrap_or(false),
        })
    }

    /// `rate_limits` needs every player to reach every node from a loopback address of its
    /// own (players played on this machine), or named by the fault proxy in front of a node on
    /// a netns host: only a Docker host's node would see them all as one address.
    fn limits_counted_per_player(
        &self,
        load: &Load,
        hosts: &Hosts,
        nodes: u32,
    ) -> Result<(), PlanError> {
        if !load.rate_limits {
            return Ok(());
        }
        let path = KeyPath::default().key("load").key("rate_limits");
        let unnamed = |n: &u32| match hosts.kind_of(Service::Node(*n)) {
            HostKind::Local => false,
            HostKind::Netns => !load.through_proxy,
            HostKind::Docker => true,
        };
        if let Some(n) = (1..=nodes).find(unnamed) {
            let how = match hosts.kind_of(Service::Node(n)) {
                HostKind::Netns => "set load.through_proxy, whose proxies name each player to it",
                _ => "it would see them all as one address",
            };
            return Err(self.err(
                &path,
                format!(
                    "players count alone only from addresses of their own, and node-{n} is on \
                     host {} ({how})",
                    hosts.of(Service::Node(n))
                ),
            ));
        }
        if load.agents.as_ref().is_some_and(|a| !a.local) {
            return Err(self.err(
                &path,
                "players count alone only from loopback addresses of their own on this machine; \
                 agents elsewhere cannot use them (set agents_local: true)"
                    .into(),
            ));
        }
        if load.players as usize > anyplay_load::api::net::PER_PLAYER_ADDRESSES {
            return Err(self.err(
                &path,
                format!(
                    "gives each player an address of its own: at most {} players",
                    anyplay_load::api::net::PER_PLAYER_ADDRESSES
                ),
            ));
        }
        Ok(())
    }

    /// `agents`, `agents_local` and `nats` of the load section.
    fn agents(
        &self,
        raw: &super::raw::RawLoad,
        services: &Services,
        path: &KeyPath,
    ) -> Result<Option<Agents>, PlanError> {
        let Some(count) = raw.agents else {
            for (key, set) in [
                ("agents_local", raw.agents_local.is_some()),
                ("nats", raw.nats.is_some()),
            ] {
                if set {
                    return Err(self.err(
                        &path.key(key),
                        format!("`{key}` is about load agents: set `agents: N` too"),
                    ));
                }
            }
            return Ok(None);
        };
        let Some(count) = NonZeroU32::new(count) else {
            return Err(self.err(
                &path.key("agents"),
                "at least one agent (leave `agents` out to play the players in the supervisor)"
                    .into(),
            ));
        };
        let local = raw.agents_local.unwrap_or(false);
        if let Some(url) = &raw.nats {
            let fine = url
                .strip_prefix("nats://")
                .and_then(|rest| rest.rsplit_once(':'))
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !fine {
                return Err(self.err(
                    &path.key("nats"),
                    format!("`{url}` is not a NATS address (nats://HOST:PORT)"),
                ));
            }
        } else if services.nats.is_none() {
            return Err(self.err(
                &path.key("agents"),
                "agents take their work over NATS: declare `services.nats`, or give `load.nats`"
                    .into(),
            ));
        } else if !local && services.nats.as_ref().is_some_and(|n| n.port.is_none()) {
            return Err(self.err(
                &path.key("agents"),
                "agents outside the run cannot find the run's NATS on a new port each run: \
                 set `agents_local: true`, `services.nats.port`, or `load.nats`"
                    .into(),
            ));
        }
        Ok(Some(Agents {
            count,
            local,
            nats: raw.nats.clone(),
        }))
    }

    /// The `checks` section. A limit below the reconnect rule's floor for a way the timeline
    /// takes nodes out is refused: a correct cloud could not meet it.
    fn limits(
        &self,
        raw: super::raw::RawChecks,
        drain_timeout: Duration,
        timeline: &[Entry],
    ) -> Result<Limits, PlanError> {
        let path = KeyPath::default().key("checks");
        let defaults = Limits::default();
        let duration_or = |text: &Option<String>, key: &str, default: Duration| match text {
            Some(text) => self.duration(text, &path.key(key)),
            None => Ok(default),
        };
        let http_error_ratio = raw.http_error_ratio.unwrap_or(defaults.http_error_ratio);
        if !(0.0..=1.0).contains(&http_error_ratio) {
            return Err(self.err(
                &path.key("http_error_ratio"),
                format!("{http_error_ratio} is not a ratio between 0 and 1"),
            ));
        }
        Ok(Limits {
            players_back: duration_or(&raw.players_back, "players_back", defaults.players_back)?,
            duplicate_sessions: raw
                .duplicate_sessions
                .unwrap_or(defaults.duplicate_sessions),
            presence_missing: raw.presence_missing.unwrap_or(defaults.presence_missing),
            events_missing: raw.events_missing.unwrap_or(defaults.events_missing),
            lost_writes: raw.lost_writes.unwrap_or(defaults.lost_writes),
            http_error_ratio,
            failover: self.failover(&raw, &path, drain_timeout, timeline)?,
            stale_online: raw.stale_online.unwrap_or(defaults.stale_online),
            event_order: raw.event_order.unwrap_or(defaults.event_order),
            session_integrity: raw.session_integrity.unwrap_or(defaults.session_integrity),
            unexpected_events: raw.unexpected_events.unwrap_or(defaults.unexpected_events),
            unexplained_disconnects: raw
                .unexplained_disconnects
                .unwrap_or(defaults.unexplained_disconnects),
            cards_privacy: raw.cards_privacy.unwrap_or(defaults.cards_privacy),
            latency: raw
                .latency
                .iter()
                .map(|(name, gate)| self.latency_gate(name, gate, &path.key("latency").key(name)))
                .collect::<Result<_, _>>()?,
        })
    }

    /// `abort`: at least one condition, each a share between 0 and 1, and how long it holds.
    fn abort(&self, raw: &super::raw::RawAbort, path: &KeyPath) -> Result<Abort, PlanError> {
        let when = path.key("when");
        let share = |value: Option<f64>, key: &str| match value {
            Some(v) if !(0.0..=1.0).contains(&v) => Err(self.err(
                &when.key(key),
                format!("{v} is not a share between 0 and 1"),
            )),
            v => Ok(v),
        };
        let http_error_ratio = share(raw.when.http_error_ratio, "http_error_ratio")?;
        let players_online_below = share(raw.when.players_online_below, "players_online_below")?;
        if http_error_ratio.is_none() && players_online_below.is_none() {
            return Err(self.err(
                &when,
                "no condition: give http_error_ratio or players_online_below".into(),
            ));
        }
        let Some(text) = &raw.for_ else {
            return Err(self.err(path, "how long a condition must hold: give `for`".into()));
        };
        let hold = self.duration(text, &path.key("for"))?;
        if hold < Duration::from_secs(1) {
            return Err(self.err(
                &path.key("for"),
                "at least 1s: the conditions are judged second by second".into(),
            ));
        }
        Ok(Abort {
            http_error_ratio,
            players_online_below,
            hold,
        })
    }

    /// `checks.latency.<op>`: an operation the load times, at least one budget above zero.
    fn latency_gate(
        &self,
        name: &str,
        raw: &super::raw::RawLatencyGate,
        path: &KeyPath,
    ) -> Result<LatencyGate, PlanError> {
        let op = Op::named(name).ok_or_else(|| {
            let names: Vec<&str> = Op::ALL.iter().map(|op| op.name()).collect();
            self.err(
                path,
                format!(
                    "`{name}` is not an operation the load times ({})",
                    names.join(", ")
                ),
            )
        })?;
        let mut budgets = Vec::new();
        for quantile in Quantile::ALL {
            let Some(text) = raw.budget(quantile) else {
                continue;
            };
            let key = path.key(quantile.name());
            let budget = self.duration(text, &key)?;
            if budget.is_zero() {
                return Err(self.err(&key, "a budget of 0s: no call is that fast".into()));
            }
            budgets.push((quantile, budget));
        }
        if budgets.is_empty() {
            return Err(self.err(path, "no budget: give p50, p95, p99 or max".into()));
        }
        let during = match &raw.during {
            Some(text) => text.parse().map_err(|m| self.err(&path.key("during"), m))?,
            None => During::default(),
        };
        Ok(LatencyGate {
            op,
            budgets,
            during,
        })
    }

    /// `checks.failover` (unset: by cause) and `checks.players_back`, each held to the floor
    /// of every way the timeline takes a node out.
    fn failover(
        &self,
        raw: &super::raw::RawChecks,
        path: &KeyPath,
        drain_timeout: Duration,
        timeline: &[Entry],
    ) -> Result<Failover, PlanError> {
        let floor = |kind: ActionKind| match kind {
            ActionKind::Kill => Some((Failover::CRASH_FLOOR, "a crash")),
            kind if kind.drains() => Some((Failover::drain_floor(drain_timeout), "a drain")),
            _ => None,
        };
        let floors = || {
            timeline
                .iter()
                .filter(|e| e.action.target().is_some_and(Target::is_node))
                .filter_map(|e| floor(e.action.kind()).map(|f| (f, e)))
        };
        // players_back is one limit for every fault: it must meet the highest floor. A set
        // failover must meet the crash's; a drain's outages are held to at least its own
        // floor (the contract's example sets 7 s beside stops and rollings).
        let highest = floors().max_by_key(|((floor, _), _)| *floor);
        let crash = floors().find(|((_, cause), _)| *cause == "a crash");
        for key in ["failover", "players_back"] {
            let (text, held) = if key == "failover" {
                (&raw.failover, crash)
            } else {
                (&raw.players_back, highest)
            };
            let (Some(text), Some(((floor, cause), entry)), false) = (text, held, self.recorded)
            else {
                continue;
            };
            let limit = self.duration(text, &path.key(key))?;
            if limit < floor {
                return Err(self.err(
                    &path.key(key),
                    format!(
                        "{text} is below the reconnect rule's floor after {cause} ({}, for \
                         `{}` on line {}): a correct cloud could not meet it",
                        duration::format(floor),
                        entry.action,
                        entry.line
                    ),
                ));
            }
        }
        Ok(match &raw.failover {
            Some(text) => Failover::set(self.duration(text, &path.key("failover"))?, drain_timeout),
            None => Failover::by_cause(drain_timeout),
        })
    }

    fn entry(&self, raw: &RawEntry, path: &KeyPath) -> Result<Entry, PlanError> {
        Ok(Entry {
            at: self.duration(&raw.at, &path.key("at"))?,
            action: super::actions::read(self, raw, path)?,
            line: locate(self.src, path),
        })
    }

    /// Load agents that take their work over the run's own NATS lose their coordinator when
    /// the timeline takes that NATS away (a link fault is the nodes' link, not the agents').
    fn agents_keep_their_nats(
        &self,
        action: &Action,
        load: &Load,
        path: &KeyPath,
    ) -> Result<(), PlanError> {
        let on_own_nats = load.agents.as_ref().is_some_and(|a| a.nats.is_none());
        if on_own_nats
            && !matches!(action, Action::Link { .. })
            && action.target() == Some(Target::Nats)
        {
            return Err(self.err(
                &path.key(action.kind().name()),
                "the load agents take their work over the run's own NATS, which this action \
                 takes away: give them another one with `load.nats`"
                    .into(),
            ));
        }
        Ok(())
    }

    fn reachable(
        &self,
        action: &Action,
        services: &Services,
        store: Store,
        load: &Load,
        path: &KeyPath,
    ) -> Result<(), PlanError> {
        let key = path.key(action.kind().name());
        let targets: Vec<(Target, KeyPath)> = match action {
            Action::Link { link, .. } | Action::Firewall { link, .. } => {
                vec![(link.a, key.index(0)), (link.b, key.index(1))]
            }
            _ => action
                .target()
                .map(|t| (t, key.clone()))
                .into_iter()
                .collect(),
        };
        for (target, at) in targets {
            let missing = match target {
                Target::Node(n) if n > services.nodes.count => Some(format!(
                    "there is no node-{n}: services.nodes.count is {}",
                    services.nodes.count
                )),
                Target::Postgres if services.postgres.is_none() => {
                    Some("the topology has no postgres (services.postgres)".to_owned())
                }
                Target::Nats if services.nats.is_none() => {
                    Some("the topology has no nats (services.nats)".to_owned())
                }
                _ => None,
            };
            if let Some(message) = missing {
                return Err(self.err(&at, message));
            }
        }
        if let Action::Service {
            target,
            fault: ServiceFault::DiskFull,
            ..
        } = action
        {
            // Only PostgreSQL and SQLite nodes keep data on a disk of theirs.
            let keeps_data =
                *target == Target::Postgres || (target.is_node() && store == Store::Sqlite);
            if !keeps_data {
                return Err(self.err(
                    &key,
                    format!("`{target}` keeps no data on disk here (postgres, or a node with `store: sqlite`)"),
                ));
            }
        }
        let cuts_players = matches!(action, Action::Drop(_))
            || matches!(action, Action::Link { link, .. } if link.ends().1 == Target::Players);
        if cuts_players && !load.through_proxy {
            return Err(self.err(
                &key,
                format!(
                    "`{}` reaches players through the fault proxy: set `load.through_proxy: true`",
                    action.kind()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::raw;
    use super::*;
    use crate::plan::LinkFault;

    fn check(src: &str) -> Result<Plan, PlanError> {
        validate(raw::parse(src)?, src)
    }

    fn refused(src: &str) -> (usize, String, String) {
        match check(src) {
            Err(PlanError::Invalid { line, key, message }) => (line, key, message),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    const SINGLE: &str = "name: one\nload: {players: 10, through_proxy: true}\n";

    /// A cluster on netns hosts: postgres on `db`, node-1 on `a`, node-2 on `b`, nats local.
    fn on_hosts(extra: &str) -> String {
        format!(
            "name: x\nstore: postgres\nhosts:\n  db: netns\n  a: netns\n  b: netns\nservices:\n  postgres: {{host: db}}\n  nats: {{}}\n  nodes: {{count: 2, host: [a, b]}}\nload: {{players: 10, through_proxy: true}}\n{extra}"
        )
    }

    #[test]
    fn hosts_place_services_and_read_back() {
        let plan = check(&on_hosts(
            "timeline:\n  - { at: 1s, partition: [node-1, postgres], via: firewall, direction: up, for: 5s }\n  - { at: 1s, partition: [nodes, nats], for: 5s }\n",
        ))
        .unwrap();
        assert_eq!(plan.hosts.of(Service::Postgres), "db");
        assert_eq!(plan.hosts.of(Service::Node(2)), "b");
        assert_eq!(plan.hosts.of(Service::Nats), LOCAL);
        assert_eq!(plan.hosts.namespaces(), vec!["a", "b", "db"]);
        assert!(matches!(
            plan.timeline[0].action,
            Action::Firewall {
                ways: crate::plan::Ways::Up,
                ..
            }
        ));
        // What is written reads back the same (lines aside).
        assert_eq!(check(&plan.to_yaml()).unwrap().to_yaml(), plan.to_yaml());
        let all_on_one = check(&on_hosts("").replace("host: [a, b]", "host: a")).unwrap();
        assert_eq!(all_on_one.hosts.of(Service::Node(2)), "a");
        assert_eq!(check(&all_on_one.to_yaml()).unwrap(), all_on_one);
    }

    #[test]
    fn rate_limits_are_taken_only_where_each_player_is_seen_as_itself() {
        let local =
            check("name: one\nload: {players: 10, through_proxy: true, rate_limits: true}\n")
                .unwrap();
        assert!(local.load.rate_limits);
        assert_eq!(check(&local.to_yaml()).unwrap(), local);
        // On netns hosts the players' proxies name each player to its node.
        let named = on_hosts("").replace(
            "through_proxy: true}",
            "through_proxy: true, rate_limits: true}",
        );
        assert!(check(&named).unwrap().load.rate_limits);
        let src = on_hosts("").replace("through_proxy: true}", "rate_limits: true}");
        let (line, key, message) = refused(&src);
        assert_eq!((line, key.as_str()), (11, "load.rate_limits"));
        assert!(message.contains("node-1 is on host a"), "{message}");
        assert!(message.contains("set load.through_proxy"), "{message}");
    }

    #[test]
    fn hosts_and_firewall_partitions_are_refused_with_line_and_key() {
        let firewall = |pair: &str| {
            on_hosts(&format!(
                "timeline:\n  - {{ at: 1s, partition: {pair}, via: firewall, for: 5s }}\n"
            ))
        };
        for (src, line, key, says) in [
            (
                on_hosts("").replace("host: db", "host: dbx"),
                8,
                "services.postgres.host",
                "no host named `dbx`",
            ),
            (
                on_hosts("").replace("[a, b]", "[a]"),
                10,
                "services.nodes.host",
                "1 hosts for 2 nodes",
            ),
            (
                on_hosts("").replace("db: netns", "DB: netns"),
                4,
                "hosts.DB",
                "not a host name",
            ),
            (
                on_hosts("backend: docker\n"),
                5,
                "hosts.a",
                "backend: process",
            ),
            (firewall("[node-1, nats]"), 13, "timeline[0].partition", "nats is on host `local`"),
            (firewall("[node-1, players]"), 13, "timeline[0].partition[1]", "players"),
            (firewall("[postgres, postgres]"), 13, "timeline[0].partition", "from itself"),
            (
                on_hosts("timeline:\n  - { at: 1s, partition: [node-1, postgres], for: 5s }\n"),
                13,
                "timeline[0].partition",
                "via: firewall",
            ),
            (
                on_hosts("timeline:\n  - { at: 1s, partition: [node-1, postgres], via: firewall, mode: drop, for: 5s }\n"),
                13,
                "timeline[0].mode",
                "fault proxy",
            ),
            (
                on_hosts("timeline:\n  - { at: 1s, latency: [node-1, nats], ms: 5, via: firewall, for: 5s }\n"),
                13,
                "timeline[0].via",
                "does not go with `latency`",
            ),
        ] {
            let (l, k, message) = refused(&src);
            assert_eq!((l, k.as_str()), (line, key), "{src}: {message}");
            assert!(message.contains(says), "{key}: {message}");
        }
        for (engine, key, says) in [
            ("{docker: 'tcp://10.0.0.5:2376'}", "hosts.e", "needs `tls"),
            (
                "{docker: 'tcp://engine:2376', tls: {ca: a, cert: b, key: c}}",
                "hosts.e.docker",
                "IP:PORT",
            ),
            (
                "{docker: 'http://10.0.0.5:2375'}",
                "hosts.e.docker",
                "not an engine address",
            ),
            ("docker", "hosts.e", "names its engine"),
        ] {
            let src = on_hosts("").replace("  b: netns\n", &format!("  b: netns\n  e: {engine}\n"));
            let (_, k, message) = refused(&src);
            assert_eq!(k, key, "{engine}: {message}");
            assert!(message.contains(says), "{engine}: {message}");
        }
        let remote = check(
            &on_hosts("")
                .replace(
                    "  b: netns\n",
                    "  b: netns\n  e: {docker: 'unix:///run/other.sock'}\n",
                )
                .replace("{host: db}", "{host: e}"),
        )
        .unwrap();
        assert_eq!(remote.hosts.kind_of(Service::Postgres), HostKind::Docker);
        assert_eq!(remote.hosts.engines().len(), 1);
        assert_eq!(check(&remote.to_yaml()).unwrap(), remote);
        let two_on_one = firewall("[node-1, node-2]").replace("host: [a, b]", "host: a");
        let (_, key, message) = refused(&two_on_one);
        assert_eq!(key, "timeline[0].partition");
        assert!(message.contains("both on host `a`"), "{message}");
    }

    #[test]
    fn load_agents_are_validated_with_line_and_key() {
        let cluster = |load: &str| {
            format!(
                "name: x\nstore: postgres\nservices:\n  postgres: {{}}\n  nats: {{}}\n  nodes: {{count: 2}}\nload:\n  players: 10\n{load}"
            )
        };
        let plan = check(&cluster("  agents: 2\n  agents_local: true\n")).unwrap();
        let agents = plan.load.agents.clone().unwrap();
        assert_eq!(
            (agents.count.get(), agents.local, agents.nats),
            (2, true, None)
        );
        // What is written reads back the same.
        assert_eq!(check(&plan.to_yaml()).unwrap(), plan);
        let own = "  agents: 2\n  agents_local: true\n";
        let nats_down = check(&format!(
            "{}timeline:\n  - {{ at: 5s, kill: nats }}\n",
            cluster(own)
        ))
        .unwrap_err();
        assert!(
            nats_down.to_string().contains("timeline[0].kill")
                && nats_down.to_string().contains("load.nats"),
            "{nats_down}"
        );
        let outside = check(&cluster("  agents: 4\n  nats: nats://127.0.0.1:4222\n")).unwrap();
        assert_eq!(
            outside.load.agents.unwrap().nats.as_deref(),
            Some("nats://127.0.0.1:4222")
        );
        for (load, line, key, says) in [
            ("  agents: 0\n", 9, "load.agents", "at least one agent"),
            (
                "  agents_local: true\n",
                9,
                "load.agents_local",
                "set `agents: N`",
            ),
            (
                "  agents: 2\n  nats: 127.0.0.1\n",
                10,
                "load.nats",
                "nats://HOST:PORT",
            ),
            ("  agents: 2\n", 9, "load.agents", "agents_local: true"),
        ] {
            let (l, k, message) = refused(&cluster(load));
            assert_eq!((l, k.as_str()), (line, key), "{load}: {message}");
            assert!(message.contains(says), "{load}: {message}");
        }
        let (_, key, message) = refused("name: one\nload: {players: 10, agents: 2}\n");
        assert_eq!(key, "load.agents");
        assert!(message.contains("services.nats"), "{message}");
    }

    #[test]
    fn a_minimal_plan_takes_the_defaults() {
        let plan = check(SINGLE).unwrap();
        assert_eq!(plan.seed, 1);
        assert_eq!(plan.store, Store::Sqlite);
        assert_eq!(plan.services.nodes.count, 1);
        assert_eq!(plan.services.nodes.drain_timeout, Duration::from_secs(5));
        assert_eq!(plan.settle, Duration::from_secs(30));
        assert_eq!(plan.checks, Limits::default());
        assert_eq!(plan.load.login_rate, 200);
    }

    #[test]
    fn a_bad_name_is_refused() {
        let (line, key, _) = refused("name: Node_Crash\nload: {players: 1}\n");
        assert_eq!((line, key.as_str()), (1, "name"));
    }

    #[test]
    fn two_actions_in_one_entry_are_refused() {
        let src = format!("{SINGLE}timeline:\n  - {{ at: 1s, kill: node-1, start: node-1 }}\n");
        let (line, key, _) = refused(&src);
        assert_eq!((line, key.as_str()), (4, "timeline[0].start"));
    }

    #[test]
    fn a_parameter_of_another_action_is_refused() {
        let src = format!("{SINGLE}timeline:\n  - at: 1s\n    kill: node-1\n    gap: 2s\n");
        let (line, key, _) = refused(&src);
        assert_eq!((line, key.as_str()), (6, "timeline[0].gap"));
    }

    #[test]
    fn a_pause_needs_its_for() {
        let src = format!("{SINGLE}timeline:\n  - {{ at: 1s, pause: node-1 }}\n");
        let (line, key, _) = refused(&src);
        assert_eq!((line, key.as_str()), (4, "timeline[0].for"));
    }

    #[test]
    fn a_node_beyond_the_count_is_refused() {
        let src = format!("{SINGLE}timeline:\n  - {{ at: 1s, kill: node-2 }}\n");
        let (line, key, message) = refused(&src);
        assert_eq!((line, key.as_str()), (4, "timeline[0].kill"));
        assert!(message.contains("no node-2"), "{message}");
    }

    #[test]
    fn a_service_the_topology_lacks_is_refused() {
        let src = format!("{SINGLE}timeline:\n  - {{ at: 1s, pause: nats, for: 2s }}\n");
        let (_, key, _) = refused(&src);
        assert_eq!(key, "timeline[0].pause");
        let src = format!(
            "{SINGLE}timeline:\n  - {{ at: 1s, partition: [node-1, postgres], for: 2s }}\n"
        );
        let (_, key, _) = refused(&src);
        assert_eq!(key, "timeline[0].partition[1]");
    }

    #[test]
    fn a_link_needs_a_node_and_a_peer() {
        let src = format!(
            "{SINGLE}timeline:\n  - {{ at: 1s, latency: [postgres, nats], ms: 5, for: 2s }}\n"
        );
        let (_, key, _) = refused(&src);
        assert_eq!(key, "timeline[0].latency");
    }

    #[test]
    fn a_limit_below_the_reconnect_rules_floor_is_refused_naming_its_line() {
        const STOP: &str = "name: x\nstore: postgres\nservices:\n  postgres: {}\n  nats: {}\n  nodes: {count: 2, drain_timeout: 5s}\nload: {players: 10}\ntimeline:\n  - { at: 5s, stop: node-1 }\n  - { at: 9s, start: node-1 }\n";
        // After a drain clients may wait 10 s: a players_back of 12 s cannot be met.
        let (line, key, message) = refused(&format!("{STOP}checks:\n  players_back: 12s\n"));
        assert_eq!(
            (line, key.as_str()),
            (12, "checks.players_back"),
            "{message}"
        );
        assert!(message.contains("floor after a drain (15s"), "{message}");
        assert!(message.contains("line 9"), "{message}");
        // A set failover of 7 s holds crashes to it, and a drain to its own floor at least.
        let plan = check(&format!("{STOP}checks:\n  failover: 7s\n")).unwrap();
        assert_eq!(
            plan.checks.failover.after(ActionKind::Kill),
            Duration::from_secs(7)
        );
        assert_eq!(
            plan.checks.failover.after(ActionKind::Stop),
            Duration::from_millis(17_500)
        );
        // A run recorded before the rule is judged again as it was held then.
        let old = format!("{STOP}checks:\n  players_back: 12s\n");
        let recorded = validate_recorded(super::super::raw::parse(&old).unwrap(), &old).unwrap();
        assert_eq!(recorded.checks.players_back, Duration::from_secs(12));
        // Unset, the limit follows the way the node left.
        let plan = check(STOP).unwrap();
        assert_eq!(
            plan.checks.failover,
            Failover::by_cause(Duration::from_secs(5))
        );
        assert_eq!(
            plan.checks.failover.after(ActionKind::Stop),
            Duration::from_millis(17_500)
        );
        assert_eq!(
            plan.checks.failover.after(ActionKind::Kill),
            Duration::from_secs(7)
        );
        assert_eq!(check(&plan.to_yaml()).unwrap().checks, plan.checks);
        // A dependency's restart takes no node out.
        let dependency = STOP
            .replace("stop: node-1", "restart: postgres")
            .replace("  - { at: 9s, start: node-1 }\n", "");
        assert!(check(&format!("{dependency}checks:\n  players_back: 7s\n")).is_ok());
        // With only crashes, 7 s is fine; below the crash's floor it is refused.
        let kill = STOP.replace("stop: node-1", "kill: node-1");
        let plan = check(&format!("{kill}checks:\n  failover: 7s\n")).unwrap();
        assert_eq!(
            plan.checks.failover,
            Failover::set(Duration::from_secs(7), Duration::from_secs(5))
        );
        assert_eq!(check(&plan.to_yaml()).unwrap().checks, plan.checks);
        let (line, key, message) = refused(&format!("{kill}checks:\n  failover: 3s\n"));
        assert_eq!((line, key.as_str()), (12, "checks.failover"), "{message}");
        assert!(message.contains("floor after a crash (4500ms"), "{message}");
    }

    #[test]
    fn dropping_players_needs_the_proxy() {
        let src = "name: x\nload: {players: 10}\ntimeline:\n  - { at: 1s, drop: players }\n";
        let (line, key, _) = refused(src);
        assert_eq!((line, key.as_str()), (4, "timeline[0].drop"));
    }

    #[test]
    fn a_cluster_needs_postgres_and_nats() {
        let (line, key, _) =
            refused("name: x\nstore: sqlite\nservices:\n  nodes: {count: 2}\nload: {players: 1}\n");
        assert_eq!((line, key.as_str()), (2, "store"));
        let (line, key, _) =
            refused("name: x\nservices:\n  nodes:\n    count: 2\nload: {players: 1}\n");
        assert_eq!((line, key.as_str()), (4, "services.nodes.count"));
        let (_, key, _) = refused(
            "name: x\nstore: postgres\nservices:\n  postgres:\n  nodes: {count: 2}\nload: {players: 1}\n",
        );
        assert_eq!(key, "services.nats");
    }

    #[test]
    fn nats_on_sqlite_is_refused() {
        let (line, key, _) = refused("name: x\nservices:\n  nats: {}\nload: {players: 1}\n");
        assert_eq!((line, key.as_str()), (3, "services.nats"));
    }

    #[test]
    fn env_values_become_strings() {
        let plan = check(
            "name: x\nservices:\n  nodes:\n    env: {PORT: 8080, DEBUG: true, NAME: a}\nload: {players: 1}\n",
        )
        .unwrap();
        let env = &plan.services.nodes.env;
        assert_eq!(env["PORT"], "8080");
        assert_eq!(env["DEBUG"], "true");
        assert_eq!(env["NAME"], "a");
    }

    #[test]
    fn duplicate_client_names_are_refused() {
        let src = format!("{SINGLE}clients:\n  - {{name: a, cmd: x}}\n  - {{name: a, cmd: y}}\n");
        let (line, key, _) = refused(&src);
        assert_eq!((line, key.as_str()), (5, "clients[1].name"));
    }

    #[test]
    fn the_v1_1_check_limits_are_read_and_unknown_check_keys_refused() {
        let src = format!(
            "{SINGLE}checks:\n  stale_online: 2\n  event_order: 3\n  session_integrity: 4\n"
        );
        let plan = check(&src).unwrap();
        let limits = &plan.checks;
        assert_eq!(
            (
                limits.stale_online,
                limits.event_order,
                limits.session_integrity
            ),
            (2, 3, 4)
        );
        // The resolved plan writes them back, so a rerun holds the run to the same limits.
        assert_eq!(check(&plan.to_yaml()).unwrap().checks, plan.checks);
        let (line, key, _) = refused(&format!("{SINGLE}checks:\n  stale_onlin: 0\n"));
        assert_eq!((line, key.as_str()), (4, "checks.stale_onlin"));
    }

    #[test]
    fn latency_gates_are_read_written_back_and_refused_with_line_and_key() {
        let src = format!(
            "{SINGLE}checks:\n  latency:\n    e2e_login: {{ p99: 300ms }}\n    \
             presence_delivery: {{ p50: 50ms, max: 2s, during: outside_faults }}\n"
        );
        let plan = check(&src).unwrap();
        let gates = &plan.checks.latency;
        assert_eq!(gates.len(), 2);
        assert_eq!(gates[0].op, Op::E2eLogin);
        assert_eq!(
            gates[0].budgets,
            [(Quantile::P99, Duration::from_millis(300))]
        );
        assert_eq!(gates[0].during, During::All);
        assert_eq!(gates[1].op, Op::PresenceDelivery);
        assert_eq!(
            gates[1].budgets,
            [
                (Quantile::P50, Duration::from_millis(50)),
                (Quantile::Max, Duration::from_secs(2))
            ]
        );
        assert_eq!(gates[1].during, During::OutsideFaults);
        assert_eq!(check(&plan.to_yaml()).unwrap().checks, plan.checks);
        let refusal = |gates: &str| refused(&format!("{SINGLE}checks:\n  latency:\n{gates}"));
        let (line, key, message) = refusal("    logins: { p99: 1s }\n");
        assert_eq!((line, key.as_str()), (5, "checks.latency.logins"));
        assert!(message.contains("e2e_login"), "{message}");
        let (line, key, message) = refusal("    cards: { during: faults }\n");
        assert_eq!((line, key.as_str()), (5, "checks.latency.cards"));
        assert!(message.contains("no budget"), "{message}");
        let (line, key, _) = refusal("    cards: { p95: 0s }\n");
        assert_eq!((line, key.as_str()), (5, "checks.latency.cards.p95"));
        let (line, key, _) = refusal("    cards: { p95: soon }\n");
        assert_eq!((line, key.as_str()), (5, "checks.latency.cards.p95"));
        let (line, key, message) = refusal("    cards: { p95: 1s, during: never }\n");
        assert_eq!((line, key.as_str()), (5, "checks.latency.cards.during"));
        assert!(message.contains("outside_faults"), "{message}");
        let (line, key, _) = refusal("    cards:\n      p95: 1s\n      p90: 1s\n");
        assert_eq!((line, key.as_str()), (7, "checks.latency.cards.p90"));
    }

    #[test]
    fn abort_is_read_written_back_and_refused_with_line_and_key() {
        let src = format!(
            "{SINGLE}abort: {{ when: {{ http_error_ratio: 0.2, players_online_below: 0.5 }}, for: 10s }}\n"
        );
        let plan = check(&src).unwrap();
        assert_eq!(
            plan.abort,
            Some(Abort {
                http_error_ratio: Some(0.2),
                players_online_below: Some(0.5),
                hold: Duration::from_secs(10),
            })
        );
        assert_eq!(check(&plan.to_yaml()).unwrap().abort, plan.abort);
        assert_eq!(check(SINGLE).unwrap().abort, None);
        let refusal = |abort: &str| refused(&format!("{SINGLE}abort:\n{abort}"));
        let (line, key, message) = refusal("  when: {}\n  for: 10s\n");
        assert_eq!((line, key.as_str()), (4, "abort.when"));
        assert!(message.contains("no condition"), "{message}");
        let (line, key, _) = refusal("  when: { players_online_below: 2 }\n  for: 10s\n");
        assert_eq!((line, key.as_str()), (4, "abort.when.players_online_below"));
        let (line, key, message) = refusal("  when: { http_error_ratio: 0.5 }\n");
        assert_eq!((line, key.as_str()), (3, "abort"));
        assert!(message.contains("`for`"), "{message}");
        let (line, key, _) = refusal("  when: { http_error_ratio: 0.5 }\n  for: 100ms\n");
        assert_eq!((line, key.as_str()), (5, "abort.for"));
        let (line, key, _) = refusal("  when: { errors: 0.5 }\n  for: 1s\n");
        assert_eq!((line, key.as_str()), (4, "abort.when.errors"));
    }

    #[test]
    fn an_impossible_ratio_is_refused() {
        let src = format!("{SINGLE}checks:\n  http_error_ratio: 2\n");
        let (line, key, _) = refused(&src);
        assert_eq!((line, key.as_str()), (4, "checks.http_error_ratio"));
    }

    const CLUSTER: &str = "name: x\nstore: postgres\nservices:\n  postgres: {}\n  nats: {}\n  nodes: {count: 2}\nload: {players: 10, through_proxy: true}\ntimeline:\n";

    fn entry(line: &str) -> Result<Plan, PlanError> {
        Plan::from_yaml(&format!("{CLUSTER}  - {line}\n"))
    }

    fn entry_refused(line: &str) -> (usize, String, String) {
        match entry(line) {
            Err(PlanError::Invalid { line, key, message }) => (line, key, message),
            other => panic!("expected a refusal of {line}, got {other:?}"),
        }
    }

    #[test]
    fn every_link_and_service_fault_is_accepted_and_written_back() {
        for line in [
            "{ at: 1s, partition: [node-1, postgres], mode: drop, direction: up, for: 5s }",
            "{ at: 1s, partition: [players, node-2], for: 5s, toxicity: 0.5 }",
            "{ at: 1s, latency: [node-2, nats], ms: 200, jitter: 50, direction: down, for: 10s }",
            "{ at: 1s, bandwidth: [players, nodes], kbps: 800, for: 5s }",
            "{ at: 1s, bandwidth: [node-1, postgres], kbps: 64, direction: up, for: 5s }",
            "{ at: 1s, slow_close: [players, node-1], delay: 2s, for: 5s }",
            "{ at: 1s, timeout: [players, node-1], after: 5s, for: 10s, toxicity: 0.3 }",
            "{ at: 1s, timeout: [node-1, nats], after: 0s, for: 10s }",
            "{ at: 1s, timeout: [node-1, nats], after: 2s, close: reset, for: 10s }",
            "{ at: 1s, limit_data: [players, node-1], bytes: 4096, for: 5s }",
            "{ at: 1s, slicer: [players, node-1], bytes: 8, delay: 1ms, for: 5s }",
            "{ at: 1s, slicer: [players, node-1], bytes: 64, variation: 16, for: 5s }",
            "{ at: 1s, cpu: node-1, limit: 0.2, for: 5s }",
            "{ at: 1s, cpu: postgres, limit: 2.5, for: 5s }",
            "{ at: 1s, memory: node-1, limit: 150MB, for: 5s }",
            "{ at: 1s, disk_full: postgres, for: 5s }",
            "{ at: 1s, clock: random-node, offset: 30s, for: 5s }",
            "{ at: 1s, clock: postgres, offset: -10s, for: 5s }",
        ] {
            let plan = entry(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let again = Plan::from_yaml(&plan.to_yaml()).unwrap_or_else(|e| panic!("{line}: {e}"));
            let actions = |p: &Plan| p.timeline.iter().map(|e| e.action).collect::<Vec<_>>();
            assert_eq!(actions(&again), actions(&plan), "{line}");
        }
        let plan = entry("{ at: 1s, timeout: [node-1, nats], after: 0s, for: 10s }").unwrap();
        assert!(matches!(
            plan.timeline[0].action,
            Action::Link {
                fault: LinkFault::Timeout {
                    after: None,
                    reset: false
                },
                ..
            }
        ));
        // With an RST, `after: 0s` resets at once, as Toxiproxy's reset_peer with `timeout: 0`.
        let plan = entry("{ at: 1s, timeout: [node-1, nats], after: 0s, close: reset, for: 10s }")
            .unwrap();
        assert!(matches!(
            plan.timeline[0].action,
            Action::Link {
                fault: LinkFault::Timeout {
                    after: Some(Duration::ZERO),
                    reset: true
                },
                ..
            }
        ));
        assert!(
            plan.to_yaml().contains("close: reset"),
            "{}",
            plan.to_yaml()
        );
    }

    #[test]
    fn bad_entry_keys_and_values_name_their_line_and_key() {
        for (line, key, says) in [
            (
                "{ at: 1s, bandwidth: [players, node-1], kbps: -1, for: 5s }",
                "kbps",
                "at least 1",
            ),
            (
                "{ at: 1s, bandwidth: [players, node-1], for: 5s }",
                "kbps",
                "needs `kbps`",
            ),
            (
                "{ at: 1s, cpu: node-1, limit: 0, for: 5s }",
                "limit",
                "above 0",
            ),
            (
                "{ at: 1s, cpu: node-1, limit: lots, for: 5s }",
                "limit",
                "above 0",
            ),
            (
                "{ at: 1s, memory: node-1, limit: 1.5GB, for: 5s }",
                "limit",
                "not a size",
            ),
            (
                "{ at: 1s, memory: node-1, limit: 0MB, for: 5s }",
                "limit",
                "0 bytes",
            ),
            (
                "{ at: 1s, latency: [node-1, nats], ms: 5, direction: sideways, for: 5s }",
                "direction",
                "up or down",
            ),
            (
                "{ at: 1s, partition: [node-1, nats], mode: lose, for: 5s }",
                "mode",
                "hold or drop",
            ),
            (
                "{ at: 1s, slicer: [players, node-1], bytes: 0, for: 5s }",
                "bytes",
                "at least 1",
            ),
            (
                "{ at: 1s, slicer: [players, node-1], bytes: 8, variation: -2, for: 5s }",
                "variation",
                "at least 0",
            ),
            (
                "{ at: 1s, limit_data: [players, node-1], bytes: 10, toxicity: 1.5, for: 5s }",
                "toxicity",
                "at most 1",
            ),
            (
                "{ at: 1s, slow_close: [players, node-1], delay: 0s, for: 5s }",
                "delay",
                "does nothing",
            ),
            (
                "{ at: 1s, timeout: [players, node-1], for: 5s }",
                "after",
                "needs `after`",
            ),
            (
                "{ at: 1s, timeout: [players, node-1], after: 1s, close: rst, for: 5s }",
                "close",
                "fin or reset",
            ),
            (
                "{ at: 1s, latency: [players, node-1], ms: 5, close: reset, for: 5s }",
                "close",
                "does not go with `latency`",
            ),
            (
                "{ at: 1s, clock: node-1, offset: 0s, for: 5s }",
                "offset",
                "does nothing",
            ),
            (
                "{ at: 1s, clock: node-1, offset: soon, for: 5s }",
                "offset",
                "soon",
            ),
            ("{ at: 1s, cpu: node-1, limit: 0.5 }", "for", "needs `for`"),
            (
                "{ at: 1s, cpu: node-1, kbps: 5, limit: 0.5, for: 2s }",
                "kbps",
                "does not go with `cpu`",
            ),
            (
                "{ at: 1s, disk_full: nats, for: 5s }",
                "disk_full",
                "no data on disk",
            ),
            (
                "{ at: 1s, disk_full: node-1, for: 5s }",
                "disk_full",
                "no data on disk",
            ),
            (
                "{ at: 1s, cpu: players, limit: 1, for: 5s }",
                "cpu",
                "cannot aim",
            ),
            (
                "{ at: 1s, bandwidth: node-1, kbps: 5, for: 5s }",
                "bandwidth",
                "",
            ),
            (
                "{ at: 1s, kill: node-1, colour: red }",
                "colour",
                "unknown key `colour`",
            ),
            ("{ at: 1s, pause: node-1, for: 5 }", "for", "is text, not 5"),
            (
                "{ at: 1s, latency: [node-1, 5], ms: 5, for: 2s }",
                "latency[1]",
                "not a target",
            ),
            (
                "{ at: 1s, latency: [node-1, nats], ms: 2.5, for: 2s }",
                "ms",
                "whole number",
            ),
            (
                "{ at: 1s, latency: [node-1, nats], ms: -5, for: 2s }",
                "ms",
                "whole number",
            ),
            (
                "{ at: 1s, kill: [node-1, node-2] }",
                "kill",
                "takes one target",
            ),
            (
                "{ at: 1s, partition: [node-1, nats], toxicity: lots, for: 2s }",
                "toxicity",
                "lots",
            ),
        ] {
            let (at, refused_key, message) = entry_refused(line);
            assert_eq!(at, 9, "{line}: {message}");
            assert_eq!(
                refused_key,
                format!("timeline[0].{key}"),
                "{line}: {message}"
            );
            assert!(message.contains(says), "{line}: {message}");
        }
    }

    #[test]
    fn what_cannot_run_is_refused_at_check_naming_its_key() {
        for (extra, key) in [
            (
                "services:\n  nodes: {count: 100000}\n",
                "services.nodes.count",
            ),
            (
                "services:\n  nodes: {env: {A: \"x\\0y\"}}\n",
                "services.nodes.env.A",
            ),
            (
                "clients:\n  - {name: c, cmd: \"true\", expect_exit: 300}\n",
                "clients[0].expect_exit",
            ),
            (
                "clients:\n  - {name: c, cmd: \"true\", expect_exit: -1}\n",
                "clients[0].expect_exit",
            ),
        ] {
            let (_, refused, message) = refused(&format!("name: x\nload: {{players: 2}}\n{extra}"));
            assert_eq!(refused, key, "{extra}: {message}");
        }
    }

    #[test]
    fn a_key_written_with_nothing_after_it_is_not_written() {
        entry("{ at: 1s, kill: node-1, for: }").unwrap();
    }

    #[test]
    fn a_disk_full_node_needs_sqlite() {
        let src = format!("{SINGLE}timeline:\n  - {{ at: 1s, disk_full: node-1, for: 2s }}\n");
        check(&src).unwrap();
    }
}
