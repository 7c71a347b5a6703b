//! The `latency` fault: each chunk is held `delay ± jitter` after it arrived, in order (a later
//! chunk never overtakes an earlier one). Removing the fault releases held chunks at once.

use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

/// A delay with uniform jitter around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency {
    pub delay: Duration,
    pub jitter: Duration,
}

impl Latency {
    pub fn new(delay: Duration, jitter: Duration) -> Self {
        Latency { delay, jitter }
    }

    /// One chunk's delay, uniform in `delay - jitter ..= delay + jitter`, never below zero.
    pub fn draw(&self, rng: &mut impl Rng) -> Duration {
        if self.jitter.is_zero() {
            return self.delay;
        }
        let spread = rng.random_range(Duration::ZERO..=self.jitter * 2);
        (self.delay + spread).saturating_sub(self.jitter)
    }
}

/// The latency currently set on one direction, if any.
#[derive(Debug)]
pub(crate) struct LatencyFault(watch::Sender<Option<Latency>>);

impl LatencyFault {
    pub(crate) fn new() -> Self {
        LatencyFault(watch::Sender::new(None))
    }

    pub(crate) fn set(&self, latency: Option<Latency>) {
        self.0.send_replace(latency);
    }

    /// Waits until a chunk that `arrived` then is due; a change of the latency meanwhile applies.
    pub(crate) async fn hold(&self, arrived: Instant) {
        let mut changes = self.0.subscribe();
        loop {
            let latency = *changes.borrow_and_update();
            let Some(latency) = latency else {
                return;
            };
            let due = arrived + latency.draw(&mut rand::rng());
            tokio::select! {
                () = sleep_until(due) => return,
                changed = changes.changed() => if changed.is_err() {
                    return;
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_within_the_jitter() {
        let mut rng = rand::rng();
        let latency = Latency::new(Duration::from_millis(200), Duration::from_millis(50));
        for _ in 0..1_000 {
            let delay = latency.draw(&mut rng);
            assert!((Duration::from_millis(150)..=Duration::from_millis(250)).contains(&delay));
        }
        let exact = Latency::new(Duration::from_millis(7), Duration::ZERO);
        assert_eq!(exact.draw(&mut rng), Duration::from_millis(7));
        // Jitter larger than the delay never gives a negative delay.
        let wide = Latency::new(Duration::from_millis(1), Duration::from_millis(10));
        assert!(wide.draw(&mut rng) <= Duration::from_millis(11));
    }

    #[tokio::test]
    async fn holds_until_due() {
        let fault = LatencyFault::new();
        let started = Instant::now();
        fault.hold(started).await;
        assert!(started.elapsed() < Duration::from_millis(50));

        fault.set(Some(Latency::new(
            Duration::from_millis(100),
            Duration::ZERO,
        )));
        let arrived = Instant::now();
        fault.hold(arrived).await;
        assert!(arrived.elapsed() >= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn removal_releases_held_chunks() {
        let fault = LatencyFault::new();
        fault.set(Some(Latency::new(Duration::from_secs(30), Duration::ZERO)));
        let arrived = Instant::now();
        let healing = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            fault.set(None);
        };
        tokio::join!(fault.hold(arrived), healing);
        assert!(arrived.elapsed() < Duration::from_secs(5));
    }
}
