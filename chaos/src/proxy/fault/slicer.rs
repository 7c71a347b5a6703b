//! The `slicer` fault: each chunk is written in pieces of `bytes` (the last one of a chunk may be
//! shorter), with `delay` between one piece and the next.

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slice {
    /// At least 1.
    pub(crate) bytes: usize,
    pub(crate) delay: Duration,
}

/// One direction's pacing: when the next piece may go.
#[derive(Debug, Default)]
pub(crate) struct Slices {
    next: Option<Instant>,
}

impl Slices {
    pub(crate) fn ready_at(&self) -> Option<Instant> {
        self.next
    }

    /// A piece was written at `now`.
    pub(crate) fn cut(&mut self, slice: Slice, now: Instant) {
        self.next = Some(now + slice.delay);
    }
}
