//! abort: the plan's `abort` never gave the run up (chaos-plan v1.2, "Latency gates and
//! abort"). Judged only when the plan has one; the moment and the reason are the supervisor's
//! record in the history, so a run judged again says the same.

use super::fault_table::fmt_num;
use super::{CheckResult, Quantity, Verdict};
use crate::events::History;
use crate::plan::Abort;
use anyplay_cloud::duration;

pub const NAME: &str = "abort";

pub fn check(history: &History, abort: &Abort) -> CheckResult {
    let (value, verdict, detail) = match history.aborted() {
        Some((t, reason)) => (
            1,
            Verdict::Fail,
            format!("given up at {}s: {reason}", fmt_num(t)),
        ),
        None => (
            0,
            Verdict::Pass,
            format!(
                "not given up: {} did not hold for {}",
                conditions(abort),
                duration::format(abort.hold)
            ),
        ),
    };
    CheckResult::new(
        NAME,
        Quantity::Count(0),
        Some(Quantity::Count(value)),
        verdict,
        detail,
    )
}

fn conditions(abort: &Abort) -> String {
    let mut said = Vec::new();
    if let Some(ratio) = abort.http_error_ratio {
        said.push(format!("an error ratio above {ratio}"));
    }
    if let Some(below) = abort.players_online_below {
        said.push(format!(
            "fewer than {:.0} % of the players online",
            below * 100.0
        ));
    }
    said.join(" or ")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::events::Event;

    const ABORT: Abort = Abort {
        http_error_ratio: Some(0.2),
        players_online_below: Some(0.5),
        hold: Duration::from_secs(10),
    };

    #[test]
    fn a_run_given_up_fails_with_its_reason_and_one_not_passes() {
        let given_up: History = vec![(
            42.0,
            Event::Aborted {
                reason: "3 of 100 players online (3 %, below 50 %) for 10s".into(),
            },
        )]
        .into_iter()
        .collect();
        let result = check(&given_up, &ABORT);
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("at 42s: 3 of 100"),
            "{}",
            result.detail
        );
        let result = check(&History::default(), &ABORT);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("above 0.2 or fewer than 50 %"),
            "{}",
            result.detail
        );
    }
}
