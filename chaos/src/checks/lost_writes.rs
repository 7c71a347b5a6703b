//! lost_writes: every friendship and session membership the cloud acknowledged (2xx), and
//! that no later acknowledged call undid, must be in the final state (`GET /v1/friends`,
//! `GET /v1/sessions/{id}`). A later write of unknown outcome that could have undone it
//! makes it not judged; an account or session the final state did not read, too.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{some, CheckResult, Quantity};
use crate::events::{Event, History, LegacyWrite};

pub const NAME: &str = "lost_writes";

/// What the latest writes say must hold at the end.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Must {
    Hold,
    Nothing,
}

pub fn check(history: &History, limit: u64) -> CheckResult {
    let mut friendships: BTreeMap<(u64, u64), Must> = BTreeMap::new();
    let mut memberships: BTreeMap<(u64, u64), Must> = BTreeMap::new();
    let mut final_state = None;
    for (_, event) in history.iter() {
        match event {
            Event::WriteAck(write) => match *write {
                LegacyWrite::FriendAdd { a, b } => {
                    friendships.insert(pair(a, b), Must::Hold);
                }
                LegacyWrite::FriendRemove { a, b } => {
                    friendships.insert(pair(a, b), Must::Nothing);
                }
                LegacyWrite::SessionJoin { a, session } => {
                    memberships.insert((session, a), Must::Hold);
                }
                LegacyWrite::SessionLeave { a, session } => {
                    memberships.insert((session, a), Must::Nothing);
                }
            },
            // Only an undo of unknown outcome matters: an unknown add asks nothing.
            Event::WriteUnknown(LegacyWrite::FriendRemove { a, b }) => {
                friendships.insert(pair(*a, *b), Must::Nothing);
            }
            Event::WriteUnknown(LegacyWrite::SessionLeave { a, session }) => {
                memberships.insert((*session, *a), Must::Nothing);
            }
            Event::FinalState {
                friends, sessions, ..
            } => final_state = Some((friends, sessions)),
            _ => {}
        }
    }
    let required_friends: Vec<(u64, u64)> = friendships
        .into_iter()
        .filter(|(_, m)| *m == Must::Hold)
        .map(|(p, _)| p)
        .collect();
    let required_members: Vec<(u64, u64)> = memberships
        .into_iter()
        .filter(|(_, m)| *m == Must::Hold)
        .map(|(p, _)| p)
        .collect();
    let required = required_friends.len() + required_members.len();
    let Some((friends, sessions)) = final_state else {
        return CheckResult {
            name: NAME.to_owned(),
            limit: Quantity::Count(limit),
            value: None,
            pass: required == 0,
            detail: match required {
                0 => "no acknowledged write to keep".to_owned(),
                n => format!("unknown: {n} acknowledged writes but no final state recorded"),
            },
        };
    };
    let friend_lists: HashMap<u64, HashSet<u64>> = friends
        .iter()
        .map(|f| (f.account, f.friends.iter().copied().collect()))
        .collect();
    let members: HashMap<u64, HashSet<u64>> = sessions
        .iter()
        .map(|s| (s.session, s.members.iter().copied().collect()))
        .collect();

    let mut lost = Vec::new();
    let mut unread = 0;
    for (a, b) in required_friends {
        // Each side that was read must list the other.
        let sides = [(a, b), (b, a)];
        let read: Vec<bool> = sides
            .iter()
            .filter_map(|(x, y)| friend_lists.get(x).map(|list| list.contains(y)))
            .collect();
        if read.is_empty() {
            unread += 1;
        } else if read.contains(&false) {
            lost.push(format!("friends {a}-{b}"));
        }
    }
    for (session, account) in required_members {
        match members.get(&session) {
            None => unread += 1,
            Some(list) if !list.contains(&account) => {
                lost.push(format!("{account} in session {session}"))
            }
            Some(_) => {}
        }
    }
    let count = lost.len() as u64;
    let mut detail = format!("{required} acknowledged writes to keep");
    if count > 0 {
        detail.push_str(&format!("; {count} lost ({})", some(&lost, 3)));
    }
    if unread > 0 {
        detail.push_str(&format!("; {unread} not read at the end (not judged)"));
    }
    CheckResult {
        name: NAME.to_owned(),
        limit: Quantity::Count(limit),
        value: Some(Quantity::Count(count)),
        pass: count <= limit,
        detail,
    }
}

fn pair(a: u64, b: u64) -> (u64, u64) {
    (a.min(b), a.max(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{FriendList, SessionMembers};

    fn ack(t: f64, write: LegacyWrite) -> (f64, Event) {
        (t, Event::WriteAck(write))
    }

    fn final_state(friends: &[(u64, &[u64])], sessions: &[(u64, &[u64])]) -> (f64, Event) {
        (
            100.0,
            Event::FinalState {
                friends: friends
                    .iter()
                    .map(|(account, list)| FriendList {
                        account: *account,
                        friends: list.to_vec(),
                        online: Vec::new(),
                    })
                    .collect(),
                sessions: sessions
                    .iter()
                    .map(|(session, list)| SessionMembers {
                        session: *session,
                        members: list.to_vec(),
                    })
                    .collect(),
                memberships: Vec::new(),
                connected: Vec::new(),
                offline: Vec::new(),
            },
        )
    }

    #[test]
    fn kept_and_undone_writes_pass() {
        let history: History = [
            ack(1.0, LegacyWrite::FriendAdd { a: 1, b: 2 }),
            ack(2.0, LegacyWrite::FriendAdd { a: 1, b: 3 }),
            ack(3.0, LegacyWrite::FriendRemove { a: 3, b: 1 }),
            ack(4.0, LegacyWrite::SessionJoin { a: 1, session: 9 }),
            ack(5.0, LegacyWrite::SessionJoin { a: 2, session: 9 }),
            ack(6.0, LegacyWrite::SessionLeave { a: 2, session: 9 }),
            final_state(&[(1, &[2]), (2, &[1]), (3, &[])], &[(9, &[1])]),
        ]
        .into_iter()
        .collect();
        let result = check(&history, 0);
        assert!(result.pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Count(0)));
    }

    #[test]
    fn a_lost_friendship_and_membership_fail() {
        let history: History = [
            ack(1.0, LegacyWrite::FriendAdd { a: 1, b: 2 }),
            ack(4.0, LegacyWrite::SessionJoin { a: 1, session: 9 }),
            final_state(&[(1, &[2]), (2, &[])], &[(9, &[])]),
        ]
        .into_iter()
        .collect();
        let result = check(&history, 0);
        assert!(!result.pass);
        assert_eq!(result.value, Some(Quantity::Count(2)));
        assert!(result.detail.contains("friends 1-2"), "{}", result.detail);
        assert!(
            result.detail.contains("1 in session 9"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn an_undo_of_unknown_outcome_is_not_judged() {
        let history: History = [
            ack(1.0, LegacyWrite::FriendAdd { a: 1, b: 2 }),
            (
                2.0,
                Event::WriteUnknown(LegacyWrite::FriendRemove { a: 1, b: 2 }),
            ),
            final_state(&[(1, &[]), (2, &[])], &[]),
        ]
        .into_iter()
        .collect();
        assert!(check(&history, 0).pass);
    }

    #[test]
    fn writes_without_a_final_state_are_unknown() {
        let history: History = [ack(1.0, LegacyWrite::FriendAdd { a: 1, b: 2 })]
            .into_iter()
            .collect();
        let result = check(&history, 0);
        assert!(!result.pass);
        assert!(result.detail.starts_with("unknown:"));
        assert!(check(&History::default(), 0).pass);
    }
}
