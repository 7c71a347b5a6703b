//! players_back: after every fault that broke connections, the players who lost theirs must
//! all have a welcome again within the limit, counted from the fault's start (so a fault
//! that lasts, like a partition, counts its own duration); in a rolling, from the step that
//! took their node out, as each step is a node outage of its own. Sign-offs and 4001 replacements
//! are no losses (the recorder writes no `player_lost` for them), and a player that signed off
//! for good after its loss is not expected back.
//!
//! Not applicable when the timeline broke no connection on purpose. A kill, stop, restart or
//! rolling of nodes and a drop always break some; when none was lost, the evidence is
//! missing (unknown). A partition or latency on the players' links breaks connections only
//! when it outlasts the clients' liveness timeout, so it is judged when it did.

use std::time::Duration;

use super::fault_table::{self, fmt_num, BackSeconds, Fault, Leavers};
use super::{CheckResult, Quantity, Verdict};
use crate::events::History;
use crate::plan::{ActionKind, Target};

pub const NAME: &str = "players_back";

/// Whether the action breaks player connections whenever it runs.
fn breaks(fault: &Fault) -> bool {
    match fault.action {
        ActionKind::Drop => true,
        action if action.takes_out() => fault.target.parse::<Target>().is_ok_and(Target::is_node),
        _ => false,
    }
}

pub fn check(history: &History, limit: Duration) -> CheckResult {
    let limit_s = limit.as_secs_f64();
    let limit_q = Quantity::Seconds(limit_s);
    let faults = fault_table::faults(history);
    let (hits, unexplained) = fault_table::hits(history, &faults, limit_s);
    let leavers = Leavers::of(history);
    let mut worst: Option<f64> = Some(0.0);
    let (mut judged, mut players, mut left) = (0, 0, 0);
    let mut failures = Vec::new();
    for (fault, hits) in faults.iter().zip(&hits) {
        let (hits, gone) = leavers.expected_back(fault, hits);
        left += gone;
        if hits.is_empty() {
            continue;
        }
        judged += 1;
        players += hits.len();
        let back = BackSeconds::of(&hits);
        worst = match (worst, back.p100) {
            (Some(w), Some(p)) => Some(w.max(p)),
            _ => None,
        };
        match back.p100 {
            Some(p) if p <= limit_s => {}
            Some(p) => failures.push(format!(
                "{}: {} players, the last back after {}s",
                fault.label(),
                hits.len(),
                fmt_num(p)
            )),
            None => {
                let never = hits.iter().filter(|h| h.back_t.is_none()).count();
                failures.push(format!(
                    "{}: {never} of {} players never back",
                    fault.label(),
                    hits.len()
                ))
            }
        }
    }
    let mut notes = String::new();
    if left > 0 {
        notes.push_str(&format!(
            "; {left} signed off for good while away (not expected back)"
        ));
    }
    if unexplained > 0 {
        notes.push_str(&format!(
            "; {unexplained} losses outside any fault (not judged)"
        ));
    }
    if judged == 0 {
        let breaking: Vec<String> = faults
            .iter()
            .filter(|f| breaks(f))
            .map(Fault::label)
            .collect();
        return if breaking.is_empty() {
            CheckResult::not_applicable(
                NAME,
                limit_q,
                format!("no action broke a player connection{notes}"),
            )
        } else {
            CheckResult::unknown(
                NAME,
                limit_q,
                format!(
                    "no player lost its connection to {} ({} actions that break connections){notes}",
                    super::some(&breaking, 3),
                    breaking.len()
                ),
            )
        };
    }
    let detail = if failures.is_empty() {
        format!("{judged} faults broke {players} connections, every player back in time{notes}")
    } else {
        format!("{}{notes}", failures.join("; "))
    };
    CheckResult::new(
        NAME,
        limit_q,
        worst.map(Quantity::Seconds),
        Verdict::of(failures.is_empty()),
        detail,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;

    fn judge(events: Vec<At>) -> CheckResult {
        check(&events.into_iter().collect(), Duration::from_secs(5))
    }

    fn drop_at(t: f64) -> Vec<At> {
        action(t, t, ActionKind::Drop, "players")
    }

    #[test]
    fn everyone_back_in_time_passes() {
        let mut events = drop_at(10.0);
        events.extend([
            on(0.0, 1, "node-1"),
            lost(10.0, 1, "node-1"),
            on(0.0, 2, "node-1"),
            lost(10.0, 2, "node-1"),
            back(11.0, 1, "node-1"),
            back(13.5, 2, "node-1"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Seconds(3.5)));
        assert!(
            result.detail.contains("1 faults broke 2 connections"),
            "{}",
            result.detail
        );
    }

    /// Each node of a rolling is an outage of its own: node-2 went out 10 s into the
    /// rolling, and its player, back 6 s after that, is in time for a 8 s limit.
    #[test]
    fn a_rolling_counts_each_node_from_its_own_step() {
        let mut events = vec![node_up(0.0, 1), node_up(0.0, 2)];
        events.extend(action(10.0, 25.0, ActionKind::Rolling, "nodes"));
        events.extend([
            on(0.0, 1, "node-1"),
            lost(10.5, 1, "node-1"),
            node_exit(11.0, 1),
            back(13.0, 1, "node-2"),
            node_up(14.0, 1),
            on(0.0, 2, "node-2"),
            lost(20.0, 2, "node-2"),
            node_exit(20.5, 2),
            back(26.0, 2, "node-1"),
            node_up(24.0, 2),
        ]);
        let result = check(&events.into_iter().collect(), Duration::from_secs(8));
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Seconds(6.0)));
    }

    #[test]
    fn a_player_never_back_fails() {
        let mut events = drop_at(10.0);
        events.extend([
            on(0.0, 1, "node-1"),
            lost(10.0, 1, "node-1"),
            on(0.0, 2, "node-1"),
            lost(10.0, 2, "node-1"),
            back(11.0, 1, "node-1"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, None);
        assert!(
            result.detail.contains("1 of 2 players never back"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_player_back_too_late_fails() {
        let mut events = drop_at(10.0);
        events.extend([
            on(0.0, 1, "node-1"),
            lost(10.0, 1, "node-1"),
            back(18.0, 1, "node-1"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, Some(Quantity::Seconds(8.0)));
    }

    #[test]
    fn a_player_that_signed_off_for_good_while_away_is_not_expected() {
        let mut events = drop_at(10.0);
        events.extend([
            on(0.0, 1, "node-1"),
            lost(10.0, 1, "node-1"),
            on(0.0, 2, "node-1"),
            lost(10.0, 2, "node-1"),
            back(11.0, 1, "node-1"),
            sign_off(11.5, 2, true),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("1 signed off for good"),
            "{}",
            result.detail
        );
        // Signing off for a while is no excuse.
        let mut events = drop_at(10.0);
        events.extend([
            on(0.0, 2, "node-1"),
            lost(10.0, 2, "node-1"),
            sign_off(11.5, 2, false),
        ]);
        assert_eq!(judge(events).result, Verdict::Fail);
    }

    /// The self-test's last kill: the settle's sign-offs for good start while some clients
    /// have not yet noticed that the kill broke their connection.
    #[test]
    fn a_player_that_signed_off_for_good_before_it_noticed_the_loss_is_not_expected() {
        let mut events = drop_at(10.0);
        events.extend([
            on(0.0, 1, "node-1"),
            lost(10.0, 1, "node-1"),
            back(11.0, 1, "node-1"),
            sign_off(10.2, 2, true),
            on(0.0, 2, "node-1"),
            lost(10.3, 2, "node-1"),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
    }

    #[test]
    fn a_breaking_action_that_lost_nobody_is_unknown() {
        let result = judge(action(10.0, 10.0, ActionKind::Kill, "node-1"));
        assert_eq!(result.result, Verdict::Unknown);
        assert!(
            result.detail.contains("kill node-1 at 10s"),
            "{}",
            result.detail
        );
        assert_eq!(judge(drop_at(10.0)).result, Verdict::Unknown);
    }

    #[test]
    fn no_breaking_action_is_not_applicable() {
        let mut events = action(10.0, 15.0, ActionKind::Pause, "nats");
        events.extend(action(
            20.0,
            30.0,
            ActionKind::Partition,
            "node-1<->players",
        ));
        events.extend(action(40.0, 41.0, ActionKind::Kill, "postgres"));
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert_eq!(result.value, None);
        assert!(
            result.detail.starts_with("no action broke"),
            "{}",
            result.detail
        );
        assert_eq!(judge(Vec::new()).result, Verdict::Pass);
    }

    #[test]
    fn a_partition_of_the_players_that_broke_connections_is_judged() {
        let mut events = action(20.0, 30.0, ActionKind::Partition, "players<->node-1");
        events.extend([on(0.0, 1, "node-1"), lost(28.0, 1, "node-1")]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail);
        assert!(result.detail.contains("never back"), "{}", result.detail);
    }
}
