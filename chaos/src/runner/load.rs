//! The players of a run as the runner drives them, in this process or over load agents
//! (`load.agents`): the same steps either way (warm up, play beside the timeline, some leave
//! for good, the final reads, the report), and every fact the players live into the history.
//! An agent lost on the way is recorded (`agent_lost`), so the checks it leaves without
//! evidence say `unknown`, and the load report says `incomplete`.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyplay_load::agents::{Phase, Played, Session};
use anyplay_load::api::wire::SessionId;
use anyplay_load::measure::facts::Stamped;
use anyplay_load::measure::progress::Progress;
use anyplay_load::players::final_reads::{self, FinalReads};
use anyplay_load::report::{Report, ScenarioReport};
use anyplay_load::run::{warm_up, Run};
use anyplay_load::scenarios::mixed;
use anyplay_load::scenarios::traffic::{self, Driven};
use anyplay_load::settings::{AgentsSettings, Settings};
use anyplay_load::{LoadError, Target};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::events::{Event, EventLog};
use crate::plan::Plan;

use anyplay_load::seal::Secret;

use super::agents::LocalAgents;
use super::players::FINAL_READS_LIMIT;
use super::topology::{part, TopologyError};
use super::RunError;

/// Players online now, for the series.
pub type Online = Arc<dyn Fn() -> usize + Send + Sync>;

/// The players, wherever they play.
pub enum Load {
    InProcess {
        run: Run,
        playing: Option<(JoinHandle<ScenarioReport>, JoinHandle<Driven>)>,
    },
    Agents(Box<Agents>),
}

/// The players over load agents.
pub struct Agents {
    session: Session,
    /// The agents this run started itself, if it did.
    local: Option<LocalAgents>,
    log: EventLog,
    /// The lost agents already in the history.
    recorded_lost: BTreeSet<String>,
}

impl Load {
    /// The players of `settings` against `target`, and the receiver of every fact they live.
    /// With `load.agents`, starts the local agents first when the plan asks for them.
    pub async fn start(
        plan: &Plan,
        settings: &Settings,
        target: Target,
        nats_url: Option<&str>,
        dir: &Path,
        log: &EventLog,
    ) -> Result<(Load, mpsc::UnboundedReceiver<Stamped>), RunError> {
        let Some(agents) = &plan.load.agents else {
            let run = Run::start(settings, target, Progress::stderr()).await?;
            let facts = run.ctx.fleet.facts().ok_or(RunError::FactsTaken)?;
            return Ok((Load::InProcess { run, playing: None }, facts));
        };
        let nats_url = agents
            .nats
            .as_deref()
            .or(nats_url)
            .ok_or(TopologyError::Refused(
                "load agents need a NATS: the plan has none".into(),
            ))?
            .to_owned();
        // Agents the run starts share a fresh secret with it; agents found on another NATS
        // share the one in the supervisor's environment.
        let (secret, local) = match agents.local {
            true => {
                let (secret, text) = Secret::fresh();
                let nodes: Vec<String> = target.nodes.iter().map(|n| n.api.clone()).collect();
                let count = agents.count.get();
                let local = LocalAgents::start(count, &nats_url, &text, &nodes, dir, log).await?;
                (secret, Some(local))
            }
            false => {
                let secret =
                    Secret::load(None).map_err(part(format!("load.agents on {nats_url}")))?;
                (secret, None)
            }
        };
        let wanted = AgentsSettings {
            count: agents.count.get() as usize,
            nats_url,
            nats_creds: None,
            secret,
        };
        let spinner = Progress::stderr().spinner("agents");
        let started = Session::start(settings, &target, &wanted, true, &spinner).await;
        spinner.finish_and_clear();
        match started {
            Ok((session, Some(facts))) => {
                let load = Load::Agents(Box::new(Agents {
                    session,
                    local,
                    log: log.clone(),
                    recorded_lost: BTreeSet::new(),
                }));
                Ok((load, facts))
            }
            Ok((session, None)) => {
                session.abort().await;
                stop_local(local).await;
                Err(RunError::FactsTaken)
            }
            Err(e) => {
                stop_local(local).await;
                Err(e.into())
            }
        }
    }

    /// How many players are online now.
    pub fn online(&self) -> Online {
        match self {
            Load::InProcess { run, .. } => {
                let fleet = run.ctx.fleet.clone();
                Arc::new(move || fleet.online_count())
            }
            Load::Agents(agents) => Arc::new(agents.session.online()),
        }
    }

    /// The login wave and the friend graph.
    pub async fn warm_up(&mut self) -> Result<Vec<ScenarioReport>, RunError> {
        match self {
            Load::InProcess { run, .. } => Ok(warm_up(&run.ctx).await?),
            Load::Agents(agents) => Ok(agents.phase(Phase::WarmUp).await?.scenarios),
        }
    }

    /// Starts what the players keep doing beside the timeline: the plan's presence, sessions
    /// and cards until the run's end, and its traffic for `traffic`.
    pub async fn play(&mut self, traffic: Duration) -> Result<(), RunError> {
        match self {
            Load::InProcess { run, playing } => {
                let mixed = tokio::spawn({
                    let ctx = run.ctx.clone();
                    async move { mixed::run(&ctx).await }
                });
                let traffic = tokio::spawn({
                    let ctx = run.ctx.clone();
                    async move { traffic::drive(&ctx, traffic).await }
                });
                *playing = Some((mixed, traffic));
                Ok(())
            }
            Load::Agents(agents) => agents.phase(Phase::Play { traffic }).await.map(drop),
        }
    }

    /// A share of the players sign off for good, so that `stale_online` judges both states;
    /// how many did.
    pub async fn leave_for_good(&mut self, seed: u64) -> Result<usize, RunError> {
        match self {
            Load::InProcess { run, .. } => {
                Ok(traffic::leave_for_good(&run.ctx.fleet, seed, traffic::LEAVING_SHARE).await)
            }
            Load::Agents(agents) => Ok(agents.phase(Phase::LeaveForGood).await?.left),
        }
    }

    /// Waits for what [`Load::play`] started to end; the players' report of it.
    pub async fn end_play(&mut self) -> Result<Option<ScenarioReport>, RunError> {
        match self {
            Load::InProcess { playing, .. } => {
                let Some((mixed, traffic)) = playing.take() else {
                    return Ok(None);
                };
                let _ = traffic.await;
                mixed.await.map(Some).map_err(|e| {
                    LoadError::Refused(format!("the players' activity ended badly: {e}")).into()
                })
            }
            Load::Agents(agents) => Ok(agents.phase(Phase::EndPlay).await?.scenarios.pop()),
        }
    }

    /// After an interrupt: what the players were doing stops now (agents stop at the finish).
    pub fn stop_play(&mut self) {
        if let Load::InProcess {
            playing: Some((mixed, traffic)),
            ..
        } = self
        {
            mixed.abort();
            traffic.abort();
        }
    }

    /// The final reads of every player, and of the `pairs` session writes touched (agents
    /// know their own).
    pub async fn final_reads(&mut self, pairs: &[(u64, SessionId)]) -> FinalReads {
        match self {
            Load::InProcess { run, .. } => {
                final_reads::read(&run.ctx.fleet, pairs, FINAL_READS_LIMIT).await
            }
            Load::Agents(agents) => {
                let limit = FINAL_READS_LIMIT;
                match agents.phase(Phase::FinalReads { limit }).await {
                    Ok(played) => played.reads,
                    Err(e) => {
                        tracing::warn!("the final reads: {e}");
                        FinalReads {
                            late: true,
                            ..FinalReads::default()
                        }
                    }
                }
            }
        }
    }

    /// Stops the players; the load report of `scenarios`.
    pub async fn finish(self, scenarios: Vec<ScenarioReport>) -> Result<Report, RunError> {
        match self {
            Load::InProcess { run, playing } => {
                if let Some((mixed, traffic)) = playing {
                    mixed.abort();
                    traffic.abort();
                }
                Ok(run.finish(scenarios).await)
            }
            Load::Agents(agents) => {
                let Agents {
                    session,
                    local,
                    log,
                    mut recorded_lost,
                } = *agents;
                let report = session.finish(scenarios).await;
                if let Ok(report) = &report {
                    for agent in report.agents.iter().flatten().filter(|a| a.lost) {
                        record_lost(&log, &mut recorded_lost, &agent.name, agent.players);
                    }
                }
                stop_local(local).await;
                Ok(report?)
            }
        }
    }
}

impl Agents {
    /// One phase over the agents; the agents it found lost go into the history.
    async fn phase(&mut self, phase: Phase) -> Result<Played, RunError> {
        let played = self.session.phase(phase).await.map_err(RunError::from);
        for agent in self.session.agents().iter().filter(|a| a.lost) {
            record_lost(
                &self.log,
                &mut self.recorded_lost,
                &agent.name,
                agent.players,
            );
        }
        played
    }
}

/// Records agent `name` lost, once.
fn record_lost(log: &EventLog, recorded: &mut BTreeSet<String>, name: &str, players: [usize; 2]) {
    if recorded.insert(name.to_owned()) {
        let [first_player, players] = players;
        let _ = log.record(Event::AgentLost {
            agent: name.to_owned(),
            first_player,
            players,
        });
        eprintln!("anyplay-chaos: load agent {name} was lost: its players' checks are unknown");
    }
}

async fn stop_local(local: Option<LocalAgents>) {
    if let Some(local) = local {
        local.stop().await;
    }
}
