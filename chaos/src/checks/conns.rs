//! Every event connection of the run as its client saw it: which account and node, when it
//! was opened and welcomed, and how it ended. Several checks ask "which connection of this
//! account was up at `t`".

use std::collections::HashMap;

use crate::events::{CloseCause, History, PlayerFact};

#[derive(Debug, Clone, PartialEq)]
pub struct Conn {
    pub id: u64,
    pub account: u64,
    pub node: String,
    /// 1: the player's own device, 2: its second device.
    pub device: u8,
    /// When the client sent the upgrade request.
    pub opened: f64,
    pub welcomed: f64,
    /// How often its node said it pings (s).
    pub ping_interval: f64,
    pub closed: Option<Close>,
    /// When its player read it slowly on purpose (`slow_readers`): from, until.
    pub slowed: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Close {
    pub t: f64,
    pub code: Option<u16>,
    pub cause: CloseCause,
}

use anyplay_load::reconnect::NO_STATUS;
/// The close code the cloud replaces an older connection of the same account with.
pub use anyplay_load::reconnect::REPLACED;

impl Conn {
    /// Whether it was welcomed at or before `t` and not closed by then.
    pub fn up_at(&self, t: f64) -> bool {
        self.welcomed <= t && self.closed.as_ref().is_none_or(|c| c.t > t)
    }

    pub fn closed_by(&self, t: f64) -> bool {
        self.closed.as_ref().is_some_and(|c| c.t <= t)
    }

    pub fn replaced(&self) -> bool {
        self.closed
            .as_ref()
            .is_some_and(|c| c.code == Some(REPLACED))
    }

    /// When a delivery owed by `by` on this connection, sent at `sent`, is owed once its
    /// reader's slow spells are counted: a spell slows what crosses it, as a fault that
    /// slows does, so what it held is owed the window after it ended.
    pub fn owed_by(&self, sent: f64, by: f64, window: f64) -> f64 {
        self.slowed
            .iter()
            .filter(|&&(from, until)| from <= by && until >= sent)
            .map(|&(_, until)| until + window)
            .fold(by, f64::max)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Conns {
    by_id: HashMap<u64, Conn>,
    /// Each account's connections in welcome order.
    by_account: HashMap<u64, Vec<u64>>,
}

impl Conns {
    pub fn of(history: &History) -> Conns {
        let mut conns = Conns::default();
        for (t, account, fact) in history.facts() {
            match fact {
                PlayerFact::Welcome {
                    conn,
                    node,
                    device,
                    opened,
                    ping_interval_s,
                    ..
                } => {
                    conns.by_id.insert(
                        *conn,
                        Conn {
                            id: *conn,
                            account,
                            node: node.0.clone(),
                            device: device.number(),
                            opened: *opened,
                            welcomed: t,
                            ping_interval: *ping_interval_s as f64,
                            closed: None,
                            slowed: Vec::new(),
                        },
                    );
                    conns.by_account.entry(account).or_default().push(*conn);
                }
                PlayerFact::Closed {
                    conn, code, cause, ..
                } => {
                    if let Some(c) = conns.by_id.get_mut(conn) {
                        c.closed.get_or_insert(Close {
                            t,
                            // The load records a frame without a code as `NO_STATUS`: here
                            // it is no code.
                            code: code.filter(|&code| code != NO_STATUS),
                            cause: *cause,
                        });
                    }
                }
                // Recorded when it ended, after the connection it slowed.
                PlayerFact::SlowReading { from, until, .. } => {
                    if let Some(id) = conns.own_device_at(account, *from) {
                        if let Some(c) = conns.by_id.get_mut(&id) {
                            c.slowed.push((*from, *until));
                        }
                    }
                }
                _ => {}
            }
        }
        conns
    }

    /// The account's own device's connection up at `t` (a slow reader reads on that one).
    pub fn own_device_at(&self, account: u64, t: f64) -> Option<u64> {
        self.of_account(account)
            .filter(|c| c.device == 1 && c.up_at(t))
            .last()
            .map(|c| c.id)
    }

    pub fn get(&self, id: u64) -> Option<&Conn> {
        self.by_id.get(&id)
    }

    /// How many connections were welcomed.
    pub fn count(&self) -> usize {
        self.by_id.len()
    }

    /// An account's connections in welcome order.
    pub fn of_account(&self, account: u64) -> impl Iterator<Item = &Conn> {
        self.by_account
            .get(&account)
            .into_iter()
            .flatten()
            .filter_map(|id| self.by_id.get(id))
    }

    /// Every account with a connection, and its connections in welcome order.
    pub fn accounts(&self) -> impl Iterator<Item = (u64, Vec<&Conn>)> {
        self.by_account
            .keys()
            .map(|&a| (a, self.of_account(a).collect()))
    }

    /// The account's newest connection welcomed at or before `t`, if it was still up then.
    pub fn up_at(&self, account: u64, t: f64) -> Option<&Conn> {
        self.of_account(account)
            .filter(|c| c.welcomed <= t)
            .last()
            .filter(|c| c.up_at(t))
    }

    /// The account's first connection welcomed after `t`.
    pub fn next_after(&self, account: u64, t: f64) -> Option<&Conn> {
        self.of_account(account).find(|c| c.welcomed > t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{slow_reading, welcome};

    #[test]
    fn a_slow_spell_makes_what_it_held_owed_a_window_after_it() {
        let history: History = [welcome(1.0, 1, 7, "node-1"), slow_reading(4.0, 9.0)]
            .into_iter()
            .collect();
        let conns = Conns::of(&history);
        let conn = conns.get(7).expect("the connection");
        assert_eq!(conn.slowed, [(4.0, 9.0)]);
        // Sent before the spell and owed within it, or sent in it: owed 3 s after it.
        assert_eq!(conn.owed_by(2.0, 5.0, 3.0), 12.0);
        assert_eq!(conn.owed_by(6.0, 9.0, 3.0), 12.0);
        // Owed before it began, or sent after it: as before.
        assert_eq!(conn.owed_by(0.0, 3.0, 3.0), 3.0);
        assert_eq!(conn.owed_by(9.5, 12.5, 3.0), 12.5);
    }
}
