//! `AppState`: what every handler shares — configuration, store, hub, mail sink,
//! limits, metrics and the drain switch.

use std::ops::Deref;
use std::sync::Arc;

use crate::bus::Bus;
use crate::config::Config;
use crate::drain::Drain;
use crate::events::{CloseCode, Event, Hub, Payload};
use crate::mail::MailSink;
use crate::metrics::Metrics;
use crate::ratelimit::{RateLimiter, Refusals};
use crate::store::Store;

#[derive(Clone)]
pub struct AppState(Arc<Shared>);

pub struct Shared {
    pub config: Config,
    pub store: Store,
    pub hub: Arc<Hub>,
    pub bus: Bus,
    pub mail: MailSink,
    pub limiter: Option<RateLimiter>,
    /// The sign-in email limit's refusals, remembered until their wait is over.
    pub sign_in_refusals: Refusals,
    pub metrics: Arc<Metrics>,
    pub drain: Drain,
}

impl Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }

    /// Sends an event to each account's event connection, wherever it is.
    pub fn notify(&self, to: &[i64], event: &Event) {
        if to.is_empty() {
            return;
        }
        self.bus.send(&self.hub, to, Payload::new(event));
    }

    /// Closes the account's event connection, wherever it is.
    pub fn close_connection(&self, account_id: i64, code: CloseCode) {
        self.bus.close(&self.hub, account_id, code);
    }
}
