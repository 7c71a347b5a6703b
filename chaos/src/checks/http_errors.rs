//! http_error_ratio: failed calls over all calls, counted in the load's per-second ticks,
//! per node: a second's calls to a node count unless a fault on that node's call path held
//! then (from its start until `grace` after its end). A call's path is players → its node →
//! PostgreSQL, and its node → NATS: `kill node-1` excuses no call to node-2, `partition
//! [node-1, nats]` none to node-2, a PostgreSQL fault every node's. `start` is on no path.
//! Ticks recorded before calls carried their node are judged whole, outside every fault.

use super::fault_table::{self, Fault};
use super::paths::Hop;
use super::{CheckResult, Quantity, Verdict};
use crate::events::{Event, History, Tick};

pub const NAME: &str = "http_error_ratio";

/// Whether `fault` lies on the way of a call to `node`.
fn on_call_path(fault: &Fault, node: &str) -> bool {
    fault.on_path(&[Hop::Players, Hop::Node(node), Hop::Postgres])
        || fault.on_path(&[Hop::Node(node), Hop::Nats])
}

/// What one tick adds: (calls, errors) counted, and the nodes of it excused.
fn judged(tick: &Tick, t: f64, faults: &[Fault], grace: f64) -> ((u64, u64), u64) {
    // A tick at `t` counts the second (t-1, t].
    let held = |f: &&Fault| t > f.start && t - 1.0 <= f.window_end(grace);
    let by_node: u64 = tick.nodes.values().map(|n| n.http_calls).sum();
    if by_node < tick.http_calls {
        // An older recording: the second is judged whole, outside every fault.
        return if faults.iter().any(|f| held(&f)) {
            ((0, 0), 1)
        } else {
            ((tick.http_calls, tick.http_errors), 0)
        };
    }
    let (mut counted, mut excused) = ((0, 0), 0);
    for (name, node) in &tick.nodes {
        if faults.iter().filter(held).any(|f| on_call_path(f, name)) {
            excused += u64::from(node.http_calls > 0);
        } else {
            counted.0 += node.http_calls;
            counted.1 += node.http_errors;
        }
    }
    (counted, excused)
}

pub fn check(history: &History, limit: f64, grace: f64) -> CheckResult {
    let faults = fault_table::faults(history);
    let limit_q = Quantity::Ratio(limit);
    let (mut calls, mut errors, mut ticks, mut excused) = (0u64, 0u64, 0u64, 0u64);
    for (t, event) in history.iter() {
        let Event::LoadTick(tick) = event else {
            continue;
        };
        ticks += 1;
        let ((c, e), x) = judged(tick, t, &faults, grace);
        calls += c;
        errors += e;
        excused += x;
    }
    if ticks == 0 {
        return CheckResult::unknown(NAME, limit_q, "no load ticks recorded");
    }
    let ratio = if calls == 0 {
        0.0
    } else {
        errors as f64 / calls as f64
    };
    CheckResult::new(
        NAME,
        limit_q,
        Some(Quantity::Ratio(ratio)),
        Verdict::of(ratio <= limit),
        format!(
            "{errors} errors of {calls} calls judged in {ticks} seconds; {excused} node-seconds \
             with a fault on their call path not judged"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Tick;
    use crate::plan::ActionKind;

    fn tick(t: f64, calls: u64, errors: u64) -> (f64, Event) {
        (
            t,
            Event::LoadTick(Tick {
                http_calls: calls,
                http_errors: errors,
                ..Tick::default()
            }),
        )
    }

    fn kill(t: f64) -> Vec<(f64, Event)> {
        let (action, target) = (ActionKind::Kill, "node-1".to_owned());
        vec![
            (
                t,
                Event::ActionStart {
                    action,
                    target: target.clone(),
                    at: t,
                    via: None,
                    to: None,
                    toxic: None,
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

    #[test]
    fn errors_inside_fault_windows_do_not_count() {
        let mut events = kill(10.0);
        events.extend([
            tick(9.0, 1000, 0),
            tick(11.0, 1000, 900),
            tick(14.0, 1000, 1),
            tick(30.0, 1000, 0),
        ]);
        let result = check(&events.into_iter().collect(), 0.001, 5.0);
        assert!(result.pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Ratio(0.0)));
    }

    /// A lasting fault (here a full disk) excuses errors while it holds and the grace after,
    /// not later.
    #[test]
    fn a_full_disk_excuses_errors_only_while_it_holds() {
        let mut events =
            crate::checks::testing::action(10.0, 18.0, ActionKind::DiskFull, "postgres");
        events.extend([
            tick(9.0, 1000, 0),
            tick(12.0, 1000, 700),
            tick(30.0, 1000, 0),
        ]);
        let history: History = events.clone().into_iter().collect();
        assert!(check(&history, 0.001, 5.0).pass);
        events.push(tick(25.0, 1000, 50));
        let result = check(&events.into_iter().collect(), 0.001, 5.0);
        assert!(!result.pass, "{result:?}");
    }

    /// A tick whose calls went to `node-1` and `node-2`: (calls, errors) each.
    fn node_tick(t: f64, one: (u64, u64), two: (u64, u64)) -> (f64, Event) {
        let node = |(http_calls, http_errors)| crate::events::NodeTick {
            http_calls,
            http_errors,
            ..crate::events::NodeTick::default()
        };
        let nodes = [
            ("node-1".to_owned(), node(one)),
            ("node-2".to_owned(), node(two)),
        ];
        (
            t,
            Event::LoadTick(Tick {
                http_calls: one.0 + two.0,
                http_errors: one.1 + two.1,
                nodes: nodes.into_iter().collect(),
                ..Tick::default()
            }),
        )
    }

    #[test]
    fn a_fault_excuses_only_the_calls_on_its_path() {
        let judge = |events: Vec<(f64, Event)>| check(&events.into_iter().collect(), 0.001, 5.0);
        // node-1 killed: its calls fail and are excused; node-2's are judged.
        let mut killed = kill(10.0);
        killed.push(node_tick(11.0, (500, 400), (500, 0)));
        let result = judge(killed.clone());
        assert!(result.pass, "{result:?}");
        assert!(result.detail.contains("of 500 calls"), "{}", result.detail);
        killed.push(node_tick(12.0, (0, 0), (500, 20)));
        assert!(!judge(killed).pass);
        // A partition of node-1 from NATS is on no call to node-2; PostgreSQL is on every one.
        let mut cut =
            crate::checks::testing::action(10.0, 20.0, ActionKind::Partition, "node-1<->nats");
        cut.push(node_tick(12.0, (500, 100), (500, 100)));
        assert!(!judge(cut).pass);
        let mut store = crate::checks::testing::action(10.0, 20.0, ActionKind::Pause, "postgres");
        store.push(node_tick(12.0, (500, 100), (500, 100)));
        assert!(judge(store).pass);
        // `start` heals: it excuses nothing.
        let mut started = crate::checks::testing::action(10.0, 10.5, ActionKind::Start, "node-1");
        started.push(node_tick(11.0, (500, 100), (500, 0)));
        assert!(!judge(started).pass);
    }

    #[test]
    fn errors_outside_fail_over_the_limit() {
        let events = [tick(1.0, 1000, 0), tick(2.0, 1000, 5)];
        let result = check(&events.into_iter().collect(), 0.001, 5.0);
        assert!(!result.pass);
        assert_eq!(result.value, Some(Quantity::Ratio(0.0025)));
    }

    #[test]
    fn no_ticks_is_unknown() {
        assert_eq!(
            check(&History::default(), 0.001, 5.0).result,
            Verdict::Unknown
        );
    }
}
