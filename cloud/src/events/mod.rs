//! Event connections: what they carry (`event`), who is connected here (`hub`),
//! and the loop of one socket (`connection`).

pub(crate) mod connection;
mod event;
pub(crate) mod hub;

pub use event::{AccountRef, Event, Payload};
pub use hub::{CloseCode, Hub};
