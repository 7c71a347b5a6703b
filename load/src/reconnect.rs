//! The contract's reconnect rule, as a pure type: what a player waits for after losing its event
//! connection, or after a failed attempt to get it back.

use std::fmt;
use std::time::Duration;

use rand::Rng;

/// How players reconnect (`--reconnect`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ReconnectMode {
    /// As the contract tells clients: jitter and a doubling pause.
    Spec,
    /// At once after every break: the worst case a cloud can face.
    Immediate,
}

impl ReconnectMode {
    pub fn name(self) -> &'static str {
        match self {
            ReconnectMode::Spec => "spec",
            ReconnectMode::Immediate => "immediate",
        }
    }
}

/// How an event connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Break {
    /// The server sent a close frame with this code.
    Closed(u16),
    /// The connection ended without a close frame (EOF, reset, error, silence).
    NoCloseFrame,
    /// The harness cut it on purpose, without a close frame (the `drop` storm).
    Dropped,
    /// Nothing heard, no event and no ping, for `2 × ping_interval + 5 s`: the client gave it up.
    Silent,
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Break::Closed(code) => write!(f, "closed {code}"),
            Break::NoCloseFrame => f.write_str("no close frame"),
            Break::Dropped => f.write_str("dropped"),
            Break::Silent => f.write_str("silent"),
        }
    }
}

/// Close codes the contract gives a meaning to.
pub const GOING_AWAY: u16 = 1001;
pub const RESTARTING: u16 = 1012;
pub const REPLACED: u16 = 4001;
pub const SIGNED_OUT: u16 = 4003;
/// WebSocket's "no status received": how a close frame without a code is recorded (RFC 6455,
/// 7.1.5), never a code a peer sends.
pub const NO_STATUS: u16 = 1005;

impl Break {
    /// Whether another node is the better next try: the node said it is going away, or
    /// the connection died without a word (a crashed node, as a load balancer in front of
    /// the nodes would route the retry elsewhere). A drop by the harness keeps the node.
    pub fn node_is_leaving(&self) -> bool {
        matches!(
            self,
            Break::Closed(GOING_AWAY | RESTARTING) | Break::NoCloseFrame | Break::Silent
        )
    }

    /// The close code and cause the history gives this break.
    pub fn as_close(&self) -> (Option<u16>, crate::measure::facts::CloseCause) {
        use crate::measure::facts::CloseCause;
        match self {
            Break::Closed(code) => (Some(*code), CloseCause::CloseFrame),
            Break::NoCloseFrame => (None, CloseCause::NoCloseFrame),
            Break::Dropped => (None, CloseCause::Dropped),
            Break::Silent => (None, CloseCause::Silent),
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Connect again after this wait.
    Wait(Duration),
    /// The tokens were revoked (4003): sign in again, then connect.
    SignIn,
    /// Replaced by another connection of the account (4001): never reconnect.
    Stop,
}

const FIRST_PAUSE: Duration = Duration::from_secs(1);
const MAX_PAUSE: Duration = Duration::from_secs(30);
/// After 1001 or 1012, reconnect at a uniform moment within this window.
const DRAIN_WINDOW: Duration = Duration::from_secs(10);

/// One player's reconnect state: the doubling pause, reset by a welcome.
#[derive(Debug, Clone)]
pub struct Reconnect {
    mode: ReconnectMode,
    pause: Duration,
}

impl Reconnect {
    pub fn new(mode: ReconnectMode) -> Self {
        Reconnect {
            mode,
            pause: FIRST_PAUSE,
        }
    }

    /// The connection `brk` ended.
    pub fn after_break<R: Rng + ?Sized>(&mut self, brk: &Break, rng: &mut R) -> Next {
        match (brk, self.mode) {
            (Break::Closed(REPLACED), _) => Next::Stop,
            (Break::Closed(SIGNED_OUT), _) => Next::SignIn,
            (_, ReconnectMode::Immediate) => Next::Wait(Duration::ZERO),
            (Break::Closed(GOING_AWAY | RESTARTING), ReconnectMode::Spec) => {
                Next::Wait(DRAIN_WINDOW.mul_f64(rng.random::<f64>()))
            }
            (_, ReconnectMode::Spec) => Next::Wait(self.backoff(rng)),
        }
    }

    /// An attempt to connect (or sign in again) failed.
    pub fn after_failed_attempt<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        match self.mode {
            ReconnectMode::Immediate => Duration::ZERO,
            ReconnectMode::Spec => self.backoff(rng),
        }
    }

    /// A welcome arrived: the pause starts over.
    pub fn after_welcome(&mut self) {
        self.pause = FIRST_PAUSE;
    }

    /// `pause/2 + random(0, pause)`, then the pause doubles up to [`MAX_PAUSE`].
    fn backoff<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        let wait = self.pause / 2 + self.pause.mul_f64(rng.random::<f64>());
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const SAMPLES: usize = 20_000;

    fn waits(mut next: impl FnMut(&mut StdRng) -> Next) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(42);
        (0..SAMPLES)
            .map(|_| match next(&mut rng) {
                Next::Wait(d) => d.as_secs_f64(),
                other => panic!("expected a wait, got {other:?}"),
            })
            .collect()
    }

    fn mean(xs: &[f64]) -> f64 {
        xs.iter().sum::<f64>() / xs.len() as f64
    }

    /// Share of samples in each tenth of [lo, hi): a uniform distribution puts ~10 % in each.
    fn tenths(xs: &[f64], lo: f64, hi: f64) -> Vec<f64> {
        let mut counts = [0usize; 10];
        for x in xs {
            let i = (((x - lo) / (hi - lo)) * 10.0).floor() as usize;
            counts[i.min(9)] += 1;
        }
        counts.iter().map(|c| *c as f64 / xs.len() as f64).collect()
    }

    #[test]
    fn after_drain_or_restart_the_wait_is_uniform_within_ten_seconds() {
        for code in [GOING_AWAY, RESTARTING] {
            let w = waits(|rng| {
                Reconnect::new(ReconnectMode::Spec).after_break(&Break::Closed(code), rng)
            });
            assert!(w.iter().all(|x| (0.0..10.0).contains(x)));
            assert!((mean(&w) - 5.0).abs() < 0.15, "mean {}", mean(&w));
            for share in tenths(&w, 0.0, 10.0) {
                assert!((share - 0.1).abs() < 0.015, "share {share}");
            }
        }
    }

    #[test]
    fn other_breaks_wait_half_a_pause_plus_up_to_a_pause() {
        for brk in [
            Break::NoCloseFrame,
            Break::Dropped,
            Break::Silent,
            Break::Closed(1013),
            Break::Closed(1006),
        ] {
            let w = waits(|rng| Reconnect::new(ReconnectMode::Spec).after_break(&brk, rng));
            assert!(w.iter().all(|x| (0.5..1.5).contains(x)), "{brk}");
            assert!((mean(&w) - 1.0).abs() < 0.02, "mean {}", mean(&w));
            for share in tenths(&w, 0.5, 1.5) {
                assert!((share - 0.1).abs() < 0.015, "share {share}");
            }
        }
    }

    #[test]
    fn the_pause_doubles_per_failed_attempt_up_to_thirty_seconds_and_resets_on_welcome() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut rule = Reconnect::new(ReconnectMode::Spec);
        let Next::Wait(first) = rule.after_break(&Break::NoCloseFrame, &mut rng) else {
            panic!("expected a wait")
        };
        assert!(first >= Duration::from_millis(500) && first < Duration::from_millis(1500));
        // pause 2, 4, 8, 16, 30, 30, ...: each wait lies in [pause/2, 1.5 pause).
        for pause in [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0] {
            let w = rule.after_failed_attempt(&mut rng).as_secs_f64();
            assert!(
                w >= pause / 2.0 && w < pause * 1.5,
                "pause {pause}: waited {w}"
            );
        }
        rule.after_welcome();
        let w = rule.after_failed_attempt(&mut rng).as_secs_f64();
        assert!(
            (0.5..1.5).contains(&w),
            "after a welcome the pause is 1 s again, waited {w}"
        );
    }

    #[test]
    fn replaced_never_reconnects_and_revoked_signs_in_again() {
        let mut rng = StdRng::seed_from_u64(3);
        for mode in [ReconnectMode::Spec, ReconnectMode::Immediate] {
            let mut rule = Reconnect::new(mode);
            assert_eq!(
                rule.after_break(&Break::Closed(REPLACED), &mut rng),
                Next::Stop
            );
            assert_eq!(
                rule.after_break(&Break::Closed(SIGNED_OUT), &mut rng),
                Next::SignIn
            );
        }
    }

    #[test]
    fn immediate_mode_never_waits() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut rule = Reconnect::new(ReconnectMode::Immediate);
        for brk in [
            Break::Closed(GOING_AWAY),
            Break::NoCloseFrame,
            Break::Dropped,
        ] {
            assert_eq!(rule.after_break(&brk, &mut rng), Next::Wait(Duration::ZERO));
        }
        assert_eq!(rule.after_failed_attempt(&mut rng), Duration::ZERO);
    }
}
