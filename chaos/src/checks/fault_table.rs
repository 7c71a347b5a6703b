//! The faults of a run as the history shows them (each `action_start` paired with its
//! `action_end`), which player losses each one caused, and the faults table of the report.
//!
//! A loss belongs to the latest fault that started at or before it and ended no more than
//! `grace` (the players_back limit) before it: a player only notices a break a little later.

use std::collections::{BTreeSet, HashMap};

use serde::{Serialize, Serializer};

use super::losses::{self, Change};
use super::outages;
use crate::control::toxiproxy::ToxicJson;
use crate::events::{Event, History, PlayerFact};
use crate::plan::{ActionKind, Service, Via};

/// One action as it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub action: ActionKind,
    pub target: String,
    /// Scheduled offset, seconds.
    pub at: f64,
    /// Actual `t` of `action_start` and `action_end` (the end of the history when missing).
    pub start: f64,
    pub end: f64,
    /// A partition by the hosts' firewalls rather than the fault proxy.
    pub via: Option<Via>,
    /// The version an `upgrade` moved its nodes to.
    pub to: Option<String>,
    /// The toxic a change through the control API set.
    pub toxic: Option<ToxicJson>,
}

impl Fault {
    /// The window a loss or an error is laid to this fault in.
    pub fn window_end(&self, grace: f64) -> f64 {
        self.end + grace
    }

    pub fn label(&self) -> String {
        format!("{} {} at {}s", self.action, self.target, fmt_num(self.at))
    }
}

/// Every action of the history, in start order.
pub fn faults(history: &History) -> Vec<Fault> {
    let mut faults: Vec<(Fault, bool)> = Vec::new();
    for (t, event) in history.iter() {
        match event {
            Event::ActionStart {
                action,
                target,
                at,
                via,
                to,
                toxic,
            } => faults.push((
                Fault {
                    action: *action,
                    target: target.clone(),
                    at: *at,
                    via: *via,
                    to: to.clone(),
                    toxic: toxic.clone(),
                    start: t,
                    end: history.end(),
                },
                false,
            )),
            Event::ActionEnd {
                action, target, at, ..
            } => {
                let open = faults.iter_mut().find(|(f, closed)| {
                    !closed && f.action == *action && f.target == *target && f.at == *at
                });
                if let Some((fault, closed)) = open {
                    fault.end = t;
                    *closed = true;
                }
            }
            _ => {}
        }
    }
    faults.into_iter().map(|(fault, _)| fault).collect()
}

impl Fault {
    /// Whether it holds a fault for a while (pause, the link faults, the service faults)
    /// rather than doing one thing (kill, stop, restart, rolling, drop).
    pub fn lasts(&self) -> bool {
        self.action == ActionKind::Pause
            || self.action.is_link_fault()
            || self.action.is_service_fault()
    }

    /// When the cloud may show the fault: a lasting one while it holds (and its
    /// [`aftermath`](Self::aftermath)); one that does a thing from its start until `grace`
    /// (the players_back limit) after it is done. `None` for `start`, which heals.
    pub fn window(&self, grace: f64) -> Option<(f64, f64)> {
        match self.action {
            ActionKind::Start => None,
            _ if self.lasts() => Some((self.start, self.end + self.aftermath())),
            _ => Some((self.start, self.end.max(self.start) + grace)),
        }
    }

    /// How long after its heal a lasting fault may still hold traffic up. The proxy passes
    /// what it held at once; after a firewall partition, TCP resends with exponential
    /// backoff, so the first resend may come as late after the heal as the cut lasted
    /// (Linux caps the backoff at 120 s).
    pub fn aftermath(&self) -> f64 {
        match self.via {
            Some(Via::Firewall) => (self.end - self.start).clamp(0.0, TCP_BACKOFF_MAX),
            _ => 0.0,
        }
    }
}

/// Linux's largest retransmission timeout (`TCP_RTO_MAX`), seconds.
const TCP_BACKOFF_MAX: f64 = 120.0;

/// How long after a dependency is back the nodes may still be reconnecting to it.
pub const RECONNECT: f64 = 2.0;

/// When `service` was down by an action that takes it down (a restart; a stop or kill until
/// its next start), and the nodes' reconnect after.
pub fn service_down(faults: &[Fault], service: &str) -> Vec<(f64, f64)> {
    let on = |f: &&Fault| f.target == service;
    faults
        .iter()
        .filter(on)
        .filter_map(|f| match f.action {
            ActionKind::Restart => Some((f.start, f.end + RECONNECT)),
            ActionKind::Stop | ActionKind::Kill => {
                let back = faults
                    .iter()
                    .filter(on)
                    .filter(|s| s.action == ActionKind::Start && s.start >= f.start)
                    .map(|s| s.end)
                    .reduce(f64::min)
                    .unwrap_or(f64::INFINITY);
                Some((f.start, back + RECONNECT))
            }
            _ => None,
        })
        .collect()
}

/// The fault windows of the run (see [`Fault::window`]).
pub fn windows(history: &History, grace: f64) -> Vec<(f64, f64)> {
    faults(history)
        .iter()
        .filter_map(|f| f.window(grace))
        .collect()
}

/// Whether `[from, until]` overlaps any of `windows`.
pub fn overlaps(windows: &[(f64, f64)], from: f64, until: f64) -> bool {
    windows.iter().any(|&(a, b)| from <= b && a <= until)
}

/// The cloud nodes the run started (`service_up` of `node-N`).
pub fn nodes(history: &History) -> BTreeSet<u32> {
    history
        .iter()
        .filter_map(|(_, e)| match e {
            Event::ServiceUp {
                service: Service::Node(n),
                ..
            } => Some(*n),
            _ => None,
        })
        .collect()
}

/// One player that lost its connection during a fault, and when (if ever) it was back.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub account: u64,
    /// The node it was on when it lost the connection (its last loss in this fault).
    pub node: String,
    /// When its node went out: the fault's start, or for a rolling its node's own step.
    pub from: f64,
    pub lost_t: f64,
    /// `t` of the first welcome after that loss.
    pub back_t: Option<f64>,
    /// `t` of the first welcome after that loss from a node other than `node`.
    pub back_elsewhere_t: Option<f64>,
}

/// The players each fault broke, indexed like `faults`; plus the losses no fault explains.
pub fn hits(history: &History, faults: &[Fault], grace: f64) -> (Vec<Vec<Hit>>, usize) {
    let changes = losses::of(history);
    // Each account's returns in order, to find "the first after" a loss by search.
    let mut backs: HashMap<u64, Vec<(usize, f64, &str)>> = HashMap::new();
    for (i, c) in changes.iter().enumerate() {
        if let Change::Back { node } = &c.change {
            backs.entry(c.account).or_default().push((i, c.t, node));
        }
    }
    let outages = outages::outages(history, faults, &outages::states(history), grace);
    let step_start = |fault: usize, node: &str, lost_t: f64| {
        outages
            .iter()
            .filter(|o| o.fault == fault && o.start <= lost_t)
            .filter(|o| Service::Node(o.node).to_string() == node)
            .map(|o| o.start)
            .reduce(f64::max)
    };
    let own = OwnLosses::of(history);
    let mut per_fault: Vec<Vec<Hit>> = vec![Vec::new(); faults.len()];
    let mut unexplained = 0;
    for (i, c) in changes.iter().enumerate() {
        let Change::Lost { node, reason } = &c.change else {
            continue;
        };
        let (t, account) = (c.t, &c.account);
        if own.contains(*account, t, reason) {
            continue;
        }
        let owner = faults
            .iter()
            .enumerate()
            .filter(|(_, f)| f.start <= t && t <= f.window_end(grace))
            .max_by(|(_, a), (_, b)| a.start.total_cmp(&b.start))
            .map(|(k, _)| k);
        let Some(owner) = owner else {
            unexplained += 1;
            continue;
        };
        let later: &[(usize, f64, &str)] = match backs.get(account) {
            Some(list) => &list[list.partition_point(|(j, _, _)| *j < i)..],
            None => &[],
        };
        let fault = &faults[owner];
        let from = match fault.action.in_turn() {
            true => step_start(owner, node, t).unwrap_or(fault.start),
            false => fault.start,
        };
        let hit = Hit {
            account: *account,
            node: node.clone(),
            from,
            lost_t: t,
            back_t: later.first().map(|(_, t, _)| *t),
            back_elsewhere_t: later
                .iter()
                .find(|(_, _, n)| *n != node.as_str())
                .map(|(_, t, _)| *t),
        };
        // A player lost twice in one fault counts once, from its last loss.
        let hits = &mut per_fault[owner];
        match hits.iter_mut().find(|h| h.account == *account) {
            Some(earlier) => *earlier = hit,
            None => hits.push(hit),
        }
    }
    (per_fault, unexplained)
}

/// The losses that were the player's own doing, never a fault's: a 4003 ends a session the
/// player signed out of, a 1013 a connection it read too slowly (`slow_readers`), and any loss
/// noticed while it read slowly was noticed late by its own doing (what was queued for it came
/// first). Such a loss in a fault's window is not the fault's hit, and its return is no
/// measure of the fault.
pub struct OwnLosses {
    /// Each account's slow spells: from, until.
    slow: HashMap<u64, Vec<(f64, f64)>>,
}

impl OwnLosses {
    pub fn of(history: &History) -> OwnLosses {
        let mut slow: HashMap<u64, Vec<(f64, f64)>> = HashMap::new();
        for spell in super::slow_consumers::spells(history) {
            slow.entry(spell.account)
                .or_default()
                .push((spell.from, spell.until));
        }
        OwnLosses { slow }
    }

    /// Whether `account`'s loss at `t`, for `reason`, was its own doing.
    pub fn contains(&self, account: u64, t: f64, reason: &str) -> bool {
        // Recorded as its spell ends, just after the close it waited for.
        const SPELL_END: f64 = 1.0;
        matches!(reason, "closed 4003" | "closed 1013")
            || self.slow.get(&account).is_some_and(|spells| {
                spells
                    .iter()
                    .any(|&(from, until)| from <= t && t <= until + SPELL_END)
            })
    }
}

/// Seconds from their node's going out until 50/90/95/99/100 % of a fault's players were back
/// (`null` when that share never came back, or nobody was hit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BackSeconds {
    #[serde(rename = "50", serialize_with = "secs")]
    pub p50: Option<f64>,
    #[serde(rename = "90", serialize_with = "secs")]
    pub p90: Option<f64>,
    #[serde(rename = "95", serialize_with = "secs")]
    pub p95: Option<f64>,
    #[serde(rename = "99", serialize_with = "secs")]
    pub p99: Option<f64>,
    #[serde(rename = "100", serialize_with = "secs")]
    pub p100: Option<f64>,
}

fn secs<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    // Milliseconds are the precision that matters in a report.
    value
        .map(|v| (v * 1000.0).round() / 1000.0)
        .serialize(serializer)
}

impl BackSeconds {
    /// Nearest-rank percentiles over the times back (`None` = never back, ranked last).
    pub fn of(hits: &[Hit]) -> BackSeconds {
        let mut times: Vec<Option<f64>> = hits
            .iter()
            .map(|h| h.back_t.map(|t| (t - h.from).max(0.0)))
            .collect();
        times.sort_by(|a, b| match (a, b) {
            (Some(a), Some(b)) => a.total_cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        let rank = |q: f64| -> Option<f64> {
            if times.is_empty() {
                return None;
            }
            let k = ((q / 100.0) * times.len() as f64).ceil().max(1.0) as usize;
            times[k - 1]
        };
        BackSeconds {
            p50: rank(50.0),
            p90: rank(90.0),
            p95: rank(95.0),
            p99: rank(99.0),
            p100: rank(100.0),
        }
    }
}

/// A row of the report's faults table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultRow {
    pub action: ActionKind,
    pub target: String,
    /// The version an `upgrade` moved its nodes to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The toxic a change through the control API set, as Toxiproxy shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toxic: Option<ToxicJson>,
    pub at: f64,
    pub players_hit: u64,
    pub back_s: BackSeconds,
    /// HTTP errors the load saw during the fault's window.
    pub errors: u64,
}

/// The faults table: one row per action of the run. A fault's errors are counted until
/// `grace` after its end, but not past the start of the next fault, which owns them then.
pub fn table(history: &History, grace: f64) -> Vec<FaultRow> {
    let faults = faults(history);
    let (hits, _) = hits(history, &faults, grace);
    let leavers = Leavers::of(history);
    faults
        .iter()
        .zip(hits)
        .map(|(fault, hits)| {
            let next_start = faults
                .iter()
                .map(|f| f.start)
                .filter(|&s| s > fault.start)
                .fold(f64::INFINITY, f64::min);
            FaultRow {
                action: fault.action,
                target: fault.target.clone(),
                to: fault.to.clone(),
                toxic: fault.toxic.clone(),
                at: fault.at,
                players_hit: hits.len() as u64,
                // Players that left for good are hit, but not expected back.
                back_s: BackSeconds::of(&leavers.expected_back(fault, &hits).0),
                errors: errors_between(
                    history,
                    fault.start,
                    fault.window_end(grace).min(next_start),
                ),
            }
        })
        .collect()
}

/// An action as the tables show it: its name (a toxic's type as Toxiproxy names it, so a
/// `reset_peer` is not shown as the `timeout` it is on the proxy) and its target with what tells
/// it from another there (an upgrade's version; a toxic's name, stream, attributes, toxicity).
pub fn shown(
    action: ActionKind,
    target: &str,
    to: Option<&str>,
    toxic: Option<&ToxicJson>,
) -> (String, String) {
    match (to, toxic) {
        (_, Some(toxic)) => (toxic.kind.clone(), format!("{target} {}", toxic.details())),
        (Some(version), None) => (action.to_string(), format!("{target} to {version}")),
        (None, None) => (action.to_string(), target.to_owned()),
    }
}

/// HTTP errors in the load ticks whose second, `(t-1, t]`, overlaps `(from, until)`.
fn errors_between(history: &History, from: f64, until: f64) -> u64 {
    history
        .iter()
        .filter_map(|(t, e)| match e {
            Event::LoadTick(tick) if t > from && t - 1.0 < until => Some(tick.http_errors),
            _ => None,
        })
        .sum()
}

/// When each account signed off for good: a player who leaves is not expected back.
pub struct Leavers(HashMap<u64, Vec<f64>>);

impl Leavers {
    pub fn of(history: &History) -> Leavers {
        let mut left: HashMap<u64, Vec<f64>> = HashMap::new();
        for (t, account, fact) in history.facts() {
            if let PlayerFact::SignOff { for_good: true } = fact {
                left.entry(account).or_default().push(t);
            }
        }
        Leavers(left)
    }

    /// The players of `fault` it still expects back, and how many it does not: those that
    /// signed off for good while away.
    pub fn expected_back(&self, fault: &Fault, hits: &[Hit]) -> (Vec<Hit>, usize) {
        let (gone, expected): (Vec<Hit>, Vec<Hit>) = hits
            .iter()
            .cloned()
            .partition(|h| h.back_t.is_none() && self.left_since(h.account, fault.start).is_some());
        (expected, gone.len())
    }

    /// When `account` first signed off for good at or after `from`. Judged from a fault's
    /// start, not a recorded loss: a client may sign off before it notices a broken link.
    pub fn left_since(&self, account: u64, from: f64) -> Option<f64> {
        self.0
            .get(&account)
            .and_then(|ts| ts.iter().copied().find(|&t| t >= from))
    }
}

/// `30`, `92.5`: a number of seconds without noise.
pub fn fmt_num(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{self as h, At};
    use crate::events::Tick;

    fn start(action: ActionKind, target: &str, at: f64) -> Event {
        Event::ActionStart {
            action,
            target: target.into(),
            at,
            via: None,
            to: None,
            toxic: None,
        }
    }

    fn end(action: ActionKind, target: &str, at: f64) -> Event {
        Event::ActionEnd {
            action,
            target: target.into(),
            at,
            error: None,
        }
    }

    /// `account` on `node` from the start, and lost from it at `t`.
    fn lost(t: f64, account: u64, node: &str) -> [At; 2] {
        [h::on(1.0, account, node), h::lost(t, account, node)]
    }

    #[test]
    fn a_firewall_partition_holds_on_after_its_heal_as_long_as_it_lasted() {
        let cut = |via| Fault {
            action: ActionKind::Partition,
            target: "node-1<->postgres".into(),
            at: 10.0,
            start: 10.0,
            end: 20.0,
            via,
            to: None,
            toxic: None,
        };
        assert_eq!(cut(None).window(5.0), Some((10.0, 20.0)));
        assert_eq!(cut(Some(Via::Firewall)).window(5.0), Some((10.0, 30.0)));
    }

    #[test]
    fn actions_pair_with_their_ends() {
        let history: History = [
            (30.0, start(ActionKind::Pause, "nats", 30.0)),
            (31.0, start(ActionKind::Kill, "node-1", 31.0)),
            (31.1, end(ActionKind::Kill, "node-1", 31.0)),
            (35.0, end(ActionKind::Pause, "nats", 30.0)),
            (40.0, start(ActionKind::Drop, "players", 40.0)),
        ]
        .into_iter()
        .collect();
        let faults = faults(&history);
        let spans: Vec<(f64, f64)> = faults.iter().map(|f| (f.start, f.end)).collect();
        assert_eq!(spans, vec![(30.0, 35.0), (31.0, 31.1), (40.0, 40.0)]);
    }

    #[test]
    fn losses_go_to_the_latest_fault_and_times_are_ranked() {
        let mut events = vec![
            (10.0, start(ActionKind::Drop, "players", 10.0)),
            (10.0, end(ActionKind::Drop, "players", 10.0)),
        ];
        for account in 1..=10 {
            events.extend(lost(10.1, account, "node-1"));
            events.push(h::back(10.0 + account as f64, account, "node-1"));
        }
        events.extend(lost(99.0, 11, "node-1"));
        // Signed out, or read too slowly, in the fault's window: not the fault's doing.
        for (account, code) in [(12, 4003), (13, 1013)] {
            events.push(h::on(1.0, account, "node-1"));
            events.push(h::lost_closed(12.0, account, "node-1", code));
            events.push(h::back(19.0, account, "node-1"));
        }
        let history: History = events.into_iter().collect();
        let faults = faults(&history);
        let (hits, unexplained) = hits(&history, &faults, 5.0);
        assert_eq!((hits[0].len(), unexplained), (10, 1));
        let back = BackSeconds::of(&hits[0]);
        assert_eq!(back.p50, Some(5.0));
        assert_eq!(back.p90, Some(9.0));
        assert_eq!(back.p100, Some(10.0));
    }

    #[test]
    fn a_player_that_left_for_good_is_hit_but_not_expected_back() {
        let mut events = vec![
            (10.0, start(ActionKind::Kill, "node-1", 10.0)),
            (10.0, end(ActionKind::Kill, "node-1", 10.0)),
            h::sign_off(11.0, 2, true),
            h::back(12.0, 1, "node-2"),
        ];
        events.extend(lost(10.1, 1, "node-1"));
        events.extend(lost(10.1, 2, "node-1"));
        let history: History = events.into_iter().collect();
        let rows = table(&history, 5.0);
        assert_eq!(rows[0].players_hit, 2);
        assert_eq!(rows[0].back_s.p100, Some(2.0));
    }

    #[test]
    fn a_player_never_back_leaves_the_top_percentiles_empty() {
        let mut events = vec![
            (10.0, start(ActionKind::Kill, "node-1", 10.0)),
            (10.0, end(ActionKind::Kill, "node-1", 10.0)),
            h::back(12.0, 1, "node-2"),
        ];
        events.extend(lost(10.1, 1, "node-1"));
        events.extend(lost(10.1, 2, "node-1"));
        let history: History = events.into_iter().collect();
        let rows = table(&history, 5.0);
        assert_eq!(rows[0].players_hit, 2);
        assert_eq!(rows[0].back_s.p50, Some(2.0));
        assert_eq!(rows[0].back_s.p100, None);
        let json = serde_json::to_string(&rows[0].back_s).unwrap();
        assert_eq!(
            json,
            r#"{"50":2.0,"90":null,"95":null,"99":null,"100":null}"#
        );
    }

    #[test]
    fn errors_are_counted_in_the_fault_window() {
        let tick = |errors| {
            Event::LoadTick(Tick {
                http_errors: errors,
                ..Tick::default()
            })
        };
        let history: History = [
            (9.0, tick(100)),
            (10.0, start(ActionKind::Kill, "node-1", 10.0)),
            (10.0, end(ActionKind::Kill, "node-1", 10.0)),
            (11.0, tick(3)),
            (12.0, tick(4)),
            (30.0, tick(50)),
        ]
        .into_iter()
        .collect();
        assert_eq!(table(&history, 2.0)[0].errors, 7);
    }

    #[test]
    fn the_next_fault_owns_the_errors_after_its_start() {
        let tick = |errors| {
            Event::LoadTick(Tick {
                http_errors: errors,
                ..Tick::default()
            })
        };
        let history: History = [
            (10.0, start(ActionKind::Drop, "players", 10.0)),
            (10.0, end(ActionKind::Drop, "players", 10.0)),
            (11.0, tick(3)),
            (15.0, start(ActionKind::Kill, "node-1", 15.0)),
            (15.0, end(ActionKind::Kill, "node-1", 15.0)),
            (16.0, tick(40)),
        ]
        .into_iter()
        .collect();
        let rows = table(&history, 20.0);
        assert_eq!((rows[0].errors, rows[1].errors), (3, 40));
    }

    /// Two toxics the proxy holds as timeouts, a reset_peer made through the API and a plan's
    /// timeout, are two rows told apart: each by what it was.
    #[test]
    fn a_toxic_is_shown_as_toxiproxy_names_it_and_a_plans_fault_by_its_kind() {
        let reset_peer = ToxicJson {
            name: "reset_peer_upstream".into(),
            kind: "reset_peer".into(),
            stream: "upstream".into(),
            toxicity: 0.5,
            attributes: serde_json::json!({"timeout": 500}),
        };
        let toxic = Event::ActionStart {
            action: ActionKind::Timeout,
            target: "node-1<->players".into(),
            at: 3.0,
            via: None,
            to: None,
            toxic: Some(reset_peer.clone()),
        };
        let history: History = [
            (3.0, toxic),
            (5.0, end(ActionKind::Timeout, "node-1<->players", 3.0)),
            (8.0, start(ActionKind::Timeout, "node-1<->players", 8.0)),
            (9.0, end(ActionKind::Timeout, "node-1<->players", 8.0)),
        ]
        .into_iter()
        .collect();
        let rows = table(&history, 5.0);
        let shown_row = |row: &FaultRow| {
            shown(
                row.action,
                &row.target,
                row.to.as_deref(),
                row.toxic.as_ref(),
            )
        };
        assert_eq!(rows[0].toxic.as_ref(), Some(&reset_peer));
        assert_eq!(
            shown_row(&rows[0]),
            (
                "reset_peer".to_owned(),
                "node-1<->players reset_peer_upstream: upstream, timeout=500, toxicity 0.5"
                    .to_owned()
            )
        );
        assert_eq!(
            shown_row(&rows[1]),
            ("timeout".to_owned(), "node-1<->players".to_owned())
        );
        let json = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(json["toxic"]["type"], "reset_peer");
        assert!(serde_json::to_value(&rows[1])
            .unwrap()
            .get("toxic")
            .is_none());
    }
}
