//! Supervision of a topology's services: a registry of [`Supervised`] handles driven through a
//! [`Backend`], one channel of [`ServiceEvent`]s for the run's history, and `shutdown_all`.
//!
//! - [`state`]: the lifecycle state machine.
//! - [`event`]: what is reported, and when.
//! - [`spec`]: what to run and how to tell it is ready.
//! - [`ready`]: the readiness probes.
//! - [`service`]: the handle: start / stop / kill / pause / resume / wait-exit / faults.
//! - [`service_faults`]: CPU, memory, disk and clock faults, and what they need prepared.
//! - [`services`]: builders for PostgreSQL, NATS and cloud nodes.
//! - [`signals`]: the supervisor's own Ctrl-C / SIGTERM.

pub(crate) mod event;
pub(crate) mod ready;
pub(crate) mod service;
pub mod service_faults;
pub mod services;
pub mod signals;
pub(crate) mod spec;
pub(crate) mod state;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

pub use event::{ServiceEvent, ServiceEventKind};
pub use ready::Probe;
pub use service::{ServiceError, Supervised};
pub use service_faults::{FaultNeeds, FaultReadiness, ServiceFault, ServiceFaultKind};
pub use spec::ServiceSpec;
pub use state::State;

use crate::backend::{Backend, BoxFuture};
use crate::sync::lock;
use service_faults::Clock;

/// Owns every service of a run. Dropping it SIGKILLs whatever is still running.
pub struct Supervisor {
    backend: Arc<dyn Backend>,
    events: mpsc::UnboundedSender<ServiceEvent>,
    services: Mutex<Vec<Supervised>>,
}

impl Supervisor {
    /// A supervisor and the receiving end of its services' events.
    pub fn new(backend: Arc<dyn Backend>) -> (Self, mpsc::UnboundedReceiver<ServiceEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let supervisor = Supervisor {
            backend,
            events,
            services: Mutex::new(Vec::new()),
        };
        (supervisor, receiver)
    }

    /// Registers a service (state `Pending`) and prepares it for the faults its spec names;
    /// `Supervised::start` launches it. Boxed, as `Supervised::start`.
    pub fn add(&self, spec: ServiceSpec) -> BoxFuture<'_, Result<Supervised, ServiceError>> {
        Box::pin(async move {
            if self.service(&spec.name).is_some() {
                return Err(ServiceError::Duplicate(spec.name));
            }
            let mut command = spec.command.clone();
            command.cgroup = spec.faults.cgroup;
            let clock = match spec.faults.clock {
                true => {
                    let clock =
                        Clock::create(&spec.name).map_err(|source| ServiceError::Fault {
                            service: spec.name.clone(),
                            source,
                        })?;
                    command.env.extend(clock.env());
                    command.binds.extend(clock.binds());
                    Some(clock)
                }
                false => None,
            };
            let unit = self
                .backend
                .create(spec.name.clone(), command)
                .await
                .map_err(|source| ServiceError::Backend {
                    service: spec.name.clone(),
                    source,
                })?;
            let service = Supervised::new(spec, unit, clock, self.events.clone());
            let mut services = self.lock();
            // Checked again: another task may have added the same name while we awaited.
            if services.iter().any(|s| s.name() == service.name()) {
                return Err(ServiceError::Duplicate(service.name().to_owned()));
            }
            services.push(service.clone());
            Ok(service)
        })
    }

    pub fn service(&self, name: &str) -> Option<Supervised> {
        self.lock().iter().find(|s| s.name() == name).cloned()
    }

    /// Every service, in the order they were added.
    pub fn services(&self) -> Vec<Supervised> {
        self.lock().clone()
    }

    /// Ends every live service at once: SIGTERM, SIGKILL after `grace`. Never fails: what does
    /// not stop in time is killed; errors are logged.
    pub async fn shutdown_all(&self, grace: Duration) {
        let mut stopping = JoinSet::new();
        for service in self.services() {
            stopping.spawn(async move {
                let outcome = match service.state() {
                    // Someone else is stopping it already: give it the same grace, then kill.
                    State::Stopping => match tokio::time::timeout(grace, service.wait_exit()).await
                    {
                        Ok(exit) => Ok(exit),
                        Err(_) => service.kill().await,
                    },
                    state if state.is_live() => service.stop(grace).await,
                    _ => return,
                };
                if let Err(error) = outcome {
                    tracing::warn!(%error, "shutdown: killing {}", service.name());
                    service.kill_now();
                }
            });
        }
        while stopping.join_next().await.is_some() {}
    }

    /// What must be removed once every service has exited: the backend's (a run's
    /// containers), and what the services' faults needed (tmpfs mounts, clock files).
    pub async fn clean_up(&self) {
        self.backend.clean_up().await;
        for service in self.services() {
            service.release_faults();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Supervised>> {
        // A list of handles stays valid even if a holder panicked.
        lock(&self.services)
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        for service in self.lock().iter() {
            service.kill_now();
        }
    }
}
