//! Every event connection of the run as its client saw it: which account and node, when it
//! was opened and welcomed, and how it ended. Several checks ask "which connection of this
//! account was up at `t`".

use std::collections::HashMap;

use crate::events::{CloseCause, Event, History};

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
    pub closed: Option<Close>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Close {
    pub t: f64,
    pub code: Option<u16>,
    pub cause: CloseCause,
}

/// The close code the cloud replaces an older connection of the same account with.
pub const REPLACED: u16 = 4001;

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
        for (t, event) in history.iter() {
            match event {
                Event::Welcome {
                    account,
                    conn,
                    node,
                    device,
                    opened,
                } => {
                    conns.by_id.insert(
                        *conn,
                        Conn {
                            id: *conn,
                            account: *account,
                            node: node.0.clone(),
                            device: *device,
                            opened: *opened,
                            welcomed: t,
                            closed: None,
                        },
                    );
                    conns.by_account.entry(*account).or_default().push(*conn);
                }
                Event::Closed {
                    conn, code, cause, ..
                } => {
                    if let Some(c) = conns.by_id.get_mut(conn) {
                        c.closed.get_or_insert(Close {
                            t,
                            code: *code,
                            cause: *cause,
                        });
                    }
                }
                _ => {}
            }
        }
        conns
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
