//! The cloud's contract as a client speaks it.

pub mod client;
pub mod net;
pub(crate) mod tls;
pub mod wire;
