//! The players of a run, played by the load crate: the plan's `load` section as load
//! settings, the load's target (the nodes as players reach them), the translation of what
//! players see into the run's history, and the final state the lost-writes check reads.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyplay_load::mail_log::{MailLog, DEFAULT_WAIT};
use anyplay_load::reconnect::ReconnectMode;
use anyplay_load::settings::{
    CardSettings, Mode, PresenceSettings, Scenario, SessionSettings, Settings,
};
use anyplay_load::stats::Status;
use anyplay_load::{EventKind, Fleet, NodeEndpoint, PlayerEvent, Target};
use hdrhistogram::Histogram;
use tokio::sync::broadcast;

use crate::events::{Event, EventLog, FriendList, LegacyWrite, SessionMembers};
use crate::plan::{Plan, Reconnect};
use crate::sync::lock;

use super::topology::{NodeAddrs, MAIL_LOG};
use super::RunError;

/// Members of the plan's parties: 4, or fewer when players have fewer friends.
const SESSION_SIZE: u32 = 4;
/// How long a party holds before its members leave.
const SESSION_HOLD: Duration = Duration::from_secs(3);
/// Accounts per gamer-card call.
const CARDS_SIZE: usize = 20;

/// The load settings of the plan, with its rates running for `duration` and its seed drawing
/// the players' choices, so a rerun repeats the players as well as the timeline.
pub fn settings(plan: &Plan, duration: Duration) -> Settings {
    let load = &plan.load;
    let defaults = Settings::default();
    let scenarios = [
        (Scenario::Presence, load.presence_rate),
        (Scenario::Sessions, load.session_rate),
        (Scenario::Cards, load.cards_rate),
    ]
    .into_iter()
    .filter(|(_, rate)| *rate > 0)
    .map(|(scenario, _)| scenario)
    .collect();
    Settings {
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
        },
        cards: CardSettings {
            rate: load.cards_rate.into(),
            size: CARDS_SIZE.min(load.players as usize),
            duration,
        },
        seed: plan.seed,
        mode: Mode::InProcess {
            default_limits: false,
        },
        ..defaults
    }
}

/// The nodes as the players reach them, with sign-in codes from the nodes' mail log.
pub fn target(dir: &Path, nodes: &[NodeAddrs]) -> Result<Target, RunError> {
    let codes = MailLog::open(&dir.join(MAIL_LOG), DEFAULT_WAIT)
        .map_err(|e| RunError::Topology(e.to_string()))?;
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
    pub http_calls: u64,
    pub http_errors: u64,
    pub latency: Option<Histogram<u64>>,
    pub presence: Option<Histogram<u64>>,
}

fn record(h: &mut Option<Histogram<u64>>, d: Duration) {
    let h = h.get_or_insert_with(|| Histogram::new(3).expect("3 significant figures is valid"));
    h.saturating_record(d.as_micros() as u64);
}

/// p99 in ms of a second's histogram.
pub fn p99_ms(h: &Option<Histogram<u64>>) -> Option<f64> {
    h.as_ref()
        .map(|h| h.value_at_quantile(0.99) as f64 / 1000.0)
}

/// Writes player events into the history and counts the current second.
pub struct Recorder {
    log: EventLog,
    fleet: Arc<Fleet>,
    /// Per player: the node of its last welcome, and whether it is lost now.
    seen: Mutex<BTreeMap<usize, (String, bool)>>,
    pub second: Mutex<Second>,
}

impl Recorder {
    pub fn new(log: EventLog, fleet: Arc<Fleet>) -> Arc<Recorder> {
        Arc::new(Recorder {
            log,
            fleet,
            seen: Mutex::new(BTreeMap::new()),
            second: Mutex::new(Second::default()),
        })
    }

    /// Takes the counts of the second that just ended.
    pub fn take_second(&self) -> Second {
        std::mem::take(&mut *lock(&self.second))
    }

    fn account(&self, player: usize) -> Option<u64> {
        self.fleet
            .players()
            .get(player)
            .and_then(|p| p.account())
            .map(|a| a.0)
    }

    fn write(&self, event: Event) {
        if let Err(e) = self.log.record(event) {
            tracing::warn!("event log: {e}");
        }
    }

    /// Follows the fleet's events until the channel closes or `stop` fires.
    pub async fn follow(
        self: Arc<Self>,
        mut events: broadcast::Receiver<PlayerEvent>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            let event = tokio::select! {
                e = events.recv() => e,
                _ = stop.wait_for(|s| *s) => return,
            };
            match event {
                Ok(e) => self.on(e),
                Err(broadcast::error::RecvError::Lagged(n)) => self.write(Event::Note {
                    text: format!(
                        "the recorder fell behind and missed {n} player events: checks may be off"
                    ),
                }),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    fn on(&self, e: PlayerEvent) {
        let Some(account) = self.account(e.player) else {
            return;
        };
        match e.kind {
            EventKind::Welcome { node, .. } => {
                lock(&self.second).welcomes += 1;
                let was_lost = lock(&self.seen)
                    .insert(e.player, (node.clone(), false))
                    .is_some_and(|(_, lost)| lost);
                if was_lost {
                    self.write(Event::PlayerBack { account, node });
                }
            }
            EventKind::Lost { reason } => {
                lock(&self.second).disconnects += 1;
                let node = {
                    let mut seen = lock(&self.seen);
                    match seen.get_mut(&e.player) {
                        Some(entry) if !entry.1 => {
                            entry.1 = true;
                            Some(entry.0.clone())
                        }
                        _ => None,
                    }
                };
                if let Some(node) = node {
                    self.write(Event::PlayerLost {
                        account,
                        node,
                        reason: reason.to_string(),
                    });
                }
            }
            EventKind::Presence {
                from,
                version,
                delivery,
            } => {
                if let Some(d) = delivery {
                    record(&mut lock(&self.second).presence, d);
                }
                self.write(Event::PresenceSeen {
                    observer: account,
                    account: from.0,
                    version,
                });
            }
            EventKind::PresenceSet { version } => self.write(Event::PresenceChange {
                account,
                version,
                sent: self.log.now(),
                node: crate::events::NodeId(String::new()),
            }),
            EventKind::Call {
                status, latency, ..
            } => {
                // Steps that are not one call (e2e_login, presence_delivery) are not counted.
                if status == Status::Done {
                    return;
                }
                let mut second = lock(&self.second);
                second.http_calls += 1;
                // A failed call got no answer, a server error or a wrong answer; a 4xx is
                // the cloud applying a rule (a full session, a taken seat).
                if matches!(
                    status,
                    Status::NoAnswer | Status::WrongCount | Status::Http(500..)
                ) {
                    second.http_errors += 1;
                }
                record(&mut second.latency, latency);
            }
        }
    }
}

/// The friendships the warm-up made, acknowledged, into the history: from here on the
/// presence check expects friends to hear each other.
pub fn record_friendships(log: &EventLog, fleet: &Fleet) {
    for player in fleet.players() {
        let Some(me) = player.account().map(|a| a.0) else {
            continue;
        };
        for friend in player.ledger().friends {
            // Each pair once.
            if me < friend.0 {
                let _ = log.record(Event::WriteAck(LegacyWrite::FriendAdd {
                    a: me,
                    b: friend.0,
                }));
            }
        }
    }
}

/// The session memberships players hold by acknowledgement (their ledgers), then what the
/// cloud shows now: the `final_state` that the lost-writes check compares.
pub async fn record_final_state(log: &EventLog, fleet: &Fleet) {
    let mut friends = Vec::new();
    let mut sessions: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for player in fleet.players() {
        let Some(me) = player.account().map(|a| a.0) else {
            continue;
        };
        let ledger = player.ledger();
        match player.list_friends(Instant::now()).await {
            Ok(view) => friends.push(FriendList {
                account: me,
                friends: view.friends.iter().map(|f| f.account_id.0).collect(),
                online: Vec::new(),
            }),
            Err(e) => tracing::warn!("final friends of {me}: {e}"),
        }
        if let Some(session) = &ledger.session {
            let Ok(id) = session.0.parse::<u64>() else {
                continue;
            };
            let _ = log.record(Event::WriteAck(LegacyWrite::SessionJoin {
                a: me,
                session: id,
            }));
            if let std::collections::btree_map::Entry::Vacant(slot) = sessions.entry(id) {
                match player.session_members(session).await {
                    Ok(members) => {
                        slot.insert(
                            members
                                .unwrap_or_default()
                                .into_iter()
                                .map(|a| a.0)
                                .collect(),
                        );
                    }
                    Err(e) => tracing::warn!("final members of session {id}: {e}"),
                }
            }
        }
    }
    let sessions = sessions
        .into_iter()
        .map(|(session, members)| SessionMembers { session, members })
        .collect();
    let _ = log.record(Event::FinalState {
        friends,
        sessions,
        memberships: Vec::new(),
        connected: Vec::new(),
        offline: Vec::new(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyplay_load::planned::player_schedules;
    use anyplay_load::Break;

    fn node_crash() -> Plan {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans/node-crash.yaml");
        Plan::load(&path).expect("plans/node-crash.yaml")
    }

    #[test]
    fn the_plans_seed_draws_the_players_choices() {
        let plan = node_crash();
        let length = Duration::from_secs(95);
        let a = settings(&plan, length);
        assert_eq!(a.seed, plan.seed);
        a.validate().expect("valid load settings");
        let breaks = [Break::Closed(1001), Break::NoCloseFrame];
        let schedule = player_schedules(&a, &breaks);
        assert_eq!(schedule.len(), plan.load.players as usize);
        // Load settings made again from the same plan: the same schedule, player by player.
        assert_eq!(
            schedule,
            player_schedules(&settings(&plan, length), &breaks)
        );
        let reseeded = settings(&plan.with_seed(plan.seed + 1), length);
        assert_ne!(schedule, player_schedules(&reseeded, &breaks));
    }
}
