//! `storm`: every player connection breaks at once without a close frame (`drop`), or node 1
//! drains (`stop-node`) or vanishes (`kill-node`); players reconnect by `--reconnect`. Measures
//! the seconds until 50/90/95/99/100 % of the broken players have a welcome again, and the
//! errors on the way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::LoadError;
use crate::players::player::Player;
use crate::report::{BackTimes, ScenarioReport, StormReport};
use crate::scenarios::Ctx;
use crate::settings::StormKind;

const POLL: Duration = Duration::from_millis(20);
/// After the last player is back, the friends lists fetched after the welcomes still belong to the storm.
const SETTLE: Duration = Duration::from_secs(1);
/// The node the storms that need a cluster act on ("node 1").
const NODE: usize = 0;

/// Seconds until each share of `hit` players was back, from the times of those that came back.
pub fn back_times(mut back: Vec<Duration>, hit: usize) -> BackTimes {
    back.sort();
    let at = |share: f64| {
        let need = ((share * hit as f64).ceil() as usize).max(1);
        back.get(need - 1).map(Duration::as_secs_f64)
    };
    BackTimes {
        p50: at(0.5),
        p90: at(0.9),
        p95: at(0.95),
        p99: at(0.99),
        all: at(1.0),
    }
}

pub async fn run(ctx: &Ctx) -> Result<ScenarioReport, LoadError> {
    let kind = ctx.settings.storm.kind;
    let control = match (&ctx.control, kind.needs_cluster()) {
        (_, false) => None,
        (Some(control), true) => Some(control.clone()),
        (None, true) => {
            return Err(LoadError::Refused(format!(
                "storm {} needs control over the nodes, which this target does not give",
                kind.name()
            )))
        }
    };
    let recorder = ctx.begin();
    let hit: Vec<(Arc<Player>, u64)> = ctx
        .fleet
        .online()
        .filter(|p| !kind.needs_cluster() || p.node() == NODE)
        .map(|p| (p.clone(), p.welcomes()))
        .collect();
    let bar = ctx
        .progress
        .bar(&format!("storm {}", kind.name()), hit.len() as u64);
    let start = Instant::now();
    let stopping = match (kind, control) {
        (StormKind::StopNode, Some(control)) => {
            // A drain takes a while: the players coming back are measured meanwhile.
            Some(tokio::spawn(async move { control.stop(NODE).await }))
        }
        (StormKind::KillNode, Some(control)) => {
            control.kill(NODE).await?;
            None
        }
        _ => {
            ctx.fleet.drop_all();
            None
        }
    };
    let mut back: Vec<Option<Duration>> = vec![None; hit.len()];
    let deadline = start + ctx.settings.storm.timeout;
    loop {
        let now = Instant::now();
        for ((player, welcomes), back) in hit.iter().zip(back.iter_mut()) {
            if back.is_none() && player.welcomes() > *welcomes {
                *back = Some(now - start);
            }
        }
        let count = back.iter().flatten().count();
        bar.set_position(count as u64);
        if count == hit.len() || now >= deadline {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    bar.finish();
    if let Some(stopping) = stopping {
        match stopping.await {
            Ok(result) => result?,
            Err(e) => tracing::error!("stopping node 1 failed: {e}"),
        }
    }
    tokio::time::sleep(SETTLE).await;
    let snapshot = recorder.snapshot();
    let mut report = ScenarioReport::new("storm", &snapshot, recorder.start().elapsed());
    let back: Vec<Duration> = back.into_iter().flatten().collect();
    report.storm = Some(StormReport {
        kind: kind.name(),
        reconnect: ctx.settings.reconnect,
        players_hit: hit.len(),
        players_back: back.len(),
        back_s: back_times(back.clone(), hit.len()),
        errors: snapshot.http_calls().1,
        back,
    });
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_read_off_the_sorted_return_times() {
        let back: Vec<Duration> = (1..=100)
            .rev()
            .map(|s| Duration::from_millis(s * 10))
            .collect();
        let t = back_times(back, 100);
        assert_eq!((t.p50, t.p99, t.all), (Some(0.5), Some(0.99), Some(1.0)));
        // 3 of 4 back: 50 % reached, 100 % never.
        let t = back_times(vec![Duration::from_secs(1); 3], 4);
        assert_eq!((t.p50, t.p90, t.all), (Some(1.0), None, None));
        assert!(back_times(Vec::new(), 0)
            .shares()
            .iter()
            .all(|(_, t)| t.is_none()));
    }
}
