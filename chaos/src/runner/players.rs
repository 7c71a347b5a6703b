//! The players of a run, played by the load crate: the plan's `load` section as load
//! settings, the load's target (the nodes as players reach them), the translation of the
//! facts players live through into the run's history, and the final reads.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyplay_load::api::wire::NodeId;
use anyplay_load::measure::facts::{Fact, Received, Stamped};
use anyplay_load::measure::stats::{self, CallClass};
use anyplay_load::players::final_reads::{FinalReads, Touched};
use anyplay_load::reconnect::ReconnectMode;
use anyplay_load::run::budget::{Devices, Holder};
use anyplay_load::settings::{
    CardSettings, Mode, PresenceSettings, Scenario, SessionSettings, Settings, SettingsDraft,
    SettingsError, TrafficSettings,
};
use anyplay_load::target::mail_log::{MailLog, DEFAULT_WAIT};
use anyplay_load::{NodeEndpoint, Target};
use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use crate::checks::losses::{self, Change, Losses};
use crate::events::{Event, EventLog};
use crate::plan::{Backend, Plan, Reconnect};
use crate::sync::lock;

use super::load::Load;
use super::topology::{part, NodeAddrs, MAIL_LOG};
use super::RunError;

/// Members of the plan's parties: 4, or fewer when players have fewer friends.
const SESSION_SIZE: u32 = 4;
/// How long a party holds before its members leave.
const SESSION_HOLD: Duration = Duration::from_secs(3);
/// Accounts per gamer-card call.
const CARDS_SIZE: usize = 20;
/// How long the final reads may take together.
pub const FINAL_READS_LIMIT: Duration = Duration::from_secs(60);

/// The load settings of the plan, with its rates running for `duration` and its seed drawing
/// the players' choices, so a rerun repeats the players as well as the timeline; validated by
/// the load's own rules, as `anyplay-load`'s flags are.
pub fn settings(plan: &Plan, duration: Duration) -> Result<Settings, SettingsError> {
    let load = &plan.load;
    let defaults = Settings::default().draft();
    let scenarios = [
        (Scenario::Presence, load.presence_rate),
        (Scenario::Sessions, load.session_rate),
        (Scenario::Cards, load.cards_rate),
    ]
    .into_iter()
    .filter(|(_, rate)| *rate > 0)
    .map(|(scenario, _)| scenario)
    .collect();
    SettingsDraft {
        scenarios,
        players: load.players as usize,
        rate: load.login_rate.into(),
        friends: load.friends as usize,
        reconnect: match load.reconnect {
            Reconnect::Spec => ReconnectMode::Spec,
            Reconnect::Immediate => ReconnectMode::Immediate,
        },
        presence: PresenceSettings {
            rate: load.presence_rate.into(),
            duration,
        },
        sessions: SessionSettings {
            rate: load.session_rate.into(),
            size: SESSION_SIZE.min(load.friends + 1).max(2),
            hold: SESSION_HOLD,
            duration,
            leader_leaves_first: load.leader_leaves_first,
        },
        cards: CardSettings {
            rate: load.cards_rate.into(),
            size: CARDS_SIZE.min(load.players as usize),
            duration,
        },
        traffic: TrafficSettings {
            friend_rate: load.friend_rate,
            churn_rate: load.churn_rate,
            block_rate: load.block_rate,
            privacy_rate: load.privacy_rate,
            logout_rate: load.logout_rate,
            second_devices: load.second_devices,
            slow_readers: load.slow_readers,
            rate_limits: load.rate_limits.then(|| super::topology::rate_limits(plan)),
        },
        seed: plan.seed,
        mode: Mode::InProcess {
            default_limits: false,
        },
        ..defaults
    }
    .validate()
}

/// The processes of this machine that hold the players' sockets: the supervisor (both ends of
/// each proxied connection, and the players themselves unless agents play them), local
/// agents, and each node process (containers have the engine's limits).
pub fn sockets(plan: &Plan) -> Vec<Holder> {
    let load = &plan.load;
    let devices = Devices {
        second: load.second_devices,
    };
    let players = u64::from(load.players);
    let proxied = if load.through_proxy { 2 } else { 0 };
    let mut holders = Vec::new();
    match &load.agents {
        None => holders.push(Holder::new("the supervisor", players, devices, 1 + proxied)),
        Some(agents) => {
            if proxied > 0 {
                holders.push(Holder::new("the supervisor", players, devices, proxied));
            }
            if agents.local {
                let count = u64::from(agents.count.get());
                let share = players.div_ceil(count);
                holders.extend(
                    (1..=count).map(|n| Holder::new(format!("agent-{n}"), share, devices, 1)),
                );
            }
        }
    }
    if plan.backend == Backend::Process {
        let nodes = u64::from(plan.services.nodes.count.max(1));
        holders.extend(
            (1..=nodes)
                .map(|n| Holder::new(format!("node-{n}"), players.div_ceil(nodes), devices, 1)),
        );
    }
    holders
}

/// The nodes as the players reach them, with sign-in codes from the nodes' mail log.
pub fn target(dir: &Path, nodes: &[NodeAddrs]) -> Result<Target, RunError> {
    let codes = MailLog::open(&dir.join(MAIL_LOG), DEFAULT_WAIT).map_err(part("the mail log"))?;
    Ok(Target {
        nodes: nodes
            .iter()
            .map(|n| NodeEndpoint {
                api: format!("http://{}", n.players),
                ops: Some(format!("http://{}", n.ops)),
                pid: None,
            })
            .collect(),
        codes: Arc::new(codes),
        control: None,
        pool: None,
    })
}

/// One second of what players saw, for the run's series.
#[derive(Default)]
pub struct Second {
    pub welcomes: u64,
    pub disconnects: u64,
    /// HTTP calls, counted and timed by the load report's own rule.
    pub calls: stats::Second,
    /// Per node index: the calls sent to it, and how many failed.
    pub calls_by_node: BTreeMap<usize, (u64, u64)>,
    /// Presence delivery times (events, not calls).
    pub presence: Option<Histogram<u64>>,
}

fn record(h: &mut Option<Histogram<u64>>, d: Duration) {
    let h = h.get_or_insert_with(|| Histogram::new(3).expect("3 significant figures is valid"));
    h.saturating_record(d.as_micros() as u64);
}

/// p99 in ms of a second's presence histogram.
pub fn p99_ms(h: &Option<Histogram<u64>>) -> Option<f64> {
    h.as_ref()
        .map(|h| h.value_at_quantile(0.99) as f64 / 1000.0)
}

/// Writes the players' facts into the history as they come, and counts the current second.
pub struct Recorder {
    log: EventLog,
    /// The rule that finds losses and returns, for the `player_lost` / `player_back` lines.
    losses: Mutex<Losses>,
    /// Every (account, session) a session write touched: read again at the end.
    touched: Touched,
    pub second: Mutex<Second>,
}

impl Recorder {
    /// A recorder into `log`, which first learns the nodes in the target's order (a fact's
    /// node index names one).
    pub fn new(log: EventLog, nodes: &[NodeAddrs]) -> Arc<Recorder> {
        let nodes = nodes.iter().map(|n| NodeId(n.name.clone())).collect();
        if let Err(e) = log.record(Event::PlayerNodes { nodes }) {
            tracing::warn!("event log: {e}");
        }
        Arc::new(Recorder {
            log,
            losses: Mutex::new(Losses::default()),
            touched: Touched::default(),
            second: Mutex::new(Second::default()),
        })
    }

    /// Takes the counts of the second that just ended.
    pub fn take_second(&self) -> Second {
        std::mem::take(&mut *lock(&self.second))
    }

    fn write(&self, at: std::time::Instant, event: Event) {
        if let Err(e) = self.log.record_at(at, event) {
            tracing::warn!("event log: {e}");
        }
    }

    /// Records every fact until `stop` fires, then what was already queued.
    pub async fn follow(
        self: Arc<Self>,
        mut facts: mpsc::UnboundedReceiver<Stamped>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                fact = facts.recv() => match fact {
                    Some(fact) => self.on(fact),
                    None => return,
                },
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        while let Ok(fact) = facts.try_recv() {
            self.on(fact);
        }
    }

    fn on(&self, stamped: Stamped) {
        self.touched.note(&stamped);
        self.count(&stamped.fact);
        let Stamped {
            at,
            player,
            account,
            fact,
        } = stamped;
        if let Fact::Call {
            op,
            status,
            latency,
            ..
        } = fact
        {
            let latency_ms = latency.as_secs_f64() * 1000.0;
            return self.write(
                at,
                Event::Call {
                    player,
                    op,
                    status,
                    latency_ms,
                },
            );
        }
        let Some(account) = account.map(|a| a.0) else {
            return;
        };
        if let Some(change) = lock(&self.losses).on(account, &fact) {
            let event = match change {
                Change::Lost { node, reason } => Event::PlayerLost {
                    account,
                    node,
                    reason,
                },
                Change::Back { node } => Event::PlayerBack { account, node },
            };
            self.write(at, event);
        }
        let fact = fact.map_times(|i| self.log.seconds(i));
        self.write(
            at,
            Event::Player {
                player,
                account,
                fact,
            },
        );
    }

    /// Counts `fact` into the current second (most facts count nothing).
    fn count(&self, fact: &Fact) {
        match fact {
            Fact::Call {
                op,
                status,
                latency,
                node_index,
            } if op.is_http() => {
                let mut second = lock(&self.second);
                second.calls.record_call(*latency, *status);
                if let Some(node) = node_index {
                    let (calls, errors) = second.calls_by_node.entry(*node).or_default();
                    *calls += 1;
                    *errors += u64::from(status.class() == CallClass::Failed);
                }
            }
            Fact::Welcome { .. } => lock(&self.second).welcomes += 1,
            Fact::Closed { code, cause, .. } if !losses::voluntary(*code, *cause) => {
                lock(&self.second).disconnects += 1;
            }
            Fact::Received {
                event:
                    Received {
                        delivery: Some(delivery),
                        ..
                    },
                ..
            } => record(&mut lock(&self.second).presence, *delivery),
            _ => {}
        }
    }
}

/// The final reads, together bounded by [`FINAL_READS_LIMIT`]: every player's friends (with
/// who is shown online), every (account, session) pair a write touched, and which accounts held
/// a connection (or none) all through the reads. What was not read in time is left out, and
/// the checks count it as not read.
pub async fn record_final_state(log: &EventLog, recorder: &Recorder, load: &mut Load) {
    let pairs = recorder.touched.pairs();
    let reads = load.final_reads(&pairs).await;
    record_final_reads(log, reads);
}

/// Writes the final reads into the history, with a note when they did not all end in time.
fn record_final_reads(log: &EventLog, reads: FinalReads) {
    if reads.late {
        let _ = log.record(Event::Note {
            text: format!(
                "the final reads took longer than {}s: what was not read is not judged",
                FINAL_READS_LIMIT.as_secs()
            ),
        });
    }
    let _ = log.record(Event::FinalState {
        friends: reads.friends,
        memberships: reads.memberships,
        connected: reads.connected,
        offline: reads.offline,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyplay_load::scenarios::planned::player_schedules;
    use anyplay_load::Break;

    fn node_crash() -> Plan {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans/node-crash.yaml");
        Plan::load(&path).expect("plans/node-crash.yaml")
    }

    #[test]
    fn a_plan_too_big_for_one_supervisor_is_refused_before_it_starts() {
        let mut plan = node_crash();
        plan.load.players = 8_000;
        plan.load.through_proxy = true;
        plan.load.second_devices = 0.0;
        let refused = anyplay_load::run::budget::check(&sockets(&plan), 20_000).unwrap_err();
        let names: Vec<&str> = refused.over.iter().map(|h| h.name.as_str()).collect();
        // 24,000 sockets in the supervisor; 4,000 players per node fit.
        assert_eq!(names, ["the supervisor"]);
        plan.load.through_proxy = false;
        assert_eq!(
            anyplay_load::run::budget::check(&sockets(&plan), 20_000),
            Ok(())
        );
    }

    #[test]
    fn local_agents_take_the_players_sockets_from_the_supervisor() {
        let mut plan = node_crash();
        plan.services.nodes.count = 4;
        plan.load.players = 50_000;
        plan.load.second_devices = 0.0;
        plan.load.through_proxy = false;
        plan.load.agents = Some(crate::plan::Agents {
            count: std::num::NonZeroU32::new(4).unwrap(),
            local: true,
            nats: None,
        });
        // 12,500 a process: agents and nodes alike.
        assert_eq!(
            anyplay_load::run::budget::check(&sockets(&plan), 20_000),
            Ok(())
        );
        let holders = sockets(&plan);
        assert!(holders.iter().all(|h| h.sockets == 12_500), "{holders:?}");
        // Through the proxy, the supervisor holds two ends of each: too many.
        plan.load.through_proxy = true;
        let refused = anyplay_load::run::budget::check(&sockets(&plan), 20_000).unwrap_err();
        assert_eq!(refused.over[0].name, "the supervisor");
        assert_eq!(refused.over[0].sockets, 100_000);
    }

    #[test]
    fn the_plans_seed_draws_the_players_choices() {
        let plan = node_crash();
        let length = Duration::from_secs(95);
        let a = settings(&plan, length).expect("valid load settings");
        assert_eq!(a.seed, plan.seed);
        let breaks = [Break::Closed(1001), Break::NoCloseFrame];
        let schedule = player_schedules(&a, &breaks);
        assert_eq!(schedule.len(), plan.load.players as usize);
        // Load settings made again from the same plan: the same schedule, player by player.
        assert_eq!(
            schedule,
            player_schedules(&settings(&plan, length).unwrap(), &breaks)
        );
        let reseeded = settings(&plan.with_seed(plan.seed + 1), length).unwrap();
        assert_ne!(schedule, player_schedules(&reseeded, &breaks));
    }
}
