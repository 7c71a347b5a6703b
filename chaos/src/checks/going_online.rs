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
//! last word of the account (an event or its resync) said the other state. Nor is going
//! offline owed when the connection's node exited before it could have finished the close
//! (a slow reader reads its node's 1013 long after it was sent, its node killed meanwhile):
//! then the account leaves by its lease, unless it came back first.

use super::conns::{Conn, Conns, REPLACED};
use super::outages::States;
use super::paths::Hop;
use crate::events::CloseCause;
use crate::plan::Service;

/// How long after a client saw its connection close the node may still be finishing it (it
/// waits 2 s for the close's reply before it lets the account go).
const CLOSE_FINISHED: f64 = 3.0;

/// Whether `node` stayed up from `from` to `until` (no exit recorded between).
fn stayed_up(states: &States, node: &str, from: f64, until: f64) -> bool {
    states
        .iter()
        .filter(|(n, _)| Service::Node(**n).to_string() == node)
        .all(|(_, log)| !log.iter().any(|&(t, up)| !up && from <= t && t <= until))
}

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
    /// The player's own close frame made it: it reached the cloud over the player's link to
    /// its node, where a fault may have kept it from the cloud.
    pub by_client: bool,
}

/// Whether the cloud surely saw this close: a close frame of either side, other than 4001.
fn seen_close(conn: &Conn) -> bool {
    conn.closed.as_ref().is_some_and(|c| match c.cause {
        CloseCause::ClientClose => true,
        CloseCause::CloseFrame => c.code != Some(REPLACED),
        _ => false,
    })
}

/// Every change of every account's online state the cloud surely saw, in time order (then
/// by account, so that a detail names the same examples on every reading); `states` are the
/// nodes' ups and exits.
pub fn changes<'a>(conns: &'a Conns, states: &States) -> Vec<StateChange<'a>> {
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
                    by_client: false,
                });
            }
            let Some(close) = conn.closed.as_ref().filter(|_| seen_close(conn)) else {
                continue;
            };
            let others_up = list.iter().any(|o| o.id != conn.id && o.up_at(close.t));
            let finished = stayed_up(states, &conn.node, conn.welcomed, close.t + CLOSE_FINISHED);
            if !others_up && finished {
                out.push(StateChange {
                    account,
                    online: false,
                    at: close.t,
                    since: conn.welcomed,
                    node: &conn.node,
                    undone: next_welcome,
                    by_client: close.cause == CloseCause::ClientClose,
                });
            }
        }
    }
    out.sort_by(|a, b| a.at.total_cmp(&b.at).then(a.account.cmp(&b.account)));
    out
}

impl StateChange<'_> {
    /// The way this change travels to a friend connected to `recipient`, as a walk: in from
    /// the player when its close made it, then through the store (the cloud looks the
    /// account's other connections up there) and, to another node, over the bus.
    pub fn path<'a>(&'a self, recipient: &'a str) -> Vec<Hop<'a>> {
        let origin = Hop::Node(self.node);
        let mut walk = Vec::new();
        if self.by_client {
            walk.push(Hop::Players);
        }
        walk.extend([origin, Hop::Postgres, origin]);
        if recipient != self.node {
            walk.extend([Hop::Nats, Hop::Node(recipient)]);
        }
        walk.push(Hop::Players);
        walk
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
        let states = crate::checks::outages::states(&history);
        let mut out: Vec<_> = changes(&conns, &states)
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
    fn a_close_its_node_could_not_finish_is_no_change() {
        // A slow reader reads its node's 1013 at 10 s; the node was killed at 8 s, or at 12 s
        // while it still waited for the close's reply: the account leaves by its lease.
        for killed in [8.0, 12.0] {
            let changes = of(vec![
                node_up(0.5, 1),
                welcome(1.0, 1, 1, "node-1"),
                node_exit(killed, 1),
                closed(10.0, 1, 1, Some(1013), CloseFrame),
            ]);
            assert_eq!(changes, [(1, true, 1.0, Some(10.0))], "killed at {killed}");
        }
        // Killed well after it finished: the account went offline at the close.
        let changes = of(vec![
            node_up(0.5, 1),
            welcome(1.0, 1, 1, "node-1"),
            closed(10.0, 1, 1, Some(1013), CloseFrame),
            node_exit(20.0, 1),
        ]);
        assert_eq!(
            changes,
            [(1, true, 1.0, Some(10.0)), (1, false, 10.0, None)]
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
