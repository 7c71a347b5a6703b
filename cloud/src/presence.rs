//! Presence as friends see it: who is online, and the events that tell them.
//!
//! An account is online while the cloud has a connection record for it. Going
//! online and offline are presence events with the account's current version.
//! The upkeep task renews this node's leases and retires records whose node
//! stopped renewing them (a crash), so no one stays online forever.

use futures_util::StreamExt;

#[cfg(feature = "seeded-defects")]
use crate::defects::SeededDefect;
use crate::events::{CloseCode, Event};
use crate::fence::Fence;
use crate::state::AppState;
use crate::store::{now_ms, Reasserted, StoreResult};

/// Tells the account's friends its presence now.
pub async fn announce(state: &AppState, account_id: i64) -> StoreResult<()> {
    let (presence, friends) = state.store.presence_and_friends(account_id).await?;
    #[cfg(feature = "seeded-defects")]
    if !presence.online && crate::defects::every(SeededDefect::SilentSignOffs, 2) {
        return Ok(());
    }
    state.metrics.presence_fanout.inc_by(friends.len() as u64);
    state.notify(
        &friends,
        &Event::Presence {
            account_id,
            online: presence.online,
            activity: presence.activity,
            version: presence.version,
        },
    );
    Ok(())
}

/// How many announcements are under way at once: their reads share statements (the
/// store's lookups batch what waits together), so thousands take seconds, not minutes.
const ANNOUNCE_AT_ONCE: usize = 256;

async fn announce_all(state: &AppState, accounts: &[i64]) {
    futures_util::stream::iter(accounts)
        .for_each_concurrent(ANNOUNCE_AT_ONCE, |&account| async move {
            if let Err(e) = announce(state, account).await {
                tracing::warn!(account, error = %e, "could not announce presence");
            }
        })
        .await;
}

/// Announces in a task of its own. The upkeep must not wait for it: after another node's
/// thousands of records expired, announcing them took longer than a lease, and a node
/// that waited for it before renewing let its own leases run out.
fn announce_apart(state: &AppState, accounts: Vec<i64>) {
    if accounts.is_empty() {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move { announce_all(&state, &accounts).await });
}

/// Removes this node's connection records (a restart after a crash, or the end
/// of a drain) and tells friends those accounts are offline.
pub async fn clear_own_records(state: &AppState) -> StoreResult<()> {
    let gone = state.store.clear_node(&state.config.node_id).await?;
    if !gone.is_empty() {
        tracing::info!(count = gone.len(), "cleared this node's connection records");
    }
    announce_all(state, &gone).await;
    Ok(())
}

/// How long a renewal waits for the store's clock before it goes on without.
const CLOCK_READ_LIMIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Renews the leases of this node's live connections and expires everyone's stale
/// ones, forever; lets the connections go when the leases cannot be renewed in time.
pub async fn upkeep(state: AppState) {
    let fence = Fence::new(now_ms());
    tokio::join!(renew(&state, &fence), fence.watch(&state));
}

async fn renew(state: &AppState, fence: &Fence) {
    let mut tick = tokio::time::interval(state.config.lease_renew);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let node = &state.config.node_id;
        let live = state.hub.accounts();
        #[cfg(feature = "seeded-defects")]
        let renewing = std::time::Instant::now();
        // The store's clock first (the leases about to be written are on it), never holding
        // the renewal up for long.
        match tokio::time::timeout(CLOCK_READ_LIMIT, state.store.sync_cluster_clock(1)).await {
            Ok(Ok(())) | Err(_) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not read the store's clock"),
        }
        let renewed = fence.renew(state, &live).await;
        // A renewal that hangs a whole period is a store out of reach (a cut link hangs, it
        // does not error); a busy pool only delays it.
        #[cfg(feature = "seeded-defects")]
        if renewing.elapsed() > state.config.lease_renew {
            crate::defects::fault_seen();
        }
        match renewed {
            // Fewer records than live connections: some expired while the store was out
            // of reach, and friends were told those players left. Put them back.
            Ok(renewed) if (renewed as usize) < live.len() => {
                // Connections that closed while the renewal ran are not put back.
                let live = state.hub.accounts();
                match state
                    .store
                    .reassert_connections(node, &live, state.config.lease_expiry)
                    .await
                {
                    Ok(Reasserted { back, taken }) => {
                        if !back.is_empty() {
                            tracing::info!(
                                count = back.len(),
                                "restored connection records that had expired"
                            );
                        }
                        announce_apart(state, back);
                        // Replaced on another node while the bus could not tell this one: the
                        // new node's welcome waits for this renewal (`routes::events`).
                        #[cfg(feature = "seeded-defects")]
                        let taken = if crate::defects::active(SeededDefect::NoCrossNodeReplace) {
                            Vec::new()
                        } else {
                            taken
                        };
                        for (account, connection) in &taken {
                            state.hub.close_account(
                                *account,
                                Some(connection),
                                CloseCode::Replaced,
                            );
                        }
                        if !taken.is_empty() {
                            tracing::info!(
                                count = taken.len(),
                                "closed connections replaced on another node unheard"
                            );
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not restore connection records"),
                }
            }
            Ok(_) => {}
            Err(e) => {
                #[cfg(feature = "seeded-defects")]
                crate::defects::fault_seen();
                tracing::warn!(error = %e, "could not renew connection leases");
            }
        }
        #[cfg(feature = "seeded-defects")]
        if crate::defects::active(SeededDefect::LeasesNeverExpire) {
            continue;
        }
        match state.store.expire_leases().await {
            Ok(gone) => {
                if !gone.is_empty() {
                    #[cfg(feature = "seeded-defects")]
                    crate::defects::fault_seen();
                    tracing::info!(
                        count = gone.len(),
                        "expired connection records of a silent node"
                    );
                }
                announce_apart(state, gone);
            }
            Err(e) => tracing::warn!(error = %e, "could not expire connection leases"),
        }
    }
}
