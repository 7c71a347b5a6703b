//! latency.<op>: the plan's latency gates (chaos-plan v1.2, "Latency gates and abort"). Each
//! budget holds a quantile of what the load timed for the operation: the history's calls (and
//! `e2e_login`, timed as one step), or for `presence_delivery` each activity change's delivery
//! as its friends received it. `during` picks the samples by whether a timeline action
//! overlapped them (from when the call went out, or the change was made, to its answer).
//! A connection read slowly on purpose (a slow reader's spell) is late by its client's
//! choice: what it received is not the cloud's latency, and is left out.

use std::collections::HashMap;

use super::fault_table::{faults, fmt_num, Fault};
use super::slow_consumers::spells;
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
    let Samples { timed, slow_read } = samples(history, gate.op);
    for (t, ms) in timed {
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
        "{} {} timed{}{}{}: {}",
        judged.len(),
        gate.op.name(),
        scope(gate.during),
        match (gate.during, others) {
            (During::All, _) | (_, 0) => String::new(),
            (_, n) => format!(" ({n} others not judged)"),
        },
        match slow_read {
            0 => String::new(),
            n => format!(" ({n} to slow readers not judged)"),
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

/// What the load timed of one operation.
struct Samples {
    /// `(t, latency in ms)`, `t` when it was answered (or received).
    timed: Vec<(f64, f64)>,
    /// Deliveries left out: to connections read slowly on purpose.
    slow_read: u64,
}

fn samples(history: &History, op: Op) -> Samples {
    if op != Op::PresenceDelivery {
        let timed = history
            .calls()
            .filter(|&(_, called, _)| called == op)
            .map(|(t, _, ms)| (t, ms))
            .collect();
        return Samples {
            timed,
            slow_read: 0,
        };
    }
    let slow = slow_read(history);
    let mut samples = Samples {
        timed: Vec::new(),
        slow_read: 0,
    };
    for (t, account, fact) in history.facts() {
        let PlayerFact::Received {
            conn,
            event:
                Received {
                    delivery: Some(delivery),
                    ..
                },
        } = fact
        else {
            continue;
        };
        if slow.get(&(account, *conn)).is_some_and(|&from| t >= from) {
            samples.slow_read += 1;
        } else {
            samples.timed.push((t, delivery.as_secs_f64() * 1000.0));
        }
    }
    samples
}

/// The connections (account, conn) read slowly on purpose, with when that began: those that
/// received anything during their account's slow-reading spell. What they received from
/// the spell's start on is late by choice, the backlog read after the spell too.
fn slow_read(history: &History) -> HashMap<(u64, u64), f64> {
    let spells = spells(history);
    let mut slow = HashMap::new();
    if spells.is_empty() {
        return slow;
    }
    for (t, account, fact) in history.facts() {
        let PlayerFact::Received { conn, .. } = fact else {
            continue;
        };
        let spell = spells
            .iter()
            .find(|s| s.account == account && s.from <= t && t <= s.until);
        if let Some(spell) = spell {
            let from = slow.entry((account, *conn)).or_insert(spell.from);
            *from = spell.from.min(*from);
        }
    }
    slow
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
    use crate::checks::testing::{action, presence, received_mut, slow_reading, welcome, At};
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

    #[test]
    fn what_a_slow_reader_received_is_its_own_choice_not_the_cloud_s_latency() {
        let delivered = |t: f64, conn: u64, seq: u64, ms: u64| {
            let mut event = presence(t, 1, conn, seq, 2, seq);
            received_mut(&mut event).delivery = Some(Duration::from_millis(ms));
            event
        };
        // Connection 1 read slowly from 10 s to 20 s: its backlog comes 9 s late, even after
        // the spell. Connection 2, the next one, is read at once again.
        let mut events = vec![welcome(0.5, 1, 1, "node-1")];
        events.push(delivered(5.0, 1, 1, 20));
        events.push(delivered(15.0, 1, 2, 9000));
        events.push(delivered(21.0, 1, 3, 9000));
        events.push(slow_reading(10.0, 20.0));
        events.push(welcome(22.0, 1, 2, "node-1"));
        events.push(delivered(23.0, 2, 1, 30));
        let gate = gate(Op::PresenceDelivery, &[(Quantile::Max, 100)], During::All);
        let result = check(&history(events.clone()), &gate);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("2 to slow readers not judged"),
            "{}",
            result.detail
        );
        // The same lateness on a connection without a spell fails.
        events.retain(|(_, e)| {
            !matches!(
                e,
                Event::Player {
                    fact: PlayerFact::SlowReading { .. },
                    ..
                }
            )
        });
        assert_eq!(check(&history(events), &gate).result, Verdict::Fail);
    }
}
