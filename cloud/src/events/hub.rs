//! The hub: this node's live event connections, one per account, each with a
//! bounded outbound queue. Delivery never waits: a full queue closes that
//! connection as a slow consumer (1013) and fan-out goes on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use super::event::Payload;
use super::turns::{Turn, Turns};
use crate::metrics::Metrics;

/// Close codes the server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCode {
    /// The node drains (graceful stop).
    GoingAway,
    /// The node restarts.
    Restart,
    /// The outbound queue was full.
    SlowConsumer,
    /// A newer connection of the same account took over.
    Replaced,
    /// Signed out or token revoked.
    SignedOut,
    /// The node cannot renew its leases in the store: another node may take its accounts.
    StoreLost,
    /// A client message over the size limit.
    TooBig,
    /// A text message that is not UTF-8.
    InvalidData,
}

impl CloseCode {
    pub fn code(self) -> u16 {
        match self {
            CloseCode::GoingAway => 1001,
            CloseCode::Restart => 1012,
            CloseCode::SlowConsumer => 1013,
            CloseCode::Replaced => 4001,
            CloseCode::SignedOut => 4003,
            CloseCode::StoreLost => 1011,
            CloseCode::TooBig => 1009,
            CloseCode::InvalidData => 1007,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            CloseCode::GoingAway => "draining",
            CloseCode::Restart => "restarting",
            CloseCode::SlowConsumer => "slow consumer",
            CloseCode::Replaced => "replaced",
            CloseCode::SignedOut => "signed out",
            CloseCode::StoreLost => "store out of reach",
            CloseCode::TooBig => "message too big",
            CloseCode::InvalidData => "text is not UTF-8",
        }
    }

    pub fn from_code(code: u16) -> Option<CloseCode> {
        [
            CloseCode::GoingAway,
            CloseCode::Restart,
            CloseCode::SlowConsumer,
            CloseCode::Replaced,
            CloseCode::SignedOut,
            CloseCode::StoreLost,
            CloseCode::TooBig,
            CloseCode::InvalidData,
        ]
        .into_iter()
        .find(|c| c.code() == code)
    }
}

/// How the server ends a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// A close frame with this code.
    With(CloseCode),
    /// No close frame: the socket is dropped, as a crashed node's would be.
    Sever,
}

/// What the hub keeps of one connection.
#[derive(Clone)]
pub struct Handle {
    pub connection_id: Arc<str>,
    pub since_ms: i64,
    /// When the hub took it, in µs: events made before are not for it.
    opened_us: i64,
    /// Registered cloud-wide, and any older connection of the account told to close: only
    /// then does the admin view list it, so that a checker never sees a replacement half done.
    established: Arc<std::sync::atomic::AtomicBool>,
    queue: mpsc::Sender<Payload>,
    close: watch::Sender<Option<Closing>>,
}

impl Handle {
    /// Asks the connection to close with `code`; the first request wins.
    pub fn close(&self, code: CloseCode) {
        self.end(Closing::With(code));
    }

    fn end(&self, how: Closing) {
        self.close.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(how);
                true
            } else {
                false
            }
        });
    }
}

/// The receiving side, owned by the connection task.
pub struct Mailbox {
    pub queue: mpsc::Receiver<Payload>,
    pub close: watch::Receiver<Option<Closing>>,
}

/// A connection as the admin view lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConnectionInfo {
    pub account_id: i64,
    pub connection_id: String,
    pub since: String,
}

pub struct Hub {
    queue_len: usize,
    conns: Mutex<HashMap<i64, Handle>>,
    /// One connection of an account registers at a time here (see [`Turns`]).
    turns: Turns,
    metrics: Arc<Metrics>,
}

impl Hub {
    pub fn new(queue_len: usize, metrics: Arc<Metrics>) -> Hub {
        Hub {
            queue_len,
            conns: Mutex::new(HashMap::new()),
            turns: Turns::default(),
            metrics,
        }
    }

    /// The account's registration turn: held from [`Hub::register`] until the store has
    /// recorded the connection.
    pub async fn turn(&self, account_id: i64) -> Turn<'_> {
        self.turns.take(account_id).await
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Handle>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `connection_id` the account's connection on this node; an older one
    /// here is closed with 4001 and gets nothing more from the hub.
    pub fn register(&self, account_id: i64, connection_id: Arc<str>, since_ms: i64) -> Mailbox {
        let (queue_tx, queue) = mpsc::channel(self.queue_len);
        let (close_tx, close) = watch::channel(None);
        let handle = Handle {
            connection_id,
            since_ms,
            opened_us: crate::store::cluster_now_us(),
            established: Arc::default(),
            queue: queue_tx,
            close: close_tx,
        };
        if let Some(old) = self.conns().insert(account_id, handle) {
            old.close(CloseCode::Replaced);
        }
        Mailbox { queue, close }
    }

    /// Forgets the connection if it is still the account's current one; true if it was.
    pub fn unregister(&self, account_id: i64, connection_id: &str) -> bool {
        let mut conns = self.conns();
        match conns.get(&account_id) {
            Some(h) if &*h.connection_id == connection_id => {
                conns.remove(&account_id);
                true
            }
            _ => false,
        }
    }

    /// Queues an event for the account's connection on this node, if it has one
    /// that was open when the event was made.
    pub fn deliver(&self, account_id: i64, payload: &Payload) -> bool {
        let Some(handle) = self.conns().get(&account_id).cloned() else {
            return false;
        };
        if handle.opened_us > payload.made_us() {
            return false;
        }
        match handle.queue.try_send(payload.clone()) {
            Ok(()) => {
                self.metrics.events_sent.inc();
                true
            }
            // Counted as a slow consumer when the connection ends (it may also stall).
            Err(mpsc::error::TrySendError::Full(_)) => {
                #[cfg(feature = "seeded-defects")]
                if crate::defects::active(crate::defects::SeededDefect::SlowConsumersKept) {
                    return false;
                }
                handle.close(CloseCode::SlowConsumer);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Closes the account's connection here, if any (and if it is `connection_id` when given).
    /// It stops being the account's connection at once: it gets no more events and the admin
    /// view no longer lists it, even while its close handshake waits on a client that may
    /// never answer (a cut link, a client already gone).
    pub fn close_account(
        &self,
        account_id: i64,
        connection_id: Option<&str>,
        code: CloseCode,
    ) -> bool {
        let mut conns = self.conns();
        match conns.get(&account_id) {
            Some(h) if connection_id.is_none_or(|id| id == &*h.connection_id) => {
                h.close(code);
                conns.remove(&account_id);
                true
            }
            _ => false,
        }
    }

    /// Closes every connection (drain: 1001).
    pub fn close_all(&self, code: CloseCode) {
        for handle in self.conns().values() {
            handle.close(code);
        }
    }

    /// Drops every connection without a close frame (a node that crashes in process).
    pub fn sever_all(&self) {
        for handle in self.conns().values() {
            handle.end(Closing::Sever);
        }
    }

    pub fn is_local(&self, account_id: i64) -> bool {
        self.conns().contains_key(&account_id)
    }

    /// The account's connection on this node, if it has one.
    pub fn connection_of(&self, account_id: i64) -> Option<Arc<str>> {
        self.conns()
            .get(&account_id)
            .map(|h| h.connection_id.clone())
    }

    pub fn len(&self) -> usize {
        self.conns().len()
    }

    /// The account's connection `connection_id` is registered cloud-wide and any older one
    /// was told to close: from now on the admin view lists it.
    pub fn established(&self, account_id: i64, connection_id: &str) {
        if let Some(h) = self.conns().get(&account_id) {
            if &*h.connection_id == connection_id {
                h.established
                    .store(true, std::sync::atomic::Ordering::Release);
            }
        }
    }

    /// The established connections, for the admin view.
    pub fn list(&self) -> Vec<ConnectionInfo> {
        let mut out: Vec<_> = self
            .conns()
            .iter()
            .filter(|(_, h)| h.established.load(std::sync::atomic::Ordering::Acquire))
            .map(|(account_id, h)| ConnectionInfo {
                account_id: *account_id,
                connection_id: h.connection_id.to_string(),
                since: crate::store::rfc3339(h.since_ms),
            })
            .collect();
        out.sort_by_key(|c| c.account_id);
        out
    }

    /// The established connections as (account, connection id, since ms), for the lease
    /// upkeep. One still being registered has no record to renew yet; counted, it looked
    /// like a record that had expired, and putting it back found the account's older record
    /// and closed the new connection as replaced (4001): in a storm, thousands at a time.
    pub fn accounts(&self) -> Vec<(i64, String, i64)> {
        self.conns()
            .iter()
            .filter(|(_, h)| h.established.load(std::sync::atomic::Ordering::Acquire))
            .map(|(a, h)| (*a, h.connection_id.to_string(), h.since_ms))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;

    fn hub(queue: usize) -> Hub {
        Hub::new(queue, Arc::new(Metrics::default()))
    }

    #[test]
    fn a_second_connection_replaces_the_first() {
        let hub = hub(4);
        let first = hub.register(1, "a".into(), 0);
        let _second = hub.register(1, "b".into(), 0);
        assert_eq!(
            *first.close.borrow(),
            Some(Closing::With(CloseCode::Replaced))
        );
        assert!(
            !hub.unregister(1, "a"),
            "the replaced one must not remove the new one"
        );
        assert!(hub.unregister(1, "b"));
    }

    #[test]
    fn a_full_queue_closes_as_slow_consumer() {
        let hub = hub(1);
        let mailbox = hub.register(1, "a".into(), 0);
        let p = Payload::new(&Event::FriendRemoved { account_id: 2 });
        assert!(hub.deliver(1, &p));
        assert!(!hub.deliver(1, &p));
        assert_eq!(
            *mailbox.close.borrow(),
            Some(Closing::With(CloseCode::SlowConsumer))
        );
    }

    #[test]
    fn a_connection_never_gets_an_event_older_than_itself() {
        let hub = hub(4);
        let p = Payload::new(&Event::FriendRemoved { account_id: 2 });
        std::thread::sleep(std::time::Duration::from_millis(1));
        let _mailbox = hub.register(1, "a".into(), 0);
        assert!(!hub.deliver(1, &p));
    }

    /// Regression (issue 11): a connection was listed from the moment it reached the hub, while
    /// its registration and the close of an older one on another node were still under way; a
    /// slow store made the sampler see the account on two nodes in consecutive rounds.
    #[test]
    fn a_connection_is_listed_once_established() {
        let hub = hub(4);
        let _mailbox = hub.register(1, "a".into(), 0);
        assert!(hub.list().is_empty());
        hub.established(1, "other");
        assert!(hub.list().is_empty());
        hub.established(1, "a");
        assert_eq!(hub.list().len(), 1);
    }

    /// Regression (issue 14): the lease upkeep took a connection whose registration was
    /// still queued for an expired record, put it back against the account's older record,
    /// and closed the new connection as replaced.
    #[test]
    fn the_lease_upkeep_sees_a_connection_once_established() {
        let hub = hub(4);
        let _mailbox = hub.register(1, "a".into(), 7);
        assert!(hub.accounts().is_empty());
        hub.established(1, "a");
        assert_eq!(hub.accounts(), [(1, "a".to_string(), 7)]);
    }

    /// Regression (issue 11): a connection replaced from another node stayed listed until its
    /// client answered the close, which a client behind a cut link never does: the sampler saw
    /// the account on two nodes for seconds.
    #[test]
    fn a_connection_closed_for_its_account_leaves_at_once() {
        let hub = hub(4);
        let mailbox = hub.register(1, "a".into(), 0);
        hub.established(1, "a");
        assert!(hub.close_account(1, Some("a"), CloseCode::Replaced));
        assert_eq!(
            *mailbox.close.borrow(),
            Some(Closing::With(CloseCode::Replaced))
        );
        assert!(hub.list().is_empty(), "still listed: {:?}", hub.list());
        let p = Payload::new(&Event::FriendRemoved { account_id: 2 });
        assert!(!hub.deliver(1, &p), "no event after the close");
        assert!(!hub.unregister(1, "a"));
    }

    #[test]
    fn the_first_close_reason_wins() {
        let hub = hub(1);
        let mailbox = hub.register(1, "a".into(), 0);
        hub.close_account(1, None, CloseCode::SignedOut);
        hub.close_all(CloseCode::GoingAway);
        assert_eq!(
            *mailbox.close.borrow(),
            Some(Closing::With(CloseCode::SignedOut))
        );
    }
}
