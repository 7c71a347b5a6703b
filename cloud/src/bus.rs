//! Delivery of events to accounts wherever their connection is.
//!
//! One node (`Local`): the hub has every connection, delivery is direct.
//!
//! A cluster (`Nats`): every node subscribes to its own subject
//! `anyplay.<cluster id>.node.<node id>`, so clusters that share a NATS never hear each
//! other (`--cluster-id`). A router task looks up which node holds each
//! recipient (the `connections` table, which also carries the one-connection-
//! per-account rule) and publishes one message per node that has recipients, so
//! an event never travels to nodes that do not need it. Recipients connected
//! here get the event at once, from the caller: they never wait for NATS. The
//! rest goes through a bounded queue that one task handles in order, so two
//! events to one account arrive in the order they were made; lookups are
//! batched. While NATS does not take messages the queue fills, and what does
//! not fit is shed and counted (`anyplay_nats_shed_total`).
//!
//! What a NATS or store outage can lose: events routed while the node is cut
//! off. Clients catch up with `GET /v1/friends` after their next welcome, as
//! the contract tells them to; `cloud/API.md` says so.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::events::{CloseCode, Hub, Payload};
use crate::metrics::{BusMetrics, Metrics};
use crate::store::Store;

/// Largest number of queued deliveries a router handles per store lookup.
const BATCH: usize = 256;

/// Longest a replacing node waits for the old node to say it closed the old connection.
const CLOSE_ANSWER_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Longest a router waits for the store to say where recipients are connected.
const LOOKUP_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a router keeps asking a store that does not answer before it gives a batch up:
/// a store that is only slow (paused, starved, far away) must delay events, not lose them,
/// while one cut off for good must not hold the queue forever.
const LOOKUP_GIVE_UP: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
#[error("cannot reach NATS at {url}: {source}")]
pub struct BusError {
    url: String,
    source: Box<dyn std::error::Error + Send + Sync>,
}

/// What goes from one node to another.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Wire {
    /// An event (JSON text, without `seq`) for these accounts, made at `made_us`.
    Event {
        to: Vec<i64>,
        event: String,
        made_us: i64,
    },
    /// Close this account's connection (only if it is still `connection_id`, when given).
    Close {
        account_id: i64,
        connection_id: Option<String>,
        code: u16,
    },
}

/// A node's answer to [`Wire::Close`].
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct CloseAnswer {
    /// Whether it held the connection, and closed it.
    closed: bool,
}

impl CloseAnswer {
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a bool serializes")
    }

    fn decode(bytes: &[u8]) -> Option<CloseAnswer> {
        serde_json::from_slice(bytes).ok()
    }
}

impl Wire {
    fn encode(&self) -> serde_json::Result<Vec<u8>> {
        #[cfg(feature = "seeded-defects")]
        if crate::defects::active(crate::defects::SeededDefect::BusFieldRenamed) {
            let message = crate::defects::bus_field(serde_json::to_value(self)?, true);
            return serde_json::to_vec(&message);
        }
        serde_json::to_vec(self)
    }

    fn decode(bytes: &[u8]) -> serde_json::Result<Wire> {
        #[cfg(feature = "seeded-defects")]
        if crate::defects::active(crate::defects::SeededDefect::BusFieldRenamed) {
            let message = serde_json::from_slice(bytes)?;
            return serde_json::from_value(crate::defects::bus_field(message, false));
        }
        serde_json::from_slice(bytes)
    }
}

/// A delivery waiting for the router.
enum Outgoing {
    Event {
        to: Vec<i64>,
        payload: Payload,
    },
    Close {
        account_id: i64,
        code: CloseCode,
    },
    /// Answered once everything queued before it is published and flushed.
    Flush(oneshot::Sender<()>),
}

pub enum Bus {
    Local,
    Nats(Box<NatsBus>),
}

pub struct NatsBus {
    client: async_nats::Client,
    subjects: Subjects,
    queue: mpsc::Sender<Outgoing>,
    metrics: BusMetrics,
}

impl NatsBus {
    /// Queues a delivery for the router, or sheds it when the queue is full.
    fn enqueue(&self, outgoing: Outgoing) {
        // Counted before it is in: the router may take it out at once.
        self.metrics.queued.inc();
        if let Err(e) = self.queue.try_send(outgoing) {
            self.metrics.queued.dec();
            if matches!(e, mpsc::error::TrySendError::Full(_)) {
                self.metrics.shed.inc();
            }
        }
    }
}

/// The NATS subjects of one cluster.
#[derive(Debug, Clone)]
struct Subjects {
    cluster: String,
}

impl Subjects {
    /// Where `node` hears what the others send it.
    fn node(&self, node: &str) -> String {
        format!("anyplay.{}.node.{node}", self.cluster)
    }

    /// Where each node says it renewed its leases; the fences of the others listen.
    fn renewals(&self) -> String {
        format!("anyplay.{}.renewals", self.cluster)
    }
}

/// Where a cluster's bus is, and how a node of it signs in there.
#[derive(Debug, Clone, Copy)]
pub struct BusAddress<'a> {
    pub url: &'a str,
    /// The cluster's id: part of every subject.
    pub cluster: &'a str,
    /// A NATS credentials file (a JWT and its seed), when the server asks for one.
    pub creds: Option<&'a std::path::Path>,
}

impl Bus {
    /// Connects to NATS when a URL is configured; reconnects forever by itself.
    pub async fn connect(
        address: Option<BusAddress<'_>>,
        queue_len: usize,
        node_id: &str,
        hub: Arc<Hub>,
        store: Store,
        metrics: &Metrics,
    ) -> Result<Bus, BusError> {
        let Some(BusAddress {
            url,
            cluster,
            creds,
        }) = address
        else {
            return Ok(Bus::Local);
        };
        let error = |source: Box<dyn std::error::Error + Send + Sync>| BusError {
            url: crate::nats_auth::shown(url),
            source,
        };
        let subjects = Subjects {
            cluster: cluster.to_string(),
        };
        let bus_metrics = metrics.bus.clone();
        let reconnects = bus_metrics.reconnects.clone();
        let (options, url) = crate::nats_auth::options(url, creds)
            .await
            .map_err(|e| error(e.into()))?;
        let client = options
            .name(node_id)
            .max_reconnects(None)
            .retry_on_initial_connect()
            .event_callback(move |event| {
                let reconnects = reconnects.clone();
                async move {
                    match event {
                        async_nats::Event::Connected => {
                            reconnects.inc();
                            tracing::info!("connected to NATS");
                        }
                        async_nats::Event::Disconnected => {
                            tracing::warn!("lost NATS; reconnecting")
                        }
                        other => tracing::debug!(event = %other, "NATS"),
                    }
                }
            })
            .connect(url.as_str())
            .await
            .map_err(|e| error(e.into()))?;
        let (queue, rx) = mpsc::channel(queue_len);
        tokio::spawn(receive(
            client.clone(),
            subjects.node(node_id),
            hub.clone(),
            bus_metrics.clone(),
        ));
        tokio::spawn(route(
            rx,
            client.clone(),
            subjects.clone(),
            node_id.to_string(),
            hub,
            store,
            bus_metrics.clone(),
        ));
        Ok(Bus::Nats(Box::new(NatsBus {
            client,
            subjects,
            queue,
            metrics: bus_metrics,
        })))
    }

    /// Tells the other nodes this one renewed its leases (see [`crate::fence`]).
    pub async fn announce_renewal(&self, node: &str) {
        if let Bus::Nats(n) = self {
            if let Err(e) = n
                .client
                .publish(n.subjects.renewals(), node.as_bytes().to_vec().into())
                .await
            {
                tracing::debug!(error = %e, "could not announce a lease renewal");
            }
        }
    }

    /// The renewals the nodes announce, each as its node's id; `None` for one node.
    pub async fn renewals(&self) -> Option<async_nats::Subscriber> {
        match self {
            Bus::Nats(n) => n.client.subscribe(n.subjects.renewals()).await.ok(),
            Bus::Local => None,
        }
    }

    /// True when other nodes may hold this cloud's accounts.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Bus::Nats(_))
    }

    /// True when delivery to other nodes works (always, for one node).
    pub fn is_connected(&self) -> bool {
        match self {
            Bus::Local => true,
            Bus::Nats(n) => n.client.connection_state() == async_nats::connection::State::Connected,
        }
    }

    /// Delivers an event to each account, wherever it is connected.
    pub fn send(&self, hub: &Hub, to: &[i64], payload: Payload) {
        let elsewhere: Vec<i64> = to
            .iter()
            .copied()
            .filter(|&account| !hub.deliver(account, &payload))
            .collect();
        if let (Bus::Nats(n), false) = (self, elsewhere.is_empty()) {
            n.enqueue(Outgoing::Event {
                to: elsewhere,
                payload,
            });
        }
    }

    /// Closes the account's connection wherever it is.
    pub fn close(&self, hub: &Hub, account_id: i64, code: CloseCode) {
        if hub.close_account(account_id, None, code) {
            return;
        }
        if let Bus::Nats(n) = self {
            n.enqueue(Outgoing::Close { account_id, code });
        }
    }

    /// Waits until every delivery queued so far has gone out to NATS: a
    /// draining node calls it last, so the offline events of the sockets it
    /// just closed are not lost when the process exits.
    pub async fn flush(&self) {
        if let Bus::Nats(n) = self {
            let (done, flushed) = oneshot::channel();
            // Waits for room: what is already queued must go out first.
            n.metrics.queued.inc();
            if n.queue.send(Outgoing::Flush(done)).await.is_ok() {
                let _ = flushed.await;
            } else {
                n.metrics.queued.dec();
            }
        }
    }

    /// Tells `node` to close a connection that a newer one replaced, and says whether it
    /// did (see [`RemoteClose`]).
    pub async fn close_remote(
        &self,
        node: &str,
        account_id: i64,
        connection_id: &str,
        code: CloseCode,
    ) -> RemoteClose {
        let Bus::Nats(n) = self else {
            return RemoteClose::Done;
        };
        let wire = Wire::Close {
            account_id,
            connection_id: Some(connection_id.to_string()),
            code: code.code(),
        };
        let Ok(body) = wire.encode() else {
            return RemoteClose::NoAnswer;
        };
        n.metrics.messages_out.inc();
        let asked = n.client.request(n.subjects.node(node), body.into());
        match tokio::time::timeout(CLOSE_ANSWER_LIMIT, asked).await {
            Ok(Ok(answer)) => match CloseAnswer::decode(&answer.payload) {
                Some(CloseAnswer { closed: false }) => RemoteClose::NotHeld,
                // An older node answers with nothing: it closed what it held, if anything.
                Some(CloseAnswer { closed: true }) | None => RemoteClose::Done,
            },
            Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                RemoteClose::NoNode
            }
            Ok(Err(e)) => {
                tracing::warn!(node, error = %e, "could not ask a node to close a replaced connection");
                RemoteClose::NoAnswer
            }
            Err(_) => RemoteClose::NoAnswer,
        }
    }
}

/// What the node holding an older connection answered its replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteClose {
    /// It closed the connection.
    Done,
    /// It held no such connection: the record's welcome was shed after the record was
    /// written, or the connection ended and its record is not yet removed.
    NotHeld,
    /// Nobody listens under that node's name: the node is gone, and its sockets with it.
    NoNode,
    /// No answer in time: the bus, or the node, is out of reach.
    NoAnswer,
}

async fn publish(client: &async_nats::Client, metrics: &BusMetrics, subject: String, wire: &Wire) {
    let Ok(body) = wire.encode() else {
        return;
    };
    match client.publish(subject.clone(), body.into()).await {
        Ok(()) => {
            metrics.messages_out.inc();
        }
        Err(e) => tracing::warn!(subject, error = %e, "could not publish to NATS"),
    }
}

/// Handles what other nodes send to this one, on its `subject`.
async fn receive(client: async_nats::Client, subject: String, hub: Arc<Hub>, metrics: BusMetrics) {
    let mut sub = loop {
        match client.subscribe(subject.clone()).await {
            Ok(sub) => break sub,
            Err(e) => {
                tracing::warn!(error = %e, "cannot subscribe to NATS; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    };
    while let Some(msg) = sub.next().await {
        metrics.messages_in.inc();
        match Wire::decode(&msg.payload) {
            Ok(Wire::Event { to, event, made_us }) => {
                if let Some(payload) = Payload::from_json(&event, made_us) {
                    for account in to {
                        #[cfg(feature = "seeded-defects")]
                        if crate::defects::dropped_about(&event) {
                            // Named in the log, so a self-test can tell which drops its
                            // check could judge.
                            tracing::warn!(account, event = %event, "seeded defect: dropped");
                            continue;
                        }
                        hub.deliver(account, &payload);
                    }
                }
            }
            Ok(Wire::Close {
                account_id,
                connection_id,
                code,
            }) => {
                let closed = CloseCode::from_code(code).is_some_and(|code| {
                    hub.close_account(account_id, connection_id.as_deref(), code)
                });
                // The replacing node sends its welcome once it hears this.
                if let Some(reply) = msg.reply {
                    let answer = CloseAnswer { closed }.encode();
                    if let Err(e) = client.publish(reply, answer.into()).await {
                        tracing::warn!(error = %e, "could not answer a close");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "unreadable message on the bus"),
        }
    }
}

/// Where `ids` are connected, asked again while the store does not answer; past
/// [`LOOKUP_GIVE_UP`] the batch reaches only the players connected here (nobody elsewhere).
async fn look_up<F, Fut>(lookup: F) -> HashMap<i64, String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<Vec<(i64, String)>>>,
{
    let started = tokio::time::Instant::now();
    loop {
        let failure = match tokio::time::timeout(LOOKUP_LIMIT, lookup()).await {
            Ok(Ok(found)) => return found.into_iter().collect(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {LOOKUP_LIMIT:?}"),
        };
        if started.elapsed() >= LOOKUP_GIVE_UP {
            tracing::warn!(
                error = %failure,
                "cannot look up where accounts are connected: their events are lost"
            );
            return HashMap::new();
        }
        tracing::debug!(error = %failure, "looking up where accounts are connected: again");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Sends queued deliveries to the nodes that hold their recipients, in order.
async fn route(
    mut rx: mpsc::Receiver<Outgoing>,
    client: async_nats::Client,
    subjects: Subjects,
    node: String,
    hub: Arc<Hub>,
    store: Store,
    metrics: BusMetrics,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        metrics.queued.dec_by(batch.len() as i64);
        // Recipients connected here need no lookup.
        let remote: HashSet<i64> = batch
            .iter()
            .flat_map(|o| match o {
                Outgoing::Event { to, .. } => to.clone(),
                Outgoing::Close { account_id, .. } => vec![*account_id],
                Outgoing::Flush(_) => Vec::new(),
            })
            .filter(|a| !hub.is_local(*a))
            .collect();
        let nodes: HashMap<i64, String> = if remote.is_empty() {
            HashMap::new()
        } else {
            let ids: Vec<i64> = remote.into_iter().collect();
            look_up(|| store.connection_nodes(&ids)).await
        };
        for outgoing in batch {
            match outgoing {
                Outgoing::Event { to, payload } => {
                    // Those connected here had it from `send`; one that connected
                    // since is newer than the event and must not get it.
                    let mut by_node: HashMap<&str, Vec<i64>> = HashMap::new();
                    for account in to {
                        if let Some(n) = nodes.get(&account).filter(|n| **n != node) {
                            by_node.entry(n).or_default().push(account);
                        }
                    }
                    for (target, to) in by_node {
                        let wire = Wire::Event {
                            to,
                            event: payload.as_str().to_string(),
                            made_us: payload.made_us(),
                        };
                        publish(&client, &metrics, subjects.node(target), &wire).await;
                    }
                }
                Outgoing::Close { account_id, code } => {
                    if let Some(target) = nodes.get(&account_id).filter(|n| **n != node) {
                        let wire = Wire::Close {
                            account_id,
                            connection_id: None,
                            code: code.code(),
                        };
                        publish(&client, &metrics, subjects.node(target), &wire).await;
                    }
                }
                Outgoing::Flush(done) => {
                    if let Err(e) = client.flush().await {
                        tracing::warn!(error = %e, "could not flush NATS");
                    }
                    let _ = done.send(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that answers only after `LOOKUP_LIMIT` and more (paused, starved) still
    /// routes the batch: the router asks again instead of dropping it.
    #[tokio::test]
    async fn a_slow_store_delays_routing_and_loses_nothing() {
        let answers_from = tokio::time::Instant::now() + LOOKUP_LIMIT + LOOKUP_LIMIT / 2;
        let asked = std::sync::atomic::AtomicU32::new(0);
        let found = look_up(|| {
            asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                tokio::time::sleep_until(answers_from).await;
                Ok(vec![(7, "node-2".to_owned())])
            }
        })
        .await;
        assert_eq!(found.get(&7).map(String::as_str), Some("node-2"));
        assert!(asked.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    }

    #[test]
    fn wire_messages_round_trip() {
        let w = Wire::Close {
            account_id: 3,
            connection_id: Some("c".into()),
            code: 4001,
        };
        let text = serde_json::to_string(&w).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"close","account_id":3,"connection_id":"c","code":4001}"#
        );
        assert!(matches!(
            serde_json::from_str::<Wire>(&text).unwrap(),
            Wire::Close { code: 4001, .. }
        ));
    }
}
