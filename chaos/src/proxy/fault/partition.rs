//! The partition fault, in two modes.
//!
//! - Hold: the covered directions stop reading, so TCP keeps what is sent meanwhile (like dropped
//!   packets that get retransmitted), and new connections wait without connecting upstream.
//!   Everything flows on, in order, once the cut is removed.
//! - Drop (as a firewall DROP): what arrives in the covered directions is read and thrown away,
//!   and new connections are refused at once. A connection that lost bytes has a hole TCP would
//!   never fill, so it is reset when the cut ends; one that lost nothing carries on.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a connection lost bytes to a drop-cut.
#[derive(Debug, Default)]
pub(crate) struct Holes(AtomicBool);

impl Holes {
    pub(crate) fn lose(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub(crate) fn any(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
