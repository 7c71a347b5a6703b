//! A plan's local load agents (`agents_local: true`): `agent-N` processes of this very binary
//! (`anyplay-chaos agent`), supervised like the services but always as processes, whatever
//! the backend, so that the players get cores of their own and no process of the fault
//! proxies. Each agent's players leave from their own loopback addresses, away from the
//! ephemeral-port wall of one address.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::backend::process::ProcessBackend;
use anyplay_load::seal::SECRET_ENV;

use crate::backend::Command;
use crate::events::{Event, EventLog};
use crate::supervisor::services::log_path;
use crate::supervisor::{Probe, ServiceEvent, ServiceEventKind, ServiceSpec, Supervisor};

use super::topology::part;
use super::RunError;

/// How long an agent may take to stop its players once told to.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The local agents of a run, stopped by [`LocalAgents::stop`] (or killed with the supervisor).
pub struct LocalAgents {
    supervisor: Supervisor,
    exits: JoinHandle<()>,
}

/// The hosts of the run's `nodes` (public URLs), for the agents' `--allow-target`.
fn allowed(nodes: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = nodes
        .iter()
        .filter_map(|n| reqwest::Url::parse(n).ok()?.host_str().map(str::to_owned))
        .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned())
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Agent `n`'s players' source addresses: `127.1.n.1` to `127.1.n.250`.
fn source_ips(n: u32) -> String {
    format!("127.1.{n}.1-127.1.{n}.250")
}

impl LocalAgents {
    /// Starts `count` agents waiting for work on `nats_url`, each logging to `logs/agent-N.log`.
    /// They share `secret` (as text) with the run's coordinator, and play against the run's
    /// `nodes` (their public URLs) only.
    pub async fn start(
        count: u32,
        nats_url: &str,
        secret: &str,
        nodes: &[String],
        dir: &Path,
        log: &EventLog,
    ) -> Result<LocalAgents, RunError> {
        let program: PathBuf =
            std::env::current_exe().map_err(part("cannot find this program to run agents with"))?;
        let (supervisor, events) = Supervisor::new(Arc::new(ProcessBackend));
        let exits = tokio::spawn(record_exits(events, log.clone()));
        let agents = LocalAgents { supervisor, exits };
        for n in 1..=count {
            let name = format!("agent-{n}");
            let mut command = Command::new(&program, log_path(dir, &name))
                .args(["agent", "--nats", nats_url, "--name", &name])
                .args(["--source-ips", &source_ips(n)])
                .env(SECRET_ENV, secret)
                .cwd(dir);
            for host in allowed(nodes) {
                command = command.args(["--allow-target", &host]);
            }
            let started = async {
                let agent = agents
                    .supervisor
                    .add(ServiceSpec::new(&name, command, Probe::Launched))
                    .await?;
                agent.start().await
            };
            if let Err(e) = started.await {
                agents.stop().await;
                return Err(part(name)(e));
            }
        }
        Ok(agents)
    }

    /// Ends every agent (SIGTERM, SIGKILL after a grace).
    pub async fn stop(self) {
        self.supervisor.shutdown_all(STOP_GRACE).await;
        self.supervisor.clean_up().await;
        // Every exit has been seen once the shutdown returned.
        self.exits.abort();
    }
}

/// An agent that ends on its own is a crash of a child: the history says so.
async fn record_exits(mut events: mpsc::UnboundedReceiver<ServiceEvent>, log: EventLog) {
    while let Some(event) = events.recv().await {
        match event.kind {
            ServiceEventKind::Exit(exit) => {
                let _ = log.record_at(
                    event.at,
                    Event::Note {
                        text: format!("load agent {} ended: {exit}", event.service),
                    },
                );
            }
            ServiceEventKind::Stopping => return,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_has_addresses_of_its_own() {
        let ranges: Vec<anyplay_load::api::net::SourceIps> =
            (1..=4).map(|n| source_ips(n).parse().unwrap()).collect();
        assert_eq!(ranges[0], "127.1.1.1-127.1.1.250".parse().unwrap());
        assert_ne!(ranges[0], ranges[1]);
    }
}
