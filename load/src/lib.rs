//! anyplay-load: plays many players against the anyplay cloud and measures what they see.
//!
//! The contract is `shared/spec/load.md`; the API the players call is `shared/spec/cloud-api.md`.
//! It is a library first: `anyplay-chaos` drives the same [`Fleet`] of players and the same
//! scenarios in process, and the `anyplay-load` binary is a thin shell around [`runner::run`].
//!
//! # Layout
//!
//! - [`settings`]: raw command-line flags, then validated [`Settings`]; bad settings never start a run.
//! - [`budget`]: the sockets a run's processes will hold, against the open-file limit.
//! - [`target`]: what a run plays against ([`Target`]): node endpoints, where sign-in codes come
//!   from ([`CodeSource`]), and optional control over nodes ([`NodeControl`]).
//! - [`mail_log`] and [`test_codes`]: the external [`CodeSource`]s, tailing the cloud's
//!   mail-log file or asking a node started with `--test-codes`.
//! - [`tls`]: what the load's TLS clients trust (the system's roots, `--ca`).
//! - [`inprocess`]: the cloud inside the harness (one SQLite node, or a cluster), as a [`Target`].
//! - [`wire`] and [`client`]: the contract's JSON bodies and a typed HTTP client of it.
//! - [`net`]: spreading connections over loopback source addresses (`--source-ips`).
//! - [`reconnect`]: the contract's reconnect rule as a pure type.
//! - [`choices`]: every choice of who acts, with what and when, drawn from the run's seed.
//! - [`planned`]: the schedule those choices give, per player, from the settings alone.
//! - [`ledger`]: what a player knows of its friends and session, to choose whom to play with.
//! - [`facts`]: what players live through, emitted as it happens (the history chaos records).
//! - [`final_reads`]: what players read at the end of a chaos run (friends, sessions, connections).
//! - [`player`], [`connection`] and [`fleet`]: players, their devices' event sockets, and the set
//!   of them with its facts and the `drop_all` fault.
//! - [`schedule`]: the open-loop scheduler, waking on time with [`wake`]; [`stats`]: HdrHistograms
//!   per op, merged exactly.
//! - [`generator`]: the harness's own health (scheduler lateness, CPU, memory).
//! - [`server`]: what the nodes' `/metrics` say changed during the run.
//! - [`scenarios`]: login, friends, presence, sessions, cards, storm, ladder.
//! - [`report`]: the JSON report and the stdout tables; [`progress`]: progress on stderr.
//! - [`provenance`]: the machine and the commit a run came from (load reports and chaos runs).
//! - [`runner`]: a whole run, in the order the contract fixes.
//! - [`game_client`]: `anyplay-load client`, one headless game client for a plan's `clients:`.
//! - [`agents`]: a run spread over load agents on other machines, coordinated over NATS;
//!   [`seal`]: the secret they share with their coordinator, which the settings carry.

pub mod agents;
pub mod budget;
pub(crate) mod choices;
pub(crate) mod client;
pub(crate) mod connection;
pub(crate) mod error;
pub mod facts;
pub mod final_reads;
pub(crate) mod fleet;
pub mod game_client;
pub mod generator;
pub mod inprocess;
pub(crate) mod ledger;
pub mod mail_log;
pub mod net;
pub mod planned;
pub(crate) mod player;
pub mod progress;
pub mod provenance;
pub mod reconnect;
pub mod report;
pub mod runner;
pub mod scenarios;
pub(crate) mod schedule;
pub mod seal;
pub mod server;
pub mod settings;
pub mod stats;
mod sync;
pub(crate) mod target;
pub(crate) mod test_codes;
pub(crate) mod tls;
pub(crate) mod wake;
pub mod wire;

pub use error::LoadError;
pub use fleet::Fleet;
pub use ledger::Ledger;
pub use player::Player;
pub use reconnect::{Break, ReconnectMode};
pub use settings::{Args, Settings};
pub use target::{CodeSource, NodeControl, NodeEndpoint, PoolProbe, Target};
