//! Latency gates (`checks.latency`): a budget per quantile for an operation the load times,
//! judged over all its samples, those clear of faults, or those a fault overlapped.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::events::Op;

/// One operation's budgets, as `checks.latency.<op>` gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyGate {
    pub op: Op,
    /// At least one; in the order p50, p95, p99, max.
    pub budgets: Vec<(Quantile, Duration)>,
    pub during: During,
}

/// A point of the latency distribution a budget holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantile {
    P50,
    P95,
    P99,
    Max,
}

impl Quantile {
    pub const ALL: [Quantile; 4] = [Quantile::P50, Quantile::P95, Quantile::P99, Quantile::Max];

    /// The key a plan writes it as.
    pub fn name(self) -> &'static str {
        match self {
            Quantile::P50 => "p50",
            Quantile::P95 => "p95",
            Quantile::P99 => "p99",
            Quantile::Max => "max",
        }
    }

    /// The share of samples at or below it.
    pub fn fraction(self) -> f64 {
        match self {
            Quantile::P50 => 0.50,
            Quantile::P95 => 0.95,
            Quantile::P99 => 0.99,
            Quantile::Max => 1.0,
        }
    }
}

/// Which samples a gate judges, by whether a timeline action overlapped them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum During {
    #[default]
    All,
    OutsideFaults,
    Faults,
}

impl During {
    pub fn as_str(self) -> &'static str {
        match self {
            During::All => "all",
            During::OutsideFaults => "outside_faults",
            During::Faults => "faults",
        }
    }
}

impl fmt::Display for During {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for During {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [During::All, During::OutsideFaults, During::Faults]
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| format!("`{s}`: all, outside_faults or faults"))
    }
}
