//! The presence changes no write makes: an account going online and going offline, which
//! events_missing owes its friends as `presence` events with `online` true or false
//! (chaos-plan v1.2).
//!
//! Only changes the cloud surely saw are owed. Going offline: the account's last connection
//! was closed by the client's close frame (a sign-off) or by the cloud's own close frame
//! (a logout's 4003, a drain's 1001 …; never a 4001, which a newer connection replaces),
//! with no other connection of the account up then. Going online: a welcome while the
//! account held no other connection, every earlier one having ended so before this one's
//! handshake began. A connection that ended without a close frame may still be open on the
//! cloud's side until its pings or its lease tell, so nothing is owed around it; nor is a
//! change the account undid within the window (a friend may see only the latest state),
//! nor one a friend already believes: events_missing owes a change only to a friend whose
//! last word of the account (an event or its resync) said the other state.

use super::conns::{Conn, Conns, REPLACED};
use super::paths::Hop;
use crate::events::CloseCause;

/// One change of an account's online state.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChange<'a> {
    pub account: u64,
    pub online: bool,
    /// When the change happened: the welcome, or the close.
    pub at: f64,
    /// The earliest an event of it may arrive: the connection's handshake began.
    pub since: f64,
    /// The node the change happened on.
    pub node: &'a str,
    /// When the account changed back, if it did: its next welcome, or this connection's close.
    pub undone: Option<f64>,
}

/// Whether the cloud surely saw this close: a close frame of either side, other than 4001.
fn seen_close(conn: &Conn) -> bool {
    conn.closed.as_ref().is_some_and(|c| match c.cause {
        CloseCause::ClientClose => true,
        CloseCause::CloseFrame => c.code.is_some_and(|code| code != REPLACED),
        _ => false,
    })
}

/// Every change of every account's online state the cloud surely saw, in time order (then
/// by account, so that a detail names the same examples on every reading).
pub fn changes(conns: &Conns) -> Vec<StateChange<'_>> {
    let mut out = Vec::new();
    for (account, list) in conns.accounts() {
        for (i, conn) in list.iter().enumerate() {
            let earlier = &list[..i];
            let alone_since = earlier
                .iter()
                .all(|o| seen_close(o) && o.closed.as_ref().is_some_and(|c| c.t < conn.opened));
            let next_welcome = list.get(i + 1).map(|n| n.welcomed);
            if alone_since {
                out.push(StateChange {
                    account,
                    online: true,
                    at: conn.welcomed,
                    since: conn.opened,
                    node: &conn.node,
                    undone: conn.closed.as_ref().map(|c| c.t),
                });
            }
            let Some(close) = conn.closed.as_ref().filter(|_| seen_close(conn)) else {
                continue;
            };
            let others_up = list.iter().any(|o| o.id != conn.id && o.up_at(close.t));
            if !others_up {
                out.push(StateChange {
                    account,
                    online: false,
                    at: close.t,
                    since: conn.welcomed,
                    node: &conn.node,
                    undone: next_welcome,
                });
            }
        }
    }
    out.sort_by(|a, b| a.at.total_cmp(&b.at).then(a.account.cmp(&b.account)));
    out
}

/// The way a state change on node `origin` travels to a friend connected to `recipient`:
/// through the store (the cloud looks the account's other connections up there) and, from
/// another node, over the bus.
pub fn path<'a>(origin: &'a str, recipient: &'a str) -> Vec<Hop<'a>> {
    if origin == recipient {
        vec![Hop::Players, Hop::Node(recipient), Hop::Postgres]
    } else {
        super::paths::delivery(origin, recipient)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::events::{CloseCause::*, History};

    fn of(events: Vec<At>) -> Vec<(u64, bool, f64, Option<f64>)> {
        let history: History = events.into_iter().collect();
        let conns = Conns::of(&history);
        let mut out: Vec<_> = changes(&conns)
            .into_iter()
            .map(|c| (c.account, c.online, c.at, c.undone))
            .collect();
        out.sort_by(|a, b| a.2.total_cmp(&b.2));
        out
    }

    #[test]
    fn a_sign_off_and_a_return_are_owed_and_a_silent_break_is_not() {
        let changes = of(vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(5.0, 1, 1, Some(1000), ClientClose),
            welcome(9.0, 1, 2, "node-1"),
            closed(12.0, 1, 2, None, NoCloseFrame),
            welcome(14.0, 1, 3, "node-2"),
        ]);
        assert_eq!(
            changes,
            [
                (1, true, 1.0, Some(5.0)),
                (1, false, 5.0, Some(9.0)),
                (1, true, 9.0, Some(12.0)),
            ]
        );
    }

    #[test]
    fn a_second_device_or_a_replacement_changes_nothing() {
        let changes = of(vec![
            welcome(1.0, 1, 1, "node-1"),
            welcome_device(3.0, 1, 2, "node-2", 2),
            closed(3.0, 1, 1, Some(4001), CloseFrame),
            closed(6.0, 1, 2, Some(1000), ClientClose),
        ]);
        // Online at the first welcome; offline when the second device, then alone, closed.
        assert_eq!(changes, [(1, true, 1.0, Some(3.0)), (1, false, 6.0, None)]);
        // A logout's 4003 is seen: offline, then online again at the next welcome.
        let changes = of(vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(4.0, 1, 1, Some(4003), CloseFrame),
            welcome(4.3, 1, 2, "node-1"),
        ]);
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert_eq!(changes[1], (1, false, 4.0, Some(4.3)));
    }
}
