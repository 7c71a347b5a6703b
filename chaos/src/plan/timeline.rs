//! Resolving a plan's timeline with its seed: random targets drawn, entries ordered by time
//! and expanded into the operations a runner performs (with each fault's heal), every
//! service's state walked, and overlaps that cannot run refused.
//!
//! The draws use ChaCha8 seeded from the plan's seed and take `next_u64() % n`, both stable
//! across library versions, so the same plan and seed always resolve to the same timeline.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use anyplay_cloud::duration;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::proxy::Direction;

use super::{
    Action, ActionKind, Link, LinkFault, Plan, PlanError, Service, ServiceFault, Target,
    VersionName, Ways,
};

/// A plan's timeline as it will run.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub plan: String,
    pub seed: u64,
    /// Ordered by scheduled time (entries with the same time keep the plan's order).
    pub steps: Vec<Step>,
}

/// One timeline entry, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Index of the entry in the plan's `timeline` list.
    pub entry: usize,
    pub line: usize,
    /// Scheduled offset from the moment every player is online.
    pub at: Duration,
    /// The action as the plan wrote it (`random-node` still in it).
    pub written: Action,
    /// The action with every random target drawn.
    pub action: Action,
    /// What the runner does, in order, with the heal of a lasting fault at its end.
    pub acts: Vec<TimedAct>,
}

/// One operation of a step and when it may start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedAct {
    /// The scheduled offset; for a chained op (`after` is set) the earliest it can start.
    pub at: Duration,
    /// `Some(gap)`: starts `gap` after the step's previous op has completed, not at a fixed
    /// time (rolling and restart wait for stops, starts and readiness).
    pub after: Option<Duration>,
    pub act: Act,
}

/// A single thing done to one process, one proxied route or the players.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Act {
    Kill(Service),
    /// SIGTERM, SIGKILL after the drain timeout + 5 s.
    Stop(Service),
    Start(Service),
    /// Wait until the service answers ready (`/readyz` for a node).
    WaitReady(Service),
    /// The node's next start runs this version (it is stopped).
    Install {
        service: Service,
        version: VersionName,
    },
    /// SIGSTOP (docker pause).
    Pause(Service),
    /// SIGCONT (docker unpause).
    Resume(Service),
    /// Every player connection in scope reset at once.
    Drop(DropScope),
    /// A fault set on the route until its `Heal`.
    Impair {
        route: Route,
        fault: LinkFault,
        ways: Ways,
        toxicity: Option<Toxicity>,
    },
    /// The route's fault of this kind removed from the ways its `Impair` set.
    Heal {
        route: Route,
        fault: LinkFault,
        ways: Ways,
    },
    /// Packets from `from` to `to` (and back, with `Ways::Both`) dropped by the firewall of
    /// their hosts, until the `Mend`; `Up` is from → to.
    Cut {
        from: Service,
        to: Service,
        ways: Ways,
    },
    /// The firewall cut between the two removed.
    Mend {
        from: Service,
        to: Service,
    },
    /// A fault set on a service until its `Release`.
    Squeeze {
        service: Service,
        fault: ServiceFault,
    },
    /// The service's fault of this kind removed.
    Release {
        service: Service,
        fault: ServiceFault,
    },
}

/// The share of connections a link fault hits, with its seed drawn from the plan's.
pub use crate::proxy::Toxicity;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropScope {
    AllPlayers,
    /// The players connected through this node's proxy.
    Node(u32),
}

/// The proxied route between one node and a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route {
    pub node: u32,
    pub peer: Peer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Peer {
    Postgres,
    Nats,
    Players,
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let peer = match self.peer {
            Peer::Postgres => "postgres",
            Peer::Nats => "nats",
            Peer::Players => "players",
        };
        write!(f, "node-{}<->{peer}", self.node)
    }
}

impl fmt::Display for Act {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Act::Kill(s) => write!(f, "kill {s}"),
            Act::Stop(s) => write!(f, "stop {s}"),
            Act::Start(s) => write!(f, "start {s}"),
            Act::WaitReady(s) => write!(f, "wait until {s} is ready"),
            Act::Install { service, version } => write!(f, "install {version} on {service}"),
            Act::Pause(s) => write!(f, "pause {s}"),
            Act::Resume(s) => write!(f, "resume {s}"),
            Act::Drop(DropScope::AllPlayers) => f.write_str("drop every player connection"),
            Act::Drop(DropScope::Node(n)) => write!(f, "drop the players of node-{n}"),
            Act::Impair {
                route,
                fault,
                ways,
                toxicity,
            } => {
                write!(f, "{} {route}", ActionKind::from(fault.kind()))?;
                super::units::write_details(f, fault, *ways, toxicity.map(|t| t.share))
            }
            Act::Heal { route, fault, .. } => {
                write!(f, "end the {} of {route}", ActionKind::from(fault.kind()))
            }
            Act::Cut { from, to, ways } => {
                write!(f, "partition {from}<->{to} via firewall")?;
                match ways {
                    Ways::Both => Ok(()),
                    ways => write!(f, " {ways}"),
                }
            }
            Act::Mend { from, to } => write!(f, "end the firewall partition of {from}<->{to}"),
            Act::Squeeze { service, fault } => {
                write!(f, "{} {service} {fault}", ActionKind::from(fault.kind()))
            }
            Act::Release { service, fault } => {
                write!(f, "end the {} of {service}", fault.kind())
            }
        }
    }
}

/// What a step holds busy, to find overlaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resource {
    Process(Service),
    /// One kind of fault on one direction of a route (a latency and a bandwidth cap may
    /// stack, and so may a latency up and one down).
    Route(Route, ActionKind, Direction),
    /// One kind of fault on a service.
    Limit(Service, ActionKind),
    /// The firewall between two services (the lesser first).
    Firewall(Service, Service),
}

/// An instant action still occupies its target for a moment: two at the same time collide.
pub(super) const INSTANT: Duration = Duration::from_millis(1);

/// A resource a step holds, from when to when (half-open).
pub(super) type Hold = (Resource, Duration, Duration);

impl TimedAct {
    /// An act due at a fixed offset.
    pub(super) fn fixed(at: Duration, act: Act) -> TimedAct {
        TimedAct {
            at,
            after: None,
            act,
        }
    }

    /// An op that starts `gap` after the step's previous one completed, not before `at`.
    pub(super) fn chained(at: Duration, gap: Duration, act: Act) -> TimedAct {
        TimedAct {
            at,
            after: Some(gap),
            act,
        }
    }

    /// A lasting fault: `set` on each of `on` at `at`, `undo` on each when it ends.
    pub(super) fn lasting<T: Copy>(
        on: &[T],
        at: Duration,
        duration: Duration,
        set: impl Fn(T) -> Act,
        undo: impl Fn(T) -> Act,
    ) -> Vec<TimedAct> {
        let set = on.iter().map(|&x| TimedAct::fixed(at, set(x)));
        let undo = on.iter().map(|&x| TimedAct::fixed(at + duration, undo(x)));
        set.chain(undo).collect()
    }
}

pub fn resolve(plan: &Plan, seed: u64) -> Result<Timeline, PlanError> {
    resolve_from(plan, seed, &BTreeSet::new())
}

/// [`resolve`], with the services in `stopped` stopped at its start (the control API's
/// actions, given while some may be).
pub fn resolve_from(
    plan: &Plan,
    seed: u64,
    stopped: &BTreeSet<Service>,
) -> Result<Timeline, PlanError> {
    let mut order: Vec<usize> = (0..plan.timeline.len()).collect();
    order.sort_by_key(|&i| plan.timeline[i].at);

    let mut walk = Walk {
        plan,
        rng: ChaCha8Rng::seed_from_u64(seed),
        running: plan
            .topology()
            .into_iter()
            .map(|s| (s, stopped.contains(&s).then_some(BEFORE)))
            .collect(),
    };
    let mut steps: Vec<Step> = Vec::with_capacity(order.len());
    let mut held: Vec<(usize, Resource, Duration, Duration)> = Vec::new();
    for index in order {
        let entry = &plan.timeline[index];
        let fail = |message: String| PlanError::Invalid {
            line: entry.line,
            key: format!("timeline[{index}].{}", entry.action.kind()),
            message,
        };
        let action = super::actions::draw(&mut walk, entry.action, entry.at).map_err(fail)?;
        // Drawn only for a step that has one, so plans without toxicity keep their draws.
        let toxicity = match action {
            Action::Link {
                toxicity: Some(share),
                ..
            } => Some(Toxicity {
                share,
                seed: walk.rng.next_u64(),
            }),
            _ => None,
        };
        walk.apply(&action, entry.at, index, entry.line)
            .map_err(fail)?;
        let count = plan.services.nodes.count;
        for (resource, from, until) in super::actions::holds(&action, entry.at, count) {
            let clash = held
                .iter()
                .find(|(_, r, f, u)| *r == resource && from < *u && *f < until);
            if let Some((other, _, f, u)) = clash {
                let other = &steps[*other];
                return Err(fail(format!(
                    "overlaps timeline[{}] on line {} ({}), which holds {} from {} to {}",
                    other.entry,
                    other.line,
                    other.action,
                    resource_name(resource),
                    duration::seconds(*f),
                    duration::seconds(u.saturating_sub(INSTANT).max(*f)),
                )));
            }
            held.push((steps.len(), resource, from, until));
        }
        steps.push(Step {
            entry: index,
            line: entry.line,
            at: entry.at,
            written: entry.action,
            action,
            acts: super::actions::expand(&action, entry.at, count, toxicity),
        });
    }
    Ok(Timeline {
        plan: plan.name.clone(),
        seed,
        steps,
    })
}

fn resource_name(resource: Resource) -> String {
    match resource {
        Resource::Process(s) => s.to_string(),
        Resource::Route(r, kind, Direction::Upstream) => format!("the {kind} of {r} up"),
        Resource::Route(r, kind, Direction::Downstream) => format!("the {kind} of {r} down"),
        Resource::Limit(s, kind) => format!("the {kind} of {s}"),
        Resource::Firewall(a, b) => format!("the firewall between {a} and {b}"),
    }
}

/// Who stopped a service stopped before the timeline starts (no entry of its own).
const BEFORE: (usize, usize) = (usize::MAX, 0);

/// The timeline walk: each service's state (with who last changed it) and the seeded draws.
pub(super) struct Walk<'a> {
    plan: &'a Plan,
    rng: ChaCha8Rng,
    /// `None` while running; `Some((entry, line))` of the step that stopped it.
    running: BTreeMap<Service, Option<(usize, usize)>>,
}

/// The nodes a `random-node` is drawn among.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Among {
    Running,
    Stopped,
    /// Any node of the plan.
    Any,
    /// The running nodes, where players sit; any node when none runs.
    WithPlayers,
}

impl Walk<'_> {
    fn nodes(&self) -> impl Iterator<Item = u32> {
        1..=self.plan.services.nodes.count
    }

    fn is_running(&self, service: Service) -> bool {
        matches!(self.running.get(&service), Some(None))
    }

    /// `target`, or for `random-node` a node drawn `among` those the action can apply to.
    pub(super) fn pick(
        &mut self,
        target: Target,
        among: Among,
        at: Duration,
    ) -> Result<Target, String> {
        if target != Target::RandomNode {
            return Ok(target);
        }
        let running = |n: &u32| self.is_running(Service::Node(*n));
        let candidates: Vec<u32> = match among {
            Among::Running => self.nodes().filter(running).collect(),
            Among::Stopped => self.nodes().filter(|n| !running(n)).collect(),
            Among::Any => self.nodes().collect(),
            Among::WithPlayers => match self.nodes().filter(running).collect::<Vec<_>>() {
                none if none.is_empty() => self.nodes().collect(),
                running => running,
            },
        };
        if candidates.is_empty() {
            let wanted = match among {
                Among::Running => "running",
                Among::Stopped => "stopped",
                Among::Any | Among::WithPlayers => "there",
            };
            return Err(format!(
                "random-node: no node is {wanted} at {}",
                duration::seconds(at)
            ));
        }
        // Modulo bias is negligible for a handful of nodes, and `%` never changes meaning.
        let pick = self.rng.next_u64() % candidates.len() as u64;
        Ok(Target::Node(candidates[pick as usize]))
    }

    /// Refuses to start what runs or stop what is stopped, then records the new states.
    fn apply(
        &mut self,
        action: &Action,
        at: Duration,
        entry: usize,
        line: usize,
    ) -> Result<(), String> {
        let Some((needs_running, leaves_running)) = super::actions::process_states(action) else {
            return Ok(());
        };
        let Some(target) = action.target() else {
            return Ok(());
        };
        let services = services_of(target, self.plan.services.nodes.count);
        for service in &services {
            let running = self.is_running(*service);
            if running != needs_running {
                let when = duration::seconds(at);
                let verb = action.kind();
                return Err(match self.running.get(service).copied().flatten() {
                    Some(BEFORE) => format!("cannot {verb} {service} at {when}: it is stopped"),
                    Some((by, by_line)) => format!(
                        "cannot {verb} {service} at {when}: it is stopped (by timeline[{by}] on line {by_line})"
                    ),
                    None if running => format!("cannot {verb} {service} at {when}: it is already running"),
                    None => format!("cannot {verb} {service} at {when}: it is stopped"),
                });
            }
        }
        for service in services {
            self.running
                .insert(service, (!leaves_running).then_some((entry, line)));
        }
        Ok(())
    }
}

/// The processes a (drawn) target stands for.
pub(super) fn services_of(target: Target, count: u32) -> Vec<Service> {
    match target {
        Target::Node(n) => vec![Service::Node(n)],
        Target::Nodes | Target::RandomNode => (1..=count).map(Service::Node).collect(),
        Target::Postgres => vec![Service::Postgres],
        Target::Nats => vec![Service::Nats],
        Target::Players => Vec::new(),
    }
}

pub(super) fn routes_of(link: Link, count: u32) -> Vec<Route> {
    let (node, peer) = link.ends();
    let peer = match peer {
        Target::Postgres => Peer::Postgres,
        Target::Nats => Peer::Nats,
        _ => Peer::Players,
    };
    services_of(node, count)
        .into_iter()
        .filter_map(|s| match s {
            Service::Node(node) => Some(Route { node, peer }),
            _ => None,
        })
        .collect()
}

/// The pairs of services a firewall partition cuts (`nodes` against one node skips itself).
pub(super) fn pairs_of(link: Link, count: u32) -> Vec<(Service, Service)> {
    let bs = services_of(link.b, count);
    services_of(link.a, count)
        .into_iter()
        .flat_map(|a| bs.iter().filter(move |b| **b != a).map(move |b| (a, *b)))
        .collect()
}

impl Timeline {
    /// When the last act is due at the earliest.
    pub fn length(&self) -> Duration {
        self.steps
            .iter()
            .flat_map(|s| s.acts.iter().map(|o| o.at + o.after.unwrap_or_default()))
            .max()
            .unwrap_or_default()
    }
}

impl fmt::Display for Timeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "plan {}, seed {}: {} steps, offsets from the moment every player is online",
            self.plan,
            self.seed,
            self.steps.len()
        )?;
        if self.steps.is_empty() {
            return writeln!(f, "  (no faults: the run only plays the load)");
        }
        writeln!(
            f,
            "(≥ marks an earliest time: that op waits for the one before it)\n"
        )?;
        let labels: Vec<String> = self.steps.iter().map(step_label).collect();
        let width = labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
            .max(6);
        writeln!(f, "{:>9}  {:>4}  {:<width$}  ops", "at", "line", "action")?;
        for (step, label) in self.steps.iter().zip(&labels) {
            for (k, act) in step.acts.iter().enumerate() {
                let at = match act.after {
                    Some(_) => format!("≥{}", duration::seconds(act.at)),
                    None => duration::seconds(act.at),
                };
                let gap = match act.after {
                    Some(gap) if !gap.is_zero() => {
                        format!("  (after a {} gap)", duration::seconds(gap))
                    }
                    _ => String::new(),
                };
                if k == 0 {
                    writeln!(
                        f,
                        "{at:>9}  {:>4}  {label:<width$}  {}{gap}",
                        step.line, act.act
                    )?;
                } else {
                    writeln!(f, "{at:>9}  {:>4}  {:<width$}  {}{gap}", "", "", act.act)?;
                }
            }
        }
        Ok(())
    }
}

fn step_label(step: &Step) -> String {
    if step.written == step.action {
        step.action.to_string()
    } else {
        format!(
            "{} (drawn from {})",
            step.action,
            step.written.target_label()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(timeline: &str) -> Result<Plan, PlanError> {
        let src = format!(
            "name: t\nseed: 7\nstore: postgres\nservices:\n  postgres: {{}}\n  nats: {{}}\n  nodes: {{count: 3}}\nload: {{players: 10, through_proxy: true}}\ntimeline:\n{timeline}"
        );
        Plan::from_yaml(&src)
    }

    fn refusal(timeline: &str) -> (usize, String, String) {
        match plan(timeline) {
            Err(PlanError::Invalid { line, key, message }) => (line, key, message),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_firewall_partition_of_a_node_from_the_nodes_cuts_each_other_one() {
        let link = Link {
            a: Target::Node(3),
            b: Target::Nodes,
        };
        assert_eq!(
            pairs_of(link, 3),
            vec![
                (Service::Node(3), Service::Node(1)),
                (Service::Node(3), Service::Node(2))
            ]
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_timeline() {
        let p = plan("  - { at: 1s, restart: random-node }\n  - { at: 5s, kill: random-node }\n  - { at: 9s, drop: random-node }\n").unwrap();
        let first = p.resolve(7).unwrap();
        for _ in 0..5 {
            assert_eq!(p.resolve(7).unwrap(), first);
        }
        assert_eq!(first.to_string(), p.resolve(7).unwrap().to_string());
    }

    #[test]
    fn seeds_spread_the_draws_over_the_nodes() {
        let p = plan("  - { at: 1s, kill: random-node }\n").unwrap();
        let drawn: std::collections::BTreeSet<String> = (0..64)
            .map(|seed| p.resolve(seed).unwrap().steps[0].action.target_label())
            .collect();
        assert_eq!(drawn.len(), 3, "{drawn:?}");
    }

    #[test]
    fn random_start_draws_only_a_stopped_node() {
        let p = plan("  - { at: 1s, kill: node-2 }\n  - { at: 5s, start: random-node }\n").unwrap();
        for seed in 0..32 {
            let t = p.resolve(seed).unwrap();
            assert_eq!(t.steps[1].action, Action::Start(Target::Node(2)));
        }
    }

    #[test]
    fn steps_are_ordered_by_time() {
        let p = plan("  - { at: 9s, drop: players }\n  - { at: 1s, drop: players }\n").unwrap();
        let t = p.resolve(1).unwrap();
        assert_eq!(
            t.steps.iter().map(|s| s.entry).collect::<Vec<_>>(),
            vec![1, 0]
        );
    }

    #[test]
    fn rolling_expands_node_by_node_with_earliest_times() {
        let p = plan("  - { at: 90s, rolling: nodes, gap: 2s }\n").unwrap();
        let t = p.resolve(1).unwrap();
        let acts: Vec<(Duration, Option<Duration>, Act)> = t.steps[0]
            .acts
            .iter()
            .map(|o| (o.at, o.after, o.act))
            .collect();
        let s = Duration::from_secs;
        let n = Service::Node;
        assert_eq!(
            acts,
            vec![
                (s(90), None, Act::Stop(n(1))),
                (s(90), Some(s(0)), Act::Start(n(1))),
                (s(90), Some(s(0)), Act::WaitReady(n(1))),
                (s(92), Some(s(2)), Act::Stop(n(2))),
                (s(92), Some(s(0)), Act::Start(n(2))),
                (s(92), Some(s(0)), Act::WaitReady(n(2))),
                (s(94), Some(s(2)), Act::Stop(n(3))),
                (s(94), Some(s(0)), Act::Start(n(3))),
                (s(94), Some(s(0)), Act::WaitReady(n(3))),
            ]
        );
    }

    #[test]
    fn lasting_faults_carry_their_heal() {
        let p = plan("  - { at: 10s, partition: [postgres, nodes], for: 5s }\n").unwrap();
        let acts = &p.resolve(1).unwrap().steps[0].acts;
        assert_eq!(acts.len(), 6);
        assert_eq!(
            acts[0].act,
            Act::Impair {
                route: Route {
                    node: 1,
                    peer: Peer::Postgres
                },
                fault: LinkFault::Partition(super::super::PartitionMode::Hold),
                ways: Ways::Both,
                toxicity: None,
            }
        );
        assert_eq!(acts[5].at, Duration::from_secs(15));
        assert_eq!(
            acts[5].act,
            Act::Heal {
                route: Route {
                    node: 3,
                    peer: Peer::Postgres
                },
                fault: LinkFault::Partition(super::super::PartitionMode::Hold),
                ways: Ways::Both,
            }
        );
    }

    #[test]
    fn starting_a_running_node_is_refused_on_its_line() {
        let (line, key, message) = refusal("  - { at: 1s, start: node-1 }\n");
        assert_eq!((line, key.as_str()), (10, "timeline[0].start"));
        assert!(message.contains("already running"), "{message}");
    }

    #[test]
    fn stopping_a_stopped_node_names_who_stopped_it() {
        let (line, key, message) =
            refusal("  - { at: 1s, kill: node-1 }\n  - { at: 2s, stop: node-1 }\n");
        assert_eq!((line, key.as_str()), (11, "timeline[1].stop"));
        assert!(message.contains("timeline[0] on line 10"), "{message}");
    }

    #[test]
    fn two_faults_on_one_target_at_once_are_refused() {
        let (line, key, message) =
            refusal("  - { at: 10s, pause: nats, for: 5s }\n  - { at: 12s, restart: nats }\n");
        assert_eq!((line, key.as_str()), (11, "timeline[1].restart"));
        assert!(message.contains("overlaps timeline[0]"), "{message}");
        let (_, key, _) = refusal(
            "  - { at: 10s, latency: [node-1, nats], ms: 9, for: 5s }\n  - { at: 14s, latency: [nats, nodes], ms: 5, for: 1s }\n",
        );
        assert_eq!(key, "timeline[1].latency");
        let (_, key, message) = refusal(
            "  - { at: 10s, cpu: node-1, limit: 0.5, for: 5s }\n  - { at: 14s, cpu: nodes, limit: 1, for: 1s }\n",
        );
        assert_eq!(key, "timeline[1].cpu");
        assert!(message.contains("the cpu of node-1"), "{message}");
    }

    #[test]
    fn faults_of_different_kinds_stack_on_one_link() {
        let p = plan(
            "  - { at: 10s, latency: [node-1, nats], ms: 9, for: 5s }\n  - { at: 11s, bandwidth: [nats, node-1], kbps: 80, for: 1s }\n  - { at: 12s, cpu: node-1, limit: 0.5, for: 5s }\n  - { at: 13s, clock: node-1, offset: 5s, for: 5s }\n",
        )
        .unwrap();
        let t = p.resolve(1).unwrap();
        let heal = t.steps[1].acts.last().unwrap();
        assert_eq!(heal.at, Duration::from_secs(12));
        assert_eq!(
            heal.act,
            Act::Heal {
                route: Route {
                    node: 1,
                    peer: Peer::Nats
                },
                fault: LinkFault::Bandwidth { kbps: 80 },
                ways: Ways::Both,
            }
        );
    }

    #[test]
    fn one_kind_may_hold_each_way_of_a_link_apart() {
        let p = plan(
            "  - { at: 10s, latency: [node-1, nats], ms: 9, direction: up, for: 5s }\n  - { at: 11s, latency: [nats, node-1], ms: 5, direction: down, for: 1s }\n",
        )
        .unwrap();
        let t = p.resolve(1).unwrap();
        assert_eq!(
            t.steps[1].acts.last().unwrap().act,
            Act::Heal {
                route: Route {
                    node: 1,
                    peer: Peer::Nats
                },
                fault: LinkFault::Latency(crate::proxy::Latency::new(
                    Duration::from_millis(5),
                    Duration::ZERO
                )),
                ways: Ways::Down,
            }
        );
        let (_, key, message) = refusal(
            "  - { at: 10s, latency: [node-1, nats], ms: 9, direction: up, for: 5s }\n  - { at: 11s, latency: [nats, node-1], ms: 5, for: 1s }\n",
        );
        assert_eq!(key, "timeline[1].latency");
        assert!(
            message.contains("the latency of node-1<->nats up"),
            "{message}"
        );
    }

    #[test]
    fn toxicity_is_drawn_with_the_seed_and_leaves_other_draws_alone() {
        let p =
            plan("  - { at: 1s, timeout: [players, nodes], after: 1s, toxicity: 0.3, for: 5s }\n")
                .unwrap();
        let seed_of = |seed| match p.resolve(seed).unwrap().steps[0].acts[0].act {
            Act::Impair {
                toxicity: Some(t), ..
            } => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(seed_of(7), seed_of(7));
        assert_ne!(seed_of(7).seed, seed_of(8).seed);
        assert_eq!(seed_of(7).share, 0.3);
        let text = p.resolve(7).unwrap().to_string();
        assert!(text.contains("on 30% of connections"), "{text}");
    }

    #[test]
    fn faults_on_different_targets_or_after_the_heal_run() {
        plan("  - { at: 10s, pause: nats, for: 5s }\n  - { at: 15s, restart: nats }\n  - { at: 11s, kill: node-1 }\n  - { at: 12s, partition: [node-1, postgres], for: 5s }\n").unwrap();
    }

    #[test]
    fn the_table_shows_drawn_targets_and_earliest_times() {
        let p = plan("  - { at: 1s, restart: random-node }\n").unwrap();
        let text = p.resolve(3).unwrap().to_string();
        assert!(text.contains("(drawn from random-node)"), "{text}");
        assert!(text.contains("≥1s"), "{text}");
    }
}
