//! The `latency` fault: each chunk is held `delay ± jitter` after it arrived, in order (a later
//! chunk never overtakes an earlier one). Removing the fault releases held chunks at once.

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::connection::LinkFaults;
use super::settings::Woke;

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

/// Waits until a chunk that `arrived` then is due; a change of the latency meanwhile applies, and
/// clearing it lets the chunk go at once.
pub(crate) async fn hold(link: &mut LinkFaults<'_>, arrived: Instant) {
    while let Some(latency) = link.now().latency {
        let due = arrived + latency.draw(&mut rand::rng());
        if link.sleep_or_change(Some(due)).await == Woke::Due {
            return;
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
}
