//! The scenarios of the contract. Each takes a [`Ctx`], records into a recorder of its own, and
//! returns its part of the report; `anyplay-chaos` calls them the same way the binary does.
//! Who acts on each scheduled operation, and with what, is drawn from the run's seed
//! ([`crate::players::choices`]) by functions that [`crate::scenarios::planned`] calls too.

pub(crate) mod cards;
pub mod friends;
pub(crate) mod ladder;
pub(crate) mod limits;
pub mod login;
pub mod mixed;
pub mod planned;
pub mod presence;
pub(crate) mod sessions;
pub mod slow_readers;
pub mod storm;
pub mod traffic;

use std::sync::Arc;

use crate::measure::generator::SchedLag;
use crate::measure::progress::Progress;
use crate::measure::stats::Recorder;
use crate::players::fleet::Fleet;
use crate::players::player::Player;
use crate::report::{DeliveryReport, ScenarioReport};
use crate::schedule::{Outcome, Plan};
use crate::settings::Settings;
use crate::target::NodeControl;

/// What every scenario runs with.
#[derive(Clone)]
pub struct Ctx {
    pub settings: Arc<Settings>,
    pub fleet: Arc<Fleet>,
    /// The run's scheduler lateness, shared by every open-loop scenario.
    pub lag: SchedLag,
    pub progress: Progress,
    /// Control over the nodes, for the storms that stop or kill one.
    pub control: Option<Arc<dyn NodeControl>>,
}

impl Ctx {
    /// A fresh recorder that the fleet's players record into from now on.
    pub fn begin(&self) -> Recorder {
        let recorder = Recorder::new();
        self.fleet.set_recorder(recorder.clone());
        recorder
    }

    /// The players online right now.
    pub fn online(&self) -> Vec<Arc<Player>> {
        self.fleet.online().cloned().collect()
    }
}

/// What an open-loop scenario drove: its schedule and, for presence, the deliveries.
pub(crate) struct Driven {
    pub plan: Plan,
    pub outcome: Outcome,
    pub delivery: Option<DeliveryReport>,
}

impl Driven {
    /// Adds the schedule (skips, rate reached) and the deliveries to a report.
    pub fn finish(self, report: ScenarioReport) -> ScenarioReport {
        let mut report = report.scheduled(&self.plan, &self.outcome);
        if self.delivery.is_some() {
            report.delivery = self.delivery;
        }
        report
    }
}
