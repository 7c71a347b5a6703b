//! failover: after a `kill` or `stop` of one node in a cluster, every player that was on it
//! must have a welcome from another node within the limit, counted from the action's start.
//! A topology of one node has nowhere to fail over to, so the check has nothing to judge.

use std::collections::BTreeSet;
use std::time::Duration;

use super::faults::{self, fmt_num};
use super::{CheckResult, Quantity};
use crate::events::{Event, History};
use crate::plan::{ActionKind, Service};

pub const NAME: &str = "failover";

pub fn check(history: &History, limit: Duration, grace: f64) -> CheckResult {
    let limit_s = limit.as_secs_f64();
    let result = |value, pass, detail: String| CheckResult {
        name: NAME.to_owned(),
        limit: Quantity::Seconds(limit_s),
        value,
        pass,
        detail,
    };
    let nodes: BTreeSet<Service> = history
        .iter()
        .filter_map(|(_, e)| match e {
            Event::ServiceUp {
                service: s @ Service::Node(_),
                ..
            } => Some(*s),
            _ => None,
        })
        .collect();
    if nodes.len() < 2 {
        return result(
            None,
            true,
            "fewer than two nodes: nothing to fail over to".to_owned(),
        );
    }
    let all = faults::faults(history);
    let (hits, _) = faults::hits(history, &all, grace);
    let mut worst: Option<f64> = Some(0.0);
    let mut judged = 0;
    let mut failures = Vec::new();
    for (fault, hits) in all.iter().zip(&hits) {
        let node_down = matches!(fault.action, ActionKind::Kill | ActionKind::Stop)
            && matches!(fault.target.parse::<Service>(), Ok(Service::Node(_)));
        if !node_down {
            continue;
        }
        judged += 1;
        let theirs: Vec<_> = hits.iter().filter(|h| h.node == fault.target).collect();
        let times: Vec<Option<f64>> = theirs
            .iter()
            .map(|h| h.back_elsewhere_t.map(|t| (t - fault.start).max(0.0)))
            .collect();
        let never = times.iter().filter(|t| t.is_none()).count();
        let slowest = times.iter().flatten().copied().fold(0.0, f64::max);
        worst = match (worst, never) {
            (Some(w), 0) => Some(w.max(slowest)),
            _ => None,
        };
        if never > 0 {
            failures.push(format!(
                "{}: {never} of {} players never welcomed by another node",
                fault.label(),
                theirs.len()
            ));
        } else if slowest > limit_s {
            failures.push(format!(
                "{}: {} players, the last elsewhere after {}s",
                fault.label(),
                theirs.len(),
                fmt_num(slowest)
            ));
        }
    }
    if judged == 0 {
        return result(None, true, "no node was killed or stopped".to_owned());
    }
    let pass = failures.is_empty();
    let detail = if pass {
        format!("{judged} node kills/stops, every player welcomed elsewhere in time")
    } else {
        failures.join("; ")
    };
    result(worst.map(Quantity::Seconds), pass, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Vec<(f64, Event)> {
        [1, 2]
            .map(|n| {
                (
                    -5.0,
                    Event::ServiceUp {
                        service: Service::Node(n),
                        addr: None,
                    },
                )
            })
            .to_vec()
    }

    fn kill_node_1(t: f64) -> Vec<(f64, Event)> {
        let (action, target) = (ActionKind::Kill, "node-1".to_owned());
        vec![
            (
                t,
                Event::ActionStart {
                    action,
                    target: target.clone(),
                    at: t,
                },
            ),
            (
                t,
                Event::ActionEnd {
                    action,
                    target,
                    at: t,
                    error: None,
                },
            ),
        ]
    }

    fn lost(t: f64, account: u64, node: &str) -> (f64, Event) {
        (
            t,
            Event::PlayerLost {
                account,
                node: node.into(),
                reason: "reset".into(),
            },
        )
    }

    fn back(t: f64, account: u64, node: &str) -> (f64, Event) {
        (
            t,
            Event::PlayerBack {
                account,
                node: node.into(),
            },
        )
    }

    #[test]
    fn a_quick_failover_passes() {
        let mut events = cluster();
        events.extend(kill_node_1(30.0));
        events.extend([
            lost(30.1, 1, "node-1"),
            lost(30.1, 2, "node-1"),
            back(31.0, 1, "node-2"),
            back(33.0, 2, "node-2"),
        ]);
        let result = check(&events.into_iter().collect(), Duration::from_secs(7), 20.0);
        assert!(result.pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Seconds(3.0)));
    }

    #[test]
    fn a_slow_failover_fails() {
        let mut events = cluster();
        events.extend(kill_node_1(30.0));
        events.extend([lost(30.1, 1, "node-1"), back(39.5, 1, "node-2")]);
        let result = check(&events.into_iter().collect(), Duration::from_secs(7), 20.0);
        assert!(!result.pass);
        assert_eq!(result.value, Some(Quantity::Seconds(9.5)));
    }

    #[test]
    fn coming_back_to_the_same_node_is_not_a_failover() {
        let mut events = cluster();
        events.extend(kill_node_1(30.0));
        events.extend([lost(30.1, 1, "node-1"), back(35.0, 1, "node-1")]);
        let result = check(&events.into_iter().collect(), Duration::from_secs(7), 20.0);
        assert!(!result.pass);
        assert!(
            result.detail.contains("never welcomed by another node"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_single_node_has_nothing_to_judge() {
        let mut events = kill_node_1(30.0);
        events.push(lost(30.1, 1, "node-1"));
        assert!(check(&events.into_iter().collect(), Duration::from_secs(7), 20.0).pass);
    }
}
