//! What the API did, as a plan's timeline: the recorded plan of an `up` holds it, so that
//! `rerun` of the directory replays it as a `run`.

use std::time::Duration;

use super::{ends, Control};
use crate::plan::{Action, Entry, Link, Plan, Target};
use crate::proxy::{Endpoint, LinkFault, Ways};

impl Control {
    /// The plan with what the API did as its timeline, so that `rerun` of the run directory
    /// replays it; `None` when nothing was done. A change a plan cannot say is left out: a
    /// toxic that hit no connection (toxicity 0) or did nothing (a latency, slow_close or
    /// limit_data of 0). A reset_peer replays as a `timeout` with `close: reset`.
    pub fn replay(&self) -> Option<Plan> {
        let mut timeline = crate::sync::lock(&self.done).clone();
        if timeline.is_empty() {
            return None;
        }
        timeline.sort_by_key(|entry| entry.at);
        Some(Plan {
            timeline,
            ..self.plan.clone()
        })
    }

    /// Notes a lasting fault on link `index` that held from `at` until now.
    pub(super) fn done_on_link(
        &self,
        index: usize,
        fault: LinkFault,
        ways: Ways,
        toxicity: f32,
        at: f64,
    ) {
        let does_something = match fault {
            LinkFault::Latency(latency) => !latency.delay.is_zero(),
            LinkFault::SlowClose { delay } => !delay.is_zero(),
            LinkFault::LimitData { bytes } => bytes > 0,
            _ => true,
        };
        if !does_something || toxicity <= 0.0 {
            return;
        }
        let (node, peer) = ends(self.links[index]);
        // Start and end in whole milliseconds, as a plan writes them, so that a fault that
        // follows another (after an update) does not overlap it.
        let start = whole_ms(Duration::from_secs_f64(at.max(0.0)));
        let end = whole_ms(self.zero.elapsed());
        let action = Action::Link {
            link: Link {
                a: as_target(node),
                b: as_target(peer),
            },
            fault,
            ways,
            toxicity: (toxicity < 1.0).then_some(f64::from(toxicity)),
            duration: end.saturating_sub(start).max(Duration::from_millis(1)),
        };
        self.note_done(start, action);
    }

    pub(super) fn note_done(&self, at: Duration, action: Action) {
        crate::sync::lock(&self.done).push(Entry {
            at: whole_ms(at),
            action,
            line: 0,
        });
    }
}

fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A link's end as a plan aims at it.
fn as_target(end: Endpoint) -> Target {
    match end {
        Endpoint::Node(n) => Target::Node(n),
        Endpoint::Postgres => Target::Postgres,
        Endpoint::Nats => Target::Nats,
        Endpoint::Players => Target::Players,
    }
}
