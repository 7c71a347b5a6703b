//! rate_limits: the cloud's per-address limits hold, and only they refuse.
//!
//! - Every burst past a limit (`load.rate_limits`), from an address no player uses, is
//!   answered as the limit says: every 429 carries a `Retry-After` in whole seconds; no more
//!   calls pass than the limit (calls per minute, sign-in emails per 15 minutes); and when every
//!   call was answered, exactly the limit passed. A calls burst that crossed a wall-clock
//!   minute may have met two of the cloud's windows: from the limit to twice it may pass. A
//!   burst while a `clock` fault skewed a node's clock (its windows follow that clock) is
//!   judged on its `Retry-After`s alone.
//! - No call of the players, who stay far within the limits, is refused 429.

use super::fault_table::{self, Fault};
use super::{some, CheckResult, Quantity};
use crate::events::{BurstAnswers, Event, History, PlayerFact, RateLimit, RateLimits};
use crate::plan::ActionKind;

pub const NAME: &str = "rate_limits";

/// What one burst was held to, and what it broke.
fn judge_burst(
    limit: RateLimit,
    limits: RateLimits,
    wall_ms: (u64, u64),
    answers: &BurstAnswers,
    skewed: bool,
) -> Vec<String> {
    let mut wrong = Vec::new();
    if answers.no_retry_after > 0 {
        wrong.push(format!(
            "{} 429s without Retry-After",
            answers.no_retry_after
        ));
    }
    if skewed {
        return wrong;
    }
    let (allowed, what) = match limit {
        RateLimit::Calls => (limits.calls_per_minute, "calls"),
        RateLimit::AuthEmail => (limits.auth_email_per_15m, "sign-in emails"),
    };
    // A calls burst meets one window per wall-clock minute it spans (a slow one, several).
    let windows = match limit {
        RateLimit::Calls => (wall_ms.1 / 60_000).saturating_sub(wall_ms.0 / 60_000) as u32 + 1,
        RateLimit::AuthEmail => 1,
    };
    let most = allowed * windows;
    if answers.ok > most {
        wrong.push(format!(
            "{} of {} {what} passed a limit of {allowed}{}",
            answers.ok,
            answers.calls,
            if windows > 1 {
                format!(" a window, over {windows} windows")
            } else {
                String::new()
            }
        ));
    } else if answers.failed == 0 && answers.calls >= allowed && answers.ok < allowed {
        wrong.push(format!(
            "only {} of {} {what} passed a limit of {allowed}",
            answers.ok, answers.calls
        ));
    }
    wrong
}

/// Whether a `clock` fault held during `[from, to]`.
fn clock_skewed(faults: &[Fault], from: f64, to: f64) -> bool {
    faults
        .iter()
        .any(|f| f.action == ActionKind::Clock && f.start <= to && f.end >= from)
}

pub fn check(history: &History, limit: u64) -> CheckResult {
    let limit_q = Quantity::Count(limit);
    let faults = fault_table::faults(history);
    let limits = history.rate_limits();
    let (mut ticks, mut player_calls, mut refused) = (0u64, 0u64, 0u64);
    let (mut bursts, mut calls_bursts, mut skewed_bursts) = (0u64, 0u64, 0u64);
    let (mut passed, mut limited, mut sent) = (0u64, 0u64, 0u64);
    let mut wrong = Vec::new();
    for (t, event) in history.iter() {
        match event {
            Event::LoadTick(tick) => {
                ticks += 1;
                player_calls += tick.http_calls;
                refused += tick.limited;
            }
            Event::Player {
                fact:
                    PlayerFact::LimitBurst {
                        limit: kind,
                        sent: from,
                        wall_ms,
                        answers,
                        source,
                    },
                ..
            } => {
                let Some(limits) = limits else {
                    wrong.push(format!("a burst from {source} in a run without limits"));
                    continue;
                };
                bursts += 1;
                calls_bursts += u64::from(*kind == RateLimit::Calls);
                let skewed = clock_skewed(&faults, *from, t);
                skewed_bursts += u64::from(skewed);
                passed += u64::from(answers.ok);
                limited += u64::from(answers.limited + answers.no_retry_after);
                sent += u64::from(answers.calls);
                wrong.extend(
                    judge_burst(*kind, limits, *wall_ms, answers, skewed)
                        .into_iter()
                        .map(|w| format!("burst from {source} at {from:.1}s: {w}")),
                );
            }
            _ => {}
        }
    }
    if refused > 0 {
        wrong.push(format!(
            "{refused} calls of players within their limits refused 429"
        ));
    }
    let players = format!("{refused} of {player_calls} player calls refused 429");
    let detail = match limits {
        None => format!("limits off, no bursts; {players}"),
        Some(limits) => format!(
            "{bursts} bursts judged ({calls_bursts} past {} calls a minute, {} past {} sign-in \
             emails in 15 min; {skewed_bursts} under a clock fault judged on Retry-After \
             alone): {passed} of {sent} calls passed, {limited} refused 429; {players}",
            limits.calls_per_minute,
            bursts - calls_bursts,
            limits.auth_email_per_15m
        ),
    };
    if ticks == 0 || (limits.is_some() && bursts == 0) {
        return CheckResult::unknown(NAME, limit_q, format!("nothing to judge: {detail}"));
    }
    let count = wrong.len() as u64;
    let detail = if wrong.is_empty() {
        detail
    } else {
        format!("{detail}; {count} wrong ({})", some(&wrong, 3))
    };
    CheckResult::count(NAME, limit, count, detail)
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::checks::testing::action;
    use crate::checks::Verdict;
    use crate::events::Tick;

    const LIMITS: RateLimits = RateLimits {
        calls_per_minute: 300,
        auth_email_per_15m: 10,
    };
    /// 12:00:05 and 12:00:09 of a day, in ms since the epoch: one wall-clock minute.
    const IN_A_MINUTE: (u64, u64) = (1_700_000_405_000, 1_700_000_409_000);
    /// 12:00:58 to 12:01:02: over a minute's edge.
    const OVER_AN_EDGE: (u64, u64) = (1_700_000_458_000, 1_700_000_462_000);

    fn tick(t: f64, calls: u64, limited: u64) -> (f64, Event) {
        (
            t,
            Event::LoadTick(Tick {
                http_calls: calls,
                limited,
                ..Tick::default()
            }),
        )
    }

    fn burst(t: f64, limit: RateLimit, wall_ms: (u64, u64), answers: BurstAnswers) -> (f64, Event) {
        crate::checks::testing::player(
            t,
            1,
            PlayerFact::LimitBurst {
                limit,
                source: IpAddr::V4(Ipv4Addr::new(127, 128, 0, 1)),
                sent: t - 2.0,
                wall_ms,
                answers,
            },
        )
    }

    fn answers(ok: u32, limited: u32, no_retry_after: u32, failed: u32) -> BurstAnswers {
        BurstAnswers {
            calls: ok + limited + no_retry_after + failed,
            ok,
            limited,
            no_retry_after,
            failed,
        }
    }

    fn judge(mut events: Vec<(f64, Event)>) -> CheckResult {
        events.insert(0, (0.0, Event::RateLimits(LIMITS)));
        events.push(tick(30.0, 500, 0));
        check(&events.into_iter().collect(), 0)
    }

    /// One burst at 5 s, judged.
    fn one(limit: RateLimit, wall_ms: (u64, u64), answers: BurstAnswers) -> CheckResult {
        judge(vec![burst(5.0, limit, wall_ms, answers)])
    }

    #[test]
    fn bursts_refused_past_their_limits_with_retry_after_pass() {
        let result = judge(vec![
            burst(5.0, RateLimit::Calls, IN_A_MINUTE, answers(300, 20, 0, 0)),
            burst(
                20.0,
                RateLimit::AuthEmail,
                IN_A_MINUTE,
                answers(10, 4, 0, 0),
            ),
            // Over a minute's edge, two windows: up to twice the limit.
            burst(25.0, RateLimit::Calls, OVER_AN_EDGE, answers(320, 0, 0, 0)),
            // Calls that got no answer may or may not have counted.
            burst(28.0, RateLimit::Calls, IN_A_MINUTE, answers(250, 20, 0, 50)),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.starts_with("4 bursts judged"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_limit_that_lets_too_many_by_fails() {
        let result = one(RateLimit::Calls, IN_A_MINUTE, answers(320, 0, 0, 0));
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("320 of 320 calls passed"),
            "{}",
            result.detail
        );
        let twice = one(RateLimit::Calls, OVER_AN_EDGE, answers(620, 0, 0, 0));
        assert_eq!(twice.result, Verdict::Fail, "{}", twice.detail);
        // A slow burst over three minutes may meet three windows.
        let slow = (OVER_AN_EDGE.0, OVER_AN_EDGE.1 + 60_000);
        assert_eq!(
            one(RateLimit::Calls, slow, answers(620, 0, 0, 0)).result,
            Verdict::Pass
        );
        let emails = one(RateLimit::AuthEmail, IN_A_MINUTE, answers(14, 0, 0, 0));
        assert_eq!(emails.result, Verdict::Fail, "{}", emails.detail);
    }

    #[test]
    fn a_limit_that_refuses_too_early_fails_when_every_call_was_answered() {
        let early = one(RateLimit::Calls, IN_A_MINUTE, answers(150, 170, 0, 0));
        assert_eq!(early.result, Verdict::Fail);
        assert!(early.detail.contains("only 150 of 320"), "{}", early.detail);
        let lost = one(RateLimit::Calls, IN_A_MINUTE, answers(150, 160, 0, 10));
        assert_eq!(lost.result, Verdict::Pass, "{}", lost.detail);
    }

    #[test]
    fn a_429_without_retry_after_fails_even_under_a_clock_fault() {
        let result = one(RateLimit::Calls, IN_A_MINUTE, answers(300, 19, 1, 0));
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("1 429s without Retry-After"),
            "{}",
            result.detail
        );

        let mut skewed = action(1.0, 10.0, ActionKind::Clock, "node-1");
        skewed.push(burst(
            5.0,
            RateLimit::Calls,
            IN_A_MINUTE,
            answers(600, 0, 0, 0),
        ));
        assert_eq!(judge(skewed.clone()).result, Verdict::Pass);
        skewed.push(burst(
            8.0,
            RateLimit::Calls,
            IN_A_MINUTE,
            answers(300, 0, 1, 0),
        ));
        assert_eq!(judge(skewed).result, Verdict::Fail);
    }

    #[test]
    fn a_player_refused_429_fails_with_limits_on_or_off() {
        let on = judge(vec![
            burst(5.0, RateLimit::Calls, IN_A_MINUTE, answers(300, 20, 0, 0)),
            tick(6.0, 40, 1),
        ]);
        assert_eq!(on.result, Verdict::Fail);
        assert!(on.detail.contains("1 calls of players"), "{}", on.detail);
        let off: History = vec![tick(1.0, 40, 0), tick(2.0, 40, 2)]
            .into_iter()
            .collect();
        let off = check(&off, 0);
        assert_eq!(off.result, Verdict::Fail, "{}", off.detail);
        let clean: History = vec![tick(1.0, 40, 0)].into_iter().collect();
        let clean = check(&clean, 0);
        assert_eq!(clean.result, Verdict::Pass);
        assert!(clean.detail.starts_with("limits off"), "{}", clean.detail);
    }

    #[test]
    fn limits_on_without_a_burst_or_a_run_without_ticks_is_unknown() {
        let no_bursts: History = vec![(0.0, Event::RateLimits(LIMITS)), tick(1.0, 40, 0)]
            .into_iter()
            .collect();
        assert_eq!(check(&no_bursts, 0).result, Verdict::Unknown);
        assert_eq!(check(&History::default(), 0).result, Verdict::Unknown);
    }
}
