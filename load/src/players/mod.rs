//! The players: their calls, their devices' sockets, and the fleet of them.

pub(crate) mod choices;
pub(crate) mod connection;
pub mod final_reads;
pub(crate) mod fleet;
pub(crate) mod ledger;
pub(crate) mod player;
pub(crate) mod shared;
