//! A timeline's actions: what each aims at ([`Target`], [`Link`]), its parameters
//! ([`Action`]), its name as plans, events and reports spell it ([`ActionKind`]), and an entry
//! of the timeline ([`Entry`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units::{LinkFault, ServiceFault, Ways};
use super::version::VersionName;

/// One timeline entry as written: when, what, and its line in the plan for messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Offset from the moment every player is signed in and online.
    pub at: Duration,
    pub action: Action,
    pub line: usize,
}

/// What a plan may aim an action at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// `node-N`, 1-based.
    Node(u32),
    Nodes,
    RandomNode,
    Postgres,
    Nats,
    Players,
}

impl Target {
    /// Whether the target names one or more cloud nodes.
    pub fn is_node(self) -> bool {
        matches!(self, Target::Node(_) | Target::Nodes | Target::RandomNode)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Node(n) => write!(f, "node-{n}"),
            Target::Nodes => f.write_str("nodes"),
            Target::RandomNode => f.write_str("random-node"),
            Target::Postgres => f.write_str("postgres"),
            Target::Nats => f.write_str("nats"),
            Target::Players => f.write_str("players"),
        }
    }
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let unknown = || {
            format!("unknown target `{s}` (node-N, nodes, random-node, postgres, nats or players)")
        };
        match s {
            "nodes" => Ok(Target::Nodes),
            "random-node" => Ok(Target::RandomNode),
            "postgres" => Ok(Target::Postgres),
            "nats" => Ok(Target::Nats),
            "players" => Ok(Target::Players),
            _ => {
                let n = s.strip_prefix("node-").ok_or_else(unknown)?;
                // `node-01` would print back as `node-1`: accept only the canonical spelling.
                match n.parse::<u32>() {
                    Ok(0) => Err(format!("`{s}`: nodes count from 1")),
                    Ok(k) if n == k.to_string() => Ok(Target::Node(k)),
                    _ => Err(unknown()),
                }
            }
        }
    }
}

/// A pair of targets. For the link faults, the fault proxy is between them: a node (`node-N`,
/// `nodes` or `random-node`) and `postgres`, `nats` or `players`, in either order. For a
/// partition `via: firewall`, any two services, the hosts' kernels between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub a: Target,
    pub b: Target,
}

impl Link {
    /// The node side and the peer side, whatever order the plan wrote them in.
    pub fn ends(&self) -> (Target, Target) {
        if self.a.is_node() {
            (self.a, self.b)
        } else {
            (self.b, self.a)
        }
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}<->{}", self.a, self.b)
    }
}

/// A timeline action with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// SIGKILL (docker kill).
    Kill(Target),
    /// SIGTERM; the node drains; SIGKILL only after drain_timeout + 5 s.
    Stop(Target),
    Start(Target),
    /// Stop, then start, then wait until ready.
    Restart(Target),
    /// Each node in turn: stop, start, wait ready, then `gap` before the next.
    Rolling {
        target: Target,
        gap: Duration,
    },
    /// Each node in turn: stop (a drain), start on version `to`, wait ready, then `gap`
    /// before the next; to an older version it is a rollback.
    Upgrade {
        target: Target,
        to: VersionName,
        gap: Duration,
    },
    /// SIGSTOP, then SIGCONT after `duration` (docker pause / unpause).
    Pause {
        target: Target,
        duration: Duration,
    },
    /// Every player connection through the target cut at once with a TCP reset.
    Drop(Target),
    /// A fault on the proxied link (partition, latency, bandwidth, …) for `duration`.
    Link {
        link: Link,
        fault: LinkFault,
        ways: Ways,
        /// The share of connections it applies to (`None`: all), drawn with the seed.
        toxicity: Option<f64>,
        duration: Duration,
    },
    /// A partition `via: firewall`: the hosts' kernels drop the packets between two services
    /// (any two of node-N, nodes, random-node, postgres, nats) for `duration`; `Up` is from
    /// the first named to the second.
    Firewall {
        link: Link,
        ways: Ways,
        duration: Duration,
    },
    /// A fault on a service's resources or clock for `duration`.
    Service {
        target: Target,
        fault: ServiceFault,
        duration: Duration,
    },
}

/// The name of an action, as plans, events and reports spell it; its row of `actions::SPECS`
/// tells its key, what it aims at and its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Kill,
    Stop,
    Start,
    Restart,
    Rolling,
    Upgrade,
    Pause,
    Drop,
    Partition,
    Latency,
    Bandwidth,
    SlowClose,
    Timeout,
    LimitData,
    Slicer,
    Cpu,
    Memory,
    DiskFull,
    Clock,
}

impl ActionKind {
    /// Whether the action is a fault on a link (through the fault proxy).
    pub fn is_link_fault(self) -> bool {
        matches!(
            self,
            ActionKind::Partition
                | ActionKind::Latency
                | ActionKind::Bandwidth
                | ActionKind::SlowClose
                | ActionKind::Timeout
                | ActionKind::LimitData
                | ActionKind::Slicer
        )
    }

    /// Whether it takes its target out of service: `kill` and every drain.
    pub fn takes_out(self) -> bool {
        self == ActionKind::Kill || self.drains()
    }

    /// Whether it drains its nodes (SIGTERM): `stop`, `restart`, `rolling`, `upgrade`.
    pub fn drains(self) -> bool {
        matches!(
            self,
            ActionKind::Stop | ActionKind::Restart | ActionKind::Rolling | ActionKind::Upgrade
        )
    }

    /// Whether it takes the nodes out one after another, each after the one before is back.
    pub fn in_turn(self) -> bool {
        matches!(self, ActionKind::Rolling | ActionKind::Upgrade)
    }

    /// Whether the action is a fault on a service's resources or clock.
    pub fn is_service_fault(self) -> bool {
        matches!(
            self,
            ActionKind::Cpu | ActionKind::Memory | ActionKind::DiskFull | ActionKind::Clock
        )
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<crate::proxy::LinkFaultKind> for ActionKind {
    fn from(kind: crate::proxy::LinkFaultKind) -> Self {
        use crate::proxy::LinkFaultKind as Kind;
        match kind {
            Kind::Partition => ActionKind::Partition,
            Kind::Latency => ActionKind::Latency,
            Kind::Bandwidth => ActionKind::Bandwidth,
            Kind::SlowClose => ActionKind::SlowClose,
            Kind::Timeout => ActionKind::Timeout,
            Kind::LimitData => ActionKind::LimitData,
            Kind::Slicer => ActionKind::Slicer,
        }
    }
}

impl From<crate::supervisor::ServiceFaultKind> for ActionKind {
    fn from(kind: crate::supervisor::ServiceFaultKind) -> Self {
        use crate::supervisor::ServiceFaultKind as Kind;
        match kind {
            Kind::Cpu => ActionKind::Cpu,
            Kind::Memory => ActionKind::Memory,
            Kind::DiskFull => ActionKind::DiskFull,
            Kind::Clock => ActionKind::Clock,
        }
    }
}

impl Action {
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::Kill(_) => ActionKind::Kill,
            Action::Stop(_) => ActionKind::Stop,
            Action::Start(_) => ActionKind::Start,
            Action::Restart(_) => ActionKind::Restart,
            Action::Rolling { .. } => ActionKind::Rolling,
            Action::Upgrade { .. } => ActionKind::Upgrade,
            Action::Pause { .. } => ActionKind::Pause,
            Action::Drop(_) => ActionKind::Drop,
            Action::Link { fault, .. } => fault.kind().into(),
            Action::Firewall { .. } => ActionKind::Partition,
            Action::Service { fault, .. } => fault.kind().into(),
        }
    }

    /// The target of a one-target action; `None` for a link fault (its target is a link).
    pub fn target(&self) -> Option<Target> {
        match self {
            Action::Kill(t)
            | Action::Stop(t)
            | Action::Start(t)
            | Action::Restart(t)
            | Action::Drop(t)
            | Action::Rolling { target: t, .. }
            | Action::Upgrade { target: t, .. }
            | Action::Pause { target: t, .. }
            | Action::Service { target: t, .. } => Some(*t),
            Action::Link { .. } | Action::Firewall { .. } => None,
        }
    }

    /// What the action aims at, as events and reports print it (`node-1`, `node-1<->postgres`).
    pub fn target_label(&self) -> String {
        match self {
            Action::Link { link, .. } | Action::Firewall { link, .. } => link.to_string(),
            _ => self.target().map(|t| t.to_string()).unwrap_or_default(),
        }
    }

    /// How long the fault holds, for the actions that have a `for`.
    pub fn duration(&self) -> Option<Duration> {
        match self {
            Action::Pause { duration, .. }
            | Action::Link { duration, .. }
            | Action::Firewall { duration, .. }
            | Action::Service { duration, .. } => Some(*duration),
            _ => None,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.target_label())?;
        super::actions::print_details(self, f)
    }
}
