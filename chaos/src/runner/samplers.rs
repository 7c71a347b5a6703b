//! What the run samples on its own clock: every node's connections four times a second
//! (for the duplicate-sessions check), and one series entry a second (players online,
//! calls, errors, latency, each node's state, CPU, memory and store connections in use).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::events::{Event, EventLog, NodeTick, Tick};

use super::abort::GiveUp;
use super::load::Online;
use super::players::{p99_ms, Recorder};
use super::topology::NodeAddrs;

/// Samples of the admin view per second; the check needs at least 4.
const SAMPLES_PER_SECOND: u32 = 5;
/// The cloud's gauge of store connections in use (`/metrics`, prefix `anyplay_`).
const POOL_BUSY: &str = "anyplay_store_pool_busy";

#[derive(Deserialize)]
struct Connections {
    connections: Vec<Connection>,
}

#[derive(Deserialize)]
struct Connection {
    account_id: u64,
}

/// Accounts that appear on more than one connection across all the views of one round.
fn duplicates(views: &[Vec<u64>]) -> Vec<u64> {
    let mut count: BTreeMap<u64, u32> = BTreeMap::new();
    for account in views.iter().flatten() {
        *count.entry(*account).or_default() += 1;
    }
    count
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(a, _)| a)
        .collect()
}

/// Samples every node's `GET /v1/admin/connections` until `stop`.
pub async fn duplicates_sampler(
    log: EventLog,
    nodes: Vec<NodeAddrs>,
    mut stop: watch::Receiver<bool>,
) {
    // A paused node does not answer: a short timeout keeps the rounds on time.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(150))
        .build()
        .expect("a plain HTTP client builds");
    let mut tick = tokio::time::interval(Duration::from_secs(1) / SAMPLES_PER_SECOND);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut round = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let views = futures_util::future::join_all(nodes.iter().map(|n| {
            let http = http.clone();
            async move {
                let url = format!("http://{}/v1/admin/connections", n.ops);
                match http.get(url).send().await {
                    Ok(r) => r.json::<Connections>().await.ok(),
                    Err(_) => None,
                }
            }
        }))
        .await;
        let views: Vec<Vec<u64>> = views
            .into_iter()
            .flatten()
            .map(|v| v.connections.into_iter().map(|c| c.account_id).collect())
            .collect();
        round += 1;
        let _ = log.record(Event::CheckSample {
            round,
            duplicates: duplicates(&views),
        });
    }
}

/// Where each node's process is, for its CPU and memory.
pub type Pids = Arc<std::sync::Mutex<BTreeMap<String, u32>>>;

/// What a second's tick is read from: the players' counts and the nodes' processes.
pub struct Sources {
    pub recorder: Arc<Recorder>,
    pub online: Online,
    pub nodes: Vec<NodeAddrs>,
    pub pids: Pids,
}

/// One `load_tick` a second until `stop`, each fed to the plan's `abort` when it has one.
pub async fn ticks(
    log: EventLog,
    sources: Sources,
    up: impl Fn(&str) -> bool,
    mut give_up: Option<GiveUp>,
    mut stop: watch::Receiver<bool>,
) {
    let Sources {
        recorder,
        online,
        nodes,
        pids,
    } = sources;
    let mut system = System::new();
    // A paused node does not answer: its scrape gives up well within the second.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("a plain HTTP client builds");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let second = recorder.take_second();
        system.refresh_processes_specifics(
            ProcessesToUpdate::All,
            true,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
        let pids = pids.lock().map(|p| p.clone()).unwrap_or_default();
        let pools = pool_busy(&http, &nodes).await;
        let nodes = nodes
            .iter()
            .zip(pools)
            .enumerate()
            .map(|(i, (n, pool_busy))| {
                let (http_calls, http_errors) =
                    second.calls_by_node.get(&i).copied().unwrap_or_default();
                let process = pids
                    .get(&n.name)
                    .and_then(|pid| system.process(Pid::from_u32(*pid)));
                let tick = NodeTick {
                    up: up(&n.name),
                    cpu: process.map_or(0.0, |p| f64::from(p.cpu_usage()) / 100.0),
                    rss_mb: process.map_or(0.0, |p| p.memory() as f64 / 1_048_576.0),
                    pool_busy,
                    http_calls,
                    http_errors,
                };
                (n.name.clone(), tick)
            })
            .collect();
        let tick = Tick {
            online: online() as u64,
            welcomes: second.welcomes,
            disconnects: second.disconnects,
            http_calls: second.calls.calls,
            http_errors: second.calls.errors,
            limited: second.calls.limited,
            p99_ms: second.calls.p99_ms(),
            presence_p99_ms: p99_ms(&second.presence),
            nodes,
        };
        if let Some(give_up) = &mut give_up {
            give_up.second(&tick, &log);
        }
        let _ = log.record(Event::LoadTick(tick));
    }
}

/// Store connections each node has in use now; 0 for a node that does not answer in time.
async fn pool_busy(http: &reqwest::Client, nodes: &[NodeAddrs]) -> Vec<u64> {
    futures_util::future::join_all(nodes.iter().map(|node| async move {
        let url = format!("http://{}/metrics", node.ops);
        anyplay_load::target::metrics::scrape(http, &url)
            .await
            .ok()
            .and_then(|metrics| metrics.get(POOL_BUSY).copied())
            .map_or(0, |busy| busy as u64)
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_on_two_nodes_is_a_duplicate() {
        assert_eq!(duplicates(&[vec![1, 2], vec![3, 2]]), vec![2]);
        assert_eq!(duplicates(&[vec![1, 1]]), vec![1]);
        assert!(duplicates(&[vec![1], vec![2]]).is_empty());
    }
}
