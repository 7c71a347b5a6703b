//! A topology whose services live on different hosts: each service is created by the backend of
//! its host (a remote Docker engine's), the others by the run's own backend.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Backend, BackendError, BoxFuture, Command, Unit};

pub struct Placed {
    default: Arc<dyn Backend>,
    /// By service name.
    by_service: BTreeMap<String, Arc<dyn Backend>>,
}

impl Placed {
    pub fn new(default: Arc<dyn Backend>) -> Placed {
        Placed {
            default,
            by_service: BTreeMap::new(),
        }
    }

    /// Runs `service` with `backend`.
    pub fn place(&mut self, service: String, backend: Arc<dyn Backend>) {
        self.by_service.insert(service, backend);
    }

    fn backends(&self) -> Vec<&Arc<dyn Backend>> {
        let mut all = vec![&self.default];
        for backend in self.by_service.values() {
            if !all.iter().any(|b| Arc::ptr_eq(b, backend)) {
                all.push(backend);
            }
        }
        all
    }
}

impl Backend for Placed {
    fn create(
        &self,
        name: String,
        command: Command,
    ) -> BoxFuture<'_, Result<Box<dyn Unit>, BackendError>> {
        let backend = self.by_service.get(&name).unwrap_or(&self.default);
        backend.create(name, command)
    }

    fn clean_up(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            for backend in self.backends() {
                backend.clean_up().await;
            }
        })
    }
}
