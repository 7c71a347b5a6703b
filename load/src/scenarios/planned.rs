//! The schedule a run's players follow, from the settings alone (no cloud, no network): every
//! operation of the open-loop scenarios (presence, sessions, cards) with its planned start and
//! the player that does it, and each player's reconnect waits. The scenarios draw with the same
//! functions as they play, so a run follows this plan whenever every player of the wave is
//! online as a scenario starts; otherwise each operation draws the same way among the players
//! online then.

use std::time::Duration;

use crate::players::choices::{self, Purpose};
use crate::reconnect::{Break, Next, Reconnect};
use crate::scenarios::{cards, presence, sessions};
use crate::schedule::Plan;
use crate::settings::{Scenario, Settings};

/// What an operation does, and who does it (players by their index in the fleet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `player` changes its activity to `activity`.
    Presence { player: usize, activity: String },
    /// The first of `leaders` not in another session creates one; its online friends join.
    Session { leaders: Vec<usize> },
    /// `player` asks for the cards of its friends and of the `fill` players.
    Cards { player: usize, fill: Vec<usize> },
}

impl Choice {
    /// The player that acts: for a session, the first leader tried.
    pub fn actor(&self) -> Option<usize> {
        match self {
            Choice::Presence { player, .. } | Choice::Cards { player, .. } => Some(*player),
            Choice::Session { leaders } => leaders.first().copied(),
        }
    }
}

/// One planned operation of an open-loop scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedOp {
    pub scenario: Scenario,
    /// Its number in the scenario's schedule.
    pub index: u64,
    /// Its planned start, from the scenario's start.
    pub at: Duration,
    pub choice: Choice,
}

/// One player's part of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlayerSchedule {
    pub player: usize,
    /// The operations it does (for a session: where it is the first leader tried), in
    /// scenario order, then by time.
    pub operations: Vec<PlannedOp>,
    /// What its reconnect rule answers to the breaks asked about, one after another.
    pub reconnect: Vec<Next>,
}

/// Every operation of the open-loop scenarios `settings` run, each scenario by time.
pub fn operations(settings: &Settings) -> Vec<PlannedOp> {
    let (seed, online) = (settings.seed, settings.players);
    // Friends fill a gamer-card call first; drawn accounts fill the places they leave.
    let places = settings.cards.size.saturating_sub(settings.friends);
    let mut ops = Vec::new();
    for scenario in [Scenario::Presence, Scenario::Sessions, Scenario::Cards] {
        if !settings.runs(scenario) {
            continue;
        }
        let (rate, duration) = match scenario {
            Scenario::Presence => (settings.presence.rate, settings.presence.duration),
            Scenario::Sessions => (settings.sessions.rate, settings.sessions.duration),
            _ => (settings.cards.rate, settings.cards.duration),
        };
        let plan = Plan::for_duration(rate, duration, settings.max_in_flight);
        for index in 0..plan.count {
            let choice = match scenario {
                Scenario::Presence => {
                    presence::choose(seed, index, online).map(|c| Choice::Presence {
                        player: c.player,
                        activity: c.activity,
                    })
                }
                Scenario::Sessions => Some(Choice::Session {
                    leaders: sessions::leaders(seed, index, online),
                }),
                _ => {
                    let mut rng = choices::stream(seed, Purpose::Cards, index);
                    cards::choose(&mut rng, online, online, |_| places).map(|c| Choice::Cards {
                        player: c.caller,
                        fill: c.fill,
                    })
                }
            };
            ops.extend(choice.map(|choice| PlannedOp {
                scenario,
                index,
                at: plan.offset(index),
                choice,
            }));
        }
    }
    ops
}

/// The schedule of every player of the wave, and the waits its reconnect rule draws for
/// `breaks` in a row (with no failed attempt between them).
pub fn player_schedules(settings: &Settings, breaks: &[Break]) -> Vec<PlayerSchedule> {
    let mut schedules: Vec<PlayerSchedule> = (0..settings.players)
        .map(|player| PlayerSchedule {
            player,
            operations: Vec::new(),
            reconnect: reconnect_waits(settings, player, breaks),
        })
        .collect();
    for op in operations(settings) {
        if let Some(schedule) = op.choice.actor().and_then(|p| schedules.get_mut(p)) {
            schedule.operations.push(op);
        }
    }
    schedules
}

/// What `player`'s reconnect rule answers to `breaks`, drawing from its stream as its
/// connection does.
fn reconnect_waits(settings: &Settings, player: usize, breaks: &[Break]) -> Vec<Next> {
    let mut rule = Reconnect::new(settings.reconnect);
    let mut rng = choices::stream(settings.seed, Purpose::Reconnect, player as u64);
    breaks
        .iter()
        .map(|brk| rule.after_break(brk, &mut rng))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconnect::{ReconnectMode, GOING_AWAY};
    use crate::settings::{Args, SettingsDraft};
    use clap::Parser;

    fn settings(flags: &[&str]) -> Settings {
        let argv = ["anyplay-load", "--scenarios", "presence,sessions,cards"];
        let args = Args::parse_from(argv.iter().chain(flags));
        Settings::from_args(args).expect("valid settings")
    }

    const BREAKS: [Break; 3] = [
        Break::Closed(GOING_AWAY),
        Break::NoCloseFrame,
        Break::NoCloseFrame,
    ];

    #[test]
    fn the_same_settings_plan_the_same_schedule_and_another_seed_another() {
        let flags = ["--players", "200", "--seed", "7"];
        let a = player_schedules(&settings(&flags), &BREAKS);
        let b = player_schedules(&settings(&flags), &BREAKS);
        assert_eq!(a, b);
        let other = player_schedules(&settings(&["--players", "200", "--seed", "8"]), &BREAKS);
        assert_ne!(a, other);
        // Per player, not only in total: most players' parts differ with the seed.
        let differ = a.iter().zip(&other).filter(|(x, y)| x != y).count();
        assert!(differ > 150, "{differ} of 200 players differ");
    }

    #[test]
    fn every_operation_is_planned_on_time_with_a_player_of_the_wave() {
        let s = settings(&["--players", "50", "--friends", "10"]);
        let ops = operations(&s);
        let count = |scenario| ops.iter().filter(|o| o.scenario == scenario).count();
        // The defaults: 100 changes/s, 5 sessions/s, 50 calls/s, for 10 s each.
        assert_eq!(count(Scenario::Presence), 1000);
        assert_eq!(count(Scenario::Sessions), 50);
        assert_eq!(count(Scenario::Cards), 500);
        let presence: Vec<&PlannedOp> = ops
            .iter()
            .filter(|o| o.scenario == Scenario::Presence)
            .collect();
        assert_eq!(presence[10].at, Duration::from_millis(100));
        for op in &ops {
            assert!(op.choice.actor().is_some_and(|p| p < 50), "{op:?}");
            match &op.choice {
                // 20 ids a call, 10 of them friends.
                Choice::Cards { fill, .. } => {
                    assert_eq!(fill.len(), 10);
                    assert!(fill.iter().all(|&p| p < 50));
                }
                Choice::Session { leaders } => assert_eq!(leaders.len(), 8),
                Choice::Presence { activity, .. } => assert!(activity.starts_with("match ")),
            }
        }
        // Spread over the players, not stuck on a few.
        let actors: std::collections::BTreeSet<usize> =
            ops.iter().filter_map(|o| o.choice.actor()).collect();
        assert_eq!(actors.len(), 50);
    }

    #[test]
    fn reconnect_waits_follow_the_rule_with_the_players_own_draws() {
        let s = settings(&["--players", "20", "--seed", "3"]);
        let schedules = player_schedules(&s, &BREAKS);
        for schedule in &schedules {
            let waits: Vec<Duration> = schedule
                .reconnect
                .iter()
                .map(|next| match next {
                    Next::Wait(wait) => *wait,
                    other => panic!("expected a wait, got {other:?}"),
                })
                .collect();
            // A drain: anywhere in 10 s; then the doubling pause from 1 s.
            assert!(waits[0] < Duration::from_secs(10));
            assert!(
                waits[1] >= Duration::from_millis(500) && waits[1] < Duration::from_millis(1500)
            );
            assert!(waits[2] >= Duration::from_secs(1) && waits[2] < Duration::from_secs(3));
        }
        // Each player draws its own waits.
        assert_ne!(schedules[0].reconnect, schedules[1].reconnect);
        let immediate = SettingsDraft {
            reconnect: ReconnectMode::Immediate,
            ..s.draft()
        }
        .validate()
        .expect("valid settings");
        assert!(player_schedules(&immediate, &BREAKS)[0]
            .reconnect
            .iter()
            .all(|next| *next == Next::Wait(Duration::ZERO)));
    }
}
