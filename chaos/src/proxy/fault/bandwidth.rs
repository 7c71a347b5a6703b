//! The `bandwidth` fault: a rate limit per connection and direction (toxiproxy's is per connection
//! too), as a token bucket. Chunks are cut into pieces of at most 1/40 s worth, so the rate holds
//! even at a few bytes per second, and a burst after a pause is at most 1/20 s worth.

use std::time::Duration;

use tokio::time::Instant;

/// The time one piece is worth, and the credit an idle link may build up.
const PIECE_TIME: Duration = Duration::from_millis(25);

fn bytes_per_second(kbps: u32) -> f64 {
    f64::from(kbps) * 125.0
}

/// Largest piece to write at once at `kbps`, at least a byte.
pub(crate) fn piece(kbps: u32) -> usize {
    // Truncation is fine: a piece a byte short of 1/40 s worth.
    ((bytes_per_second(kbps) * PIECE_TIME.as_secs_f64()) as usize).max(1)
}

/// One direction's bucket: when the next piece may go.
#[derive(Debug, Default)]
pub(crate) struct Bucket {
    next: Option<Instant>,
}

impl Bucket {
    pub(crate) fn ready_at(&self) -> Option<Instant> {
        self.next
    }

    /// Spends `bytes` written at `now`.
    pub(crate) fn spent(&mut self, kbps: u32, bytes: usize, now: Instant) {
        // Counting from the schedule, not from `now`, keeps timer lateness from slowing the rate;
        // the floor bounds what an idle link saves up.
        let credit_from = now.checked_sub(PIECE_TIME).unwrap_or(now);
        let start = self.next.unwrap_or(now).max(credit_from);
        let takes = Duration::from_secs_f64(bytes as f64 / bytes_per_second(kbps));
        self.next = Some(start + takes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_a_fortieth_of_a_second_and_at_least_a_byte() {
        assert_eq!(piece(800), 2_500);
        assert_eq!(piece(8), 25);
        assert_eq!(piece(1), 3);
    }

    #[test]
    fn schedules_at_the_rate_without_saving_up_more_than_a_piece() {
        let mut bucket = Bucket::default();
        let start = Instant::now();
        // 8 kbps = 1000 B/s: 100 bytes take 100 ms.
        bucket.spent(8, 100, start);
        assert_eq!(bucket.ready_at(), Some(start + Duration::from_millis(100)));
        // Written a little late: the schedule, not the lateness, counts.
        bucket.spent(8, 100, start + Duration::from_millis(103));
        assert_eq!(bucket.ready_at(), Some(start + Duration::from_millis(200)));
        // After a long pause only one piece's worth of credit is left.
        let later = start + Duration::from_secs(10);
        bucket.spent(8, 25, later);
        assert_eq!(bucket.ready_at(), Some(later));
    }
}
