//! The store's rows past their use, deleted while a node runs (`Store::purge_expired`):
//! every node purges, so a cluster keeps purging while any node is up.

use std::time::Duration;

use crate::ratelimit::CALL_WINDOW;
use crate::state::AppState;
use crate::store::cluster_now_ms;

/// How often a node purges: the tables grow by at most this much of traffic in between.
const EVERY: Duration = Duration::from_secs(60);

/// Purges every [`EVERY`], forever; a failed purge is tried again at the next.
pub async fn purge(state: AppState) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // On the cluster's clock, as the rate windows are: a node whose own clock runs ahead
        // would otherwise purge the other nodes' live windows.
        match state
            .store
            .purge_expired(cluster_now_ms(), CALL_WINDOW)
            .await
        {
            Ok(0) => {}
            Ok(count) => tracing::debug!(count, "purged rows past their use"),
            Err(error) => tracing::warn!(%error, "purging rows past their use"),
        }
    }
}
