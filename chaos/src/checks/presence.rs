//! presence_missing: for every acknowledged activity change, every friend that was online and
//! a friend for the whole delivery window (3 s) after it must have received an event of that
//! account with a version at least the change's (a later version counts as seen).
//!
//! Online: from the start (every player is online at the timeline's zero) until a
//! `player_lost`, again from a `player_back`. Friends: from an acknowledged add, until a
//! remove; a write of unknown outcome makes the pair not judged from then on.

use std::collections::HashMap;

use super::{some, CheckResult, Quantity};
use crate::events::{Event, History, LegacyWrite};

pub const NAME: &str = "presence_missing";

/// The cloud's bounded delivery time, and how long a friend must stay online to be judged.
pub const DELIVERY_WINDOW: f64 = 3.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bond {
    Added,
    Removed,
    Unknown,
}

pub fn check(history: &History, limit: u64) -> CheckResult {
    let end = history.end();
    // (t, online?) per account, and (t, bond) per unordered pair, in time order.
    let mut online: HashMap<u64, Vec<(f64, bool)>> = HashMap::new();
    let mut bonds: HashMap<(u64, u64), Vec<(f64, Bond)>> = HashMap::new();
    let mut friends_of: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut best_seen: HashMap<(u64, u64), u64> = HashMap::new();
    let mut changes = Vec::new();
    for (t, event) in history.iter() {
        match event {
            Event::PlayerLost { account, .. } => {
                online.entry(*account).or_default().push((t, false))
            }
            Event::PlayerBack { account, .. } => {
                online.entry(*account).or_default().push((t, true))
            }
            Event::WriteAck(LegacyWrite::FriendAdd { a, b }) => {
                bond(&mut bonds, &mut friends_of, *a, *b, t, Bond::Added)
            }
            Event::WriteAck(LegacyWrite::FriendRemove { a, b }) => {
                bond(&mut bonds, &mut friends_of, *a, *b, t, Bond::Removed)
            }
            Event::WriteUnknown(
                LegacyWrite::FriendAdd { a, b } | LegacyWrite::FriendRemove { a, b },
            ) => bond(&mut bonds, &mut friends_of, *a, *b, t, Bond::Unknown),
            Event::PresenceSeen {
                observer,
                account,
                version,
            } => {
                let best = best_seen.entry((*observer, *account)).or_insert(0);
                *best = (*best).max(*version);
            }
            Event::PresenceChange {
                account, version, ..
            } => changes.push((t, *account, *version)),
            _ => {}
        }
    }

    let mut expected = 0u64;
    let mut missing: Vec<String> = Vec::new();
    let mut too_late_to_judge = 0;
    for &(t, account, version) in &changes {
        if t + DELIVERY_WINDOW > end {
            too_late_to_judge += 1;
            continue;
        }
        for &friend in friends_of.get(&account).map_or(&[][..], |v| v.as_slice()) {
            let pair = (account.min(friend), account.max(friend));
            let bonded = held(bonds.get(&pair), t, Bond::Added);
            let on = online.get(&friend).is_none_or(|log| held_online(log, t));
            if !bonded || !on {
                continue;
            }
            expected += 1;
            if best_seen.get(&(friend, account)).copied().unwrap_or(0) < version {
                missing.push(format!("{account} v{version} → {friend}"));
            }
        }
    }
    let count = missing.len() as u64;
    let mut detail = format!("{} changes, {expected} deliveries judged", changes.len());
    if count > 0 {
        detail.push_str(&format!("; {count} missing ({})", some(&missing, 3)));
    }
    if too_late_to_judge > 0 {
        detail.push_str(&format!(
            "; {too_late_to_judge} changes in the last {DELIVERY_WINDOW}s not judged"
        ));
    }
    CheckResult {
        name: NAME.to_owned(),
        limit: Quantity::Count(limit),
        value: Some(Quantity::Count(count)),
        pass: count <= limit,
        detail,
    }
}

fn bond(
    bonds: &mut HashMap<(u64, u64), Vec<(f64, Bond)>>,
    friends_of: &mut HashMap<u64, Vec<u64>>,
    a: u64,
    b: u64,
    t: f64,
    state: Bond,
) {
    let pair = (a.min(b), a.max(b));
    let log = bonds.entry(pair).or_default();
    if log.is_empty() {
        friends_of.entry(a).or_default().push(b);
        friends_of.entry(b).or_default().push(a);
    }
    log.push((t, state));
}

/// Whether the pair was in `state` at `t` and nothing about it changed during the window.
fn held(log: Option<&Vec<(f64, Bond)>>, t: f64, state: Bond) -> bool {
    let Some(log) = log else { return false };
    let at = log.partition_point(|(u, _)| *u <= t);
    let before = at.checked_sub(1).map(|k| log[k].1);
    let changed_in_window = log[at..]
        .first()
        .is_some_and(|(u, _)| *u <= t + DELIVERY_WINDOW);
    before == Some(state) && !changed_in_window
}

/// Whether the account was online at `t` and did not lose its connection during the window.
fn held_online(log: &[(f64, bool)], t: f64) -> bool {
    let at = log.partition_point(|(u, _)| *u <= t);
    let on_at_t = at.checked_sub(1).is_none_or(|k| log[k].1);
    let lost_in_window = log[at..]
        .iter()
        .take_while(|(u, _)| *u <= t + DELIVERY_WINDOW)
        .any(|(_, on)| !on);
    on_at_t && !lost_in_window
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::NodeId;

    fn friends(t: f64, a: u64, b: u64) -> (f64, Event) {
        (t, Event::WriteAck(LegacyWrite::FriendAdd { a, b }))
    }

    fn change(t: f64, account: u64, version: u64) -> (f64, Event) {
        (
            t,
            Event::PresenceChange {
                account,
                version,
                sent: t,
                node: NodeId("node-1".into()),
            },
        )
    }

    fn seen(t: f64, observer: u64, account: u64, version: u64) -> (f64, Event) {
        (
            t,
            Event::PresenceSeen {
                observer,
                account,
                version,
            },
        )
    }

    fn note(t: f64) -> (f64, Event) {
        (t, Event::Note { text: "end".into() })
    }

    #[test]
    fn every_friend_seeing_the_change_passes() {
        let history: History = [
            friends(0.0, 1, 2),
            friends(0.0, 3, 1),
            change(10.0, 1, 100),
            seen(10.1, 2, 1, 100),
            // A later version counts as having seen the change.
            seen(10.2, 3, 1, 101),
            note(20.0),
        ]
        .into_iter()
        .collect();
        let result = check(&history, 0);
        assert!(result.pass, "{result:?}");
        assert!(
            result.detail.contains("2 deliveries judged"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_missing_presence_event_fails() {
        let history: History = [
            friends(0.0, 1, 2),
            friends(0.0, 1, 3),
            change(10.0, 1, 100),
            seen(10.1, 2, 1, 100),
            seen(10.1, 3, 1, 99),
            note(20.0),
        ]
        .into_iter()
        .collect();
        let result = check(&history, 0);
        assert!(!result.pass);
        assert_eq!(result.value, Some(Quantity::Count(1)));
        assert!(result.detail.contains("1 v100 → 3"), "{}", result.detail);
    }

    #[test]
    fn friends_offline_or_unfriended_in_the_window_are_not_judged() {
        let history: History = [
            friends(0.0, 1, 2),
            friends(0.0, 1, 3),
            friends(0.0, 1, 4),
            (
                11.0,
                Event::PlayerLost {
                    account: 2,
                    node: "node-1".into(),
                    reason: "reset".into(),
                },
            ),
            change(10.0, 1, 100),
            (
                11.5,
                Event::WriteAck(LegacyWrite::FriendRemove { a: 3, b: 1 }),
            ),
            (
                9.0,
                Event::WriteUnknown(LegacyWrite::FriendRemove { a: 1, b: 4 }),
            ),
            note(20.0),
        ]
        .into_iter()
        .collect();
        let result = check(&history, 0);
        assert!(result.pass, "{result:?}");
        assert!(
            result.detail.contains("0 deliveries judged"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_change_at_the_very_end_is_not_judged() {
        let history: History = [friends(0.0, 1, 2), change(10.0, 1, 100), note(11.0)]
            .into_iter()
            .collect();
        let result = check(&history, 0);
        assert!(result.pass);
        assert!(result.detail.contains("not judged"), "{}", result.detail);
    }
}
