//! The players of a run and what they share: the nodes, the HTTP clients, the current recorder,
//! the facts they live through ([`crate::measure::facts`]) and the faults that act on every connection
//! at once.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rand::distr::{Alphanumeric, SampleString};
use tokio::sync::{mpsc, watch};

use crate::api::net::{Net, SourceIps};
use crate::api::wire::AccountId;
use crate::error::LoadError;
use crate::measure::facts::unix_micros;
use crate::measure::facts::{FactSink, Stamped};
use crate::measure::stats::Recorder;
use crate::players::player::Player;
use crate::players::shared::{Node, Shared};
use crate::reconnect::ReconnectMode;
use crate::target::{NodeEndpoint, Target};

/// The players of a run.
pub struct Fleet {
    shared: Arc<Shared>,
    /// The run's number of `players[0]` (not 0 on a load agent, which plays a share).
    first: usize,
    players: Vec<Arc<Player>>,
}

/// A tag for a run's players. Not from the seed on purpose: the tag must differ between runs,
/// so that a rerun against the same database makes new accounts instead of colliding with the
/// last.
pub fn new_tag() -> String {
    Alphanumeric
        .sample_string(&mut rand::rng(), 5)
        .to_lowercase()
}

impl Fleet {
    /// Makes the run's players numbered `players` (none signed in yet) against `target`,
    /// reconnecting by `reconnect` with waits drawn from `seed`. Their emails and handles carry
    /// `tag` ([`new_tag`] when `None`), so runs against the same cloud never collide.
    pub async fn new(
        target: &Target,
        players: Range<usize>,
        reconnect: ReconnectMode,
        seed: u64,
        source_ips: Option<&SourceIps>,
        tag: Option<&str>,
    ) -> Result<Fleet, LoadError> {
        let mut nodes = Vec::with_capacity(target.nodes.len());
        for endpoint in &target.nodes {
            nodes.push(resolve(endpoint).await?);
        }
        if nodes.is_empty() {
            return Err(LoadError::Refused("the target has no nodes".into()));
        }
        let net = Net::new(source_ips, players.start).map_err(|e| LoadError::Node {
            url: target.nodes[0].api.clone(),
            detail: format!("building the HTTP client: {e}"),
        })?;
        let shared = Arc::new(Shared {
            nodes,
            codes: target.codes.clone(),
            net,
            reconnect,
            seed,
            started_us: unix_micros(),
            drops: watch::Sender::new(0),
            shutdown: watch::Sender::new(false),
            recorder: RwLock::new(Recorder::new()),
            facts: FactSink::default(),
            // A share of a run (a load agent's) numbers its connections above its first
            // player's number shifted up, so no two shares give one number to two connections.
            connections: AtomicU64::new((players.start as u64) << 32),
            directory: RwLock::new(HashMap::new()),
        });
        let tag = tag.map_or_else(new_tag, str::to_owned);
        let node_count = shared.nodes.len();
        let first = players.start;
        let players = players
            .map(|index| Arc::new(Player::new(index, &tag, index % node_count, shared.clone())))
            .collect();
        Ok(Fleet {
            shared,
            first,
            players,
        })
    }

    /// The run's number of the fleet's first player.
    pub fn first(&self) -> usize {
        self.first
    }

    pub fn players(&self) -> &[Arc<Player>] {
        &self.players
    }

    /// The players whose event connection has had its welcome and is still up.
    pub fn online(&self) -> impl Iterator<Item = &Arc<Player>> {
        self.players.iter().filter(|p| p.is_online())
    }

    pub fn online_count(&self) -> usize {
        self.online().count()
    }

    /// Event connections up right now, second devices included.
    pub fn connections(&self) -> usize {
        self.players.iter().map(|p| p.connections()).sum()
    }

    /// The player with this account, once it signed in.
    pub fn by_account(&self, account: AccountId) -> Option<&Arc<Player>> {
        self.shared
            .player_of(account)
            .and_then(|index| index.checked_sub(self.first))
            .and_then(|local| self.players.get(local))
    }

    /// The players `player` is friends with by its ledger, in fleet order rather than by
    /// account id (which differs from run to run), so that choices among them repeat.
    pub fn friends_of(&self, player: &Player) -> Vec<&Arc<Player>> {
        let mut friends: Vec<&Arc<Player>> = player
            .friends()
            .into_iter()
            .filter_map(|account| self.by_account(account))
            .collect();
        friends.sort_by_key(|friend| friend.index);
        friends
    }

    pub fn node_count(&self) -> usize {
        self.shared.nodes.len()
    }

    /// Every fact of every player from now on; `None` once taken (one history per fleet).
    pub fn facts(&self) -> Option<mpsc::UnboundedReceiver<Stamped>> {
        self.shared.facts.take()
    }

    /// Where ops of every player are recorded from now on (each scenario has its own).
    pub fn set_recorder(&self, recorder: Recorder) {
        *self
            .shared
            .recorder
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = recorder;
    }

    /// Breaks every event connection at once without a close frame (the `drop` storm); players
    /// then reconnect by their rule.
    pub fn drop_all(&self) {
        self.shared.drops.send_modify(|generation| *generation += 1);
    }

    /// Closes every event connection with a close frame and waits (bounded) for the players to stop.
    pub async fn shutdown(&self) {
        self.shared.shutdown.send_replace(true);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        for player in &self.players {
            player.stop_connection(deadline).await;
        }
    }
}

/// The event connection's URL of the node at `api` (`host:port`): `wss://` for `https://`.
pub(crate) fn events_url(api: &reqwest::Url, host: &str, port: u16) -> String {
    let scheme = match api.scheme() {
        "https" => "wss",
        _ => "ws",
    };
    format!("{scheme}://{host}:{port}/v1/events")
}

async fn resolve(endpoint: &NodeEndpoint) -> Result<Node, LoadError> {
    let fail = |detail: String| LoadError::Node {
        url: endpoint.api.clone(),
        detail,
    };
    let url = reqwest::Url::parse(&endpoint.api).map_err(|e| fail(e.to_string()))?;
    let host = url
        .host_str()
        .ok_or_else(|| fail("no host".into()))?
        .to_string();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| fail("no port".into()))?;
    let addr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| fail(e.to_string()))?
        .next()
        .ok_or_else(|| fail("the host resolves to no address".into()))?;
    Ok(Node {
        endpoint: endpoint.clone(),
        ws_url: events_url(&url, &host, port),
        addr,
    })
}
