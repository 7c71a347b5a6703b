//! When each node went out of the cloud, from the actions that take nodes out (`kill`,
//! `stop`, `restart`, and each node of a `rolling`) and the nodes' exits.
//!
//! A node went out at its action's start; a rolling records one action for all its nodes,
//! so a later node's step is taken to start at its first lost player or its exit, whichever
//! came first (the node drains before it exits). A node's losses are those from its going
//! out until `grace` after its exit, or its start again if sooner.

use std::collections::BTreeMap;

use super::fault_table::Fault;
use super::losses::{self, Change};
use crate::events::{Event, History};
use crate::plan::{Service, Target};

/// A node out of the cloud for a while.
#[derive(Debug, Clone, PartialEq)]
pub struct Outage {
    /// Its action, as an index into the run's faults.
    pub fault: usize,
    pub label: String,
    pub node: u32,
    pub start: f64,
    pub exit: f64,
    /// The end of the span its losses are laid to.
    pub until: f64,
}

/// Each node's `(t, up?)` in time order.
pub type States = BTreeMap<u32, Vec<(f64, bool)>>;

pub fn states(history: &History) -> States {
    let mut states = States::new();
    for (t, event) in history.iter() {
        match event {
            Event::ServiceUp {
                service: Service::Node(n),
                ..
            } => states.entry(*n).or_default().push((t, true)),
            Event::ServiceExit {
                service: Service::Node(n),
                ..
            } => states.entry(*n).or_default().push((t, false)),
            _ => {}
        }
    }
    states
}

pub fn up_at(states: &States, node: u32, t: f64) -> bool {
    states
        .get(&node)
        .and_then(|log| log.iter().take_while(|(u, _)| *u <= t).last())
        .is_some_and(|(_, up)| *up)
}

/// Every node outage of the run, each node of a rolling on its own.
pub fn outages(history: &History, faults: &[Fault], states: &States, grace: f64) -> Vec<Outage> {
    // A node's first loss after `t`, to date a rolling step.
    let changes = losses::of(history);
    let first_loss = |node: &str, after: f64, by: f64| {
        changes.iter().find_map(|c| match &c.change {
            Change::Lost { node: n, .. } if n == node && c.t > after && c.t <= by => Some(c.t),
            _ => None,
        })
    };
    let mut out = Vec::new();
    for (index, fault) in faults.iter().enumerate() {
        if !fault.action.takes_out() {
            continue;
        }
        let targets: Vec<u32> = match fault.target.parse::<Target>() {
            Ok(Target::Node(n)) => vec![n],
            Ok(Target::Nodes) => states.keys().copied().collect(),
            _ => continue,
        };
        // The exits it caused, in time order (an exit may be written just after the end).
        let mut exits: Vec<(f64, u32)> = targets
            .iter()
            .filter_map(|&n| {
                let log = states.get(&n)?;
                let exit = log
                    .iter()
                    .find(|(t, up)| !up && *t >= fault.start && *t <= fault.end + 1.0)?;
                Some((exit.0, n))
            })
            .collect();
        exits.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut lower = fault.start;
        for (k, &(exit, n)) in exits.iter().enumerate() {
            let name = Service::Node(n).to_string();
            let start = if fault.action.in_turn() && k > 0 {
                first_loss(&name, lower, exit).unwrap_or(exit)
            } else {
                fault.start
            };
            let back_up = states[&n]
                .iter()
                .find(|(t, up)| *up && *t > exit)
                .map_or(f64::INFINITY, |(t, _)| *t);
            out.push(Outage {
                fault: index,
                label: match fault.action.in_turn() {
                    true => format!("{} ({name})", fault.label()),
                    false => fault.label(),
                },
                node: n,
                start,
                exit,
                until: (exit + grace).min(back_up),
            });
            lower = back_up.min(fault.end).max(exit);
        }
    }
    out
}
