//! anyplay-chaos: brings up a game-cloud topology, plays players against it, fires a
//! timed plan of faults, checks invariants over the recorded history, and reports.
//!
//! Layout (one job per module):
//! - `backend`: how a service runs (a real process, or a container on a local or remote Docker
//!   engine) behind one trait.
//! - `supervisor`: service handles, lifecycle states and events, readiness, service builders.
//! - `network`: the network namespaces, bridge and firewall cuts of `netns` hosts.
//! - `proxy`: the in-process TCP fault proxy (toxiproxy's faults, one way or both) on each link.
//! - `plan`: the YAML plan read, validated and its timeline resolved with the seed.
//! - `events`: the recorded history (`events.jsonl`), its writer and its reader.
//! - `checks`: pure invariant checks over the history, and the faults table.
//! - `report`: `report.json`, `summary.md`, `report.html` and JUnit XML, rendered from a run
//!   directory; `compare` of two runs.
//! - `runner`: a whole run in its phases: set up, play (the timeline beside the players),
//!   heal, store (the checks judged into the report).
//! - `control`: the control API of `up --api`, Toxiproxy's over the run's fault proxies.
//! - `printable`: text from a run directory escaped for a terminal.
//! - `run_files`: run directories and their files, never written or read through a link.
//! - `selftest` (feature `seeded-defects`): the checks proven against defects built into the cloud.
//! - `sync`: locking a mutex whatever an earlier holder did (panicked).

pub mod backend;
pub(crate) mod checks;
pub mod control;
pub mod events;
pub(crate) mod network;
pub mod plan;
pub(crate) mod printable;
pub mod proxy;
pub mod report;
pub mod run_files;
pub mod runner;
#[cfg(feature = "seeded-defects")]
pub mod selftest;
pub mod supervisor;
mod sync;
