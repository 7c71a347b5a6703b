//! `abort`: a run whose players are clearly lost ends early (chaos-plan v1.2, "Latency gates
//! and abort"): once a condition held for `for`, the timeline stops, every fault is healed and
//! the run fails with the reason.

use std::time::Duration;

/// The conditions, each on one second of the load's numbers; any one that holds counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Abort {
    /// Failed calls (5xx, no answer, wrong answer) over the second's calls, above this.
    pub http_error_ratio: Option<f64>,
    /// The players online, as a share of the plan's players, below this.
    pub players_online_below: Option<f64>,
    /// How long a condition must hold, second after second.
    pub hold: Duration,
}
