//! `anyplay-load agent`: a long-lived process that waits on NATS for a coordinator's offer, plays
//! the share of players it is assigned with the same [`Run`] and scenarios as a run in one
//! process, starts each phase at the instant it is told, and sends back what it measured.
//! It plays one run at a time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::agents::codes::NatsCodes;
use crate::agents::protocol::{self, Answer, Event, Finished, Offer, Phase, Reply, Request};
use crate::agents::protocol::{ScenarioResult, WireHistogram};
use crate::agents::{health, AgentsError};
use crate::api::net::SourceIps;
use crate::error::LoadError;
use crate::measure::facts::unix_micros;
use crate::measure::facts::{Clock, Stamped};
use crate::measure::progress::Progress;
use crate::players::final_reads::{self, Touched};
use crate::report::ScenarioReport;
use crate::run::budget::{self, Devices, Holder};
use crate::run::{self, Run};
use crate::scenarios::traffic::{self, Driven};
use crate::scenarios::{mixed, Ctx};
use crate::seal::{self, Channel, Key, Numbers, Replays, Secret};
use crate::settings::{AgentArgs, AllowedTarget, Settings};
use crate::sync::lock;
use crate::target::{NodeEndpoint, Target};

/// How long an agent that answered an offer waits to be assigned (another may have been taken).
const ASSIGN_WAIT: Duration = Duration::from_secs(10);
/// How long an agent holding a run, with no phase going, waits for its coordinator before it
/// gives the run up.
const COORDINATOR_SILENCE: Duration = Duration::from_secs(60);
/// Events waiting to be sent to the coordinator.
const EVENT_QUEUE: usize = 1024;
/// Facts per message: well under NATS's default largest message (1 MB).
const FACTS_PER_MESSAGE: usize = 500;
/// How long a fact may wait for others to fill its message.
const FACTS_EVERY: Duration = Duration::from_millis(100);
/// Friend lists (and memberships) per message of the final reads.
const READS_PER_MESSAGE: usize = 1000;

/// The agent's name: `--name`, or the host's name and the process id.
fn name(args: &AgentArgs) -> Result<String, AgentsError> {
    let name = args.name.clone().unwrap_or_else(|| {
        let host = sysinfo::System::host_name().unwrap_or_else(|| "agent".into());
        let host: String = host
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        format!("{host}-{}", std::process::id())
    });
    if protocol::is_token(&name) {
        Ok(name)
    } else {
        Err(AgentsError::Invalid(format!(
            "--name {name:?}: only letters, digits, '-' and '_' (it is part of NATS subjects)"
        )))
    }
}

/// Serves offers on `args.nats` until the process ends. Boxed (here, as every entry point a
/// binary or test awaits) so its future tree is compiled once, in this crate (results/ci).
pub fn serve(args: AgentArgs) -> BoxFuture<'static, Result<(), AgentsError>> {
    Box::pin(async move {
        let name = name(&args)?;
        // Nobody without the secret may give this agent work: it does not start without it.
        let secret = Secret::load(args.secret_file.as_deref())?;
        if let Some(ca) = &args.ca {
            crate::api::tls::trust_also(ca).map_err(|e| AgentsError::Invalid(e.to_string()))?;
        }
        let client = super::connect(&args.nats, args.nats_creds.as_deref(), &name).await?;
        let mut offers = client
            .subscribe(protocol::ANY_OFFER)
            .await
            .map_err(|e| AgentsError::nats(&args.nats, &e))?;
        eprintln!(
            "anyplay-load agent {name:?}: waiting for work on {}",
            anyplay_cloud::nats_auth::shown(&args.nats)
        );
        let mut ignored = Said::default();
        let mut answered = Answered::default();
        while let Some(message) = offers.next().await {
            let Some(reply) = message.reply.clone() else {
                continue;
            };
            let offer = match open_offer(&secret, &message).and_then(|offer| answered.first(offer))
            {
                Ok(offer) => offer,
                Err(why) => {
                    // Coordinators offer again every second, and anyone may publish here.
                    ignored.say(|| {
                        format!(
                            "anyplay-load agent {name:?}: ignored an offer on {}: {why}",
                            message.subject
                        )
                    });
                    continue;
                }
            };
            // Listening before answering, so that the assignment cannot come first.
            let mut inbox = client
                .subscribe(protocol::to_agent(&offer.run, &name))
                .await
                .map_err(|e| AgentsError::nats(&args.nats, &e))?;
            let nonce = seal::nonce();
            let answer = protocol::encode(&Answer {
                name: name.clone(),
                nonce: nonce.clone(),
            });
            let answer = secret.run_key(&offer.run).seal(Channel::Answer, 1, &answer);
            if let Err(e) = client.publish(reply, answer.into()).await {
                tracing::warn!("answering the offer of run {}: {e}", offer.run);
                continue;
            }
            let agent = Agent {
                client: client.clone(),
                run: offer.run.clone(),
                name: name.clone(),
                source_ips: args.source_ips.clone(),
                allow_targets: args.allow_targets.clone(),
                session: Arc::new(AgentSession {
                    key: secret.session_key(&offer.run, &name, &nonce),
                    requests: Replays::default(),
                    events: Numbers::default(),
                    codes: Numbers::default(),
                }),
            };
            agent.play(&mut inbox).await;
            let _ = inbox.unsubscribe().await;
            // Offers that came meanwhile are old: their coordinators took other agents or gave up.
            while let Some(Some(_)) = offers.next().now_or_never() {}
        }
        Ok(())
    })
}

/// The runs whose offers this agent answered, each with when it answered and the offer's own
/// time. A coordinator still recruiting offers again every second, each offer as new as its
/// clock; a genuine offer played again by someone else is as old as it was: an offer of a run
/// answered before is taken only if it is newer by about the time since (its clock against
/// itself, so no skew between machines counts). A captured offer takes an agent once, and a
/// run's captured offers no longer than the run's coordinator offered.
#[derive(Default)]
struct Answered(std::collections::HashMap<String, (Instant, u64)>);

/// How far a coordinator's repeated offer may lag the time since the one answered before.
const REPEAT_SLACK: Duration = Duration::from_secs(2);

impl Answered {
    /// `offer`, unless it is an old offer of a run answered before; counted as answered.
    fn first(&mut self, offer: Offer) -> Result<Offer, String> {
        // Past this, an offer is too old by its own clock anyway.
        self.0
            .retain(|_, (at, _)| at.elapsed() < 2 * seal::OFFER_AGE + ASSIGN_WAIT);
        if let Some((answered, at_us)) = self.0.get(&offer.run) {
            let since = answered.elapsed().saturating_sub(REPEAT_SLACK);
            if offer.at_us <= *at_us || offer.at_us < at_us.saturating_add(since.as_micros() as u64)
            {
                return Err(format!(
                    "an old offer of run {}, answered {} s ago (played again)",
                    offer.run,
                    answered.elapsed().as_secs()
                ));
            }
        }
        self.0
            .insert(offer.run.clone(), (Instant::now(), offer.at_us));
        Ok(offer)
    }
}

/// A line said on stderr at most once per [`SAID_EVERY`], with how many were held back: a
/// stranger on NATS must not fill the agent's log.
#[derive(Default)]
struct Said {
    last: Option<Instant>,
    held: u64,
}

const SAID_EVERY: Duration = Duration::from_secs(10);

impl Said {
    fn say(&mut self, line: impl FnOnce() -> String) {
        if self.last.is_some_and(|at| at.elapsed() < SAID_EVERY) {
            self.held += 1;
            return;
        }
        match std::mem::take(&mut self.held) {
            0 => eprintln!("{}", line()),
            held => eprintln!("{} (and {held} more like it since)", line()),
        }
        self.last = Some(Instant::now());
    }
}

/// An offer sealed with `secret` for the run its subject names, and not older than
/// [`seal::OFFER_AGE`] by this agent's clock.
fn open_offer(secret: &Secret, message: &async_nats::Message) -> Result<Offer, String> {
    let run = protocol::offer_run(message.subject.as_str()).ok_or("not a run's offer subject")?;
    let (_, body) = secret
        .run_key(run)
        .open(Channel::Offer, &message.payload)
        .map_err(|e| e.to_string())?;
    let offer: Offer = protocol::decode(body).map_err(|e| e.to_string())?;
    if offer.run != run {
        return Err(format!(
            "an offer of run {:?} on run {run}'s subject",
            offer.run
        ));
    }
    let age = unix_micros().abs_diff(offer.at_us);
    if age > seal::OFFER_AGE.as_micros() as u64 {
        return Err(format!(
            "an offer {} s away from this agent's clock",
            age / 1_000_000
        ));
    }
    Ok(offer)
}

/// An agent within one run.
struct Agent {
    client: async_nats::Client,
    run: String,
    name: String,
    source_ips: Option<SourceIps>,
    allow_targets: Vec<AllowedTarget>,
    session: Arc<AgentSession>,
}

/// The key of an agent's session with its coordinator, and the numbers of its channels.
pub(crate) struct AgentSession {
    pub key: Key,
    /// The coordinator's requests taken so far.
    requests: Replays,
    /// The events sent so far.
    events: Numbers,
    /// The code requests sent so far.
    pub codes: Numbers,
}

/// The run an agent holds.
struct Held {
    run: Run,
    events: mpsc::Sender<Event>,
    publisher: JoinHandle<()>,
    health: JoinHandle<()>,
    /// The players' facts on their way to the coordinator, when it asked for them.
    facts: Option<FactStream>,
    phase: Option<JoinHandle<()>>,
    play: Play,
}

/// What a phase may need besides the run's context.
#[derive(Clone)]
struct Play {
    /// What [`Phase::Play`] started, until [`Phase::EndPlay`] takes it.
    going: Arc<Mutex<Option<Playing>>>,
    /// The sessions the players' writes touched (from their facts), for the final reads.
    touched: Arc<Touched>,
}

struct Playing {
    mixed: JoinHandle<ScenarioReport>,
    traffic: JoinHandle<Driven>,
}

struct FactStream {
    stop: oneshot::Sender<()>,
    /// How many it sent.
    task: JoinHandle<u64>,
}

impl Agent {
    /// Answers the coordinator's requests until the run ends or the coordinator goes quiet.
    async fn play(&self, inbox: &mut async_nats::Subscriber) {
        let mut held: Option<Held> = None;
        let mut ignored = Said::default();
        // Only the coordinator's own requests move it: a stranger's message on this subject
        // holds the agent no longer.
        let mut heard = tokio::time::Instant::now();
        loop {
            // A run is going while a phase is, or what `Play` started (the timeline's length).
            let playing = held.as_ref().is_some_and(|h| {
                h.phase.as_ref().is_some_and(|phase| !phase.is_finished())
                    || lock(&h.play.going).is_some()
            });
            let wait = match &held {
                None => ASSIGN_WAIT,
                Some(_) => COORDINATOR_SILENCE,
            };
            if playing {
                heard = heard.max(tokio::time::Instant::now() - wait / 2);
            }
            let message = match tokio::time::timeout_at(heard + wait, inbox.next()).await {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(_) if playing => continue,
                Err(_) => {
                    if held.is_some() {
                        tracing::warn!("run {}: the coordinator went quiet; giving up", self.run);
                    }
                    break;
                }
            };
            let Some(reply_to) = message.reply.clone() else {
                continue;
            };
            let session = &self.session;
            let opened = session
                .key
                .open(Channel::Request, &message.payload)
                .and_then(|(seq, body)| session.requests.take(seq).map(|()| (seq, body)));
            let (seq, body) = match opened {
                Ok(opened) => opened,
                Err(e) => {
                    ignored.say(|| {
                        format!(
                            "anyplay-load agent {:?}: run {}: ignored a request: {e}",
                            self.name, self.run
                        )
                    });
                    continue;
                }
            };
            heard = tokio::time::Instant::now();
            let (reply, done) = match protocol::decode::<Request>(body) {
                Ok(request) => self.answer(request, &mut held).await,
                Err(e) => (refused(e), false),
            };
            let reply = session
                .key
                .seal(Channel::Reply, seq, &protocol::encode(&reply));
            if let Err(e) = self.client.publish(reply_to, reply.into()).await {
                tracing::warn!("run {}: answering the coordinator: {e}", self.run);
            }
            if done {
                break;
            }
        }
        if let Some(held) = held {
            held.abort().await;
        }
    }

    /// The reply to `request`, and whether the run is over.
    async fn answer(&self, request: Request, held: &mut Option<Held>) -> (Reply, bool) {
        match (request, held.as_mut()) {
            (Request::Clock, _) => (
                Reply::Clock {
                    now_us: unix_micros(),
                },
                false,
            ),
            (
                Request::Assign {
                    settings,
                    nodes,
                    facts,
                },
                None,
            ) => match self.hold(*settings, nodes, facts).await {
                Ok(run) => {
                    *held = Some(run);
                    (Reply::Assigned, false)
                }
                Err(e) => (refused(e), true),
            },
            (Request::Assign { .. }, Some(_)) => (refused("this agent holds a run already"), false),
            (Request::Phase { phase, at_us }, Some(run)) => {
                if run.phase.as_ref().is_some_and(|p| !p.is_finished()) {
                    return (refused("a phase is still going"), false);
                }
                let (ctx, events) = (run.run.ctx.clone(), run.events.clone());
                let play = run.play.clone();
                run.phase = Some(tokio::spawn(play_phase(ctx, play, phase, at_us, events)));
                (Reply::Starting, false)
            }
            (Request::Finish, Some(_)) => match held.take() {
                Some(run) => (Reply::Finished(Box::new(run.finish().await)), true),
                None => (refused("no run"), true),
            },
            (Request::Abort, _) => {
                if let Some(run) = held.take() {
                    run.abort().await;
                }
                (Reply::Aborted, true)
            }
            (_, None) => (refused("no run assigned yet"), false),
        }
    }

    /// Takes the share `settings` of the run against `nodes`.
    async fn hold(
        &self,
        mut settings: Settings,
        nodes: Vec<String>,
        facts: bool,
    ) -> Result<Held, LoadError> {
        // Only against what this agent's own command line allows, whoever asks.
        for node in &nodes {
            let allowed = reqwest::Url::parse(node).ok().is_some_and(|url| {
                url.host()
                    .is_some_and(|host| self.allow_targets.iter().any(|a| a.allows(&host)))
            });
            if !allowed {
                let why = format!("the node {node} is not among this agent's --allow-target");
                eprintln!(
                    "anyplay-load agent {:?}: run {}: refused: {why}",
                    self.name, self.run
                );
                return Err(LoadError::Refused(why));
            }
        }
        // With the cloud's limits on, each player has an address of its own instead.
        if settings.traffic.rate_limits.is_none() {
            let mut draft = settings.draft();
            draft.source_ips = self.source_ips.clone();
            settings = draft
                .validate()
                .map_err(|e| LoadError::Refused(e.to_string()))?;
        }
        // A share too big for this process is refused before any of its players starts.
        if let Ok(limit) = budget::open_file_limit() {
            let devices = Devices {
                second: settings.traffic.second_devices,
            };
            let players = settings.total_players() as u64;
            let holder = Holder::new(format!("agent {}", self.name), players, devices, 1);
            budget::check(&[holder], limit).map_err(|e| LoadError::Refused(e.to_string()))?;
        }
        let target = Target {
            nodes: nodes
                .into_iter()
                .map(|api| NodeEndpoint {
                    api,
                    ops: None,
                    pid: None,
                })
                .collect(),
            codes: Arc::new(NatsCodes::new(
                self.client.clone(),
                &self.run,
                &self.name,
                self.session.clone(),
            )),
            control: None,
            pool: None,
        };
        let run = Run::start(&settings, target, Progress::hidden()).await?;
        let (events, queued) = mpsc::channel(EVENT_QUEUE);
        let subject = protocol::from_agent(&self.run, &self.name);
        let publisher = tokio::spawn(publish(
            self.client.clone(),
            subject,
            self.session.clone(),
            queued,
        ));
        let health = health::start(run.ctx.fleet.clone(), events.clone());
        let play = Play {
            going: Arc::default(),
            touched: Arc::default(),
        };
        let facts = match facts {
            true => {
                let facts = run.ctx.fleet.facts().ok_or_else(|| {
                    LoadError::Refused("the players' facts were taken already".into())
                })?;
                let (stop, stopped) = oneshot::channel();
                let task = tokio::spawn(stream_facts(
                    facts,
                    events.clone(),
                    play.touched.clone(),
                    stopped,
                ));
                Some(FactStream { stop, task })
            }
            false => None,
        };
        eprintln!(
            "anyplay-load agent {:?}: run {}: players {}..{}",
            self.name,
            self.run,
            settings.first_player,
            settings.first_player + settings.players
        );
        Ok(Held {
            run,
            events,
            publisher,
            health,
            facts,
            phase: None,
            play,
        })
    }
}

impl Held {
    /// Stops the players, lets the queued events go out, and tells the run's own health.
    async fn finish(self) -> Finished {
        let Held {
            run,
            events,
            publisher,
            health,
            facts,
            phase,
            play,
        } = self;
        health.abort();
        if let Some(phase) = phase {
            phase.abort();
        }
        if let Some(playing) = lock(&play.going).take() {
            playing.mixed.abort();
            playing.traffic.abort();
        }
        let sched_lag = WireHistogram::encode(&run.ctx.lag.histogram());
        let report = run.finish(Vec::new()).await;
        // After the players stopped, so their last closes go too.
        let facts_sent = match facts {
            Some(facts) => {
                let _ = facts.stop.send(());
                facts.task.await.unwrap_or(0)
            }
            None => 0,
        };
        drop(events);
        let _ = tokio::time::timeout(Duration::from_secs(5), publisher).await;
        Finished {
            generator: report.generator,
            sched_lag,
            facts_sent,
        }
    }

    /// Stops the players and the run's tasks; nothing is sent any more.
    async fn abort(self) {
        self.publisher.abort();
        self.finish().await;
    }
}

fn refused(reason: impl ToString) -> Reply {
    Reply::Refused {
        reason: reason.to_string(),
    }
}

/// Sends the queued events to the coordinator, in order. Results that cannot go (more than
/// the server's largest message) are reported as the phase's failure, so that the coordinator
/// does not wait for them.
async fn publish(
    client: async_nats::Client,
    subject: String,
    session: Arc<AgentSession>,
    mut queued: mpsc::Receiver<Event>,
) {
    let seal = |event: &Event| {
        let seq = session.events.next();
        session
            .key
            .seal(Channel::Event, seq, &protocol::encode(event))
    };
    while let Some(event) = queued.recv().await {
        let sent = client.publish(subject.clone(), seal(&event).into()).await;
        if let Err(e) = sent {
            tracing::warn!("sending to the coordinator: {e}");
            if let Event::PhaseDone { phase, .. } = event {
                let failed = Event::PhaseFailed {
                    phase,
                    error: format!("its results could not be sent: {e}"),
                };
                let _ = client.publish(subject.clone(), seal(&failed).into()).await;
            }
        }
    }
    let _ = client.flush().await;
}

/// Sends the players' facts in messages of up to [`FACTS_PER_MESSAGE`], each within
/// [`FACTS_EVERY`] of its first fact, noting the sessions their writes touched; once `stop`
/// fires, sends what is left and says how many it sent.
async fn stream_facts(
    mut facts: mpsc::UnboundedReceiver<Stamped>,
    events: mpsc::Sender<Event>,
    touched: Arc<Touched>,
    mut stop: oneshot::Receiver<()>,
) -> u64 {
    let clock = Clock::now();
    let mut batch = Vec::with_capacity(FACTS_PER_MESSAGE);
    let mut sent = 0u64;
    let mut flush = tokio::time::interval(FACTS_EVERY);
    let add = |batch: &mut Vec<_>, fact: Stamped| {
        touched.note(&fact);
        batch.push(fact.map_times(|at| clock.to_unix(at)));
    };
    loop {
        tokio::select! {
            fact = facts.recv() => match fact {
                Some(fact) => {
                    add(&mut batch, fact);
                    if batch.len() < FACTS_PER_MESSAGE {
                        continue;
                    }
                }
                // Nobody emits any more.
                None => break,
            },
            _ = flush.tick() => {}
            _ = &mut stop => {
                while let Ok(fact) = facts.try_recv() {
                    add(&mut batch, fact);
                }
                break;
            }
        }
        if !send_facts(&events, &mut batch, &mut sent).await {
            return sent;
        }
    }
    send_facts(&events, &mut batch, &mut sent).await;
    sent
}

/// Sends `batch` (emptied) in messages of up to [`FACTS_PER_MESSAGE`], counting into `sent`;
/// false once nobody takes events any more.
async fn send_facts(
    events: &mpsc::Sender<Event>,
    batch: &mut Vec<Stamped<u64>>,
    sent: &mut u64,
) -> bool {
    for part in std::mem::take(batch).chunks(FACTS_PER_MESSAGE) {
        let facts = part.to_vec();
        if events.send(Event::Facts { facts }).await.is_err() {
            return false;
        }
        *sent += part.len() as u64;
    }
    true
}

/// Plays `phase` from the agent's clock reading `at_us`, and sends its results.
async fn play_phase(ctx: Ctx, play: Play, phase: Phase, at_us: u64, events: mpsc::Sender<Event>) {
    let start = Instant::now() + Duration::from_micros(at_us.saturating_sub(unix_micros()));
    tokio::time::sleep_until(start.into()).await;
    let played = match phase {
        Phase::WarmUp => run::warm_up(&ctx).await,
        Phase::Scenario { scenario } => run::scenario(&ctx, scenario)
            .await
            .map(|report| report.into_iter().collect()),
        Phase::Play { traffic } => {
            let playing = Playing {
                mixed: tokio::spawn({
                    let ctx = ctx.clone();
                    async move { mixed::run(&ctx).await }
                }),
                traffic: tokio::spawn({
                    let ctx = ctx.clone();
                    async move { traffic::drive(&ctx, traffic).await }
                }),
            };
            *lock(&play.going) = Some(playing);
            Ok(Vec::new())
        }
        Phase::LeaveForGood => {
            let seed = ctx.settings.seed;
            let players = traffic::leave_for_good(&ctx.fleet, seed, traffic::LEAVING_SHARE).await;
            let _ = events.send(Event::Left { players }).await;
            Ok(Vec::new())
        }
        Phase::EndPlay => end_play(&play).await,
        Phase::FinalReads { limit } => {
            let pairs = play.touched.pairs();
            let reads = final_reads::read(&ctx.fleet, &pairs, limit).await;
            for part in reads.into_parts(READS_PER_MESSAGE) {
                let _ = events.send(Event::Reads(part)).await;
            }
            Ok(Vec::new())
        }
    };
    let event = match played {
        Ok(reports) => {
            let results: Result<Vec<ScenarioResult>, _> = reports
                .iter()
                .map(|report| ScenarioResult::of(report, ms_after(report.began, start)))
                .collect();
            match results {
                Ok(results) => Event::PhaseDone { phase, results },
                Err(e) => Event::PhaseFailed {
                    phase,
                    error: e.to_string(),
                },
            }
        }
        Err(e) => Event::PhaseFailed {
            phase,
            error: e.to_string(),
        },
    };
    let _ = events.send(event).await;
}

/// Waits for what [`Phase::Play`] started; the `mixed` report.
async fn end_play(play: &Play) -> Result<Vec<ScenarioReport>, LoadError> {
    let playing = lock(&play.going).take();
    let Some(Playing { mixed, traffic }) = playing else {
        return Err(LoadError::Refused("no play was started".into()));
    };
    let _ = traffic.await;
    match mixed.await {
        Ok(report) => Ok(vec![report]),
        Err(e) => Err(LoadError::Refused(format!("the play ended badly: {e}"))),
    }
}

/// Milliseconds from `start` to `at`, negative when `at` came first.
fn ms_after(at: Instant, start: Instant) -> f64 {
    match at.checked_duration_since(start) {
        Some(after) => after.as_secs_f64() * 1000.0,
        None => -(start.duration_since(at).as_secs_f64() * 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(run: &str, at_us: u64) -> Offer {
        Offer {
            run: run.into(),
            at_us,
        }
    }

    #[test]
    fn an_offer_played_again_is_refused_and_a_coordinators_repeat_taken() {
        let mut answered = Answered::default();
        let now = unix_micros();
        answered.first(offer("r1", now)).unwrap();
        // The same offer again, and an older one of the run: played again.
        assert!(answered.first(offer("r1", now)).is_err());
        assert!(answered.first(offer("r1", now - 1_000_000)).is_err());
        // Another run's offer is its own.
        answered.first(offer("r2", now)).unwrap();
        // A coordinator's repeat is as new as the time since.
        std::thread::sleep(Duration::from_millis(50));
        answered.first(offer("r1", unix_micros())).unwrap();
        // A replay long after its run's offers: answered 30 s ago, the replay 1 s newer.
        answered
            .0
            .insert("r3".into(), (Instant::now() - Duration::from_secs(30), now));
        assert!(answered.first(offer("r3", now + 1_000_000)).is_err());
    }

    #[test]
    fn a_flood_of_ignored_messages_says_one_line_per_while() {
        let mut said = Said::default();
        let mut lines = 0;
        for _ in 0..20_000 {
            said.say(|| {
                lines += 1;
                String::from("ignored")
            });
        }
        assert_eq!(lines, 1);
        assert_eq!(said.held, 19_999);
    }
}
