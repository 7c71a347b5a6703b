//! latency.<op>: the plan's latency gates (chaos-plan v1.2, "Latency gates and abort"). Each
//! budget holds a quantile of what the load timed for the operation: the history's calls (and
//! `e2e_login`, timed as one step), or for `presence_delivery` each activity change's delivery
//! as its friends received it. `during` picks the samples by whether a timeline action
//! overlapped them (from when the call went out, or the change was made, to its answer).

use super::faults::{faults, fmt_num, Fault};
use super::{CheckResult, Quantity, Verdict};
use crate::events::{History, Op, PlayerFact, Received};
use crate::plan::{During, LatencyGate, Quantile};

/// The check's name for `op`: `latency.e2e_login`.
pub fn name(op: Op) -> String {
    format!("latency.{}", op.name())
}

pub fn check(history: &History, gate: &LatencyGate) -> CheckResult {
    let name = name(gate.op);
    let faults = faults(history);
    let (mut judged, mut others) = (Vec::new(), 0u64);
    for (t, ms) in samples(history, gate.op) {
        let faulted = overlapped(&faults, t - ms / 1000.0, t);
        let keep = match gate.during {
            During::All => true,
            During::OutsideFaults => !faulted,
            During::Faults => faulted,
        };
        if keep {
            judged.push(ms);
        } else {
            others += 1;
        }
    }
    let (first, budget) = gate.budgets[0];
    let limit = Quantity::Seconds(budget.as_secs_f64());
    if judged.is_empty() {
        return CheckResult::unknown(
            &name,
            limit,
            format!(
                "no {} timed{} ({others} others)",
                gate.op.name(),
                scope(gate.during),
            ),
        );
    }
    judged.sort_by(f64::total_cmp);
    // Every budget measured; the check's value is the one furthest over (or nearest) its budget.
    let measured: Vec<(Quantile, f64, f64)> = gate
        .budgets
        .iter()
        .map(|&(q, budget)| (q, quantile(&judged, q), budget.as_secs_f64() * 1000.0))
        .collect();
    let (_, worst_ms, worst_budget) = measured
        .iter()
        .copied()
        .max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2)))
        .unwrap_or((first, 0.0, 0.0));
    let over: Vec<String> = measured
        .iter()
        .filter(|(_, ms, budget)| ms > budget)
        .map(|(q, ms, budget)| {
            format!(
                "{} {} ms over {} ms",
                q.name(),
                ms_text(*ms),
                ms_text(*budget)
            )
        })
        .collect();
    let within: Vec<String> = measured
        .iter()
        .filter(|(_, ms, budget)| ms <= budget)
        .map(|(q, ms, budget)| {
            format!(
                "{} {} ms within {} ms",
                q.name(),
                ms_text(*ms),
                ms_text(*budget)
            )
        })
        .collect();
    let detail = format!(
        "{} {} timed{}{}: {}",
        judged.len(),
        gate.op.name(),
        scope(gate.during),
        match (gate.during, others) {
            (During::All, _) | (_, 0) => String::new(),
            (_, n) => format!(" ({n} others not judged)"),
        },
        over.iter()
            .chain(&within)
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
    );
    CheckResult::new(
        name,
        Quantity::Seconds(worst_budget / 1000.0),
        Some(Quantity::Seconds(worst_ms / 1000.0)),
        Verdict::of(over.is_empty()),
        detail,
    )
}

/// `(t, latency in ms)` of every sample of `op`, `t` when it was answered (or received).
fn samples(history: &History, op: Op) -> Vec<(f64, f64)> {
    match op {
        Op::PresenceDelivery => history
            .facts()
            .filter_map(|(t, _, fact)| match fact {
                PlayerFact::Received {
                    event:
                        Received {
                            delivery: Some(delivery),
                            ..
                        },
                    ..
                } => Some((t, delivery.as_secs_f64() * 1000.0)),
                _ => None,
            })
            .collect(),
        op => history
            .calls()
            .filter(|&(_, called, _)| called == op)
            .map(|(t, _, ms)| (t, ms))
            .collect(),
    }
}

/// Whether an action's window (with its aftermath) met `[from, to]`.
fn overlapped(faults: &[Fault], from: f64, to: f64) -> bool {
    faults
        .iter()
        .any(|f| f.start <= to && from <= f.end + f.aftermath())
}

/// The nearest-rank quantile of `sorted` (not empty): the smallest sample with at least that
/// share of the samples at or below it.
fn quantile(sorted: &[f64], q: Quantile) -> f64 {
    let rank = (q.fraction() * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn scope(during: During) -> &'static str {
    match during {
        During::All => "",
        During::OutsideFaults => " outside faults",
        During::Faults => " during faults",
    }
}

fn ms_text(ms: f64) -> String {
    fmt_num((ms * 10.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::checks::testing::{action, presence, received_mut, welcome, At};
    use crate::events::{Event, Status};
    use crate::plan::ActionKind;

    fn history(events: Vec<At>) -> History {
        events.into_iter().collect()
    }

    fn call(t: f64, op: Op, ms: f64) -> At {
        (
            t,
            Event::Call {
                player: 0,
                op,
                status: Status::Http(200),
                latency_ms: ms,
            },
        )
    }

    fn gate(op: Op, budgets: &[(Quantile, u64)], during: During) -> LatencyGate {
        LatencyGate {
            op,
            budgets: budgets
                .iter()
                .map(|&(q, ms)| (q, Duration::from_millis(ms)))
                .collect(),
            during,
        }
    }

    /// 100 friends lists: 1 ms … 100 ms, one a second.
    fn hundred() -> Vec<At> {
        (1..=100)
            .map(|i| call(i as f64, Op::FriendsList, i as f64))
            .collect()
    }

    #[test]
    fn a_budget_below_what_was_measured_fails_and_one_above_passes() {
        let judge = |budgets: &[(Quantile, u64)]| {
            check(
                &history(hundred()),
                &gate(Op::FriendsList, budgets, During::All),
            )
        };
        let result = judge(&[(Quantile::P99, 98)]);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert_eq!(result.name, "latency.friends_list");
        assert_eq!(result.value, Some(Quantity::Seconds(0.099)));
        assert!(
            result.detail.contains("p99 99 ms over 98 ms"),
            "{}",
            result.detail
        );
        let result = judge(&[(Quantile::P99, 99), (Quantile::P50, 50)]);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        // One budget over is enough to fail, whichever it is.
        let result = judge(&[(Quantile::P50, 49), (Quantile::Max, 1000)]);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert_eq!(result.value, Some(Quantity::Seconds(0.05)));
        assert_eq!(judge(&[(Quantile::Max, 100)]).result, Verdict::Pass);
        assert_eq!(judge(&[(Quantile::Max, 99)]).result, Verdict::Fail);
    }

    #[test]
    fn only_the_op_named_is_judged() {
        let mut events = hundred();
        events.push(call(101.0, Op::Cards, 5000.0));
        let result = check(
            &history(events),
            &gate(Op::FriendsList, &[(Quantile::Max, 100)], During::All),
        );
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        let cards = check(
            &history(hundred()),
            &gate(Op::Cards, &[(Quantile::Max, 100)], During::All),
        );
        assert_eq!(cards.result, Verdict::Unknown, "{}", cards.detail);
    }

    #[test]
    fn during_picks_the_samples_a_fault_overlapped_or_not() {
        // Slow while node-1 was paused (40–60 s), quick otherwise.
        let mut events: Vec<At> = (1..=100)
            .map(|i| {
                let t = i as f64;
                let ms = if (40.0..=60.0).contains(&t) {
                    900.0
                } else {
                    10.0
                };
                call(t, Op::E2eLogin, ms)
            })
            .collect();
        events.extend(action(40.0, 60.0, ActionKind::Pause, "node-1"));
        let judge = |during| {
            check(
                &history(events.clone()),
                &gate(Op::E2eLogin, &[(Quantile::P99, 100)], during),
            )
        };
        let outside = judge(During::OutsideFaults);
        assert_eq!(outside.result, Verdict::Pass, "{}", outside.detail);
        assert!(
            outside.detail.contains("others not judged"),
            "{}",
            outside.detail
        );
        assert_eq!(judge(During::Faults).result, Verdict::Fail);
        assert_eq!(judge(During::All).result, Verdict::Fail);
        // A call answered after the fault ended but sent before its end was overlapped.
        let late = vec![call(61.0, Op::E2eLogin, 2000.0)];
        let mut with_fault = late.clone();
        with_fault.extend(action(40.0, 60.0, ActionKind::Pause, "node-1"));
        let result = check(
            &history(with_fault),
            &gate(Op::E2eLogin, &[(Quantile::Max, 100)], During::OutsideFaults),
        );
        assert_eq!(result.result, Verdict::Unknown, "{}", result.detail);
    }

    #[test]
    fn presence_delivery_is_judged_from_what_friends_received() {
        let mut events = vec![welcome(0.5, 1, 1, "node-1")];
        for i in 1..=10u64 {
            let mut delivered = presence(i as f64, 1, 1, i, 2, i);
            received_mut(&mut delivered).delivery = Some(Duration::from_millis(i * 10));
            events.push(delivered);
        }
        let judge = |ms| {
            check(
                &history(events.clone()),
                &gate(Op::PresenceDelivery, &[(Quantile::Max, ms)], During::All),
            )
            .result
        };
        assert_eq!(judge(100), Verdict::Pass);
        assert_eq!(judge(99), Verdict::Fail);
    }
}
