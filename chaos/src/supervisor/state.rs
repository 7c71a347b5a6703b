//! A service's lifecycle as an explicit state machine, and the steps that move it.

use std::fmt;

use crate::backend::Exit;

/// Where a service is in its lifecycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Never started.
    Pending,
    /// Launched, readiness not yet seen.
    Starting,
    Running,
    /// SIGSTOPped (docker paused).
    Paused,
    /// Asked to stop gracefully, not yet exited.
    Stopping,
    Exited(Exit),
}

/// A move between states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Start,
    Ready,
    Pause,
    Resume,
    Stop,
    Exit(Exit),
}

impl State {
    /// True while an instance exists (from launch until its exit was seen).
    pub fn is_live(&self) -> bool {
        matches!(
            self,
            State::Starting | State::Running | State::Paused | State::Stopping
        )
    }

    /// The state after `step`, or `None` when `step` is not allowed from here.
    pub(crate) fn next(&self, step: &Step) -> Option<State> {
        use State::*;
        match (self, step) {
            (Pending | Exited(_), Step::Start) => Some(Starting),
            (Starting, Step::Ready) => Some(Running),
            (Running, Step::Pause) => Some(Paused),
            (Paused, Step::Resume) => Some(Running),
            (Starting | Running | Paused, Step::Stop) => Some(Stopping),
            (state, Step::Exit(exit)) if state.is_live() => Some(Exited(exit.clone())),
            _ => None,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Pending => f.write_str("pending"),
            State::Starting => f.write_str("starting"),
            State::Running => f.write_str("running"),
            State::Paused => f.write_str("paused"),
            State::Stopping => f.write_str("stopping"),
            State::Exited(exit) => write!(f, "exited ({exit})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;

    const KILLED: Exit = Exit::Signal(Signal::SIGKILL);

    #[test]
    fn a_full_life() {
        let mut state = State::Pending;
        for (step, expected) in [
            (Step::Start, State::Starting),
            (Step::Ready, State::Running),
            (Step::Pause, State::Paused),
            (Step::Resume, State::Running),
            (Step::Stop, State::Stopping),
            (Step::Exit(KILLED), State::Exited(KILLED)),
            (Step::Start, State::Starting),
        ] {
            state = state
                .next(&step)
                .unwrap_or_else(|| panic!("{step:?} from {state}"));
            assert_eq!(state, expected);
        }
    }

    #[test]
    fn refuses_what_makes_no_sense() {
        assert_eq!(State::Running.next(&Step::Start), None);
        assert_eq!(State::Paused.next(&Step::Start), None);
        assert_eq!(State::Pending.next(&Step::Stop), None);
        assert_eq!(State::Exited(KILLED).next(&Step::Stop), None);
        assert_eq!(State::Paused.next(&Step::Pause), None);
        assert_eq!(State::Running.next(&Step::Resume), None);
        assert_eq!(State::Pending.next(&Step::Exit(KILLED)), None);
        // A stop that raced with readiness wins: the service does not become Running again.
        assert_eq!(State::Stopping.next(&Step::Ready), None);
    }

    #[test]
    fn any_live_state_can_exit() {
        for state in [
            State::Starting,
            State::Running,
            State::Paused,
            State::Stopping,
        ] {
            assert_eq!(
                state.next(&Step::Exit(Exit::Code(0))),
                Some(State::Exited(Exit::Code(0)))
            );
        }
    }
}
