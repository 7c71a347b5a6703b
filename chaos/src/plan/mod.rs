//! The chaos plan: the topology to bring up, the load to play, the faults to fire and when,
//! and the limits the checks hold the run to.
//!
//! A plan is read in two stages (raw flags, then validated settings, as ripgrep does):
//! [`raw`] is the YAML exactly as written, [`validate`] turns it into the typed [`Plan`] and
//! refuses what cannot run, naming the line and the key; [`timeline`] then draws the random
//! targets with the seed and expands every entry into the operations a runner performs. An
//! action's types are in `action`; `actions` holds the one table of their names, targets and
//! parameters, and a file per family of actions that reads, writes back, draws, expands and
//! prints them (the walk and the topology rules call into it).

mod abort;
mod action;
mod actions;
pub(crate) mod hosts;
mod image;
mod latency;
pub(crate) mod raw;
pub(crate) mod timeline;
mod trust;
mod units;
mod validate;
mod version;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use abort::Abort;
pub use action::{Action, ActionKind, Entry, Link, Target};
pub use hosts::{Engine, Host, HostKind, Hosts, Tls, Via};
pub use image::{ImageOverride, ImageSlot};
pub use latency::{During, LatencyGate, Quantile};
pub use timeline::{Act, DropScope, Route, Step, TimedAct, Timeline, Toxicity};
pub use units::{Bytes, ClockOffset, LinkFault, PartitionMode, ServiceFault, Ways};
pub use version::{Version, VersionName, VersionSource};

/// Why a plan cannot be used. `Invalid` always names the line and the key.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("line {line}: {key}: {message}")]
    Invalid {
        line: usize,
        key: String,
        message: String,
    },
}

/// A validated plan. Defaults are filled in; see `Plan::to_yaml` for its canonical text.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub name: String,
    pub description: String,
    pub seed: u64,
    pub backend: Backend,
    pub store: Store,
    pub hosts: Hosts,
    /// The builds of the cloud the nodes may run, beside the built-in one.
    pub versions: BTreeMap<VersionName, Version>,
    pub services: Services,
    pub load: Load,
    /// In the order written; [`Plan::resolve`] orders them by time.
    pub timeline: Vec<Entry>,
    pub clients: Vec<Client>,
    /// Time after the last action before the final checks.
    pub settle: Duration,
    pub checks: Limits,
    /// When to give a lost run up early.
    pub abort: Option<Abort>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    #[default]
    Process,
    Docker,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Store {
    #[default]
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reconnect {
    /// The cloud API's reconnect rule (random spread after 1001/1012, backoff otherwise).
    #[default]
    Spec,
    /// Reconnect at once after every break: the worst case for a storm.
    Immediate,
}

/// Which processes the topology has. Nodes are always there; PostgreSQL and NATS when declared.
#[derive(Debug, Clone, PartialEq)]
pub struct Services {
    pub postgres: Option<Dependency>,
    pub nats: Option<Dependency>,
    pub nodes: Nodes,
}

/// PostgreSQL or NATS: how to start it (defaults belong to the backend).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dependency {
    /// Docker image; the process backend ignores it.
    pub image: Option<String>,
    pub port: Option<u16>,
    pub args: Vec<String>,
    /// PostgreSQL: fsync and synchronous commit stay on (`None`: the default, on), so a killed
    /// server loses nothing it acknowledged. NATS has no such key.
    pub durable: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Nodes {
    pub count: u32,
    pub drain_timeout: Duration,
    /// Store pool size per node; `None` leaves the node's own default.
    pub db_connections: Option<u32>,
    /// Extra environment for every node.
    pub env: BTreeMap<String, String>,
    pub image: Option<String>,
    /// The version every node starts on.
    pub version: VersionName,
}

/// What the load crate plays during the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    pub players: u32,
    /// Logins per second during the ramp.
    pub login_rate: u32,
    pub friends: u32,
    pub reconnect: Reconnect,
    pub presence_rate: u32,
    pub session_rate: u32,
    pub cards_rate: u32,
    /// Players reach nodes through the fault proxy (needed to drop or cut them).
    pub through_proxy: bool,
    /// Friend writes per second for the whole run (0: none).
    pub friend_rate: f64,
    /// Players per second that sign off and come back (0: none).
    pub churn_rate: f64,
    /// Blocks per second, each undone 1–4 s later (0: none).
    pub block_rate: f64,
    /// Card privacy changes per second (0: none).
    pub privacy_rate: f64,
    /// Logouts per second, each signed in again (0: none).
    pub logout_rate: f64,
    /// The share of players that also open a second device (0 to 1).
    pub second_devices: f64,
    /// The share of players that read slowly once, flooded by a friend, until the cloud
    /// closes them as slow consumers (0 to 1).
    pub slow_readers: f64,
    /// The share of sessions whose leader leaves before its members (0 to 1).
    pub leader_leaves_first: f64,
    /// The nodes keep their per-address limits, every player calls from a loopback address of
    /// its own, and bursts go past the limits on purpose.
    pub rate_limits: bool,
    /// Load agents that play the players instead of the supervisor.
    pub agents: Option<Agents>,
}

/// Players played by load agents, which take their work over NATS.
#[derive(Debug, Clone, PartialEq)]
pub struct Agents {
    pub count: std::num::NonZeroU32,
    /// The supervisor starts them itself, as processes it supervises.
    pub local: bool,
    /// The NATS where agents wait for work; `None`: the run's own.
    pub nats: Option<String>,
}

/// A real client program that rides through the run; its exit code is a check of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Client {
    pub name: String,
    /// With `{urls}`, `{name}` and `{out}` still in it; the runner fills them.
    pub cmd: String,
    pub expect_exit: i32,
}

/// The checks' limits. Every check always runs; an unset limit takes the default shown in the
/// plan contract's example (players_back 20s, failover 7s, ratio 0.001, counts 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub players_back: Duration,
    pub duplicate_sessions: u64,
    pub presence_missing: u64,
    /// Changes other than activity (friendships, requests, party members) not told.
    pub events_missing: u64,
    pub lost_writes: u64,
    pub http_error_ratio: f64,
    pub failover: Failover,
    /// Friends shown online when they hold no connection, or offline when they do, at the end.
    pub stale_online: u64,
    /// Connections whose `seq` ran with a gap or repeat, plus events older than their welcome.
    pub event_order: u64,
    /// Session views over their size, without their leader, or disagreeing at the end.
    pub session_integrity: u64,
    /// Events the model of the contract did not allow their recipient.
    pub unexpected_events: u64,
    /// Closes the cloud made without a reason in the history.
    pub unexplained_disconnects: u64,
    /// Gamer cards shown otherwise than the model allows their viewer.
    pub cards_privacy: u64,
    /// Budgets for what the load times, one check each (`latency.<op>`).
    pub latency: Vec<LatencyGate>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            players_back: Duration::from_secs(20),
            duplicate_sessions: 0,
            presence_missing: 0,
            events_missing: 0,
            lost_writes: 0,
            http_error_ratio: 0.001,
            failover: Failover::by_cause(DEFAULT_DRAIN_TIMEOUT),
            stale_online: 0,
            event_order: 0,
            session_integrity: 0,
            unexpected_events: 0,
            unexplained_disconnects: 0,
            cards_privacy: 0,
            latency: Vec::new(),
        }
    }
}

/// How long a node may drain when the plan does not say.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The failover limit for each way a node leaves (chaos-plan v1.2, "Limits by cause"), from
/// the reconnect rule: after a crash a client tries again within 1.5 s, then within 3 s
/// more; after a drain's 1001 it waits up to 10 s, while the node drains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Failover {
    /// After a `kill`.
    pub crash: Duration,
    /// After a `stop`, a `restart` or a step of a `rolling`.
    pub drain: Duration,
    /// The plan set one limit for both (else each follows the rule).
    pub set: bool,
}

impl Failover {
    /// The rule's floor after a crash: its first two attempts.
    pub const CRASH_FLOOR: Duration = Duration::from_millis(4_500);
    /// How widely clients spread their reconnects after a 1001.
    pub const DRAIN_SPREAD: Duration = Duration::from_secs(10);
    /// Room above a floor for the welcome itself on a busy machine.
    const MARGIN: Duration = Duration::from_millis(2_500);

    /// The rule's floor after a drain of nodes with this drain timeout.
    pub fn drain_floor(drain_timeout: Duration) -> Duration {
        drain_timeout + Self::DRAIN_SPREAD
    }

    /// Limits that follow the rule, for nodes with this drain timeout.
    pub fn by_cause(drain_timeout: Duration) -> Failover {
        Failover {
            crash: Self::CRASH_FLOOR + Self::MARGIN,
            drain: Self::drain_floor(drain_timeout) + Self::MARGIN,
            set: false,
        }
    }

    /// The limit the plan set: a crash is held to it, a drain of nodes with this drain
    /// timeout to it or the drain's own limit by the rule, whichever is longer (a drain's
    /// clients may rightly wait 10 s).
    pub fn set(limit: Duration, drain_timeout: Duration) -> Failover {
        Failover {
            crash: limit,
            drain: limit.max(Self::by_cause(drain_timeout).drain),
            set: true,
        }
    }

    /// The limit after an action that took a node out.
    pub fn after(&self, action: ActionKind) -> Duration {
        match action {
            ActionKind::Kill => self.crash,
            _ => self.drain,
        }
    }
}

/// A process of the topology that actions start, stop and pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Service {
    Node(u32),
    Postgres,
    Nats,
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Service::Node(n) => write!(f, "node-{n}"),
            Service::Postgres => f.write_str("postgres"),
            Service::Nats => f.write_str("nats"),
        }
    }
}

impl FromStr for Service {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.parse::<Target>() {
            Ok(Target::Node(n)) => Ok(Service::Node(n)),
            Ok(Target::Postgres) => Ok(Service::Postgres),
            Ok(Target::Nats) => Ok(Service::Nats),
            _ => Err(format!("`{s}` is not a service (node-N, postgres or nats)")),
        }
    }
}

impl Serialize for Service {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Service {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Plan {
    /// Parses and validates a plan, including a walk of its timeline with its own seed.
    pub fn from_yaml(src: &str) -> Result<Plan, PlanError> {
        let plan = validate::validate(raw::parse(src)?, src)?;
        plan.resolve(plan.seed)?;
        Ok(plan)
    }

    /// Reads and validates the plan file at `path`.
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        Self::load_on(path, None)
    }

    /// As [`Plan::load`], on `backend` instead of the plan's own when given (`--backend`):
    /// the rules that depend on the backend (the builds its versions name, the clock of a
    /// container) hold for the one it will run on, naming the plan's lines.
    pub fn load_on(path: &Path, backend: Option<Backend>) -> Result<Plan, PlanError> {
        let src = Self::read(path)?;
        let mut raw = raw::parse(&src)?;
        if backend.is_some() {
            raw.backend = backend;
        }
        let plan = validate::validate(raw, &src)?;
        plan.resolve(plan.seed)?;
        Ok(plan)
    }

    /// Reads the plan a run recorded at `path`, to judge that run again: as `load`, but its
    /// limits stand as the run was held to them (a floor added since does not refuse them).
    pub fn load_recorded(path: &Path) -> Result<Plan, PlanError> {
        let src = Self::read_from_run(path)?;
        let plan = validate::validate_recorded(raw::parse(&src)?, &src)?;
        plan.resolve(plan.seed)?;
        Ok(plan)
    }

    /// As [`Plan::load`], for the plan a run directory holds (`rerun DIR`): read as a file of
    /// that directory's own (see `run_files::read`).
    pub fn load_from_run(path: &Path) -> Result<Plan, PlanError> {
        Self::from_yaml(&Self::read_from_run(path)?)
    }

    fn read_from_run(path: &Path) -> Result<String, PlanError> {
        crate::run_files::read_to_string(path).map_err(|source| PlanError::Read {
            path: path.to_owned(),
            source,
        })
    }

    fn read(path: &Path) -> Result<String, PlanError> {
        anyplay_cloud::small_file::read_to_string(path).map_err(|source| PlanError::Read {
            path: path.to_owned(),
            source,
        })
    }

    /// The canonical text of the plan, every default written out: what a run stores as
    /// `plan.yaml` so that `rerun` repeats it.
    pub fn to_yaml(&self) -> String {
        let raw = raw::RawPlan::from(self);
        // Plain strings, numbers and maps: serializing them cannot fail.
        serde_yaml::to_string(&raw).unwrap_or_default()
    }

    /// The plan as JSON, for the report's `plan` field (the same shape as `to_yaml`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(raw::RawPlan::from(self)).unwrap_or_default()
    }

    /// The same plan with another seed (`run --seed N`).
    pub fn with_seed(&self, seed: u64) -> Plan {
        Plan {
            seed,
            ..self.clone()
        }
    }

    /// Draws the random targets with `seed`, orders the entries by time, expands each into its
    /// operations and walks every service's state; refuses what cannot run.
    pub fn resolve(&self, seed: u64) -> Result<Timeline, PlanError> {
        timeline::resolve(self, seed)
    }

    /// One timeline entry given while the topology is up (the control API's service actions),
    /// as a plan writes it without `at` (`{"kill": "node-1"}`): read as the plan reads its
    /// entries, at offset `at`, and resolved with the services in `stopped` stopped now.
    pub fn entry_now(
        &self,
        entry: &serde_json::Value,
        at: Duration,
        stopped: &BTreeSet<Service>,
    ) -> Result<Step, PlanError> {
        let invalid = |message: String| PlanError::Invalid {
            line: 0,
            key: "timeline[0]".into(),
            message,
        };
        let serde_json::Value::Object(keys) = entry else {
            return Err(invalid(
                "an entry is an object: {\"kill\": \"node-1\"}".into(),
            ));
        };
        if keys.contains_key("at") {
            return Err(invalid(
                "`at` is now: an entry given while up has none".into(),
            ));
        }
        let mut entry = serde_yaml::to_value(keys).map_err(|e| invalid(e.to_string()))?;
        entry["at"] = format!("{}ms", at.as_millis()).into();
        let mut raw: serde_yaml::Value =
            serde_yaml::from_str(&self.to_yaml()).map_err(|e| invalid(e.to_string()))?;
        raw["timeline"] = serde_yaml::Value::Sequence(vec![entry]);
        let src = serde_yaml::to_string(&raw).map_err(|e| invalid(e.to_string()))?;
        let plan = validate::validate_recorded(raw::parse(&src)?, &src)?;
        let mut timeline = timeline::resolve_from(&plan, self.seed, stopped)?;
        timeline
            .steps
            .pop()
            .ok_or_else(|| invalid("no action".into()))
    }

    /// The kinds of service fault each service may meet (`random-node`: every node), so it
    /// can be made ready for them before it starts.
    pub fn service_faults(&self) -> BTreeMap<Service, BTreeSet<ActionKind>> {
        let mut faults: BTreeMap<Service, BTreeSet<ActionKind>> = BTreeMap::new();
        for entry in &self.timeline {
            if let Action::Service { target, fault, .. } = entry.action {
                for service in timeline::services_of(target, self.services.nodes.count) {
                    faults
                        .entry(service)
                        .or_default()
                        .insert(fault.kind().into());
                }
            }
        }
        faults
    }

    /// Every process of the topology, in start order (stores first, then nodes).
    pub fn topology(&self) -> Vec<Service> {
        let mut services = Vec::new();
        if self.services.postgres.is_some() {
            services.push(Service::Postgres);
        }
        if self.services.nats.is_some() {
            services.push(Service::Nats);
        }
        services.extend((1..=self.services.nodes.count).map(Service::Node));
        services
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print_the_same() {
        for text in [
            "node-1",
            "node-12",
            "nodes",
            "random-node",
            "postgres",
            "nats",
            "players",
        ] {
            let target: Target = text.parse().unwrap();
            assert_eq!(target.to_string(), text);
        }
    }

    #[test]
    fn bad_targets_are_refused() {
        for text in [
            "node-0", "node-01", "node-", "node-x", "node1", "redis", "Node-1", "",
        ] {
            assert!(text.parse::<Target>().is_err(), "{text:?} was accepted");
        }
    }

    #[test]
    fn services_serialize_as_their_names() {
        let json = serde_json::to_string(&Service::Node(2)).unwrap();
        assert_eq!(json, "\"node-2\"");
        let back: Service = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Service::Node(2));
    }

    #[test]
    fn a_link_knows_its_node_side() {
        let link = Link {
            a: Target::Postgres,
            b: Target::Node(1),
        };
        assert_eq!(link.ends(), (Target::Node(1), Target::Postgres));
    }
}
