//! http_error_ratio: failed calls over all calls, counted in the load's per-second ticks that
//! lie outside every fault window (a fault's start until `grace` after its end).

use super::faults;
use super::{CheckResult, Quantity, Verdict};
use crate::events::{Event, History};

pub const NAME: &str = "http_error_ratio";

pub fn check(history: &History, limit: f64, grace: f64) -> CheckResult {
    let windows: Vec<(f64, f64)> = faults::faults(history)
        .iter()
        .map(|f| (f.start, f.window_end(grace)))
        .collect();
    let limit_q = Quantity::Ratio(limit);
    let (mut calls, mut errors, mut ticks, mut outside) = (0u64, 0u64, 0, 0);
    for (t, event) in history.iter() {
        let Event::LoadTick(tick) = event else {
            continue;
        };
        ticks += 1;
        // A tick at `t` counts the second (t-1, t].
        if windows
            .iter()
            .any(|&(from, until)| t > from && t - 1.0 <= until)
        {
            continue;
        }
        outside += 1;
        calls += tick.http_calls;
        errors += tick.http_errors;
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
            "{errors} errors of {calls} calls in {outside} of {ticks} seconds outside fault windows"
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
