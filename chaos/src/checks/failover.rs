//! failover: every action that takes a node out (`kill`, `stop`, `restart`, and each node of
//! a `rolling`) must see every player that lost its connection on that node welcomed by
//! another node within the limit, counted from the node's going out. A player that signed
//! off for good meanwhile is not expected.
//!
//! When a node went out, and which losses are its, is [`super::outages`]'s to say.
//!
//! Not applicable with fewer than two nodes, or when no node went out; an outage while no
//! other node was up has nowhere to fail over to and is not judged.

use std::collections::BTreeMap;

use super::conns::Conns;
use super::fault_table::{self, fmt_num, Fault, Leavers, OwnLosses};
use super::losses::{self, Change};
use super::outages::{outages, states, up_at, Outage};
use super::{some, CheckResult, Quantity, Verdict};
use crate::events::History;
use crate::plan::{Failover, Service};

pub const NAME: &str = "failover";

pub fn check(history: &History, limits: Failover, grace: f64) -> CheckResult {
    // The report shows one limit: the highest this run's outages are held to.
    let limit_q = |outages: &[Outage], faults: &[Fault]| {
        Quantity::Seconds(
            outages
                .iter()
                .map(|o| limits.after(faults[o.fault].action).as_secs_f64())
                .fold(limits.crash.as_secs_f64(), f64::max),
        )
    };
    let limit_q_none = limit_q(&[], &[]);
    let nodes = fault_table::nodes(history);
    if nodes.len() < 2 {
        return CheckResult::not_applicable(
            NAME,
            limit_q_none,
            "fewer than two nodes: nothing to fail over to",
        );
    }
    let states = states(history);
    let faults = fault_table::faults(history);
    let outages = outages(history, &faults, &states, grace);
    if outages.is_empty() {
        return CheckResult::not_applicable(NAME, limit_q_none, "no node was taken out");
    }
    let limit_q = limit_q(&outages, &faults);
    let conns = Conns::of(history);
    let leavers = Leavers::of(history);
    let own = OwnLosses::of(history);
    let changes = losses::of(history);
    let mut worst: Option<f64> = Some(0.0);
    let (mut judged, mut players, mut nowhere, mut left) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for outage in &outages {
        if !nodes
            .iter()
            .any(|&n| n != outage.node && up_at(&states, n, outage.start))
        {
            nowhere += 1;
            continue;
        }
        let name = Service::Node(outage.node).to_string();
        // Each account once, from its last loss in the span.
        let mut lost: BTreeMap<u64, f64> = BTreeMap::new();
        for c in &changes {
            if let Change::Lost { node, reason } = &c.change {
                if *node == name
                    && c.t >= outage.start
                    && c.t <= outage.until
                    && !own.contains(c.account, c.t, reason)
                {
                    lost.insert(c.account, c.t);
                }
            }
        }
        let mut times = Vec::new();
        for (&account, &lost_t) in &lost {
            let elsewhere = conns
                .of_account(account)
                .find(|c| c.welcomed > lost_t && c.node != name)
                .map(|c| c.welcomed);
            let signed_off = leavers.left_since(account, outage.start);
            match (elsewhere, signed_off) {
                (Some(w), Some(s)) if s < w => left += 1,
                (None, Some(_)) => left += 1,
                (w, _) => times.push(w.map(|w| (w - outage.start).max(0.0))),
            }
        }
        if times.is_empty() {
            continue;
        }
        judged += 1;
        players += times.len();
        let never = times.iter().filter(|t| t.is_none()).count();
        let slowest = times.iter().flatten().copied().fold(0.0, f64::max);
        worst = match (worst, never) {
            (Some(w), 0) => Some(w.max(slowest)),
            _ => None,
        };
        if never > 0 {
            failures.push(format!(
                "{}: {never} of {} players never welcomed by another node",
                outage.label,
                times.len()
            ));
        } else if slowest > limits.after(faults[outage.fault].action).as_secs_f64() {
            failures.push(format!(
                "{}: {} players, the last elsewhere after {}s",
                outage.label,
                times.len(),
                fmt_num(slowest)
            ));
        }
    }
    let mut notes = String::new();
    if nowhere > 0 {
        notes.push_str(&format!(
            "; {nowhere} outages with no other node up (not judged)"
        ));
    }
    if left > 0 {
        notes.push_str(&format!(
            "; {left} players signed off for good (not expected)"
        ));
    }
    if judged == 0 {
        let labels: Vec<&str> = outages.iter().map(|o| o.label.as_str()).collect();
        if nowhere == outages.len() {
            return CheckResult::not_applicable(
                NAME,
                limit_q,
                format!("nothing to fail over to{notes}"),
            );
        }
        return CheckResult::unknown(
            NAME,
            limit_q,
            format!(
                "{} nodes taken out ({}) but no player lost its connection there{notes}",
                outages.len(),
                some(labels, 3)
            ),
        );
    }
    let pass = failures.is_empty();
    let detail = if pass {
        format!(
            "{judged} of {} node outages hit {players} players, every one welcomed elsewhere in time{notes}",
            outages.len()
        )
    } else {
        format!("{}{notes}", failures.join("; "))
    };
    CheckResult::new(
        NAME,
        limit_q,
        worst.map(Quantity::Seconds),
        Verdict::of(pass),
        detail,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::plan::ActionKind;
    use std::time::Duration;

    fn cluster(n: u32) -> Vec<At> {
        (1..=n).map(|k| node_up(-5.0, k)).collect()
    }

    fn kill_node_1(t: f64) -> Vec<At> {
        let mut events = action(t, t, ActionKind::Kill, "node-1");
        events.push(node_exit(t, 1));
        events
    }

    fn judge(events: Vec<At>) -> CheckResult {
        check(
            &events.into_iter().collect(),
            Failover::set(Duration::from_secs(7), Duration::ZERO),
            20.0,
        )
    }

    #[test]
    fn unset_limits_follow_the_way_the_node_left() {
        let by_cause = Failover::by_cause(Duration::from_secs(5));
        let judge = |action_kind: ActionKind| {
            let mut events = cluster(2);
            events.extend(action(30.0, 31.0, action_kind, "node-1"));
            events.push(node_exit(31.0, 1));
            // A drain's clients wait up to 10 s before they come back elsewhere.
            events.extend([
                on(0.0, 1, "node-1"),
                lost(30.1, 1, "node-1"),
                welcome(39.99, 1, 11, "node-2"),
            ]);
            check(&events.into_iter().collect(), by_cause, 20.0)
        };
        let stopped = judge(ActionKind::Stop);
        assert_eq!(stopped.result, Verdict::Pass, "{stopped:?}");
        assert_eq!(stopped.limit, Quantity::Seconds(17.5));
        let killed = judge(ActionKind::Kill);
        assert_eq!(killed.result, Verdict::Fail, "{killed:?}");
        assert_eq!(killed.limit, Quantity::Seconds(7.0));
    }

    #[test]
    fn a_quick_failover_passes() {
        let mut events = cluster(2);
        events.extend(kill_node_1(30.0));
        events.extend([
            on(0.0, 1, "node-1"),
            lost(30.1, 1, "node-1"),
            on(0.0, 2, "node-1"),
            lost(30.1, 2, "node-1"),
            welcome(31.0, 1, 11, "node-2"),
            welcome(33.0, 2, 12, "node-2"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Seconds(3.0)));
    }

    #[test]
    fn a_slow_failover_fails() {
        let mut events = cluster(2);
        events.extend(kill_node_1(30.0));
        events.extend([
            on(0.0, 1, "node-1"),
            lost(30.1, 1, "node-1"),
            welcome(39.5, 1, 11, "node-2"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, Some(Quantity::Seconds(9.5)));
    }

    #[test]
    fn coming_back_to_the_same_node_is_not_a_failover() {
        let mut events = cluster(2);
        events.extend(kill_node_1(30.0));
        events.extend([
            node_up(33.0, 1),
            on(0.0, 1, "node-1"),
            lost(30.1, 1, "node-1"),
            welcome(35.0, 1, 11, "node-1"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("never welcomed by another node"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_player_that_signed_off_for_good_is_not_expected() {
        let mut events = cluster(2);
        events.extend(kill_node_1(30.0));
        events.extend([
            on(0.0, 1, "node-1"),
            lost(30.1, 1, "node-1"),
            on(0.0, 2, "node-1"),
            lost(30.1, 2, "node-1"),
            welcome(31.0, 1, 11, "node-2"),
            sign_off(30.5, 2, true),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("1 players signed off for good"),
            "{}",
            result.detail
        );
    }

    /// The self-test's last kill: the settle's sign-offs for good start while some clients
    /// have not yet noticed that the kill broke their connection.
    #[test]
    fn a_player_that_signed_off_for_good_before_it_noticed_the_loss_is_not_expected() {
        let mut events = cluster(2);
        events.extend(kill_node_1(30.0));
        events.extend([
            on(0.0, 1, "node-1"),
            lost(30.1, 1, "node-1"),
            welcome(31.0, 1, 11, "node-2"),
            sign_off(30.2, 2, true),
            on(0.0, 2, "node-1"),
            lost(30.3, 2, "node-1"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
    }

    #[test]
    fn every_node_of_a_rolling_is_judged_from_its_own_step() {
        let mut events = cluster(2);
        events.extend(action(10.0, 40.0, ActionKind::Rolling, "nodes"));
        events.extend([
            on(0.0, 1, "node-1"),
            lost(10.1, 1, "node-1"),
            node_exit(11.0, 1),
            back(12.0, 1, "node-2"),
            node_up(14.0, 1),
            // node-2's step starts with its first loss, long after the rolling's start.
            lost(25.0, 1, "node-2"),
            on(0.0, 2, "node-2"),
            lost(25.0, 2, "node-2"),
            node_exit(26.0, 2),
            welcome(27.0, 1, 12, "node-1"),
            welcome(29.0, 2, 13, "node-1"),
            node_up(30.0, 2),
        ]);
        let result = judge(events.clone());
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Seconds(4.0)));
        assert!(
            result.detail.contains("2 of 2 node outages hit 3 players"),
            "{}",
            result.detail
        );
        // Player 2 slow to leave node-2: the second step fails on its own.
        events.retain(|(t, _)| *t != 29.0);
        events.push(welcome(39.0, 2, 13, "node-1"));
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("rolling nodes at 10s (node-2)"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_restart_is_a_node_taken_out() {
        let mut events = cluster(2);
        events.extend(action(10.0, 15.0, ActionKind::Restart, "node-2"));
        events.extend([
            node_exit(11.0, 2),
            on(0.0, 4, "node-2"),
            lost(10.2, 4, "node-2"),
            node_up(14.0, 2),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("restart node-2"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_single_node_or_no_outage_is_not_applicable() {
        let mut events = kill_node_1(30.0);
        events.extend([
            node_up(-5.0, 1),
            on(0.0, 1, "node-1"),
            lost(30.1, 1, "node-1"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass);
        assert!(
            result.detail.starts_with("fewer than two nodes"),
            "{}",
            result.detail
        );
        let mut events = cluster(2);
        events.extend(action(10.0, 10.0, ActionKind::Drop, "players"));
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass);
        assert_eq!(result.detail, "no node was taken out");
    }

    #[test]
    fn killing_every_node_has_nowhere_to_fail_over_to() {
        let mut events = cluster(2);
        events.extend(action(10.0, 10.0, ActionKind::Kill, "nodes"));
        events.extend([
            node_exit(10.0, 1),
            node_exit(10.0, 2),
            on(0.0, 1, "node-1"),
            lost(10.1, 1, "node-1"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("2 outages with no other node up"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_node_out_without_a_player_hit_is_unknown() {
        let mut events = cluster(2);
        events.extend(kill_node_1(30.0));
        let result = judge(events);
        assert_eq!(result.result, Verdict::Unknown);
        assert!(
            result.detail.contains("no player lost its connection"),
            "{}",
            result.detail
        );
    }
}
