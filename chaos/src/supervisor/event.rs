//! What the supervisor reports about services as it happens, for the run's history.

use std::time::Instant;

use crate::backend::{Exit, InstanceId};

/// One lifecycle event of one service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEvent {
    pub service: String,
    pub kind: ServiceEventKind,
    pub at: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceEventKind {
    /// An instance was launched (not yet ready), running `build` when the service names one
    /// (a node's version).
    Started {
        instance: InstanceId,
        build: Option<String>,
    },
    /// Its readiness probe passed.
    Up,
    Paused,
    Resumed,
    /// A graceful stop was requested (SIGTERM sent).
    Stopping,
    /// It ended, recorded as soon as the backend saw it; or, with [`Exit::EngineLost`], the
    /// backend lost sight of it (its container may still run): the history must say so, not
    /// record an exit.
    Exit(Exit),
}
