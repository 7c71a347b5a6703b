//! Event connections: what they carry (`event`), who is connected here (`hub`), one
//! registration of an account at a time (`turns`), and the loop of one socket (`connection`).

pub(crate) mod connection;
mod event;
pub(crate) mod hub;
mod turns;

pub use event::{AccountRef, Event, Payload};
pub use hub::{CloseCode, Hub};
