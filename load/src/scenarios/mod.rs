//! The scenarios of the contract. Each takes a [`Ctx`], records into a recorder of its own, and
//! returns its part of the report; `anyplay-chaos` calls them the same way the binary does.

pub mod cards;
pub mod friends;
pub mod ladder;
pub mod login;
pub mod presence;
pub mod sessions;
pub mod storm;

use std::sync::Arc;

use rand::Rng;

use crate::fleet::Fleet;
use crate::generator::SchedLag;
use crate::player::Player;
use crate::progress::Progress;
use crate::settings::Settings;
use crate::stats::Recorder;
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

/// A random player of `players`, if there is one.
fn pick(players: &[Arc<Player>]) -> Option<Arc<Player>> {
    (!players.is_empty()).then(|| players[rand::rng().random_range(0..players.len())].clone())
}
