//! duplicate_sessions: one connection per account in the whole cloud, judged from both sides.
//!
//! - The cloud's side: the sampler records, per round over every node's
//!   `/v1/admin/connections`, the accounts seen twice; an account in two consecutive rounds is
//!   a duplicate, in one round only a transient (a replacement caught mid-way: reported, not
//!   failed).
//! - The clients' side: for two connections of one account, A welcomed before B, both
//!   receiving an event made after B's welcome is a duplicate (the cloud must close A with
//!   4001 by then). An event's making is known for presence: its change was sent after B's
//!   welcome.
//!
//! Each account counts the larger of its two sides' episodes, so one episode both sides saw
//! counts once.
//!
//! Judged through every fault, the bus's too: while NATS is out, the cloud still closes the
//! older connection before the newer welcome (the old node finds its record taken when it
//! renews its leases).

use std::collections::{BTreeMap, HashMap};

use super::conns::Conns;
use super::{some, CheckResult, Quantity};
use crate::events::{Event, History, PlayerFact};

pub const NAME: &str = "duplicate_sessions";

pub fn check(history: &History, limit: u64) -> CheckResult {
    let mut rounds = 0usize;
    let mut seen: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut made: HashMap<(u64, u64), f64> = HashMap::new();
    for (_, event) in history.iter() {
        match event {
            Event::CheckSample { round, duplicates } => {
                rounds += 1;
                for account in duplicates {
                    seen.entry(*account).or_default().push(*round);
                }
            }
            Event::Player {
                account,
                fact: PlayerFact::PresenceSet { version, sent, .. },
                ..
            } => {
                made.insert((*account, *version), *sent);
            }
            _ => {}
        }
    }
    if rounds == 0 {
        return CheckResult::unknown(
            NAME,
            Quantity::Count(limit),
            "no connection samples recorded",
        );
    }
    let (server, transients) = server_episodes(seen);

    // The latest making time of the events each connection received.
    let mut latest_made: HashMap<u64, f64> = HashMap::new();
    for (_, _, fact) in history.facts() {
        if let PlayerFact::Received { conn, event } = fact {
            let Some((from, version, _)) = event.presence else {
                continue;
            };
            if let Some(&sent) = made.get(&(from.0, version)) {
                let latest = latest_made.entry(*conn).or_insert(f64::NEG_INFINITY);
                *latest = latest.max(sent);
            }
        }
    }
    let conns = Conns::of(history);
    let mut client: BTreeMap<u64, u64> = BTreeMap::new();
    let mut pairs = 0u64;
    let (mut replaced, mut by_second, mut of_second) = (0u64, 0u64, 0u64);
    for (account, list) in conns.accounts() {
        for (k, b) in list.iter().enumerate() {
            let older_up: Vec<_> = list[..k]
                .iter()
                .filter(|a| !a.closed_by(b.welcomed))
                .collect();
            pairs += older_up.len() as u64;
            let got_after = |id: u64| latest_made.get(&id).is_some_and(|&m| m > b.welcomed);
            if got_after(b.id) && older_up.iter().any(|a| got_after(a.id)) {
                *client.entry(account).or_default() += 1;
            }
        }
        for (k, a) in list.iter().enumerate().filter(|(_, a)| a.replaced()) {
            replaced += 1;
            // The connection that replaced it: the newest other one opened before its close (the
            // cloud closes the older one before it sends the newer one's welcome).
            let close = a.closed.as_ref().map_or(f64::INFINITY, |c| c.t);
            let by = list[k + 1..].iter().rev().find(|c| c.opened <= close);
            if a.device == 2 {
                of_second += 1;
            } else if by.is_some_and(|c| c.device == 2) {
                by_second += 1;
            }
        }
    }

    let mut accounts: BTreeMap<u64, u64> = server.clone();
    for (account, n) in &client {
        let count = accounts.entry(*account).or_default();
        *count = (*count).max(*n);
    }
    let episodes: u64 = accounts.values().sum();
    let mut detail = format!(
        "{rounds} rounds sampled, {} server-side episodes, {transients} transients (one round only, not failed); \
         {} connections, {pairs} client pairs judged, {} client-side episodes; \
         {replaced} replacements seen (4001): {by_second} by a second device, {of_second} of a second device",
        server.values().sum::<u64>(),
        conns.count(),
        client.values().sum::<u64>(),
    );
    if episodes > 0 {
        detail.push_str(&format!(
            "; {episodes} duplicates (accounts {})",
            some(accounts.keys(), 5)
        ));
    }
    CheckResult::count(NAME, limit, episodes, detail)
}

/// Per account, its runs of two or more consecutive rounds; and the one-round transients.
fn server_episodes(seen: BTreeMap<u64, Vec<u64>>) -> (BTreeMap<u64, u64>, u64) {
    let mut episodes = BTreeMap::new();
    let mut transients = 0;
    for (account, mut in_rounds) in seen {
        in_rounds.sort_unstable();
        in_rounds.dedup();
        let mut run = 1;
        for k in 0..in_rounds.len() {
            if k + 1 < in_rounds.len() && in_rounds[k + 1] == in_rounds[k] + 1 {
                run += 1;
                continue;
            }
            if run >= 2 {
                *episodes.entry(account).or_default() += 1;
            } else {
                transients += 1;
            }
            run = 1;
        }
    }
    (episodes, transients)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::conns::REPLACED;
    use crate::checks::testing::*;
    use crate::checks::Verdict;
    use crate::events::CloseCause;

    fn samples(rounds: &[&[u64]]) -> Vec<At> {
        rounds
            .iter()
            .enumerate()
            .map(|(i, accounts)| {
                (
                    i as f64 * 0.25,
                    Event::CheckSample {
                        round: i as u64,
                        duplicates: accounts.to_vec(),
                    },
                )
            })
            .collect()
    }

    fn judge(events: Vec<At>) -> CheckResult {
        check(&events.into_iter().collect(), 0)
    }

    /// The cloud can replace across nodes without the bus (the old node's lease renewal
    /// finds its record taken): an account on two nodes while NATS is paused is judged.
    #[test]
    fn duplicates_while_the_bus_is_out_are_judged() {
        let mut history = action(10.0, 15.0, crate::plan::ActionKind::Pause, "nats");
        for (t, round) in [(11.0, 1), (11.2, 2), (11.4, 3)] {
            history.push((
                t,
                Event::CheckSample {
                    round,
                    duplicates: vec![7],
                },
            ));
        }
        let result = check(&History::from_iter(history), 0);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(result.detail.contains("accounts 7"), "{}", result.detail);
    }

    #[test]
    fn one_round_only_is_a_transient() {
        let result = judge(samples(&[&[], &[7], &[], &[7], &[]]));
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Count(0)));
        assert!(result.detail.contains("2 transients"), "{}", result.detail);
    }

    #[test]
    fn two_consecutive_rounds_are_a_duplicate() {
        let result = judge(samples(&[&[], &[7, 8], &[7], &[7], &[], &[8]]));
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, Some(Quantity::Count(1)));
        assert!(result.detail.contains("accounts 7"), "{}", result.detail);
    }

    #[test]
    fn a_limit_tolerates_some() {
        let result = check(&samples(&[&[1, 2], &[1, 2]]).into_iter().collect(), 2);
        assert!(result.pass);
        assert_eq!(result.value, Some(Quantity::Count(2)));
    }

    #[test]
    fn no_samples_is_unknown() {
        let result = judge(Vec::new());
        assert_eq!(result.result, Verdict::Unknown);
        assert!(!result.pass);
    }

    /// Account 1 on node-1 (conn 1), then a second device on node-2 (conn 2) at 10 s; friend
    /// 5 changes its presence at 12 s.
    fn second_device(old_closed_at: Option<f64>) -> Vec<At> {
        let mut events = samples(&[&[], &[]]);
        events.extend([
            welcome(0.0, 1, 1, "node-1"),
            welcome_device(10.0, 1, 2, "node-2", 2),
            change(12.1, 5, 40, 12.0, "node-1"),
            presence(12.2, 1, 2, 1, 5, 40),
        ]);
        if let Some(t) = old_closed_at {
            events.push(closed(t, 1, 1, Some(REPLACED), CloseCause::CloseFrame));
        }
        events
    }

    #[test]
    fn both_connections_receiving_an_event_made_after_the_newer_welcome_is_a_duplicate() {
        let mut events = second_device(None);
        events.push(presence(12.2, 1, 1, 7, 5, 40));
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail, "{result:?}");
        assert!(
            result.detail.contains("1 client-side episodes"),
            "{}",
            result.detail
        );
        assert!(result.detail.contains("accounts 1"), "{}", result.detail);
    }

    #[test]
    fn an_older_connection_that_only_received_events_made_before_is_no_duplicate() {
        let mut events = second_device(Some(10.2));
        events.extend([
            change(9.5, 5, 39, 9.4, "node-1"),
            presence(9.6, 1, 1, 7, 5, 39),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("1 client pairs judged"),
            "{}",
            result.detail
        );
        assert!(
            result
                .detail
                .contains("1 replacements seen (4001): 1 by a second device"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn an_account_seen_by_both_sides_counts_once() {
        let mut events = second_device(None);
        events.push(presence(12.2, 1, 1, 7, 5, 40));
        events.extend(samples(&[&[1], &[1]]));
        let result = judge(events);
        assert_eq!(result.value, Some(Quantity::Count(1)));
    }
}
