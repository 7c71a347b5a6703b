//! A run, in Jepsen's order, one function per phase: [`set_up`] (the history, the topology,
//! the players signed in), [`play`] (the timeline fires while the players play and the
//! samplers and clients watch, then the run settles), [`heal`] (every link restored, the final
//! state read back) and [`store`] (the history on disk, the checks judged into the report).
//! An interrupt ([`interrupt`]) cuts the phase that waits short; the run then goes to its store.
//!
//! - [`interrupt`]: Ctrl-C, SIGTERM or SIGHUP, listened for once.
//! - [`topology`]: services and fault proxies, and the ops that act on them.
//! - [`images`]: the Docker images of the services.
//! - [`load`]: the players, in this process or over load agents ([`agents`]: the local ones).
//! - [`players`]: the plan's load settings, the players' facts into the history, the final state.
//! - [`samplers`]: connections 4+ times a second, and one series entry a second.
//! - [`timeline`]: the steps of the resolved timeline, each at its time.
//! - [`clients`]: the plan's own client programs, riding through the run.

mod abort;
mod agents;
mod builds;
mod clients;
pub mod images;
mod interrupt;
mod load;
mod players;
mod samplers;
pub(crate) mod timeline;
pub(crate) mod topology;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyplay_load::measure::facts::Stamped;
use futures_util::future::LocalBoxFuture;
use indicatif::ProgressBar;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::control::{self, Control};
use crate::events::{Event, EventLog, RunMeta, EVENTS_FILE};
use crate::plan::{ImageOverride, Plan, Service, Timeline};
use crate::report::{self, markdown, LOAD_REPORT_FILE, PLAN_FILE};
use crate::supervisor::{ServiceEvent, ServiceEventKind};

use anyplay_load::report::ScenarioReport;
use interrupt::Interrupt;
use load::Load;
use topology::{Topology, TopologyError};

/// Why a run could not be carried out (a failed check is not an error: it is the verdict).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    #[error("the topology could not start: {0}")]
    Topology(#[from] TopologyError),
    #[error("the history: {0}")]
    History(#[from] crate::events::EventsError),
    #[error("cannot listen for Ctrl-C: {0}")]
    Signals(#[source] std::io::Error),
    #[error("the players' facts were taken already")]
    FactsTaken,
    #[error("cannot encode the load report: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("the players could not start: {0}")]
    Load(#[from] anyplay_load::LoadError),
    #[error("the load agents: {0}")]
    Agents(#[from] anyplay_load::agents::AgentsError),
    #[error("the run directory: {}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the run needs more sockets than a process may open: {0}")]
    Sockets(#[from] anyplay_load::run::budget::TooManySockets),
    #[error("the report: {0}")]
    Report(#[from] report::ReportError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{plan} has the supervisor run or reach what it names ({parts}); a run directory may \
         come from anywhere: read it, then rerun with --trust-plan to run it"
    )]
    Untrusted { plan: String, parts: String },
}

/// What `run` was asked.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub plan: Plan,
    pub out: Option<PathBuf>,
    pub seed: Option<u64>,
    /// `--image SERVICE=IMAGE`, in order.
    pub images: Vec<ImageOverride>,
    /// `--metrics ADDR`: the run's series served there while it runs.
    pub metrics: Option<SocketAddr>,
}

/// How a run ended.
#[derive(Debug)]
pub struct Finished {
    pub dir: PathBuf,
    /// What the run wrote into `report.json` (its verdict included).
    pub report: report::Report,
    /// Ctrl-C or SIGTERM cut the run short; the report covers what ran.
    pub interrupted: bool,
}

/// The error of a file or folder of the run directory at `path`.
pub fn file(path: &Path) -> impl Fn(std::io::Error) -> RunError + '_ {
    move |source| RunError::File {
        path: path.to_owned(),
        source,
    }
}

/// Now, as run directories name it: `20261201T081500Z`.
pub fn utc_stamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// The default run directory: `results/runs/<plan name>-<UTC time>`.
fn default_dir(plan: &Plan) -> PathBuf {
    PathBuf::from("results/runs").join(format!("{}-{}", plan.name, utc_stamp()))
}

/// Prepares the run directory and the plan as it will run (seed and backend applied).
fn prepare(options: RunOptions) -> Result<(Plan, PathBuf), RunError> {
    let mut plan = options.plan;
    if let Some(seed) = options.seed {
        plan = plan.with_seed(seed);
    }
    // Another seed can make the timeline impossible: refuse before anything starts.
    plan.resolve(plan.seed)?;
    // So can a plan too big for this machine's processes.
    if let Ok(limit) = anyplay_load::run::budget::open_file_limit() {
        anyplay_load::run::budget::check(&players::sockets(&plan), limit)?;
    }
    for image in &options.images {
        plan = plan.with_image(image);
    }
    let dir = options.out.unwrap_or_else(|| default_dir(&plan));
    // Canonical: services run in the run directory, every path handed to them is absolute.
    let dir = crate::run_files::prepare_dir(&dir).map_err(file(&dir))?;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(file(&logs))?;
    let plan_file = dir.join(PLAN_FILE);
    crate::run_files::write(&plan_file, plan.to_yaml()).map_err(file(&plan_file))?;
    Ok((plan, dir))
}

/// Runs a plan to its verdict; writes everything into the run directory. Boxed (here, as every
/// entry point a binary or test awaits) so its future tree is compiled once, in this crate
/// (results/ci); not `Send`, as the async fn was not.
pub fn run(options: RunOptions) -> LocalBoxFuture<'static, Result<Finished, RunError>> {
    Box::pin(run_plan(options))
}

async fn run_plan(options: RunOptions) -> Result<Finished, RunError> {
    let metrics = listen(options.metrics).await?;
    let (plan, dir) = prepare(options)?;
    let timeline = plan.resolve(plan.seed)?;
    // The plan's `abort`, watched over the load's seconds, cuts the run short as a signal does.
    let (give_up, given_up) = watch::channel(None);
    let mut interrupt = Interrupt::listen(given_up).map_err(RunError::Signals)?;
    eprintln!(
        "anyplay-chaos: run {} (seed {}) in {}",
        plan.name,
        plan.seed,
        dir.display()
    );
    eprint!("{timeline}");
    let stage = set_up(&plan, &dir, timeline.length() + plan.settle, metrics).await?;
    let (mut stage, mut scenarios) = warm_up(stage, &mut interrupt).await?;
    if !interrupt.heard() {
        let watching = Watching::start(&plan, &dir, &stage, give_up);
        scenarios.extend(play(&plan, &timeline, &mut stage, &mut interrupt, &dir).await);
        heal(&mut stage, watching).await;
    }
    let report = store(stage, &dir, scenarios).await?;
    Ok(Finished {
        dir,
        report,
        interrupted: interrupt.signalled(),
    })
}

/// A listener on `addr` when given (`--api`, `--metrics`): bound before anything starts, so
/// an address that is taken fails the run at once.
async fn listen(addr: Option<SocketAddr>) -> Result<Option<tokio::net::TcpListener>, RunError> {
    match addr {
        Some(addr) => tokio::net::TcpListener::bind(addr)
            .await
            .map(Some)
            .map_err(|source| RunError::Listen { addr, source }),
        None => Ok(None),
    }
}

/// What a run plays on: the history, the topology and its players, with the tasks that
/// record what happens to them.
struct Stage {
    log: EventLog,
    topology: Arc<Topology>,
    load: Load,
    recorder: Arc<players::Recorder>,
    pids: samplers::Pids,
    /// Told `true` when the players' facts and the samplers are to stop.
    stop: watch::Sender<bool>,
    following: JoinHandle<()>,
    services: JoinHandle<()>,
    /// `--metrics`' server, until the store.
    metrics: Option<JoinHandle<()>>,
}

/// Set up: the history opened (its series served on `metrics`), the topology started and the
/// players signed in for `length`.
async fn set_up(
    plan: &Plan,
    dir: &Path,
    length: Duration,
    metrics: Option<tokio::net::TcpListener>,
) -> Result<Stage, RunError> {
    let log = EventLog::create(&dir.join(EVENTS_FILE), Instant::now().into_std())?;
    let metrics = metrics.map(|listener| {
        let series = Arc::new(control::metrics::Metrics::new());
        log.observe({
            let series = series.clone();
            Arc::new(move |event: &Event| series.observe(event))
        });
        if let Ok(addr) = listener.local_addr() {
            eprintln!("  metrics: http://{addr}/metrics");
        }
        tokio::spawn(control::server::serve(
            listener,
            control::metrics::routes(series),
        ))
    });
    log.record(Event::RunStart(RunMeta::now(&plan.name, plan.seed)))?;
    log.record(Event::FriendLimits(topology::friend_limits(plan)))?;
    if plan.load.rate_limits {
        log.record(Event::RateLimits(topology::rate_limits(plan)))?;
    }
    let (supervisor, service_events) = Topology::supervisor(plan, dir).await?;
    let pids = samplers::Pids::default();
    let services = tokio::spawn(follow_services(service_events, log.clone(), pids.clone()));
    let topology = Arc::new(Topology::start(plan, dir, supervisor).await?);
    for node in &topology.nodes {
        eprintln!(
            "  {}: api http://{} (players via {}), ops http://{}",
            node.name, node.api, node.players, node.ops
        );
    }
    for host in topology.hosts() {
        let services: Vec<String> = host.services.iter().map(|s| s.to_string()).collect();
        eprintln!(
            "  host {} ({}, {}): {}",
            host.name,
            host.kind,
            host.address,
            services.join(", ")
        );
        log.record(Event::HostUp {
            host: host.name,
            host_kind: host.kind,
            address: host.address.to_string(),
            services: host.services,
        })?;
    }
    let (load, facts) = start_players(plan, length, dir, &topology, &log).await?;
    let (stop, stopped) = watch::channel(false);
    let recorder = players::Recorder::new(log.clone(), &topology.nodes);
    let following = tokio::spawn(recorder.clone().follow(facts, stopped));
    Ok(Stage {
        log,
        topology,
        load,
        recorder,
        pids,
        stop,
        following,
        services,
        metrics,
    })
}

/// The warm-up, cut short by an interrupt (no reports then); after a failed one everything
/// is stopped and nothing judged.
async fn warm_up(
    mut stage: Stage,
    interrupt: &mut Interrupt,
) -> Result<(Stage, Vec<ScenarioReport>), RunError> {
    let warmed = interrupt
        .or_stop(stage.load.warm_up(), "during the warm-up", &stage.log)
        .await;
    match warmed {
        Some(Ok(reports)) => Ok((stage, reports)),
        Some(Err(e)) => {
            stage.abandon().await;
            Err(e)
        }
        None => Ok((stage, Vec::new())),
    }
}

impl Stage {
    /// After a failed warm-up: everything stopped, nothing judged.
    async fn abandon(self) {
        if let Some(metrics) = &self.metrics {
            metrics.abort();
        }
        let _ = self.stop.send(true);
        let _ = self.load.finish(Vec::new()).await;
        self.topology.shutdown().await;
    }
}

/// What watches the run besides the players: the samplers and the plan's own clients.
struct Watching {
    samplers: [JoinHandle<()>; 2],
    clients: Vec<clients::Running>,
}

impl Watching {
    fn start(
        plan: &Plan,
        dir: &Path,
        stage: &Stage,
        give_up: watch::Sender<Option<String>>,
    ) -> Watching {
        let (log, topology) = (&stage.log, &stage.topology);
        let stopped = stage.stop.subscribe();
        let give_up = plan
            .abort
            .map(|a| abort::GiveUp::new(a, u64::from(plan.load.players), give_up));
        let samplers = [
            tokio::spawn(samplers::duplicates_sampler(
                log.clone(),
                topology.nodes.clone(),
                stopped.clone(),
            )),
            tokio::spawn({
                let topology = topology.clone();
                samplers::ticks(
                    log.clone(),
                    samplers::Sources {
                        recorder: stage.recorder.clone(),
                        online: stage.load.online(),
                        nodes: topology.nodes.clone(),
                        pids: stage.pids.clone(),
                    },
                    move |name| {
                        name.parse::<Service>()
                            .is_ok_and(|s| topology.is_running(s))
                    },
                    give_up,
                    stopped,
                )
            }),
        ];
        let clients = clients::start(&plan.clients, dir, &topology.nodes, log);
        Watching { samplers, clients }
    }
}

/// Run and record: the timeline fires while the players play, then the run settles; what
/// the players' activity reported. Cut short by an interrupt, the players stop at once and
/// a second interrupt ends the run without grace.
async fn play(
    plan: &Plan,
    timeline: &Timeline,
    stage: &mut Stage,
    interrupt: &mut Interrupt,
    dir: &Path,
) -> Option<ScenarioReport> {
    let (log, load) = (&stage.log, &mut stage.load);
    // The series starts with the timeline: the warm-up's calls are in the load report.
    stage.recorder.take_second();
    note(
        log,
        format!(
            "{} of {} players online",
            load.online()(),
            plan.load.players
        ),
    );
    if let Err(e) = load.play(timeline.length()).await {
        note(log, format!("the players could not start playing: {e}"));
    }
    // An action's `t` minus this one's is its actual offset, to hold against its `at`.
    let _ = log.record(Event::TimelineStart);
    let bar = ProgressBar::new(timeline.steps.len() as u64);
    let fired = timeline::fire(timeline, Instant::now(), stage.topology.clone(), log, &bar);
    if interrupt
        .or_stop(fired, "during the timeline", log)
        .await
        .is_some()
    {
        bar.finish_and_clear();
        note(
            log,
            format!("timeline done; settling for {:?}", plan.settle),
        );
        if plan.load.churn_rate > 0.0 {
            // Some players leave for good, so that stale_online judges both states.
            match load.leave_for_good(plan.seed).await {
                Ok(leaving) => note(log, format!("{leaving} players signed off for good")),
                Err(e) => note(log, format!("the players could not sign off: {e}")),
            }
        }
        let settle = tokio::time::sleep(plan.settle);
        interrupt.or_stop(settle, "while settling", log).await;
    }
    if interrupt.heard() {
        load.stop_play();
        // Listening starts here, before anything else runs, so a quick second press counts.
        if interrupt.signalled() {
            if let Ok(again) = crate::supervisor::signals::termination_requested() {
                let stop_at_once = stop_at_once_on(again, dir.to_owned(), stage.topology.clone());
                tokio::spawn(stop_at_once);
            }
        }
        return None;
    }
    match load.end_play().await {
        Ok(report) => report,
        Err(e) => {
            tracing::warn!("the players' activity ended badly: {e}");
            None
        }
    }
}

/// Heal: the clients end, every link is restored, and the final state is read over healed
/// links, whatever the timeline was doing when it ended; then the samplers stop.
async fn heal(stage: &mut Stage, watching: Watching) {
    clients::finish(watching.clients, &stage.log).await;
    stage.topology.heal().await;
    players::record_final_state(&stage.log, &stage.recorder, &mut stage.load).await;
    let _ = stage.stop.send(true);
    for sampler in watching.samplers {
        let _ = sampler.await;
    }
}

/// Store: the players and the topology shut down, the history on disk, the load report and
/// the run's report written and printed.
async fn store(
    stage: Stage,
    dir: &Path,
    scenarios: Vec<ScenarioReport>,
) -> Result<report::Report, RunError> {
    let Stage {
        log,
        topology,
        load,
        stop,
        following,
        services,
        metrics,
        ..
    } = stage;
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    let _ = stop.send(true);
    let _ = following.await;
    let load_report = load.finish(scenarios).await?;
    topology.shutdown().await;
    // Every exit has been seen once shutdown returned; the channel itself lives as long as the supervisor.
    services.abort();
    let unwritten = log.failed_writes();
    if unwritten > 0 {
        let _ = log.record(Event::Unwritten { records: unwritten });
        eprintln!("anyplay-chaos: {unwritten} events could not be written to the history");
    }
    if let Err(e) = log.sync() {
        eprintln!("anyplay-chaos: the history may not be on disk: {e}");
    }
    let load_file = dir.join(LOAD_REPORT_FILE);
    let text = serde_json::to_string_pretty(&load_report).map_err(RunError::Encode)?;
    crate::run_files::write(&load_file, text).map_err(file(&load_file))?;
    let report = report::render_dir(dir)?;
    if let Some(shortfall) = report.login_shortfall() {
        println!("Load: {shortfall}.\n");
    }
    print!("{}", markdown::tables(&report));
    println!("report: {}", dir.display());
    Ok(report)
}

/// A note in the history; a note that cannot be written is counted by the log.
fn note(log: &EventLog, text: String) {
    let _ = log.record(Event::Note { text });
}

/// The players of `plan`, their rates running for `duration`, against the topology's nodes,
/// and the receiver of their facts; the topology is shut down when they cannot start.
async fn start_players(
    plan: &Plan,
    duration: Duration,
    dir: &Path,
    topology: &Topology,
    log: &EventLog,
) -> Result<(Load, mpsc::UnboundedReceiver<Stamped>), RunError> {
    let settings = players::settings(plan, duration)
        .map_err(|e| RunError::Load(anyplay_load::LoadError::from(e)))?;
    let nats_url = topology.nats_url.as_deref();
    let started = async {
        let target = players::target(dir, &topology.nodes)?;
        Load::start(plan, &settings, target, nats_url, dir, log).await
    }
    .await;
    if started.is_err() {
        topology.shutdown().await;
    }
    started
}

/// After an interrupt, a second Ctrl-C or SIGTERM ends the run at once: the nodes are killed,
/// their dependencies given a moment to stop (a PostgreSQL that stops removes its shared
/// memory), everything the run made is removed, and the report is written from what was
/// recorded.
async fn stop_at_once_on(
    again: impl std::future::Future<Output = nix::sys::signal::Signal>,
    dir: PathBuf,
    topology: Arc<Topology>,
) {
    let signal = again.await;
    eprintln!("anyplay-chaos: {signal} again: stopping at once");
    topology.kill_all().await;
    // The exit below drops nothing, and a service's cgroup goes when it is dropped.
    for left in crate::backend::process::cgroup::remove_own() {
        tracing::info!("removed {}", left.display());
    }
    match report::render_dir(&dir) {
        Ok(_) => eprintln!(
            "anyplay-chaos: the report covers what ran: {}",
            dir.display()
        ),
        Err(e) => eprintln!("anyplay-chaos: no report: {e}"),
    }
    std::process::exit(1);
}

/// Service lifecycle into the history (and each node's pid for the series).
async fn follow_services(
    mut events: tokio::sync::mpsc::UnboundedReceiver<ServiceEvent>,
    log: EventLog,
    pids: samplers::Pids,
) {
    while let Some(event) = events.recv().await {
        let Ok(service) = event.service.parse::<Service>() else {
            continue;
        };
        let recorded = match event.kind {
            ServiceEventKind::Started { instance, build } => {
                if let Ok(mut pids) = pids.lock() {
                    pids.insert(event.service.clone(), instance.host_pid());
                }
                Some(Event::ServiceStart {
                    service,
                    version: build,
                })
            }
            ServiceEventKind::Up => Some(Event::ServiceUp {
                service,
                addr: None,
            }),
            // Not an exit: nobody knows whether the container still runs.
            ServiceEventKind::Exit(exit) if exit.engine_lost() => Some(Event::Note {
                text: format!("{service}: {exit}"),
            }),
            ServiceEventKind::Exit(exit) => Some(Event::ServiceExit {
                service,
                code: exit.code(),
                signal: exit.signal_name().map(str::to_owned),
                reason: exit.oom_killed().then(|| "oom".to_owned()),
            }),
            ServiceEventKind::Paused | ServiceEventKind::Resumed | ServiceEventKind::Stopping => {
                None
            }
        };
        if let Some(e) = recorded {
            let _ = log.record(e);
        }
    }
}

/// `up`: the topology and the players, held until Ctrl-C, with the control API on `api` when
/// given; then healed, judged and reported as a `run`. Boxed, as `run`.
pub fn up(
    options: RunOptions,
    api: Option<SocketAddr>,
) -> LocalBoxFuture<'static, Result<Finished, RunError>> {
    Box::pin(up_plan(options, api))
}

async fn up_plan(options: RunOptions, api: Option<SocketAddr>) -> Result<Finished, RunError> {
    let listener = listen(api).await?;
    let metrics = listen(options.metrics).await?;
    let (plan, dir) = prepare(options)?;
    // `up` has no timeline to give up: a channel closed at once never aborts.
    let mut interrupt = Interrupt::listen(watch::channel(None).1).map_err(RunError::Signals)?;
    eprintln!(
        "anyplay-chaos: up {} (seed {}) in {}",
        plan.name,
        plan.seed,
        dir.display()
    );
    // The players play for as long as the topology is held.
    let stage = set_up(&plan, &dir, HELD, metrics).await?;
    if let Some(url) = &stage.topology.postgres_url {
        eprintln!("  postgres: {url}");
    }
    if let Some(url) = &stage.topology.nats_url {
        eprintln!("  nats: {url}");
    }
    let (mut stage, scenarios) = warm_up(stage, &mut interrupt).await?;
    if !interrupt.heard() {
        let watching = Watching::start(&plan, &dir, &stage, watch::channel(None).0);
        hold(&plan, &mut stage, &mut interrupt, &dir, listener).await;
        heal(&mut stage, watching).await;
    }
    let report = store(stage, &dir, scenarios).await?;
    Ok(Finished {
        dir,
        report,
        interrupted: false,
    })
}

/// What the control API did becomes the recorded plan's timeline, so that `rerun` of the
/// directory replays it; when a plan cannot hold it (two faults of a kind on one link at
/// once), the plan stays as it was and the history says why.
fn record_replay(control: &Control, dir: &Path, log: &EventLog) {
    let Some(replay) = control.replay() else {
        return;
    };
    let text = replay.to_yaml();
    match Plan::from_yaml(&text) {
        Ok(_) => {
            let path = dir.join(PLAN_FILE);
            if let Err(e) = crate::run_files::write(&path, text) {
                note(
                    log,
                    format!("the API's changes could not be recorded in the plan: {e}"),
                );
            }
        }
        Err(e) => note(
            log,
            format!("the API's changes cannot be replayed as a plan's timeline: {e}"),
        ),
    }
}

/// How long `up` sets its players' rates to run: longer than anyone holds a topology.
const HELD: Duration = Duration::from_secs(365 * 24 * 3600);

/// `up`'s play: the players play and the control API (when `listener`) changes the faults
/// until Ctrl-C; then what the API set is healed and the run settles, as after a timeline.
async fn hold(
    plan: &Plan,
    stage: &mut Stage,
    interrupt: &mut Interrupt,
    dir: &Path,
    listener: Option<tokio::net::TcpListener>,
) {
    let log = &stage.log;
    stage.recorder.take_second();
    note(
        log,
        format!(
            "{} of {} players online",
            stage.load.online()(),
            plan.load.players
        ),
    );
    if let Err(e) = stage.load.play(HELD).await {
        note(log, format!("the players could not start playing: {e}"));
    }
    let _ = log.record(Event::TimelineStart);
    let control = Arc::new(Control::new(
        plan,
        stage.topology.clone(),
        log.clone(),
        Instant::now(),
    ));
    let server = listener.map(|listener| {
        if let Ok(addr) = listener.local_addr() {
            eprintln!("  control API (Toxiproxy's): http://{addr}");
        }
        tokio::spawn(control::server::serve(
            listener,
            control::server::routes(control.clone()),
        ))
    });
    eprintln!("anyplay-chaos: every player online; Ctrl-C ends the run");
    match interrupt.wait().await {
        Some(signal) => note(
            log,
            format!("{signal}: the run heals, settles and is judged"),
        ),
        None => note(log, "the run heals, settles and is judged".into()),
    }
    if let Some(server) = server {
        server.abort();
    }
    // A second Ctrl-C ends it at once, as during a run.
    if let Ok(again) = crate::supervisor::signals::termination_requested() {
        tokio::spawn(stop_at_once_on(
            again,
            dir.to_owned(),
            stage.topology.clone(),
        ));
    }
    control.heal();
    // A service action under way ends as it would on a timeline (its `for` runs out).
    control.finish_actions().await;
    record_replay(&control, dir, log);
    note(log, format!("settling for {:?}", plan.settle));
    tokio::time::sleep(plan.settle).await;
    stage.load.stop_play();
}

/// `rerun DIR`: the plan and seed recorded in DIR, again, into a new directory. Boxed, as `run`.
/// What the recorded plan has run beyond its own parts (client commands, the services'
/// environment and arguments, binaries, builds, remote engines) runs only when `trust_plan`
/// says the directory is as trusted as a plan one wrote.
pub fn rerun<'a>(
    dir: &'a Path,
    trust_plan: bool,
) -> LocalBoxFuture<'a, Result<Finished, RunError>> {
    Box::pin(async move {
        let dir = crate::run_files::check_dir(dir).map_err(file(dir))?;
        let path = dir.join(PLAN_FILE);
        let plan = Plan::load_from_run(&path)?;
        let parts = plan.needs_trust();
        if !trust_plan && !parts.is_empty() {
            let parts: Vec<String> = parts
                .iter()
                .map(|part| crate::printable::line(part).into_owned())
                .collect();
            return Err(RunError::Untrusted {
                plan: path.display().to_string(),
                parts: parts.join("; "),
            });
        }
        // The recorded plan has the backend and images of that run already.
        run(RunOptions {
            plan,
            out: None,
            seed: None,
            images: Vec::new(),
            metrics: None,
        })
        .await
    })
}
