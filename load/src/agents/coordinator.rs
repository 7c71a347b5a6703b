//! The coordinator's side of a run over load agents, as a library: recruit agents on NATS,
//! assign each its share and measure its clock, run phases that every agent starts at one agreed
//! instant, watch that each keeps answering, and end the run.
//!
//! ```text
//! let mut c = Coordinator::recruit(nats_url, None, None, 3, RECRUIT_WAIT, &secret).await?;
//! c.assign(&settings, &target).await?;
//! let warm_up = c.run_phase(Phase::WarmUp).await?;   // per agent: its scenarios' results
//! ...
//! let finished = c.finish().await;                    // per agent: its own health
//! let agents = c.reports();                           // shares, clocks, health, who was lost
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::StreamExt;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use crate::agents::clock::{self, Estimate, Ping};
use crate::agents::protocol::{self, Answer, Event, Finished, Health, Offer, Phase, Reply};
use crate::agents::protocol::{Request, ScenarioResult};
use crate::agents::{codes, share, AgentsError};
use crate::error::LoadError;
use crate::measure::facts::unix_micros;
use crate::measure::facts::{Clock, FactSink, Stamped};
use crate::players::final_reads::FinalReads;
use crate::report::{AgentReport, HealthReport};
use crate::seal::{Channel, Key, Numbers, Replays, Secret};
use crate::settings::Settings;
use crate::sync::lock;
use crate::target::Target;

/// An agent that sends nothing for this long during a phase is lost.
pub const SILENCE: Duration = Duration::from_secs(5);
/// How long an agent may take to answer a request.
const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// How often an agent done with a phase hears from the coordinator while others still play
/// it: an agent gives its run up after a minute of silence (a 50,000-player storm's slowest
/// share took longer than that after the others were back).
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long the coordinator waits for an answer to a keep-alive.
const KEEP_ALIVE_WAIT: Duration = Duration::from_secs(2);
/// How long an agent may take to stop its players and answer the finish.
const FINISH_WAIT: Duration = Duration::from_secs(30);
/// How long the facts an agent sent before its finish may take to arrive after it.
const LAST_FACTS_WAIT: Duration = Duration::from_secs(5);
/// Clock pings per agent.
const PINGS: usize = 5;
/// How far past the slowest agent's round trip a phase starts, so every agent hears of it first.
const START_MARGIN: Duration = Duration::from_secs(2);
/// How often an offer is repeated while agents are missing (agents that start late hear it).
const OFFER_EVERY: Duration = Duration::from_secs(1);

/// Every agent's results of one phase.
#[derive(Debug, Clone)]
pub struct PhaseResults {
    /// Per agent that finished the phase, in share order: its scenarios' results.
    pub results: Vec<(String, Vec<ScenarioResult>)>,
    /// The agents found lost during the phase.
    pub lost: Vec<String>,
    /// Players who signed off for good ([`Phase::LeaveForGood`]), over the agents.
    pub left: usize,
    /// The final reads of every agent that finished [`Phase::FinalReads`].
    pub reads: FinalReads,
}

/// What the coordinator knows of one agent.
struct Link {
    players: Range<usize>,
    clock: Estimate,
    /// Its health samples, at coordinator-clock µs.
    health: Vec<(u64, Health)>,
    last_seen: Instant,
    lost_at_us: Option<u64>,
    outcome: Option<Event>,
    /// Its facts received so far.
    facts: u64,
    /// What it told during the current phase besides the outcome.
    left: usize,
    reads: FinalReads,
}

type Links = Arc<Mutex<BTreeMap<String, Link>>>;

/// The key of one agent's session (from its sealed answer), and its channels' numbers.
pub(crate) struct SessionKeys {
    pub key: Key,
    /// The requests sent to it so far.
    requests: Numbers,
    /// The last of its events taken.
    events: Replays,
    /// The last of its code requests taken.
    pub codes: Replays,
}

/// Every recruited agent's session, by name.
pub(crate) type Sessions = Arc<Mutex<HashMap<String, Arc<SessionKeys>>>>;

/// A run's coordinator (see the module's example).
pub struct Coordinator {
    client: async_nats::Client,
    url: String,
    run: String,
    /// The agents in share order.
    names: Vec<String>,
    sessions: Sessions,
    links: Links,
    heard: Arc<Notify>,
    /// Where the agents' facts go, converted to this process's clock, once somebody takes them.
    facts: Arc<FactSink>,
    listener: JoinHandle<()>,
    codes: Option<JoinHandle<()>>,
    /// The first phase's agreed start, coordinator-clock µs.
    origin_us: Option<u64>,
}

impl Coordinator {
    /// Offers run `run` (a fresh id when none) on `nats_url` and takes the first `count`
    /// distinct agents that answer within `wait`.
    pub async fn recruit(
        nats_url: &str,
        nats_creds: Option<&std::path::Path>,
        run: Option<&str>,
        count: usize,
        wait: Duration,
        secret: &Secret,
    ) -> Result<Coordinator, AgentsError> {
        let run = run.map_or_else(
            || format!("{}-{}", std::process::id(), unix_micros()),
            str::to_string,
        );
        if !protocol::is_token(&run) {
            return Err(AgentsError::Invalid(format!(
                "run id {run:?}: only letters, digits, '-' and '_'"
            )));
        }
        let nats = |e: &dyn std::fmt::Display| AgentsError::nats(nats_url, e);
        let client = super::connect(nats_url, nats_creds, &format!("anyplay-load-{run}")).await?;
        let links: Links = Arc::default();
        let heard = Arc::new(Notify::new());
        let events = client
            .subscribe(protocol::from_any_agent(&run))
            .await
            .map_err(|e| nats(&e))?;
        let facts = Arc::new(FactSink::default());
        let sessions: Sessions = Arc::default();
        let listener = tokio::spawn(listen(
            events,
            sessions.clone(),
            links.clone(),
            heard.clone(),
            facts.clone(),
        ));
        let inbox = client.new_inbox();
        let mut answers = client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| nats(&e))?;
        let run_key = secret.run_key(&run);
        let deadline = tokio::time::Instant::now() + wait;
        let mut names: Vec<String> = Vec::new();
        let mut next_offer = tokio::time::Instant::now();
        while names.len() < count {
            if tokio::time::Instant::now() >= next_offer {
                // Each offer tells this clock, so that one played again later is refused.
                let offer = protocol::encode(&Offer {
                    run: run.clone(),
                    at_us: unix_micros(),
                });
                let offer = run_key.seal(Channel::Offer, 0, &offer);
                client
                    .publish_with_reply(protocol::offer(&run), inbox.clone(), offer.into())
                    .await
                    .map_err(|e| nats(&e))?;
                next_offer += OFFER_EVERY;
            }
            tokio::select! {
                answer = answers.next() => {
                    let Some(answer) = answer else { break };
                    let answer = run_key
                        .open(Channel::Answer, &answer.payload)
                        .ok()
                        .and_then(|(_, body)| protocol::decode::<Answer>(body).ok());
                    if let Some(Answer { name, nonce }) = answer {
                        if protocol::is_token(&name) && !names.contains(&name) {
                            lock(&sessions).insert(name.clone(), Arc::new(SessionKeys {
                                key: secret.session_key(&run, &name, &nonce),
                                requests: Numbers::default(),
                                events: Replays::default(),
                                codes: Replays::default(),
                            }));
                            names.push(name);
                        }
                    }
                }
                _ = tokio::time::sleep_until(next_offer.min(deadline)) => {
                    if tokio::time::Instant::now() >= deadline {
                        break;
                    }
                }
            }
        }
        let _ = answers.unsubscribe().await;
        if names.len() < count {
            listener.abort();
            return Err(AgentsError::TooFew {
                wanted: count,
                answered: names,
                waited: wait,
                url: nats_url.to_string(),
            });
        }
        Ok(Coordinator {
            client,
            url: nats_url.to_string(),
            run,
            names,
            sessions,
            links,
            heard,
            facts,
            listener,
            codes: None,
            origin_us: None,
        })
    }

    /// The run's id: its subjects are under `anyplay.load.<id>.`.
    pub fn run_id(&self) -> &str {
        &self.run
    }

    /// The agents, in share order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Every fact of every agent's players from the assignment on, timed on this process's
    /// clock; `None` once taken. Take them before [`Coordinator::assign`]: agents stream
    /// their facts only when somebody takes them.
    pub fn facts(&self) -> Option<mpsc::UnboundedReceiver<Stamped>> {
        self.facts.take()
    }

    /// How many players are online over the agents still answering, by their latest health.
    pub fn online(&self) -> impl Fn() -> usize + Send + Sync + 'static {
        let links = self.links.clone();
        move || {
            lock(&links)
                .values()
                .filter(|l| l.lost_at_us.is_none())
                .filter_map(|l| l.health.last().map(|(_, h)| h.online))
                .sum()
        }
    }

    /// Gives each agent its share of `settings` against `target`'s nodes, answers their
    /// sign-in codes from `target`'s source, and measures each agent's clock.
    pub async fn assign(
        &mut self,
        settings: &Settings,
        target: &Target,
    ) -> Result<(), AgentsError> {
        // One tag for the run's players, given to every agent: the codes are answered for
        // that tag's players only.
        let tag = settings
            .tag
            .clone()
            .unwrap_or_else(crate::players::fleet::new_tag);
        let mut tagged = settings.draft();
        tagged.tag = Some(tag.clone());
        let tagged = tagged.validate().map_err(LoadError::from)?;
        let shares = share::shares(&tagged, self.names.len())?;
        let players = self
            .names
            .iter()
            .zip(&shares)
            .map(|(name, s)| (name.clone(), s.first_player..s.first_player + s.players))
            .collect();
        self.codes = Some(
            codes::serve(
                self.client.clone(),
                &self.run,
                self.sessions.clone(),
                Arc::new(players),
                tag,
                target.codes.clone(),
            )
            .await
            .map_err(|e| AgentsError::nats(&self.url, &e))?,
        );
        let nodes: Vec<String> = target.nodes.iter().map(|n| n.api.clone()).collect();
        let this = &*self;
        let asked = this.names.iter().zip(&shares).map(|(name, share)| {
            let request = Request::Assign {
                settings: Box::new(share.clone()),
                nodes: nodes.clone(),
                facts: this.facts.is_taken(),
            };
            async move {
                match this.ask(name, &request, REQUEST_WAIT).await {
                    Ok(Reply::Assigned) => {}
                    Ok(other) => return Err(unexpected(name, "the assignment", &other)),
                    Err(reason) => return Err(AgentsError::agent(name, reason)),
                }
                let clock = this.measure_clock(name).await?;
                let players = share.first_player..share.first_player + share.players;
                Ok((name.clone(), players, clock))
            }
        });
        for assigned in join_all(asked).await {
            let (name, players, clock) = assigned?;
            lock(&self.links).insert(
                name,
                Link {
                    players,
                    clock,
                    health: Vec::new(),
                    last_seen: Instant::now(),
                    lost_at_us: None,
                    outcome: None,
                    facts: 0,
                    left: 0,
                    reads: FinalReads::default(),
                },
            );
        }
        Ok(())
    }

    /// NTP-style pings over request/reply ([`clock`]).
    async fn measure_clock(&self, name: &str) -> Result<Estimate, AgentsError> {
        let mut pings = Vec::with_capacity(PINGS);
        for _ in 0..PINGS {
            let t0 = unix_micros();
            match self.ask(name, &Request::Clock, REQUEST_WAIT).await {
                Ok(Reply::Clock { now_us }) => pings.push(Ping {
                    t0,
                    t1: now_us,
                    t2: unix_micros(),
                }),
                Ok(other) => return Err(unexpected(name, "a clock ping", &other)),
                Err(reason) => return Err(AgentsError::agent(name, reason)),
            }
        }
        clock::estimate(&pings).ok_or_else(|| AgentsError::agent(name, "no clock ping answered"))
    }

    /// One request to agent `name` and its reply.
    async fn ask(&self, name: &str, request: &Request, wait: Duration) -> Result<Reply, String> {
        let session = lock(&self.sessions)
            .get(name)
            .cloned()
            .ok_or("not recruited")?;
        let seq = session.requests.next();
        let sealed = session
            .key
            .seal(Channel::Request, seq, &protocol::encode(request));
        let message = async_nats::Request::new()
            .payload(sealed.into())
            .timeout(Some(wait));
        let answer = self
            .client
            .send_request(protocol::to_agent(&self.run, name), message)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let (answered, body) = session
            .key
            .open(Channel::Reply, &answer.payload)
            .map_err(|e| format!("its reply: {e}"))?;
        if answered != seq {
            return Err(format!("a reply to request {answered}, not to {seq}"));
        }
        if let Some(link) = lock(&self.links).get_mut(name) {
            link.last_seen = Instant::now();
        }
        protocol::decode(body).map_err(|e| e.to_string())
    }

    /// The agents not lost so far, in share order.
    fn live(&self) -> Vec<String> {
        let links = lock(&self.links);
        self.names
            .iter()
            .filter(|name| links.get(*name).is_some_and(|l| l.lost_at_us.is_none()))
            .cloned()
            .collect()
    }

    /// The agents lost so far.
    pub fn lost(&self) -> Vec<String> {
        let links = lock(&self.links);
        self.names
            .iter()
            .filter(|name| links.get(*name).is_some_and(|l| l.lost_at_us.is_some()))
            .cloned()
            .collect()
    }

    fn mark_lost(&self, name: &str, why: &str) {
        if let Some(link) = lock(&self.links).get_mut(name) {
            if link.lost_at_us.is_none() {
                link.lost_at_us = Some(unix_micros());
                tracing::warn!("agent {name:?} {why}: the run is incomplete");
            }
        }
    }

    /// Starts `phase` on every agent still answering at one agreed instant and waits until each
    /// ended it or was lost (silent for [`SILENCE`]). A phase an agent could not play is an error.
    pub async fn run_phase(&mut self, phase: Phase) -> Result<PhaseResults, AgentsError> {
        let live = self.live();
        if live.is_empty() {
            return Err(AgentsError::AllLost);
        }
        let slowest = {
            let links = lock(&self.links);
            live.iter()
                .filter_map(|name| links.get(name).map(|l| l.clock.rtt_us))
                .max()
                .unwrap_or(0)
        };
        let at = unix_micros() + slowest + START_MARGIN.as_micros() as u64;
        self.origin_us.get_or_insert(at);
        for link in lock(&self.links).values_mut() {
            link.outcome = None;
            link.left = 0;
            link.reads = FinalReads::default();
        }
        let this = &*self;
        let started = live.iter().map(|name| {
            let offset = lock(&this.links).get(name).map(|l| l.clock);
            let request = Request::Phase {
                phase,
                at_us: offset.map_or(at, |clock| clock.to_agent(at)),
            };
            async move { (name, this.ask(name, &request, REQUEST_WAIT).await) }
        });
        for (name, reply) in join_all(started).await {
            match reply {
                Ok(Reply::Starting) => {}
                Ok(other) => return Err(unexpected(name, phase.name(), &other)),
                Err(reason) => {
                    self.mark_lost(name, &format!("did not take {}: {reason}", phase.name()))
                }
            }
        }
        // Silence counts from now: the start request was the last word to every agent.
        for name in &live {
            if let Some(link) = lock(&self.links).get_mut(name) {
                link.last_seen = Instant::now();
            }
        }
        let mut lost = Vec::new();
        let mut said = Instant::now();
        loop {
            let heard = self.heard.notified();
            let mut waiting = false;
            let mut done = Vec::new();
            for name in &live {
                let silent = {
                    let links = lock(&self.links);
                    let Some(link) = links.get(name) else {
                        continue;
                    };
                    if link.lost_at_us.is_some() {
                        if !lost.contains(name) {
                            lost.push(name.clone());
                        }
                        continue;
                    }
                    match &link.outcome {
                        Some(Event::PhaseFailed { error, .. }) => {
                            return Err(AgentsError::agent(
                                name,
                                format!("{}: {error}", phase.name()),
                            ))
                        }
                        Some(_) => {
                            done.push(name);
                            continue;
                        }
                        None => link.last_seen.elapsed() > SILENCE,
                    }
                };
                if silent {
                    self.mark_lost(name, &format!("stopped answering during {}", phase.name()));
                    lost.push(name.clone());
                } else {
                    waiting = true;
                }
            }
            if !waiting {
                break;
            }
            if said.elapsed() >= KEEP_ALIVE {
                // Any request will do; what the answer says is not needed.
                let asked = done
                    .into_iter()
                    .map(|name| self.ask(name, &Request::Clock, KEEP_ALIVE_WAIT));
                join_all(asked).await;
                said = Instant::now();
            }
            tokio::select! {
                _ = heard => {}
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
        let mut links = lock(&self.links);
        let (mut left, mut reads) = (0, FinalReads::default());
        let mut results = Vec::new();
        for name in &live {
            let Some(link) = links.get_mut(name) else {
                continue;
            };
            if let Some(Event::PhaseDone {
                results: theirs, ..
            }) = link.outcome.take()
            {
                results.push((name.clone(), theirs));
                left += link.left;
                reads.extend(std::mem::take(&mut link.reads));
            }
        }
        reads.sort();
        Ok(PhaseResults {
            results,
            lost,
            left,
            reads,
        })
    }

    /// Each agent's share, clock, health and whether it was lost.
    pub fn reports(&self) -> Vec<AgentReport> {
        let links = lock(&self.links);
        let origin = self.origin_us.unwrap_or(0) as f64;
        let seconds = |us: u64| ((us as f64 - origin) / 1e5).round() / 10.0;
        self.names
            .iter()
            .filter_map(|name| {
                let link = links.get(name)?;
                Some(AgentReport {
                    name: name.clone(),
                    players: [link.players.start, link.players.len()],
                    clock_offset_ms: link.clock.offset_us as f64 / 1000.0,
                    rtt_ms: link.clock.rtt_us as f64 / 1000.0,
                    health: link
                        .health
                        .iter()
                        .map(|(at, h)| HealthReport {
                            t: seconds(*at),
                            sched_lag_ms_p99: h.sched_lag_ms_p99,
                            cpu: h.cpu,
                            rss_mb: h.rss_mb,
                            connections: h.connections,
                            send_queue: h.send_queue,
                        })
                        .collect(),
                    lost: link.lost_at_us.is_some(),
                    lost_at_s: link.lost_at_us.map(seconds),
                })
            })
            .collect()
    }

    /// Tells every agent still answering to stop its players; each one's health over the run.
    /// An agent that does not answer is lost.
    pub async fn finish(&mut self) -> Vec<(String, Finished)> {
        let live = self.live();
        let this = &*self;
        let asked = live
            .iter()
            .map(|name| async move { (name, this.ask(name, &Request::Finish, FINISH_WAIT).await) });
        let mut finished = Vec::new();
        for (name, reply) in join_all(asked).await {
            match reply {
                Ok(Reply::Finished(f)) => finished.push((name.clone(), *f)),
                Ok(other) => self.mark_lost(name, &format!("answered the finish with {other:?}")),
                Err(reason) => self.mark_lost(name, &format!("did not finish: {reason}")),
            }
        }
        self.await_last_facts(&finished).await;
        self.stop();
        finished
    }

    /// Waits (bounded) until every finished agent's facts have arrived: they were sent before
    /// its answer, but on another subject.
    async fn await_last_facts(&self, finished: &[(String, Finished)]) {
        let deadline = tokio::time::Instant::now() + LAST_FACTS_WAIT;
        loop {
            let missing = {
                let links = lock(&self.links);
                finished
                    .iter()
                    .any(|(name, f)| links.get(name).is_some_and(|l| l.facts < f.facts_sent))
            };
            if !missing || tokio::time::Instant::now() >= deadline {
                if missing {
                    tracing::warn!("some agents' last facts did not arrive");
                }
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Tells every agent the run is over without a finish (after an error).
    pub async fn abort(&mut self) {
        let live = self.live();
        join_all(
            live.iter()
                .map(|name| self.ask(name, &Request::Abort, REQUEST_WAIT)),
        )
        .await;
        self.stop();
    }

    fn stop(&mut self) {
        self.listener.abort();
        if let Some(codes) = self.codes.take() {
            codes.abort();
        }
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.stop();
    }
}

fn unexpected(name: &str, what: &str, reply: &Reply) -> AgentsError {
    let reason = match reply {
        Reply::Refused { reason } => format!("refused {what}: {reason}"),
        other => format!("answered {what} with {other:?}"),
    };
    AgentsError::agent(name, reason)
}

/// Notes every agent's messages (any of them says it is alive), and passes their facts on.
async fn listen(
    mut events: async_nats::Subscriber,
    sessions: Sessions,
    links: Links,
    heard: Arc<Notify>,
    facts: Arc<FactSink>,
) {
    let clock = Clock::now();
    while let Some(message) = events.next().await {
        let Some(name) = protocol::last_token(message.subject.as_str()) else {
            continue;
        };
        // Only what the agent of that name sealed in its session, each message once.
        let Some(session) = lock(&sessions).get(name).cloned() else {
            continue;
        };
        let opened = session
            .key
            .open(Channel::Event, &message.payload)
            .and_then(|(seq, body)| session.events.take(seq).map(|()| body));
        let body = match opened {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!("ignored a message on agent {name:?}'s subject: {e}");
                continue;
            }
        };
        let event = match protocol::decode::<Event>(body) {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!("agent {name:?} sent what the protocol does not know: {e}");
                continue;
            }
        };
        let mut links = lock(&links);
        let Some(link) = links.get_mut(name) else {
            continue;
        };
        link.last_seen = Instant::now();
        match event {
            Event::Health(health) => {
                let at = link.clock.to_coordinator(health.at_us);
                link.health.push((at, health));
            }
            Event::Facts { facts: batch } => {
                link.facts += batch.len() as u64;
                let offset = link.clock.offset_us;
                for fact in batch {
                    facts.forward(fact.map_times(|at| clock.to_instant(at, offset)));
                }
            }
            Event::Left { players } => link.left += players,
            Event::Reads(part) => link.reads.extend(part),
            done @ (Event::PhaseDone { .. } | Event::PhaseFailed { .. }) => {
                link.outcome = Some(done)
            }
        }
        drop(links);
        heard.notify_waiters();
    }
}
