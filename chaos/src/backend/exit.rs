//! How an instance ended: an exit code or the signal that killed it; or that nobody can tell
//! any more, because the Docker engine running it is gone.

use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;

/// How an instance ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited by itself with this code.
    Code(i32),
    /// A signal ended it.
    Signal(Signal),
    /// The kernel's OOM killer ended it (SIGKILL) because its memory limit was reached.
    OomKilled,
    /// The backend could not observe how it ended (the reason says why).
    Unknown(String),
    /// Not an exit: the Docker engine stopped answering, so the instance is out of the
    /// supervisor's hands and `container` may still run.
    EngineLost { container: String, error: String },
}

impl Exit {
    pub fn code(&self) -> Option<i32> {
        match self {
            Exit::Code(code) => Some(*code),
            _ => None,
        }
    }

    /// The signal's name as the run's history records it, e.g. `"SIGKILL"`.
    pub fn signal_name(&self) -> Option<&'static str> {
        match self {
            Exit::Signal(signal) => Some(signal.as_str()),
            Exit::OomKilled => Some(Signal::SIGKILL.as_str()),
            _ => None,
        }
    }

    /// True when the OOM killer ended it.
    pub fn oom_killed(&self) -> bool {
        *self == Exit::OomKilled
    }

    /// This exit, told as an OOM kill when it is a SIGKILL and `oom` says the memory limit
    /// caused one.
    pub(crate) fn or_oom_killed(self, oom: impl FnOnce() -> bool) -> Exit {
        if self == Exit::Signal(Signal::SIGKILL) && oom() {
            Exit::OomKilled
        } else {
            self
        }
    }

    pub fn success(&self) -> bool {
        *self == Exit::Code(0)
    }

    /// True when the backend lost the engine rather than saw an exit.
    pub fn engine_lost(&self) -> bool {
        matches!(self, Exit::EngineLost { .. })
    }
}

impl Exit {
    /// A container's exit as Docker reports it: one status code, 128 + n when signal n ended the
    /// main process (the shell's convention, which runc follows).
    pub fn from_container_status(status: i64) -> Exit {
        let Ok(code) = i32::try_from(status) else {
            return Exit::Unknown(format!("status {status}"));
        };
        match code.checked_sub(128).map(Signal::try_from) {
            Some(Ok(signal)) if code > 128 => Exit::Signal(signal),
            _ => Exit::Code(code),
        }
    }
}

impl From<ExitStatus> for Exit {
    fn from(status: ExitStatus) -> Self {
        if let Some(code) = status.code() {
            return Exit::Code(code);
        }
        match status.signal() {
            Some(number) => match Signal::try_from(number) {
                Ok(signal) => Exit::Signal(signal),
                // Real-time signals have no nix name; keep the number rather than guess.
                Err(_) => Exit::Unknown(format!("signal {number}")),
            },
            None => Exit::Unknown(format!("wait status {status}")),
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit code {code}"),
            Exit::Signal(signal) => write!(f, "signal {}", signal.as_str()),
            Exit::OomKilled => {
                f.write_str("signal SIGKILL: killed by the kernel's OOM killer (memory limit)")
            }
            Exit::Unknown(reason) => write!(f, "unknown exit ({reason})"),
            Exit::EngineLost { container, error } => write!(
                f,
                "the Docker engine was lost ({error}); container {container} may still run"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_a_code() {
        // A raw wait status keeps the exit code in the second byte.
        let exit = Exit::from(ExitStatus::from_raw(3 << 8));
        assert_eq!(exit, Exit::Code(3));
        assert_eq!(exit.code(), Some(3));
        assert_eq!(exit.signal_name(), None);
        assert!(!exit.success());
        assert!(Exit::from(ExitStatus::from_raw(0)).success());
    }

    #[test]
    fn a_signal_is_named() {
        let exit = Exit::from(ExitStatus::from_raw(9));
        assert_eq!(exit, Exit::Signal(Signal::SIGKILL));
        assert_eq!(exit.signal_name(), Some("SIGKILL"));
        assert_eq!(exit.code(), None);
        assert_eq!(exit.to_string(), "signal SIGKILL");
    }

    #[test]
    fn a_container_status_above_128_is_a_signal() {
        assert_eq!(
            Exit::from_container_status(137),
            Exit::Signal(Signal::SIGKILL)
        );
        assert_eq!(
            Exit::from_container_status(130),
            Exit::Signal(Signal::SIGINT)
        );
        assert_eq!(Exit::from_container_status(0), Exit::Code(0));
        assert_eq!(Exit::from_container_status(128), Exit::Code(128));
        assert_eq!(Exit::from_container_status(1), Exit::Code(1));
        assert!(matches!(
            Exit::from_container_status(i64::MAX),
            Exit::Unknown(_)
        ));
    }

    #[test]
    fn an_oom_kill_is_a_sigkill_that_says_why() {
        let killed = Exit::Signal(Signal::SIGKILL);
        assert_eq!(killed.clone().or_oom_killed(|| false), killed);
        let oom = killed.or_oom_killed(|| true);
        assert!(oom.oom_killed());
        assert_eq!(oom.signal_name(), Some("SIGKILL"));
        assert_eq!(oom.code(), None);
        assert!(oom.to_string().contains("OOM killer"), "{oom}");
        // Only a SIGKILL can be the OOM killer's.
        assert_eq!(Exit::Code(137).or_oom_killed(|| true), Exit::Code(137));
    }

    #[test]
    fn a_realtime_signal_keeps_its_number() {
        let exit = Exit::from(ExitStatus::from_raw(40));
        assert_eq!(exit, Exit::Unknown("signal 40".into()));
    }
}
