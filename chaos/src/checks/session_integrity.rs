//! session_integrity: every session as an answer showed it (create, join, a read, the final
//! reads) holds no more than its `max_members` and is led by its longest-standing member
//! (the first in join order: the creator leads, and a leader's leaving hands leadership to
//! the member who joined earliest); and
//! at the end the members' views of one session agree (the same members in the same order,
//! the same leader), and every account a final view lists reads itself as a member.

use std::collections::{BTreeMap, HashMap};

use super::{some, CheckResult, Quantity};
use crate::events::{Event, History, PlayerFact, SessionView};

pub const NAME: &str = "session_integrity";

/// What is wrong with one view on its own.
fn flaw(view: &SessionView) -> Option<String> {
    let s = &view.session;
    if view.members.len() > view.max_members as usize {
        Some(format!(
            "session {s} with {} of {} members",
            view.members.len(),
            view.max_members
        ))
    } else if !view.members.contains(&view.leader) {
        Some(format!("session {s} led by non-member {}", view.leader))
    } else if view.members.first() != Some(&view.leader) {
        Some(format!(
            "session {s} led by {}, not by its longest-standing member {}",
            view.leader, view.members[0]
        ))
    } else {
        None
    }
}

pub fn check(history: &History, limit: u64) -> CheckResult {
    let mut views = 0u64;
    let mut violations = Vec::new();
    let mut finals: BTreeMap<&str, Vec<&SessionView>> = BTreeMap::new();
    let mut member: HashMap<(u64, &str), bool> = HashMap::new();
    for (_, event) in history.iter() {
        match event {
            Event::Player {
                account,
                fact: PlayerFact::SessionView(session),
                ..
            } => {
                views += 1;
                violations.extend(flaw(&SessionView::of(*account, session)));
            }
            Event::FinalState { memberships, .. } => {
                for m in memberships {
                    member.insert((m.account, m.session.as_str()), m.member);
                    if let Some(view) = &m.view {
                        views += 1;
                        violations.extend(flaw(view));
                        finals.entry(view.session.as_str()).or_default().push(view);
                    }
                }
            }
            _ => {}
        }
    }
    let limit_q = Quantity::Count(limit);
    if views == 0 {
        return CheckResult::unknown(NAME, limit_q, "no session view recorded");
    }
    for (session, list) in &finals {
        let first = list[0];
        if list
            .iter()
            .any(|v| v.members != first.members || v.leader != first.leader)
        {
            violations.push(format!("session {session}: its members' views differ"));
        }
        for view in list {
            for &m in &view.members {
                if member.get(&(m, *session)) == Some(&false) {
                    violations.push(format!("session {session} lists {m}, who is not in it"));
                }
            }
        }
    }
    let mut detail = format!(
        "{views} views of {} sessions at the end judged",
        finals.len()
    );
    if !violations.is_empty() {
        violations.sort();
        violations.dedup();
        detail.push_str(&format!(
            "; {} violations ({})",
            violations.len(),
            some(&violations, 3)
        ));
    }
    CheckResult::count(NAME, limit, violations.len() as u64, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;

    fn judge(events: Vec<At>) -> CheckResult {
        check(&events.into_iter().collect(), 0)
    }

    #[test]
    fn sound_views_that_agree_at_the_end_pass() {
        let result = judge(vec![
            session_view(1.0, view(1, "9", 1, &[1], 2)),
            session_view(2.0, view(2, "9", 1, &[1, 2], 2)),
            Final::default()
                .member(1, "9", true, Some(view(1, "9", 1, &[1, 2], 2)))
                .member(2, "9", true, Some(view(2, "9", 1, &[1, 2], 2)))
                .member(3, "9", false, None)
                .at(100.0),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert_eq!(result.detail, "4 views of 1 sessions at the end judged");
    }

    #[test]
    fn an_oversized_session_or_a_leader_outside_it_fails() {
        let result = judge(vec![
            session_view(1.0, view(1, "9", 1, &[1, 2, 3], 2)),
            session_view(2.0, view(4, "8", 5, &[4], 2)),
        ]);
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, Some(Quantity::Count(2)));
        assert!(
            result.detail.contains("session 9 with 3 of 2 members"),
            "{}",
            result.detail
        );
        assert!(
            result.detail.contains("session 8 led by non-member 5"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn leadership_passes_to_the_longest_standing_member() {
        // 1 created it, 2 then 3 joined; 1 left: 2 leads.
        let handed = judge(vec![
            session_view(1.0, view(1, "9", 1, &[1, 2, 3], 4)),
            session_view(5.0, view(2, "9", 2, &[2, 3], 4)),
        ]);
        assert_eq!(handed.result, Verdict::Pass, "{}", handed.detail);
        let newest = judge(vec![
            session_view(1.0, view(1, "9", 1, &[1, 2, 3], 4)),
            session_view(5.0, view(2, "9", 3, &[2, 3], 4)),
        ]);
        assert_eq!(newest.result, Verdict::Fail, "{}", newest.detail);
        assert!(
            newest
                .detail
                .contains("session 9 led by 3, not by its longest-standing member 2"),
            "{}",
            newest.detail
        );
    }

    #[test]
    fn members_disagreeing_at_the_end_fail() {
        let result = judge(vec![Final::default()
            .member(1, "9", true, Some(view(1, "9", 1, &[1, 2], 4)))
            .member(2, "9", true, Some(view(2, "9", 1, &[2, 1], 4)))
            .at(100.0)]);
        assert_eq!(result.result, Verdict::Fail);
        assert!(result.detail.contains("views differ"), "{}", result.detail);
    }

    #[test]
    fn a_listed_member_that_reads_itself_out_fails() {
        let result = judge(vec![Final::default()
            .member(1, "9", true, Some(view(1, "9", 1, &[1, 2], 4)))
            .member(2, "9", false, None)
            .at(100.0)]);
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("lists 2, who is not in it"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn no_session_view_is_unknown() {
        let result = judge(vec![Final::default().member(1, "9", false, None).at(100.0)]);
        assert_eq!(result.result, Verdict::Unknown);
    }
}
