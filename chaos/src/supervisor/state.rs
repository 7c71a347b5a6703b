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
pub(crate) enum Transition {
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

    /// The state after `transition`, or `None` when `transition` is not allowed from here.
    pub(crate) fn next(&self, transition: &Transition) -> Option<State> {
        use State::*;
        match (self, transition) {
            (Pending | Exited(_), Transition::Start) => Some(Starting),
            (Starting, Transition::Ready) => Some(Running),
            (Running, Transition::Pause) => Some(Paused),
            (Paused, Transition::Resume) => Some(Running),
            (Starting | Running | Paused, Transition::Stop) => Some(Stopping),
            (state, Transition::Exit(exit)) if state.is_live() => Some(Exited(exit.clone())),
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
        for (transition, expected) in [
            (Transition::Start, State::Starting),
            (Transition::Ready, State::Running),
            (Transition::Pause, State::Paused),
            (Transition::Resume, State::Running),
            (Transition::Stop, State::Stopping),
            (Transition::Exit(KILLED), State::Exited(KILLED)),
            (Transition::Start, State::Starting),
        ] {
            state = state
                .next(&transition)
                .unwrap_or_else(|| panic!("{transition:?} from {state}"));
            assert_eq!(state, expected);
        }
    }

    #[test]
    fn refuses_what_makes_no_sense() {
        assert_eq!(State::Running.next(&Transition::Start), None);
        assert_eq!(State::Paused.next(&Transition::Start), None);
        assert_eq!(State::Pending.next(&Transition::Stop), None);
        assert_eq!(State::Exited(KILLED).next(&Transition::Stop), None);
        assert_eq!(State::Paused.next(&Transition::Pause), None);
        assert_eq!(State::Running.next(&Transition::Resume), None);
        assert_eq!(State::Pending.next(&Transition::Exit(KILLED)), None);
        // A stop that raced with readiness wins: the service does not become Running again.
        assert_eq!(State::Stopping.next(&Transition::Ready), None);
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
                state.next(&Transition::Exit(Exit::Code(0))),
                Some(State::Exited(Exit::Code(0)))
            );
        }
    }
}
