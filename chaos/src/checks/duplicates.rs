//! duplicate_sessions: one connection per account in the whole cloud. The sampler records,
//! per round over every node's `/v1/admin/connections`, the accounts seen twice; an account
//! in two consecutive rounds is a duplicate (counted), in one round only a transient (a
//! replacement caught mid-way: reported, not failed).

use std::collections::BTreeMap;

use super::{some, CheckResult, Quantity};
use crate::events::{Event, History};

pub const NAME: &str = "duplicate_sessions";

pub fn check(history: &History, limit: u64) -> CheckResult {
    let mut rounds = 0usize;
    let mut seen: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (_, event) in history.iter() {
        if let Event::CheckSample { round, duplicates } = event {
            rounds += 1;
            for account in duplicates {
                seen.entry(*account).or_default().push(*round);
            }
        }
    }
    if rounds == 0 {
        return CheckResult {
            name: NAME.to_owned(),
            limit: Quantity::Count(limit),
            value: None,
            pass: false,
            detail: "unknown: no connection samples recorded".to_owned(),
        };
    }
    let mut duplicates: Vec<u64> = Vec::new();
    let mut episodes = 0u64;
    let mut transients = 0u64;
    for (account, mut in_rounds) in seen {
        in_rounds.sort_unstable();
        in_rounds.dedup();
        // Split into runs of consecutive round numbers: each run is one episode.
        let mut run = 1;
        let mut flagged = false;
        for k in 0..in_rounds.len() {
            let continues = k + 1 < in_rounds.len() && in_rounds[k + 1] == in_rounds[k] + 1;
            if continues {
                run += 1;
                continue;
            }
            if run >= 2 {
                episodes += 1;
                flagged = true;
            } else {
                transients += 1;
            }
            run = 1;
        }
        if flagged {
            duplicates.push(account);
        }
    }
    let mut detail = format!("{rounds} rounds sampled");
    if episodes > 0 {
        detail.push_str(&format!(
            "; {episodes} duplicates (accounts {})",
            some(&duplicates, 5)
        ));
    }
    if transients > 0 {
        detail.push_str(&format!(
            "; {transients} transients (one round only, not failed)"
        ));
    }
    CheckResult {
        name: NAME.to_owned(),
        limit: Quantity::Count(limit),
        value: Some(Quantity::Count(episodes)),
        pass: episodes <= limit,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(rounds: &[&[u64]]) -> History {
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

    #[test]
    fn one_round_only_is_a_transient() {
        let result = check(&samples(&[&[], &[7], &[], &[7], &[]]), 0);
        assert!(result.pass, "{result:?}");
        assert_eq!(result.value, Some(Quantity::Count(0)));
        assert!(result.detail.contains("2 transients"), "{}", result.detail);
    }

    #[test]
    fn two_consecutive_rounds_are_a_duplicate() {
        let result = check(&samples(&[&[], &[7, 8], &[7], &[7], &[], &[8]]), 0);
        assert!(!result.pass);
        assert_eq!(result.value, Some(Quantity::Count(1)));
        assert!(result.detail.contains("accounts 7"), "{}", result.detail);
    }

    #[test]
    fn a_limit_tolerates_some() {
        let result = check(&samples(&[&[1, 2], &[1, 2]]), 2);
        assert!(result.pass);
        assert_eq!(result.value, Some(Quantity::Count(2)));
    }

    #[test]
    fn no_samples_is_unknown() {
        let result = check(&History::default(), 0);
        assert!(!result.pass);
        assert!(result.detail.starts_with("unknown:"));
    }
}
