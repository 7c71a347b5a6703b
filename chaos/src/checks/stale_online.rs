//! stale_online: after the settle, what each friend list says of a friend's online state
//! must match whether that friend holds a connection. The final reads name the accounts that
//! held a connection all through them (`connected`) and those that held none (`offline`); a
//! friend in neither changed meanwhile and is not judged.

use std::collections::HashSet;

use super::{some, CheckResult, Quantity};
use crate::events::{Event, History};

pub const NAME: &str = "stale_online";

pub fn check(history: &History, limit: u64) -> CheckResult {
    let limit_q = Quantity::Count(limit);
    let Some((friends, connected, offline)) = history.iter().find_map(|(_, e)| match e {
        Event::FinalState {
            friends,
            connected,
            offline,
            ..
        } => Some((friends, connected, offline)),
        _ => None,
    }) else {
        return CheckResult::unknown(NAME, limit_q, "no final reads recorded");
    };
    let connected: HashSet<u64> = connected.iter().copied().collect();
    let offline: HashSet<u64> = offline.iter().copied().collect();
    let (mut online_judged, mut offline_judged) = (0u64, 0u64);
    let mut stale = Vec::new();
    for list in friends {
        let shown: HashSet<u64> = list.online.iter().copied().collect();
        for &friend in &list.friends {
            let truth = if connected.contains(&friend) {
                online_judged += 1;
                true
            } else if offline.contains(&friend) {
                offline_judged += 1;
                false
            } else {
                continue;
            };
            let says = shown.contains(&friend);
            if says != truth {
                let how = if says { "online" } else { "offline" };
                stale.push(format!("{} sees {friend} {how}", list.account));
            }
        }
    }
    let judged = online_judged + offline_judged;
    let mut detail = format!(
        "{judged} pairs judged ({online_judged} with the friend online, {offline_judged} offline)"
    );
    if judged == 0 {
        return CheckResult::unknown(NAME, limit_q, detail);
    }
    if !stale.is_empty() {
        detail.push_str(&format!("; {} stale ({})", stale.len(), some(&stale, 3)));
    }
    CheckResult::count(NAME, limit, stale.len() as u64, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;

    fn judge(last: Final) -> CheckResult {
        check(&vec![last.at(100.0)].into_iter().collect(), 0)
    }

    #[test]
    fn lists_that_match_the_connections_pass() {
        let result = judge(
            Final::default()
                .list(1, &[2, 3, 4], &[2])
                .list(2, &[1], &[])
                .connected(&[2])
                .offline(&[1, 3]),
        );
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        // 4 changed during the reads: not judged.
        assert_eq!(
            result.detail,
            "3 pairs judged (1 with the friend online, 2 offline)"
        );
    }

    #[test]
    fn a_friend_shown_online_without_a_connection_or_offline_with_one_fails() {
        let result = judge(
            Final::default()
                .list(1, &[2, 3], &[3])
                .connected(&[2])
                .offline(&[3]),
        );
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, Some(Quantity::Count(2)));
        assert!(
            result.detail.contains("1 sees 2 offline"),
            "{}",
            result.detail
        );
        assert!(
            result.detail.contains("1 sees 3 online"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn no_final_reads_or_no_pair_to_judge_is_unknown() {
        assert_eq!(check(&History::default(), 0).result, Verdict::Unknown);
        let result = judge(Final::default().list(1, &[2], &[2]));
        assert_eq!(result.result, Verdict::Unknown);
    }
}
