//! What is set on a proxy: a slot per fault kind and direction with its toxicity and when it was
//! set (a direction's slot is set and cleared on its own, as Toxiproxy's upstream and downstream
//! toxics are), and the view of it from one direction of one connection ([`OnLink`]).

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

use super::latency::Latency;
use super::limit_data::Limit;
use super::slicer::Slice;
use super::timeout::Timeout;
use super::toxicity::spread;
use super::{Direction, LinkFault, LinkFaultKind, PartitionMode, Toxicity, Ways};

#[derive(Debug, Clone, Copy)]
struct Active {
    fault: LinkFault,
    toxicity: Option<Toxicity>,
    since: Instant,
    /// Tells a fault from an earlier one of its kind (limit_data counts afresh).
    generation: u64,
}

impl Active {
    fn reaches(&self, serial: u64) -> bool {
        self.toxicity
            .is_none_or(|toxicity| toxicity.hits(self.fault.kind(), serial))
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    /// By kind, then direction (upstream, downstream).
    slots: [[Option<Active>; 2]; LinkFaultKind::ALL.len()],
    generations: u64,
}

/// The faults that reach one direction of one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct OnLink {
    pub(crate) cut: Option<PartitionMode>,
    pub(crate) latency: Option<Latency>,
    /// At least 1.
    pub(crate) kbps: Option<u32>,
    pub(crate) slow_close: Option<Duration>,
    pub(crate) timeout: Option<Timeout>,
    pub(crate) limit: Option<Limit>,
    pub(crate) slice: Option<Slice>,
}

impl OnLink {
    /// True while this direction must neither read nor write.
    pub(crate) fn stops(&self) -> bool {
        self.cut == Some(PartitionMode::Hold) || self.timeout.is_some()
    }
}

impl Settings {
    pub(crate) fn set(&mut self, fault: LinkFault, ways: Ways, toxicity: Option<Toxicity>) {
        self.generations += 1;
        let active = Active {
            fault,
            toxicity,
            since: Instant::now(),
            generation: self.generations,
        };
        for slot in self.slots_of(fault.kind(), ways) {
            *slot = Some(active);
        }
    }

    /// Removes the fault of `kind` from the directions `ways` covers; returns whether anything
    /// changed.
    pub(crate) fn clear(&mut self, kind: LinkFaultKind, ways: Ways) -> bool {
        let mut any = false;
        for slot in self.slots_of(kind, ways) {
            any |= slot.take().is_some();
        }
        any
    }

    /// Returns whether anything changed.
    pub(crate) fn heal(&mut self) -> bool {
        let any = self.slots.iter().flatten().any(Option::is_some);
        self.slots = Default::default();
        any
    }

    pub(crate) fn is_set(&self, kind: LinkFaultKind) -> bool {
        self.slots[kind.index()].iter().any(Option::is_some)
    }

    fn slots_of(
        &mut self,
        kind: LinkFaultKind,
        ways: Ways,
    ) -> impl Iterator<Item = &mut Option<Active>> {
        let directions = [Direction::Upstream, Direction::Downstream];
        self.slots[kind.index()]
            .iter_mut()
            .zip(directions)
            .filter(move |(_, direction)| ways.covers(*direction))
            .map(|(slot, _)| slot)
    }

    pub(crate) fn on_link(&self, direction: Direction, serial: u64) -> OnLink {
        let mut on = OnLink::default();
        let index = match direction {
            Direction::Upstream => 0,
            Direction::Downstream => 1,
        };
        let reaching = self
            .slots
            .iter()
            .filter_map(|slots| slots[index].as_ref())
            .filter(|active| active.reaches(serial));
        for active in reaching {
            match active.fault {
                LinkFault::Partition(mode) => on.cut = Some(mode),
                LinkFault::Latency(latency) => on.latency = Some(latency),
                LinkFault::Bandwidth { kbps } => on.kbps = Some(kbps.max(1)),
                LinkFault::SlowClose { delay } => on.slow_close = Some(delay),
                LinkFault::Timeout { after, reset } => {
                    on.timeout = Some(Timeout {
                        after,
                        reset,
                        since: active.since,
                    });
                }
                LinkFault::LimitData { bytes } => {
                    on.limit = Some(Limit {
                        bytes,
                        generation: active.generation,
                    });
                }
                LinkFault::Slicer {
                    bytes,
                    variation,
                    delay,
                } => {
                    // The connection's serial and direction (and the run's seed, with a
                    // toxicity) pick its sizes.
                    let run = active.toxicity.map_or(0, |toxicity| toxicity.seed);
                    on.slice = Some(Slice {
                        bytes: bytes.max(1),
                        variation,
                        delay,
                        seed: run ^ spread(serial.wrapping_mul(2).wrapping_add(index as u64)),
                    });
                }
            }
        }
        on
    }

    /// The partition a new connection meets: one way is enough to stop a handshake.
    pub(crate) fn cut_on_connect(&self, serial: u64) -> Option<PartitionMode> {
        let modes: Vec<PartitionMode> = self.slots[LinkFaultKind::Partition.index()]
            .iter()
            .flatten()
            .filter(|a| a.reaches(serial))
            .filter_map(|a| match a.fault {
                LinkFault::Partition(mode) => Some(mode),
                _ => None,
            })
            .collect();
        // Either way's drop refuses the connection; else either way's hold holds it.
        if modes.contains(&PartitionMode::Drop) {
            Some(PartitionMode::Drop)
        } else {
            modes.first().copied()
        }
    }
}

/// Why [`sleep_or_change`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    Due,
    Changed,
}

/// Waits until `until` (forever if `None`) or the next change of the settings, whichever is first.
pub(crate) async fn sleep_or_change(
    settings: &mut watch::Receiver<Settings>,
    until: Option<Instant>,
) -> Woke {
    let sleep = async {
        match until {
            Some(until) => sleep_until(until).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = sleep => Woke::Due,
        changed = settings.changed() => {
            if changed.is_err() {
                // The proxy is gone and its tasks are being aborted.
                std::future::pending::<()>().await;
            }
            Woke::Changed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_reaches_only_the_directions_it_covers() {
        let mut settings = Settings::default();
        settings.set(LinkFault::Bandwidth { kbps: 0 }, Ways::Up, None);
        settings.set(LinkFault::Partition(PartitionMode::Drop), Ways::Down, None);
        let up = settings.on_link(Direction::Upstream, 0);
        assert_eq!(up.kbps, Some(1), "0 kbps counts as 1");
        assert_eq!(up.cut, None);
        let down = settings.on_link(Direction::Downstream, 0);
        assert_eq!(down.kbps, None);
        assert_eq!(down.cut, Some(PartitionMode::Drop));
        assert_eq!(settings.cut_on_connect(0), Some(PartitionMode::Drop));
    }

    #[test]
    fn setting_a_kind_again_replaces_it_and_clear_removes_only_that_kind() {
        let mut settings = Settings::default();
        settings.set(LinkFault::LimitData { bytes: 5 }, Ways::Both, None);
        let first = settings.on_link(Direction::Upstream, 0).limit;
        settings.set(LinkFault::LimitData { bytes: 7 }, Ways::Both, None);
        let second = settings.on_link(Direction::Upstream, 0).limit;
        assert_eq!(second.map(|limit| limit.bytes), Some(7));
        assert_ne!(first.map(|l| l.generation), second.map(|l| l.generation));

        settings.set(
            LinkFault::Timeout {
                after: None,
                reset: false,
            },
            Ways::Both,
            None,
        );
        assert!(settings.clear(LinkFaultKind::Timeout, Ways::Both));
        assert!(!settings.clear(LinkFaultKind::Timeout, Ways::Both));
        assert!(settings.is_set(LinkFaultKind::LimitData));
        assert!(settings.heal());
        assert!(!settings.heal());
        assert_eq!(
            settings.on_link(Direction::Downstream, 0),
            OnLink::default()
        );
    }

    #[test]
    fn each_direction_of_a_kind_is_set_and_cleared_on_its_own() {
        let mut settings = Settings::default();
        let latency =
            |ms| LinkFault::Latency(Latency::new(Duration::from_millis(ms), Duration::ZERO));
        settings.set(latency(10), Ways::Up, None);
        settings.set(latency(20), Ways::Down, None);
        let delay = |direction| settings.on_link(direction, 0).latency.map(|l| l.delay);
        assert_eq!(delay(Direction::Upstream), Some(Duration::from_millis(10)));
        assert_eq!(
            delay(Direction::Downstream),
            Some(Duration::from_millis(20))
        );
        assert!(settings.clear(LinkFaultKind::Latency, Ways::Up));
        assert_eq!(settings.on_link(Direction::Upstream, 0).latency, None);
        assert!(settings.is_set(LinkFaultKind::Latency));
        settings.set(LinkFault::Partition(PartitionMode::Hold), Ways::Up, None);
        settings.set(LinkFault::Partition(PartitionMode::Drop), Ways::Down, None);
        assert_eq!(settings.cut_on_connect(0), Some(PartitionMode::Drop));
    }

    #[test]
    fn toxicity_picks_connections_per_kind() {
        let mut settings = Settings::default();
        let none = Toxicity {
            share: 0.0,
            seed: 1,
        };
        let all = Toxicity {
            share: 1.0,
            seed: 1,
        };
        settings.set(
            LinkFault::Partition(PartitionMode::Hold),
            Ways::Both,
            Some(none),
        );
        settings.set(
            LinkFault::SlowClose {
                delay: Duration::from_secs(1),
            },
            Ways::Both,
            Some(all),
        );
        for serial in 0..50 {
            let on = settings.on_link(Direction::Upstream, serial);
            assert_eq!(on.cut, None);
            assert!(!on.stops());
            assert_eq!(on.slow_close, Some(Duration::from_secs(1)));
            assert_eq!(settings.cut_on_connect(serial), None);
        }
    }
}
