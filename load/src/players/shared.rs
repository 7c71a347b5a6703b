//! What every player of a fleet shares, and what a device's connection reaches through it:
//! the nodes, the source addresses, the reconnect rule's seed, the faults that act on every
//! connection at once, the current recorder and the facts.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use tokio::sync::watch;

use crate::api::net::Net;
use crate::api::wire::AccountId;
use crate::measure::facts::{ConnId, Fact, FactSink};
use crate::measure::stats::{Op, Recorder, Status};
use crate::reconnect::ReconnectMode;
use crate::target::{CodeSource, NodeEndpoint};

/// A node as the players reach it.
pub(crate) struct Node {
    pub endpoint: NodeEndpoint,
    pub ws_url: String,
    pub addr: SocketAddr,
}

/// What every player of a fleet shares.
pub(crate) struct Shared {
    pub nodes: Vec<Node>,
    pub codes: Arc<dyn CodeSource>,
    pub net: Net,
    pub reconnect: ReconnectMode,
    /// The run's seed: each player's reconnect waits draw from it ([`crate::players::choices`]).
    pub seed: u64,
    /// When the fleet was made, in µs since the Unix epoch: presence versions older than it are
    /// not changes of this run.
    pub started_us: u64,
    pub drops: watch::Sender<u64>,
    pub shutdown: watch::Sender<bool>,
    pub(super) recorder: RwLock<Recorder>,
    pub(super) facts: FactSink,
    pub(super) connections: AtomicU64,
    pub(super) directory: RwLock<HashMap<AccountId, usize>>,
}

impl Shared {
    pub fn recorder(&self) -> Recorder {
        self.recorder
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Records an op of `player` (with `account`) that started at `since` (a call to node
    /// `node_index`), and its fact.
    pub fn record(
        &self,
        player: usize,
        account: Option<AccountId>,
        op: Op,
        since: Instant,
        status: Status,
        node_index: Option<usize>,
    ) {
        let latency = since.elapsed();
        self.recorder().record(op, latency, status);
        self.emit(
            player,
            account,
            Fact::Call {
                op,
                status,
                latency,
                node_index,
            },
        );
    }

    /// Emits a fact of `player` (with `account`), when somebody listens.
    pub fn emit(&self, player: usize, account: Option<AccountId>, fact: Fact) {
        self.facts.emit(player, account, fact);
    }

    /// A number for a new event connection.
    pub fn next_conn(&self) -> ConnId {
        self.connections.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn register(&self, account: AccountId, player: usize) {
        self.directory
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(account, player);
    }

    pub(super) fn player_of(&self, account: AccountId) -> Option<usize> {
        self.directory
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&account)
            .copied()
    }
}
