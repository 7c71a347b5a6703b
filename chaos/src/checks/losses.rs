//! When a player lost its event connection and when it was back, from the welcomes and closes
//! its client recorded: the one rule behind `players_back`, `failover` and the dating of a
//! rolling's steps, and behind the `player_lost` / `player_back` lines the recorder writes for
//! readers of `events.jsonl`.
//!
//! A player is lost when a connection ends that it did not end itself (a sign-off, the run's
//! end) and that no newer connection replaced (4001), leaving it with none; it is back at its
//! next welcome. A second loss before that welcome is the same loss.

use std::collections::{BTreeMap, HashMap};

use anyplay_load::measure::facts::{CloseCause, Fact};
use anyplay_load::reconnect::REPLACED;

use crate::events::History;

/// A player's loss or return, with the node it was lost from or came back to.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Lost { node: String, reason: String },
    Back { node: String },
}

/// A [`Change`] of `account` at `t`.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    pub t: f64,
    pub account: u64,
    pub change: Change,
}

/// Whether a close was the client's own doing or a replacement, never a loss.
pub fn voluntary(code: Option<u16>, cause: CloseCause) -> bool {
    matches!(cause, CloseCause::ClientClose | CloseCause::Shutdown) || code == Some(REPLACED)
}

/// The rule, fact by fact, for the recorder (as facts arrive) and for [`of`] (a history).
#[derive(Debug, Default)]
pub struct Losses {
    accounts: HashMap<u64, Account>,
}

#[derive(Debug, Default)]
struct Account {
    /// Live connections and the node of each.
    live: BTreeMap<u64, String>,
    lost: bool,
}

impl Losses {
    /// What `fact` of `account` changes: a loss, a return, or nothing.
    pub fn on<T>(&mut self, account: u64, fact: &Fact<T>) -> Option<Change> {
        match fact {
            Fact::Welcome { conn, node, .. } => {
                let state = self.accounts.entry(account).or_default();
                state.live.insert(*conn, node.0.clone());
                std::mem::take(&mut state.lost).then(|| Change::Back {
                    node: node.0.clone(),
                })
            }
            Fact::Closed {
                conn, code, cause, ..
            } => {
                let state = self.accounts.entry(account).or_default();
                let node = state.live.remove(conn)?;
                if voluntary(*code, *cause) || !state.live.is_empty() || state.lost {
                    return None;
                }
                state.lost = true;
                let reason = match code {
                    Some(code) => format!("closed {code}"),
                    None => serde_json::to_value(cause)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                };
                Some(Change::Lost { node, reason })
            }
            _ => None,
        }
    }
}

/// Every loss and return of the run, in time order.
pub fn of(history: &History) -> Vec<Timed> {
    let mut losses = Losses::default();
    history
        .facts()
        .filter_map(|(t, account, fact)| {
            losses
                .on(account, fact)
                .map(|change| Timed { t, account, change })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{closed, welcome};
    use crate::events::CloseCause::{ClientClose, CloseFrame, NoCloseFrame, Shutdown};

    fn changes(events: Vec<crate::checks::testing::At>) -> Vec<(f64, u64, Change)> {
        of(&events.into_iter().collect())
            .into_iter()
            .map(|c| (c.t, c.account, c.change))
            .collect()
    }

    fn lost(node: &str, reason: &str) -> Change {
        Change::Lost {
            node: node.into(),
            reason: reason.into(),
        }
    }

    fn back(node: &str) -> Change {
        Change::Back { node: node.into() }
    }

    #[test]
    fn a_close_that_leaves_no_connection_is_a_loss_until_the_next_welcome() {
        let found = changes(vec![
            welcome(1.0, 7, 1, "node-1"),
            closed(5.0, 7, 1, None, NoCloseFrame),
            welcome(8.0, 7, 2, "node-2"),
            closed(9.0, 7, 2, Some(1001), CloseFrame),
            welcome(12.0, 7, 3, "node-1"),
        ]);
        assert_eq!(
            found,
            [
                (5.0, 7, lost("node-1", "no_close_frame")),
                (8.0, 7, back("node-2")),
                (9.0, 7, lost("node-2", "closed 1001")),
                (12.0, 7, back("node-1")),
            ]
        );
    }

    #[test]
    fn the_players_own_closes_and_replacements_are_no_loss() {
        let found = changes(vec![
            welcome(1.0, 7, 1, "node-1"),
            closed(2.0, 7, 1, Some(REPLACED), CloseFrame),
            welcome(2.0, 7, 2, "node-2"),
            closed(3.0, 7, 2, Some(1000), ClientClose),
            welcome(4.0, 7, 3, "node-2"),
            closed(9.0, 7, 3, None, Shutdown),
        ]);
        assert_eq!(found, []);
    }

    #[test]
    fn a_close_while_another_connection_lives_is_no_loss_and_a_loss_counts_once() {
        let found = changes(vec![
            welcome(1.0, 7, 1, "node-1"),
            welcome(1.5, 7, 2, "node-2"),
            closed(3.0, 7, 1, None, NoCloseFrame),
            closed(4.0, 7, 2, Some(1011), CloseFrame),
            // A close of a connection never welcomed changes nothing.
            closed(4.5, 7, 9, None, NoCloseFrame),
            welcome(6.0, 7, 3, "node-1"),
        ]);
        assert_eq!(
            found,
            [
                (4.0, 7, lost("node-2", "closed 1011")),
                (6.0, 7, back("node-1")),
            ]
        );
    }
}
