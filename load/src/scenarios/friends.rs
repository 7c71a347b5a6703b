//! `friends`: each online player befriends the next `--friends/2` players on a ring (request by
//! handle, then the other accepts), as fast as `--max-in-flight` calls at once allow.

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;

use crate::api::wire::FriendStatus;
use crate::players::player::Player;
use crate::report::ScenarioReport;
use crate::scenarios::Ctx;

/// The ring's pairs: each of `n` players with the next `half`, never a pair twice or with itself;
/// a whole round of the ring per step, so that pairs near each other in the list (made at once)
/// share few players, each of whom then needs few connections at once.
pub fn ring_pairs(n: usize, half: usize) -> Vec<(usize, usize)> {
    // Past (n-1)/2 steps ahead, a pair would come back reversed.
    let steps = half.min(n.saturating_sub(1) / 2);
    (1..=steps)
        .flat_map(|k| (0..n).map(move |i| (i, (i + k) % n)))
        .collect()
}

pub async fn run(ctx: &Ctx) -> ScenarioReport {
    let recorder = ctx.begin();
    let ring: Vec<Arc<Player>> = ctx.fleet.players()[..ctx.settings.players]
        .iter()
        .filter(|p| p.is_online())
        .cloned()
        .collect();
    let pairs = ring_pairs(ring.len(), ctx.settings.friends / 2);
    let bar = ctx.progress.bar("friends", pairs.len() as u64);
    futures_util::stream::iter(pairs)
        .for_each_concurrent(ctx.settings.max_in_flight, |(a, b)| {
            let (asker, asked, bar) = (&ring[a], &ring[b], bar.clone());
            async move {
                if let Ok(FriendStatus::Requested) =
                    asker.request_friend(asked, Instant::now()).await
                {
                    // Failures are recorded; the ledger keeps only what was acknowledged.
                    let _ = asked.accept_friend(asker, Instant::now()).await;
                }
                bar.inc(1);
            }
        })
        .await;
    bar.finish();
    ScenarioReport::new("friends", &recorder.snapshot(), recorder.start().elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_player_gets_friends_on_both_sides_of_the_ring() {
        let pairs = ring_pairs(10, 5);
        // 10 players, 4 steps each (5 would pair 0-5 and 5-0): 40 distinct pairs.
        let distinct: HashSet<(usize, usize)> = pairs
            .iter()
            .map(|(a, b)| ((*a).min(*b), (*a).max(*b)))
            .collect();
        assert_eq!((pairs.len(), distinct.len()), (40, 40));
        let pairs = ring_pairs(100, 5);
        assert_eq!(pairs.len(), 500);
        for p in 0..100 {
            let friends = pairs.iter().filter(|(a, b)| *a == p || *b == p).count();
            assert_eq!(friends, 10, "player {p}");
        }
        assert!(ring_pairs(1, 5).is_empty());
    }
}
