//! What the supervisor needs to run one service: its command, its readiness probe and how long
//! readiness may take.

use std::time::Duration;

use super::ready::Probe;
use super::service_faults::FaultReadiness;
use crate::backend::Command;

/// Readiness wait when the builder does not say otherwise.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct ServiceSpec {
    /// Unique in a topology: `postgres`, `nats`, `node-1`, …
    pub name: String,
    pub command: Command,
    pub probe: Probe,
    pub ready_timeout: Duration,
    /// What it is made ready for before its first start, so faults can be applied later.
    pub faults: FaultReadiness,
    /// What it runs, when that has a name (a node's version), for the history.
    pub build: Option<String>,
}

impl ServiceSpec {
    pub fn new(name: impl Into<String>, command: Command, probe: Probe) -> Self {
        ServiceSpec {
            name: name.into(),
            command,
            probe,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            faults: FaultReadiness::default(),
            build: None,
        }
    }

    pub fn build(mut self, build: impl Into<String>) -> Self {
        self.build = Some(build.into());
        self
    }

    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    pub fn ready_for(mut self, faults: FaultReadiness) -> Self {
        self.faults = faults;
        self
    }
}
