//! An agent's clock offset to the coordinator's, NTP-style: the coordinator notes when it asked
//! (t0) and got the answer (t2), the agent what its clock said (t1). Assuming the answer took
//! as long as the question, offset = t1 − (t0 + t2) / 2; the sample with the shortest round
//! trip bounds the error best (by half of it).

/// One ping: the coordinator's send and receive times and the agent's time, µs since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    pub t0: u64,
    pub t1: u64,
    pub t2: u64,
}

/// What the pings say of an agent's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Agent's clock minus the coordinator's, µs.
    pub offset_us: i64,
    /// The round trip of the ping it came from, µs.
    pub rtt_us: u64,
}

impl Estimate {
    /// The agent's clock reading at the coordinator's instant `at_us`.
    pub fn to_agent(self, at_us: u64) -> u64 {
        at_us.saturating_add_signed(self.offset_us)
    }

    /// The coordinator's clock reading at the agent's instant `at_us`.
    pub fn to_coordinator(self, at_us: u64) -> u64 {
        at_us.saturating_add_signed(-self.offset_us)
    }
}

/// The estimate from the ping with the shortest round trip; none without pings.
pub fn estimate(pings: &[Ping]) -> Option<Estimate> {
    let best = pings.iter().min_by_key(|p| p.t2.saturating_sub(p.t0))?;
    let mid = (i128::from(best.t0) + i128::from(best.t2)) / 2;
    Some(Estimate {
        offset_us: i64::try_from(i128::from(best.t1) - mid).unwrap_or(0),
        rtt_us: best.t2.saturating_sub(best.t0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_round_trip_gives_the_offset() {
        // The agent runs 5 s ahead; pings of 10 ms, 2 ms (one way 1 ms) and 40 ms.
        let ahead = 5_000_000;
        let pings = [
            Ping {
                t0: 1_000_000,
                t1: 1_004_000 + ahead,
                t2: 1_010_000,
            },
            Ping {
                t0: 2_000_000,
                t1: 2_001_000 + ahead,
                t2: 2_002_000,
            },
            // A slow way there: this sample alone would be 15 ms off.
            Ping {
                t0: 3_000_000,
                t1: 3_035_000 + ahead,
                t2: 3_040_000,
            },
        ];
        let e = estimate(&pings).expect("pings");
        assert_eq!(
            e,
            Estimate {
                offset_us: ahead as i64,
                rtt_us: 2_000
            }
        );
        assert_eq!(e.to_agent(10_000_000), 15_000_000);
        assert_eq!(e.to_coordinator(15_000_000), 10_000_000);
        let behind = estimate(&[Ping {
            t0: 10_000,
            t1: 4_000,
            t2: 12_000,
        }])
        .expect("a ping");
        assert_eq!(behind.offset_us, -7_000);
        assert_eq!(estimate(&[]), None);
    }
}
