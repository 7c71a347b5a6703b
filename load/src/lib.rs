//! anyplay-load: plays many players against the anyplay cloud and measures what they see.
//!
//! The contract is `shared/spec/load.md`; the API the players call is `shared/spec/cloud-api.md`.
//! It is a library first: `anyplay-chaos` drives the same [`Fleet`] of players and the same
//! scenarios in process, and the `anyplay-load` binary is a thin shell around [`run::run`].
//!
//! # Layout
//!
//! By job, each folder using only those above it in this list (nothing runs back up):
//!
//! - `sync`: locking a mutex whatever an earlier holder did.
//! - [`api`]: the cloud's contract as a client speaks it: its JSON bodies ([`api::wire`]), a
//!   typed HTTP client ([`api::client`]), what TLS trusts (`api::tls`) and the loopback
//!   source addresses connections are spread over ([`api::net`], `--source-ips`).
//! - [`measure`]: what a run measures: HdrHistograms per op ([`measure::stats`]), the facts
//!   players live through as chaos records them ([`measure::facts`]), the harness's own health
//!   ([`measure::generator`]), the machine and commit ([`measure::provenance`]), progress on
//!   stderr ([`measure::progress`]).
//! - [`reconnect`]: the contract's reconnect rule as a pure type.
//! - [`seal`]: the secret load agents share with their coordinator, which the settings carry.
//! - [`settings`]: raw command-line flags, then validated [`Settings`]; bad settings never start a run.
//! - `error`: the crate's error at its boundary.
//! - [`target`]: what a run plays against ([`Target`]): node endpoints, where sign-in codes come
//!   from ([`CodeSource`]: the cloud's mail log or a node's test codes), control over nodes
//!   ([`NodeControl`]), the cloud inside the harness ([`target::inprocess`]) and what the
//!   nodes' `/metrics` say changed ([`target::metrics`]).
//! - [`players`]: players (`players::player`), their devices' event sockets
//!   (`players::connection`), the set of them with its facts and the `drop_all` fault
//!   ([`Fleet`]), what a player knows of its friends ([`Ledger`]), every choice drawn from the
//!   seed (`players::choices`) and what players read at the end of a chaos run
//!   ([`players::final_reads`]).
//! - `schedule`: the open-loop scheduler, waking on time.
//! - [`report`]: the JSON report and the stdout tables.
//! - [`scenarios`]: login, friends, presence, sessions, cards, storm, ladder, traffic, and the
//!   schedule their choices give per player ([`scenarios::planned`]).
//! - [`run`]: a whole run, in the order the contract fixes, and the sockets it will hold against
//!   the open-file limit ([`run::budget`]).
//! - [`game_client`]: `anyplay-load client`, one headless game client for a plan's `clients:`.
//! - [`agents`]: a run spread over load agents on other machines, coordinated over NATS.

mod sync;

pub mod agents;
pub mod api;
pub(crate) mod error;
pub mod game_client;
pub mod measure;
pub mod players;
pub mod reconnect;
pub mod report;
pub mod run;
pub mod scenarios;
pub(crate) mod schedule;
pub mod seal;
pub mod settings;
pub mod target;

pub use error::LoadError;
pub use measure::generator::PoolProbe;
pub use players::fleet::Fleet;
pub use players::ledger::Ledger;
pub use players::player::Player;
pub use reconnect::{Break, ReconnectMode};
pub use settings::{Args, Settings};
pub use target::{CodeSource, NodeControl, NodeEndpoint, Target};
