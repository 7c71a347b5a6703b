//! The plan's `abort` watched second by second over the load's numbers: once a condition held
//! for the plan's `for`, the reason goes to the run, which stops as on an interrupt and fails.

use tokio::sync::watch;

use crate::events::{Event, EventLog, Tick};
use crate::plan::Abort;

/// The watch, and the run it tells when it gives the run up.
pub struct GiveUp {
    watch: AbortWatch,
    tell: watch::Sender<Option<String>>,
}

impl GiveUp {
    pub fn new(abort: Abort, players: u64, tell: watch::Sender<Option<String>>) -> GiveUp {
        GiveUp {
            watch: AbortWatch::new(abort, players),
            tell,
        }
    }

    /// Feeds one second of the load; once a condition held long enough, the history records
    /// why and the run is told, once.
    pub fn second(&mut self, tick: &Tick, log: &EventLog) {
        if self.tell.borrow().is_some() {
            return;
        }
        if let Some(reason) = self.watch.see(tick) {
            let _ = log.record(Event::Aborted {
                reason: reason.clone(),
            });
            let _ = self.tell.send(Some(reason));
        }
    }
}

/// How long the conditions have held, fed one second of the load at a time.
pub struct AbortWatch {
    abort: Abort,
    players: u64,
    /// Seconds in a row the latest reason held.
    held: u32,
    reason: Option<String>,
}

impl AbortWatch {
    /// Watches `abort` for a run of `players`.
    pub fn new(abort: Abort, players: u64) -> AbortWatch {
        AbortWatch {
            abort,
            players,
            held: 0,
            reason: None,
        }
    }

    /// The reason to give the run up, once one second more made a condition hold long enough.
    pub fn see(&mut self, second: &Tick) -> Option<String> {
        match self.holds(second) {
            Some(reason) => {
                self.held += 1;
                self.reason = Some(reason);
            }
            None => {
                self.held = 0;
                self.reason = None;
            }
        }
        let held = f64::from(self.held);
        match &self.reason {
            Some(reason) if held >= self.abort.hold.as_secs_f64() => {
                Some(format!("{reason} for {held}s"))
            }
            _ => None,
        }
    }

    /// What holds in this second, if anything.
    fn holds(&self, second: &Tick) -> Option<String> {
        let online = second.online as f64 / self.players.max(1) as f64;
        if let Some(below) = self.abort.players_online_below {
            if online < below {
                return Some(format!(
                    "{} of {} players online ({:.0} %, below {:.0} %)",
                    second.online,
                    self.players,
                    online * 100.0,
                    below * 100.0
                ));
            }
        }
        if let Some(ratio) = self.abort.http_error_ratio {
            let errors = second.http_errors as f64 / second.http_calls.max(1) as f64;
            if second.http_calls > 0 && errors > ratio {
                return Some(format!(
                    "{} of {} calls failed ({errors:.2}, above {ratio})",
                    second.http_errors, second.http_calls
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn second(online: u64, calls: u64, errors: u64) -> Tick {
        Tick {
            online,
            http_calls: calls,
            http_errors: errors,
            ..Tick::default()
        }
    }

    fn watch(online_below: Option<f64>, error_ratio: Option<f64>, hold: u64) -> AbortWatch {
        AbortWatch::new(
            Abort {
                http_error_ratio: error_ratio,
                players_online_below: online_below,
                hold: Duration::from_secs(hold),
            },
            100,
        )
    }

    #[test]
    fn a_condition_gives_the_run_up_once_it_held_its_for() {
        let mut w = watch(Some(0.5), None, 3);
        assert_eq!(w.see(&second(40, 10, 0)), None);
        assert_eq!(w.see(&second(30, 10, 0)), None);
        let reason = w.see(&second(20, 10, 0)).expect("three seconds below");
        assert!(reason.contains("20 of 100 players online"), "{reason}");
        assert!(reason.ends_with("for 3s"), "{reason}");
    }

    #[test]
    fn a_second_without_it_starts_the_count_again() {
        let mut w = watch(Some(0.5), Some(0.2), 2);
        assert_eq!(w.see(&second(40, 10, 0)), None);
        assert_eq!(w.see(&second(90, 10, 0)), None);
        assert_eq!(w.see(&second(90, 10, 3)), None);
        let reason = w.see(&second(90, 10, 5)).expect("two seconds of errors");
        assert!(reason.contains("5 of 10 calls failed"), "{reason}");
        // A second without calls is no error ratio.
        let mut w = watch(None, Some(0.2), 1);
        assert_eq!(w.see(&second(90, 0, 0)), None);
        assert_eq!(w.see(&second(90, 10, 2)), None, "0.2 is not above 0.2");
    }
}
