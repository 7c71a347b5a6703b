//! One connection's view of its proxy's faults: its serial number (which toxicity draws on), the
//! bytes it lost to a drop-cut, its limit_data count, and the watch that ends it when a fault says
//! so. [`LinkFaults`] is the view from one direction.

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::limit_data::{Budget, Limit};
use super::partition::Holes;
use super::settings::{sleep_or_change, OnLink, Settings, Woke};
use super::{Direction, Faults, PartitionMode};

pub(crate) struct ConnectionFaults<'a> {
    faults: &'a Faults,
    serial: u64,
    opened: Instant,
    holes: Holes,
    budget: Budget,
    /// Wakes [`ended`](Self::ended) when the connection loses bytes or reaches its limit.
    events: Notify,
}

/// How a fault ends a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// RST on both sides: its stream has a hole, or a reset_peer timeout ran out.
    Reset,
    /// A normal close (FIN) on both sides: limit_data or timeout.
    Close,
}

impl<'a> ConnectionFaults<'a> {
    pub(crate) fn new(faults: &'a Faults, serial: u64) -> Self {
        ConnectionFaults {
            faults,
            serial,
            opened: Instant::now(),
            holes: Holes::default(),
            budget: Budget::default(),
            events: Notify::new(),
        }
    }

    pub(crate) fn link(&self, direction: Direction) -> LinkFaults<'_> {
        LinkFaults {
            connection: self,
            direction,
            settings: self.faults.watch(),
        }
    }

    /// Waits while a hold-cut keeps new connections back; false when a drop-cut refuses this one.
    pub(crate) async fn may_connect(&self) -> bool {
        let mut settings = self.faults.watch();
        loop {
            let cut = settings.borrow_and_update().cut_on_connect(self.serial);
            match cut {
                None => return true,
                Some(PartitionMode::Drop) => return false,
                Some(PartitionMode::Hold) => {
                    sleep_or_change(&mut settings, None).await;
                }
            }
        }
    }

    /// Returns when a fault ends the connection: a drop-cut that took bytes from it is over, its
    /// limit_data is reached, or its timeout has run out.
    pub(crate) async fn ended(&self) -> Ending {
        let mut settings = self.faults.watch();
        loop {
            let (up, down) = {
                let settings = settings.borrow_and_update();
                (
                    settings.on_link(Direction::Upstream, self.serial),
                    settings.on_link(Direction::Downstream, self.serial),
                )
            };
            let dropping = [up.cut, down.cut].contains(&Some(PartitionMode::Drop));
            if self.holes.any() && !dropping {
                return Ending::Reset;
            }
            let limit = up.limit.or(down.limit);
            if limit.is_some_and(|limit| self.budget.reached(limit)) {
                return Ending::Close;
            }
            let timeout = up.timeout.or(down.timeout);
            let deadline = timeout.and_then(|timeout| timeout.deadline(self.opened));
            if deadline.is_some_and(|deadline| deadline <= Instant::now()) {
                return match timeout {
                    Some(timeout) if timeout.reset => Ending::Reset,
                    _ => Ending::Close,
                };
            }
            tokio::select! {
                _ = sleep_or_change(&mut settings, deadline) => {}
                () = self.events.notified() => {}
            }
        }
    }
}

/// The faults as one direction of a connection meets them.
pub(crate) struct LinkFaults<'c> {
    connection: &'c ConnectionFaults<'c>,
    direction: Direction,
    settings: watch::Receiver<Settings>,
}

impl LinkFaults<'_> {
    /// What reaches this direction now; [`sleep_or_change`](Self::sleep_or_change) wakes at the
    /// next change after this.
    pub(crate) fn now(&mut self) -> OnLink {
        self.settings
            .borrow_and_update()
            .on_link(self.direction, self.connection.serial)
    }

    /// True when no fault reaches this direction now.
    pub(crate) fn is_clear(&mut self) -> bool {
        self.now() == OnLink::default()
    }

    pub(crate) async fn sleep_or_change(&mut self, until: Option<Instant>) -> Woke {
        sleep_or_change(&mut self.settings, until).await
    }

    /// Waits while this direction is stopped (a hold-cut or a timeout).
    pub(crate) async fn flowing(&mut self) {
        while self.now().stops() {
            self.sleep_or_change(None).await;
        }
    }

    /// True when a drop-cut takes bytes just read; the connection then has a hole.
    pub(crate) fn drops(&mut self) -> bool {
        if self.now().cut != Some(PartitionMode::Drop) {
            return false;
        }
        self.connection.holes.lose();
        self.connection.events.notify_one();
        true
    }

    /// Up to `want` bytes that may still pass under `limit`.
    pub(crate) fn take(&self, limit: Limit, want: usize) -> usize {
        self.connection.budget.take(limit, want)
    }

    /// Counts bytes written under `limit`; reaching it ends the connection.
    pub(crate) fn written(&self, limit: Limit, bytes: usize) {
        if self.connection.budget.written(limit, bytes) {
            self.connection.events.notify_one();
        }
    }
}
