//! Toxicity: the share of a proxy's connections a fault reaches. Whether a connection is reached
//! depends only on the seed, the fault's kind and the connection's serial number in its proxy, so
//! a run with the same seed hits the same connections.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::LinkFaultKind;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Toxicity {
    /// 0 reaches no connection, 1 (or more) every one.
    pub share: f64,
    pub seed: u64,
}

impl Toxicity {
    /// True when a fault of `kind` reaches connection `serial`.
    pub fn hits(&self, kind: LinkFaultKind, serial: u64) -> bool {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ mix(serial, kind));
        // The top 53 bits as a fraction in [0, 1).
        let fraction = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        fraction < self.share
    }
}

/// Spreads (serial, kind) over 64 bits, so nearby serials seed far apart.
fn mix(serial: u64, kind: LinkFaultKind) -> u64 {
    let kinds = LinkFaultKind::ALL.len() as u64;
    spread(serial.wrapping_mul(kinds).wrapping_add(kind.index() as u64))
}

/// splitmix64: `z` spread over 64 bits, so nearby numbers land far apart.
pub(super) fn spread(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit_serials(toxicity: Toxicity, kind: LinkFaultKind, count: u64) -> Vec<u64> {
        (0..count)
            .filter(|&serial| toxicity.hits(kind, serial))
            .collect()
    }

    #[test]
    fn hits_about_the_share_and_the_same_serials_for_the_same_seed() {
        let toxicity = Toxicity {
            share: 0.3,
            seed: 42,
        };
        let hits = hit_serials(toxicity, LinkFaultKind::Partition, 10_000);
        // 3000 expected; the standard deviation is about 46.
        assert!((2_800..=3_200).contains(&hits.len()), "{}", hits.len());
        assert_eq!(
            hits,
            hit_serials(toxicity, LinkFaultKind::Partition, 10_000)
        );

        let other_seed = Toxicity {
            seed: 43,
            ..toxicity
        };
        assert_ne!(
            hits,
            hit_serials(other_seed, LinkFaultKind::Partition, 10_000)
        );
        // Each kind draws on its own.
        assert_ne!(hits, hit_serials(toxicity, LinkFaultKind::Latency, 10_000));
    }

    #[test]
    fn no_share_hits_nothing_and_a_full_share_everything() {
        let none = Toxicity {
            share: 0.0,
            seed: 7,
        };
        let all = Toxicity {
            share: 1.0,
            seed: 7,
        };
        assert!(hit_serials(none, LinkFaultKind::Timeout, 1_000).is_empty());
        assert_eq!(hit_serials(all, LinkFaultKind::Timeout, 1_000).len(), 1_000);
    }
}
