//! Each service's state over a run (up, draining, down, paused) as time bands, derived
//! from the history alone: `service_up` and `service_exit`, and the `action_start` /
//! `action_end` of the actions that stop or pause a service.
//!
//! The history has no "SIGTERM sent" line, so a drain is inferred: a `stop` or `restart`
//! drains its node from the action's start until the node exits; a `rolling` drains its
//! nodes in turn, each from the moment the node before it is up again (so the band also
//! covers the rolling's `gap`; an `upgrade` likewise). A node's bands carry the version its
//! `service_start` named.

use std::collections::{BTreeMap, VecDeque};

use crate::events::{Event, History};
use crate::plan::{ActionKind, Service, Target};

/// What a service was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Up,
    Draining,
    Down,
    Paused,
}

impl State {
    pub const ALL: [State; 4] = [State::Up, State::Draining, State::Down, State::Paused];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Up => "up",
            State::Draining => "draining",
            State::Down => "down",
            State::Paused => "paused",
        }
    }
}

/// One stretch of one state, in seconds of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub state: State,
    pub from: f64,
    pub to: f64,
    /// The version the service ran (nodes).
    pub version: Option<String>,
}

/// One service's bands as they are being built.
#[derive(Debug)]
struct Track {
    state: State,
    since: f64,
    version: Option<String>,
    bands: Vec<Band>,
}

impl Track {
    fn set(&mut self, t: f64, state: State) {
        if state == self.state {
            return;
        }
        self.close(t);
        self.state = state;
        self.since = t;
    }

    /// From `t` on it runs `version`.
    fn runs(&mut self, t: f64, version: &Option<String>) {
        if *version != self.version {
            self.close(t);
            self.since = t;
            self.version = version.clone();
        }
    }

    fn close(&mut self, t: f64) {
        if t > self.since {
            self.bands.push(Band {
                state: self.state,
                from: self.since,
                to: t,
                version: self.version.clone(),
            });
        }
    }
}

/// Every service that appears in the history with its bands, in service order (nodes
/// first). A service has no band before its first `service_up` or `service_exit`.
pub fn bands(history: &History) -> Vec<(Service, Vec<Band>)> {
    let mut tracks: BTreeMap<Service, Track> = BTreeMap::new();
    // The nodes a running `rolling` has still to drain, in order.
    let mut rolling: VecDeque<Service> = VecDeque::new();
    for (t, event) in history.iter() {
        match event {
            Event::ServiceStart { service, version } => {
                track(&mut tracks, *service, t).runs(t, version);
            }
            Event::ServiceUp { service, .. } => {
                track(&mut tracks, *service, t).set(t, State::Up);
                if rolling.front() == Some(service) {
                    rolling.pop_front();
                    if let Some(next) = rolling.front() {
                        drain(&mut tracks, *next, t);
                    }
                }
            }
            Event::ServiceExit { service, .. } => {
                track(&mut tracks, *service, t).set(t, State::Down);
            }
            Event::ActionStart { action, target, .. } => {
                let services = covered(&tracks, target);
                match action {
                    ActionKind::Stop | ActionKind::Restart => {
                        for service in services {
                            drain(&mut tracks, service, t);
                        }
                    }
                    ActionKind::Rolling | ActionKind::Upgrade => {
                        rolling = services.into();
                        if let Some(first) = rolling.front() {
                            drain(&mut tracks, *first, t);
                        }
                    }
                    ActionKind::Pause => {
                        for service in services {
                            if let Some(track) = tracks.get_mut(&service) {
                                track.set(t, State::Paused);
                            }
                        }
                    }
                    _ => {}
                }
            }
            Event::ActionEnd { action, target, .. } => match action {
                ActionKind::Pause => {
                    for service in covered(&tracks, target) {
                        if let Some(track) = tracks.get_mut(&service) {
                            // Killed while paused stays down.
                            if track.state == State::Paused {
                                track.set(t, State::Up);
                            }
                        }
                    }
                }
                ActionKind::Rolling | ActionKind::Upgrade => rolling.clear(),
                _ => {}
            },
            _ => {}
        }
    }
    let end = history.end();
    tracks
        .into_iter()
        .map(|(service, mut track)| {
            track.close(end);
            (service, track.bands)
        })
        .collect()
}

fn track(tracks: &mut BTreeMap<Service, Track>, service: Service, t: f64) -> &mut Track {
    tracks.entry(service).or_insert_with(|| Track {
        // Replaced at once by the event that created it.
        state: State::Down,
        since: t,
        version: None,
        bands: Vec::new(),
    })
}

/// A stop only drains a service that is up; one already down stays down.
fn drain(tracks: &mut BTreeMap<Service, Track>, service: Service, t: f64) {
    if let Some(track) = tracks.get_mut(&service) {
        if track.state == State::Up {
            track.set(t, State::Draining);
        }
    }
}

/// The known services an action's target names (`nodes`: every node seen so far); a link
/// or `players` names none.
fn covered(tracks: &BTreeMap<Service, Track>, target: &str) -> Vec<Service> {
    match target.parse::<Target>() {
        Ok(Target::Node(n)) => vec![Service::Node(n)],
        Ok(Target::Nodes | Target::RandomNode) => tracks
            .keys()
            .copied()
            .filter(|s| matches!(s, Service::Node(_)))
            .collect(),
        Ok(Target::Postgres) => vec![Service::Postgres],
        Ok(Target::Nats) => vec![Service::Nats],
        Ok(Target::Players) | Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(service: Service) -> Event {
        Event::ServiceUp {
            service,
            addr: None,
        }
    }

    fn exit(service: Service, signal: Option<&str>) -> Event {
        Event::ServiceExit {
            service,
            code: signal.is_none().then_some(0),
            signal: signal.map(str::to_owned),
            reason: None,
        }
    }

    fn start(action: ActionKind, target: &str) -> Event {
        Event::ActionStart {
            action,
            target: target.into(),
            at: 0.0,
            via: None,
            to: None,
            toxic: None,
        }
    }

    fn end(action: ActionKind, target: &str) -> Event {
        Event::ActionEnd {
            action,
            target: target.into(),
            at: 0.0,
            error: None,
        }
    }

    fn spans(bands: &[Band]) -> Vec<(State, f64, f64)> {
        bands.iter().map(|b| (b.state, b.from, b.to)).collect()
    }

    const N1: Service = Service::Node(1);
    const N2: Service = Service::Node(2);

    #[test]
    fn a_kill_is_down_until_the_node_is_up_again() {
        let history: History = [
            (1.0, up(N1)),
            (10.0, start(ActionKind::Kill, "node-1")),
            (10.1, exit(N1, Some("SIGKILL"))),
            (10.1, end(ActionKind::Kill, "node-1")),
            (13.0, start(ActionKind::Start, "node-1")),
            (13.5, end(ActionKind::Start, "node-1")),
            (13.5, up(N1)),
            (20.0, Event::Note { text: "end".into() }),
        ]
        .into_iter()
        .collect();
        let bands = bands(&history);
        assert_eq!(bands.len(), 1);
        assert_eq!(
            spans(&bands[0].1),
            vec![
                (State::Up, 1.0, 10.1),
                (State::Down, 10.1, 13.5),
                (State::Up, 13.5, 20.0)
            ]
        );
    }

    #[test]
    fn a_stop_drains_until_the_exit() {
        let history: History = [
            (0.5, up(N1)),
            (0.6, up(N2)),
            (5.0, start(ActionKind::Stop, "node-2")),
            (7.0, exit(N2, None)),
            (7.0, end(ActionKind::Stop, "node-2")),
            (9.0, Event::Note { text: "end".into() }),
        ]
        .into_iter()
        .collect();
        let bands = bands(&history);
        assert_eq!(spans(&bands[0].1), vec![(State::Up, 0.5, 9.0)]);
        assert_eq!(
            spans(&bands[1].1),
            vec![
                (State::Up, 0.6, 5.0),
                (State::Draining, 5.0, 7.0),
                (State::Down, 7.0, 9.0)
            ]
        );
    }

    #[test]
    fn a_rolling_drains_each_node_in_turn() {
        let history: History = [
            (0.0, up(N1)),
            (0.0, up(N2)),
            (10.0, start(ActionKind::Rolling, "nodes")),
            (11.0, exit(N1, None)),
            (12.0, up(N1)),
            (15.0, exit(N2, None)),
            (16.0, up(N2)),
            (16.0, end(ActionKind::Rolling, "nodes")),
            (20.0, Event::Note { text: "end".into() }),
        ]
        .into_iter()
        .collect();
        let bands = bands(&history);
        assert_eq!(
            spans(&bands[0].1),
            vec![
                (State::Up, 0.0, 10.0),
                (State::Draining, 10.0, 11.0),
                (State::Down, 11.0, 12.0),
                (State::Up, 12.0, 20.0)
            ]
        );
        assert_eq!(
            spans(&bands[1].1),
            vec![
                (State::Up, 0.0, 12.0),
                (State::Draining, 12.0, 15.0),
                (State::Down, 15.0, 16.0),
                (State::Up, 16.0, 20.0)
            ]
        );
    }

    #[test]
    fn a_pause_holds_until_its_end_and_other_services_get_bands_too() {
        let history: History = [
            (0.0, up(Service::Nats)),
            (0.0, up(Service::Postgres)),
            (0.1, up(N1)),
            (5.0, start(ActionKind::Pause, "nats")),
            (10.0, end(ActionKind::Pause, "nats")),
            (12.0, start(ActionKind::Partition, "node-1<->postgres")),
            (12.0, start(ActionKind::Drop, "players")),
            (14.0, Event::Note { text: "end".into() }),
        ]
        .into_iter()
        .collect();
        let bands = bands(&history);
        let order: Vec<Service> = bands.iter().map(|(s, _)| *s).collect();
        assert_eq!(order, vec![N1, Service::Postgres, Service::Nats]);
        assert_eq!(
            spans(&bands[2].1),
            vec![
                (State::Up, 0.0, 5.0),
                (State::Paused, 5.0, 10.0),
                (State::Up, 10.0, 14.0)
            ]
        );
        assert_eq!(spans(&bands[1].1), vec![(State::Up, 0.0, 14.0)]);
    }

    #[test]
    fn a_node_killed_while_paused_stays_down() {
        let history: History = [
            (0.0, up(N1)),
            (2.0, start(ActionKind::Pause, "node-1")),
            (3.0, exit(N1, Some("SIGKILL"))),
            (7.0, end(ActionKind::Pause, "node-1")),
            (8.0, Event::Note { text: "end".into() }),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            spans(&bands(&history)[0].1),
            vec![
                (State::Up, 0.0, 2.0),
                (State::Paused, 2.0, 3.0),
                (State::Down, 3.0, 8.0)
            ]
        );
    }
}
