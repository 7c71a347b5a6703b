//! Waking at a planned instant to the microsecond. tokio's timer rounds every deadline up to its
//! next millisecond tick, so each open-loop start was about 1 ms late, and since latency counts
//! from the planned start, that millisecond was billed to the cloud in every figure. A timerfd
//! (`CLOCK_MONOTONIC`, the clock of `Instant`) wakes when asked.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Instant;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// One timer, reused for every wake of a schedule.
pub struct Alarm {
    /// `None` when no timerfd could be had (the open-file limit): tokio's timer then, a
    /// millisecond late rather than no run.
    fd: Option<AsyncFd<Timer>>,
}

/// A [`TimerFd`] as tokio's reactor takes it (by its raw fd).
struct Timer(TimerFd);

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Alarm {
    pub fn new() -> Alarm {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(io::Error::from)
        .and_then(|fd| {
            // SAFETY: the TimerFd owns its fd, which stays open and the same until it drops
            // with the AsyncFd that holds it.
            unsafe { AsyncFd::register_with_interest(Timer(fd), Interest::READABLE) }
                .map_err(io::Error::from)
        });
        match fd {
            Ok(fd) => Alarm { fd: Some(fd) },
            Err(e) => {
                tracing::warn!("no timerfd ({e}): operations start on tokio's 1 ms ticks");
                Alarm { fd: None }
            }
        }
    }

    /// Returns at `at` or just after; never before. An instant already past returns at once.
    pub async fn sleep_until(&mut self, at: Instant) {
        let Some(fd) = &self.fd else {
            return tokio::time::sleep_until(at.into()).await;
        };
        if let Err(e) = wait(fd, at).await {
            // Once, not per start: the rest of the schedule goes on tokio's timer.
            tracing::warn!("timerfd failed ({e}): operations start on tokio's 1 ms ticks");
            self.fd = None;
            tokio::time::sleep_until(at.into()).await;
        }
    }
}

impl Default for Alarm {
    fn default() -> Self {
        Alarm::new()
    }
}

async fn wait(fd: &AsyncFd<Timer>, at: Instant) -> io::Result<()> {
    let delay = at.saturating_duration_since(Instant::now());
    if delay.is_zero() {
        return Ok(());
    }
    // A relative one-shot alarm: it replaces whatever was set before.
    fd.get_ref()
        .0
        .set(
            Expiration::OneShot(TimeSpec::from_duration(delay)),
            TimerSetTimeFlags::empty(),
        )
        .map_err(io::Error::from)?;
    loop {
        let mut ready = fd.readable().await?;
        // The expiry count (8 bytes) is read so the fd is not readable at the next wait.
        match ready
            .try_io(|fd| nix::unistd::read(&fd.get_ref().0, &mut [0u8; 8]).map_err(io::Error::from))
        {
            Ok(read) => return read.map(drop),
            Err(_would_block) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn wakes_never_before_the_instant_and_at_once_for_a_past_one() {
        let mut alarm = Alarm::new();
        assert!(alarm.fd.is_some());
        for ms in [1, 3, 2, 5] {
            let at = Instant::now() + Duration::from_millis(ms);
            alarm.sleep_until(at).await;
            assert!(Instant::now() >= at);
        }
        let past = Instant::now() - Duration::from_millis(5);
        let before = Instant::now();
        alarm.sleep_until(past).await;
        assert!(before.elapsed() < Duration::from_secs(1));
    }
}
