//! Which faults lie on an observation's path (chaos-plan v1.2, "Excuses follow the path").
//!
//! A path is a chain of hops: a player's event connection runs `players → node-N`, a node's
//! store runs `node-N → postgres`, an event from another node runs `players → node-R → nats
//! → node-S → postgres` (the sender looks up where its recipients are in the store). A fault lies on a path when it acts on one of its hops (a
//! service action whose target names it: `kill node-1`, `pause postgres`, `drop players`,
//! `nodes` for every node) or cuts or slows the link between two of its hops in a row
//! (`partition [players, node-1]`). A fault elsewhere (`partition [node-1, nats]` for a
//! player's connection) excuses nothing on it.
//!
//! A fault on the path either loses what crosses it by its nature ([`Fault::loses`]: a
//! kill, a drain, a partition, a `timeout` or `limit_data`, a `drop`) or only slows it
//! (latency, bandwidth, slicer, slow_close, cpu, pause, memory, clock, disk_full): what it
//! slows is owed by the fault's end plus the usual window, never excused.

use super::conns::Conn;
use super::fault_table::{self, Fault};
use super::presence::DELIVERY_WINDOW;
use crate::plan::ActionKind;

/// One hop of a path, by the name actions give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop<'a> {
    Players,
    Node(&'a str),
    Nats,
    Postgres,
}

impl Hop<'_> {
    /// Whether an action's end `name` stands for this hop.
    fn named(self, name: &str) -> bool {
        match self {
            Hop::Players => name == "players",
            Hop::Node(node) => name == node || name == "nodes",
            Hop::Nats => name == "nats",
            Hop::Postgres => name == "postgres",
        }
    }
}

/// A player's event connection to `node`.
pub fn connection(node: &str) -> [Hop<'_>; 2] {
    [Hop::Players, Hop::Node(node)]
}

/// An event made on node `sender` for a player connected to node `recipient`: over the bus
/// when they differ, after the sender looked the recipient up in the store.
pub fn delivery<'a>(sender: &'a str, recipient: &'a str) -> Vec<Hop<'a>> {
    if sender == recipient {
        connection(recipient).to_vec()
    } else {
        vec![
            Hop::Players,
            Hop::Node(recipient),
            Hop::Nats,
            Hop::Node(sender),
            Hop::Postgres,
        ]
    }
}

/// `node`'s way to its store.
pub fn store(node: &str) -> [Hop<'_>; 2] {
    [Hop::Node(node), Hop::Postgres]
}

impl Fault {
    /// Whether this fault acts on `path`: a link fault on a link between two hops in a row,
    /// any other action on one of its hops. `start` heals and is on no path.
    pub fn on_path(&self, path: &[Hop<'_>]) -> bool {
        if self.action == ActionKind::Start {
            return false;
        }
        let ends: Vec<&str> = self.target.split("<->").collect();
        match ends.as_slice() {
            [a, b] => path.windows(2).any(|pair| {
                (pair[0].named(a) && pair[1].named(b)) || (pair[0].named(b) && pair[1].named(a))
            }),
            _ => path.iter().any(|hop| hop.named(&self.target)),
        }
    }

    /// Whether it loses what crosses it by its nature; else it only slows it.
    pub fn loses(&self) -> bool {
        match self.action {
            ActionKind::Kill
            | ActionKind::Stop
            | ActionKind::Restart
            | ActionKind::Rolling
            | ActionKind::Upgrade
            | ActionKind::Drop
            | ActionKind::Partition
            | ActionKind::Timeout
            | ActionKind::LimitData => true,
            ActionKind::Start
            | ActionKind::Pause
            | ActionKind::Latency
            | ActionKind::Bandwidth
            | ActionKind::SlowClose
            | ActionKind::Slicer
            | ActionKind::Cpu
            | ActionKind::Memory
            | ActionKind::DiskFull
            | ActionKind::Clock => false,
        }
    }

    /// Whether it acts on a player's way to some node: the players, a node, or a link
    /// between them.
    pub fn cuts_players(&self) -> bool {
        match self.target.split_once("<->") {
            Some((a, b)) => a == "players" || b == "players",
            None => self.target == "players" || self.target.starts_with("node"),
        }
    }

    /// Whether this fault (with a firewall partition's aftermath) held at some moment of
    /// `[from, to]`.
    pub fn meets(&self, from: f64, to: f64) -> bool {
        self.start <= to && from <= self.end.max(self.start) + self.aftermath()
    }

    /// Whether `t` falls in this fault (with a firewall partition's aftermath) or in the
    /// `after` seconds that follow its end (a client notices a break a while after it).
    pub fn covers(&self, t: f64, after: f64) -> bool {
        self.start <= t && t <= self.end.max(self.start) + self.aftermath() + after
    }
}

/// The first fault on `path` that covers `t` (see [`Fault::covers`]).
pub fn excuse<'f>(faults: &'f [Fault], path: &[Hop<'_>], t: f64, after: f64) -> Option<&'f Fault> {
    faults
        .iter()
        .find(|f| f.on_path(path) && f.covers(t, after))
}

/// When a delivery sent at `sent` is owed, by the faults on its path.
pub struct Owed {
    /// `window_end`, or later when a fault that slows the path held until then.
    pub by: f64,
    /// A fault that loses data by nature lay on the path meanwhile.
    pub lost: bool,
}

impl Owed {
    pub fn on(faults: &[Fault], path: &[Hop<'_>], sent: f64, window_end: f64) -> Owed {
        let on_path: Vec<&Fault> = faults.iter().filter(|f| f.on_path(path)).collect();
        let mut by = window_end;
        // A slowed delivery is owed the window after the fault ends; faults may chain.
        loop {
            let later = on_path
                .iter()
                .filter(|f| !f.loses() && f.start <= by && f.end >= sent)
                .map(|f| f.end + DELIVERY_WINDOW)
                .fold(by, f64::max);
            if later <= by {
                break;
            }
            by = later;
        }
        let lost = on_path.iter().any(|f| {
            // A node taken out: its players' connections break (owed by resync), and what
            // dies with a SIGKILLed sender is judged apart.
            if f.action.takes_out() && f.target != "nats" && f.target != "postgres" {
                return false;
            }
            let (from, until) = match f.target.as_str() {
                // A dependency taken down stays down until it is started again.
                "nats" | "postgres" if matches!(f.action, ActionKind::Kill | ActionKind::Stop) => {
                    fault_table::service_down(faults, &f.target)
                        .into_iter()
                        .find(|&(from, _)| from == f.start)
                        .unwrap_or((f.start, f.end))
                }
                _ => (f.start, f.end + f.aftermath() + fault_table::RECONNECT),
            };
            f.loses() && from <= by && until >= sent
        });
        Owed { by, lost }
    }

    /// Owed later when the recipient read `conn` slowly on purpose meanwhile
    /// ([`Conn::owed_by`]).
    pub fn slowed_on(self, conn: &Conn, sent: f64) -> Owed {
        Owed {
            by: conn.owed_by(sent, self.by, DELIVERY_WINDOW),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(action: ActionKind, target: &str) -> Fault {
        Fault {
            action,
            target: target.into(),
            at: 10.0,
            start: 10.0,
            end: 15.0,
            via: None,
            to: None,
            toxic: None,
        }
    }

    #[test]
    fn a_link_fault_is_on_a_path_only_between_its_two_hops() {
        let cut = fault(ActionKind::Partition, "players<->node-1");
        assert!(cut.on_path(&connection("node-1")));
        assert!(fault(ActionKind::Latency, "node-1<->players").on_path(&connection("node-1")));
        assert!(!cut.on_path(&connection("node-2")));
        assert!(!cut.on_path(&store("node-1")));
        let bus = fault(ActionKind::Partition, "node-1<->nats");
        assert!(!bus.on_path(&connection("node-1")));
        assert!(!bus.on_path(&store("node-1")));
        assert!(fault(ActionKind::Partition, "node-1<->postgres").on_path(&store("node-1")));
        assert!(!fault(ActionKind::Partition, "node-1<->postgres").on_path(&store("node-2")));
    }

    #[test]
    fn a_service_action_is_on_every_path_through_its_target() {
        assert!(fault(ActionKind::Kill, "node-1").on_path(&connection("node-1")));
        assert!(fault(ActionKind::Kill, "node-1").on_path(&store("node-1")));
        assert!(!fault(ActionKind::Kill, "node-1").on_path(&connection("node-2")));
        assert!(fault(ActionKind::Rolling, "nodes").on_path(&connection("node-3")));
        assert!(fault(ActionKind::Drop, "players").on_path(&connection("node-2")));
        assert!(fault(ActionKind::Pause, "postgres").on_path(&store("node-2")));
        assert!(!fault(ActionKind::Pause, "postgres").on_path(&connection("node-2")));
        assert!(!fault(ActionKind::Pause, "nats").on_path(&connection("node-2")));
        assert!(!fault(ActionKind::Start, "node-1").on_path(&connection("node-1")));
    }

    #[test]
    fn an_event_from_another_node_crosses_the_bus_and_the_senders_store() {
        let path = delivery("node-2", "node-1");
        assert!(fault(ActionKind::Pause, "nats").on_path(&path));
        assert!(fault(ActionKind::Latency, "node-2<->nats").on_path(&path));
        assert!(fault(ActionKind::Latency, "nats<->node-1").on_path(&path));
        assert!(fault(ActionKind::Partition, "node-2<->postgres").on_path(&path));
        assert!(!fault(ActionKind::Partition, "node-1<->postgres").on_path(&path));
        assert!(!fault(ActionKind::Latency, "players<->node-2").on_path(&path));
        assert!(!fault(ActionKind::Cpu, "node-3").on_path(&path));
        // On one node, nothing but the player's link and the node.
        let local = delivery("node-1", "node-1");
        assert!(!fault(ActionKind::Pause, "nats").on_path(&local));
        assert!(fault(ActionKind::Cpu, "node-1").on_path(&local));
        assert!(!fault(ActionKind::Pause, "nats").loses());
        assert!(fault(ActionKind::Partition, "node-2<->nats").loses());
    }

    #[test]
    fn an_excuse_covers_the_fault_and_what_follows_it() {
        let faults = [fault(ActionKind::Kill, "node-1")];
        let path = connection("node-1");
        assert!(excuse(&faults, &path, 9.9, 2.0).is_none());
        assert!(excuse(&faults, &path, 10.0, 2.0).is_some());
        assert!(excuse(&faults, &path, 17.0, 2.0).is_some());
        assert!(excuse(&faults, &path, 17.1, 2.0).is_none());
    }
}
