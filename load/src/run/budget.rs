//! The sockets a run will hold, process by process, held against the open-file limit before
//! anything starts: a run too big for its processes is refused with the numbers, instead of
//! failing midway with "Too many open files" (one process here may open 20,000 files, and
//! the hard limit cannot be raised: more players need more processes).

use std::fmt;

use crate::settings::{Mode, Settings};

/// Files a process keeps beside its players' sockets: HTTP pools, database and NATS
/// connections, logs, listeners (measured here: about 18,000 player sockets fit in 20,000).
pub const RESERVE: u64 = 2_000;

/// One process of a run and the sockets it will hold at most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Who it is, as the refusal names it: "the harness", "node-2", "agent a1".
    pub name: String,
    /// Players whose connections it holds (for the message).
    pub players: u64,
    pub sockets: u64,
}

impl Holder {
    /// `players` players' event sockets, `per_player` each (a proxied connection costs a
    /// process two more, an in-process cloud one more).
    pub fn new(name: impl Into<String>, players: u64, devices: Devices, per_player: u64) -> Holder {
        Holder {
            name: name.into(),
            players,
            sockets: devices.connections(players).saturating_mul(per_player),
        }
    }
}

/// How many event connections players open: one each, plus a second device for a share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Devices {
    /// The share of players that also open a second device (`--second-devices`).
    pub second: f64,
}

impl Devices {
    pub fn connections(self, players: u64) -> u64 {
        // Saturating: a share too big to count is too big to hold, never a wrapped small one.
        players.saturating_add((players as f64 * self.second.clamp(0.0, 1.0)).ceil() as u64)
    }
}

/// A run that needs more sockets than some of its processes may open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManySockets {
    pub over: Vec<Holder>,
    pub limit: u64,
}

impl fmt::Display for TooManySockets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let over: Vec<String> = self
            .over
            .iter()
            .map(|h| {
                format!(
                    "{} would hold {} sockets for {} players",
                    h.name, h.sockets, h.players
                )
            })
            .collect();
        write!(
            f,
            "{}, and a process may open {} files here ({} of them kept for other files): \
             spread the players over more processes (agents, nodes)",
            over.join("; "),
            self.limit,
            RESERVE
        )
    }
}

impl std::error::Error for TooManySockets {}

/// Refuses when a holder's sockets and [`RESERVE`] exceed `limit`.
pub fn check(holders: &[Holder], limit: u64) -> Result<(), TooManySockets> {
    let over: Vec<Holder> = holders
        .iter()
        .filter(|h| h.sockets.saturating_add(RESERVE) > limit)
        .cloned()
        .collect();
    if over.is_empty() {
        Ok(())
    } else {
        Err(TooManySockets { over, limit })
    }
}

/// The processes of a load run on this machine: the harness, with the cloud inside it when it
/// runs in process (each connection is then held at both ends). External nodes run under
/// their own limits, which this machine cannot know.
pub fn of_load_run(settings: &Settings) -> Vec<Holder> {
    let devices = Devices {
        second: settings.traffic.second_devices,
    };
    let players = settings.total_players() as u64;
    let ends = match settings.mode {
        Mode::External(_) => 1,
        Mode::InProcess { .. } | Mode::Cluster { .. } => 2,
    };
    vec![Holder::new("the harness", players, devices, ends)]
}

/// The open-file limit of this process (and of the processes it starts), after raising the
/// soft limit to the hard one.
pub fn open_file_limit() -> std::io::Result<u64> {
    anyplay_cloud::raise_fd_limit()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: u64 = 20_000;

    #[test]
    fn a_share_too_big_to_count_is_refused_not_wrapped() {
        let devices = Devices { second: 1.0 };
        let holder = Holder::new("agent a", u64::MAX, devices, 2);
        assert_eq!(holder.sockets, u64::MAX);
        assert!(check(&[holder], LIMIT).is_err());
    }

    #[test]
    fn twenty_thousand_players_in_process_are_refused_before_they_start() {
        let holders = [Holder::new(
            "the harness",
            20_000,
            Devices { second: 0.0 },
            2,
        )];
        let refused = check(&holders, LIMIT).unwrap_err();
        let text = refused.to_string();
        assert!(
            text.contains("the harness would hold 40000 sockets for 20000 players"),
            "{text}"
        );
        assert!(text.contains("20000 files"), "{text}");
    }

    #[test]
    fn a_share_that_fits_passes_and_second_devices_count() {
        let fits = Holder::new("agent a1", 12_500, Devices { second: 0.0 }, 1);
        assert_eq!(check(&[fits], LIMIT), Ok(()));
        let with_seconds = Holder::new("agent a1", 12_500, Devices { second: 0.5 }, 1);
        assert_eq!(with_seconds.sockets, 18_750);
        assert!(check(&[with_seconds], LIMIT).is_err());
    }

    #[test]
    fn only_the_processes_over_the_limit_are_named() {
        let holders = [
            Holder::new("node-1", 9_000, Devices { second: 0.0 }, 1),
            Holder::new("the supervisor", 18_500, Devices { second: 0.0 }, 1),
        ];
        let refused = check(&holders, LIMIT).unwrap_err();
        assert_eq!(refused.over.len(), 1);
        assert_eq!(refused.over[0].name, "the supervisor");
    }
}
