//! The `slicer` fault: each chunk is written in pieces of `bytes` ± `variation` (Toxiproxy's
//! `average_size` and `size_variation`; the last piece of a chunk is what is left), with
//! `delay` between one piece and the next.

use std::time::Duration;

use tokio::time::Instant;

use super::toxicity::spread;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slice {
    /// At least 1.
    pub(crate) bytes: usize,
    pub(crate) variation: usize,
    pub(crate) delay: Duration,
    /// Where this direction of this connection draws its sizes from, so that a run with the
    /// same seed cuts its connections alike.
    pub(crate) seed: u64,
}

/// One direction's pacing: when the next piece may go, and how many went.
#[derive(Debug, Default)]
pub(crate) struct Slices {
    next: Option<Instant>,
    pieces: u64,
}

impl Slices {
    pub(crate) fn ready_at(&self) -> Option<Instant> {
        self.next
    }

    /// The size of the next piece: drawn evenly from `bytes` ± `variation` (at least 1) by
    /// the slice's seed and the piece's number.
    pub(crate) fn size(&self, slice: Slice) -> usize {
        if slice.variation == 0 {
            return slice.bytes;
        }
        let low = slice.bytes.saturating_sub(slice.variation).max(1);
        let high = slice.bytes.saturating_add(slice.variation);
        let span = (high - low) as u128 + 1;
        let draw = u128::from(spread(slice.seed ^ spread(self.pieces)));
        // Below `high`, so it fits.
        low + (draw % span) as usize
    }

    /// A piece was written at `now`.
    pub(crate) fn cut(&mut self, slice: Slice, now: Instant) {
        self.next = Some(now + slice.delay);
        self.pieces += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(slice: Slice, count: usize) -> Vec<usize> {
        let mut slices = Slices::default();
        (0..count)
            .map(|_| {
                let size = slices.size(slice);
                slices.cut(slice, Instant::now());
                size
            })
            .collect()
    }

    #[test]
    fn pieces_vary_around_the_average_within_the_variation_and_repeat_with_the_seed() {
        let slice = Slice {
            bytes: 64,
            variation: 16,
            delay: Duration::ZERO,
            seed: 7,
        };
        let drawn = sizes(slice, 2_000);
        assert!(
            drawn.iter().all(|size| (48..=80).contains(size)),
            "{drawn:?}"
        );
        // Every size in the range comes up, the ends included, evenly around the average.
        for size in [48, 64, 80] {
            assert!(drawn.contains(&size), "{size} never drawn");
        }
        let mean = drawn.iter().sum::<usize>() as f64 / drawn.len() as f64;
        assert!((63.0..=65.0).contains(&mean), "mean {mean}");
        assert_eq!(sizes(slice, 2_000), drawn, "the same seed, the same pieces");
        assert_ne!(sizes(Slice { seed: 8, ..slice }, 2_000), drawn);
    }

    #[test]
    fn without_variation_every_piece_is_the_average_and_none_is_empty() {
        let even = Slice {
            bytes: 8,
            variation: 0,
            delay: Duration::ZERO,
            seed: 1,
        };
        assert!(sizes(even, 100).iter().all(|&size| size == 8));
        let wide = Slice {
            bytes: 2,
            variation: 10,
            ..even
        };
        assert!(sizes(wide, 500).iter().all(|size| (1..=12).contains(size)));
    }
}
