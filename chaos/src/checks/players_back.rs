//! players_back: after every fault that broke connections, the players who lost theirs must
//! all have a welcome again within the limit, counted from the fault's start (so a fault
//! that lasts, like a partition, counts its own duration).

use std::time::Duration;

use super::faults::{self, fmt_num, BackSeconds};
use super::{CheckResult, Quantity};
use crate::events::History;

pub const NAME: &str = "players_back";

pub fn check(history: &History, limit: Duration) -> CheckResult {
    let limit_s = limit.as_secs_f64();
    let faults = faults::faults(history);
    let (hits, unexplained) = faults::hits(history, &faults, limit_s);
    let mut worst: Option<f64> = Some(0.0);
    let mut judged = 0;
    let mut failures = Vec::new();
    for (fault, hits) in faults.iter().zip(&hits) {
        if hits.is_empty() {
            continue;
        }
        judged += 1;
        let back = BackSeconds::of(fault.start, hits);
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
    let stray = match unexplained {
        0 => String::new(),
        n => format!("; {n} losses outside any fault (not judged)"),
    };
    let (value, detail) = if judged == 0 {
        (None, format!("no fault broke a connection{stray}"))
    } else if failures.is_empty() {
        (
            worst.map(Quantity::Seconds),
            format!("{judged} faults broke connections, every player back in time{stray}"),
        )
    } else {
        (
            worst.map(Quantity::Seconds),
            format!("{}{stray}", failures.join("; ")),
        )
    };
    CheckResult {
        name: NAME.to_owned(),
        limit: Quantity::Seconds(limit_s),
        value,
        pass: failures.is_empty(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::plan::ActionKind;

    fn drop_at(t: f64) -> Vec<(f64, Event)> {
        vec![
            (
                t,
                Event::ActionStart {
                    action: ActionKind::Drop,
                    target: "players".into(),
                    at: t,
                },
            ),
            (
                t,
                Event::ActionEnd {
                    action: ActionKind::Drop,
                    target: "players".into(),
                    at: t,
                    error: None,
                },
            ),
        ]
    }

    fn lost(t: f64, account: u64) -> (f64, Event) {
        (
            t,
            Event::PlayerLost {
                account,
                node: "node-1".into(),
                reason: "reset".into(),
            },
        )
    }

    fn back(t: f64, account: u64) -> (f64, Event) {
        (
            t,
            Event::PlayerBack {
                account,
                node: "node-1".into(),
            },
        )
    }

    #[test]
    fn everyone_back_in_time_passes() {
        let mut events = drop_at(10.0);
        events.extend([lost(10.0, 1), lost(10.0, 2), back(11.0, 1), back(13.5, 2)]);
        let result = check(&events.into_iter().collect(), Duration::from_secs(5));
        assert!(result.pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Seconds(3.5)));
    }

    #[test]
    fn a_player_never_back_fails() {
        let mut events = drop_at(10.0);
        events.extend([lost(10.0, 1), lost(10.0, 2), back(11.0, 1)]);
        let result = check(&events.into_iter().collect(), Duration::from_secs(5));
        assert!(!result.pass);
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
        events.extend([lost(10.0, 1), back(18.0, 1)]);
        let result = check(&events.into_iter().collect(), Duration::from_secs(5));
        assert!(!result.pass);
        assert_eq!(result.value, Some(Quantity::Seconds(8.0)));
    }

    #[test]
    fn no_losses_pass_with_nothing_to_judge() {
        let result = check(&drop_at(10.0).into_iter().collect(), Duration::from_secs(5));
        assert!(result.pass);
        assert!(result.detail.starts_with("no fault broke"));
    }
}
