//! How a service actually runs: one small trait pair that the process backend (and later a Docker
//! backend in `docker.rs`) implements, so the supervisor drives every service the same way.
//!
//! A [`Backend`] creates a [`Unit`] per service once; the unit is then started any number of times
//! (a Docker container is created once and started again after a kill, which keeps its data). Each
//! start hands back the instance's id and a future that resolves to its [`Exit`].

mod command;
mod exit;
pub mod process;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

pub use command::{Command, RunAs};
pub use exit::Exit;

/// A boxed future, so that the traits below stay object-safe (`Arc<dyn Backend>`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Creates the units of a topology.
pub trait Backend: Send + Sync {
    /// Prepares one service named `name` that runs `command` (nothing runs yet).
    fn create(
        &self,
        name: String,
        command: Command,
    ) -> BoxFuture<'_, Result<Box<dyn Unit>, BackendError>>;
}

/// One service as the backend knows it: started, signalled, and logged.
pub trait Unit: Send + Sync {
    /// Starts a fresh instance. The caller must not start again before the last exit resolved.
    fn start(&self) -> BoxFuture<'_, Result<Started, BackendError>>;
    /// Delivers `op` to the running instance (the whole process tree); a no-op once it has exited.
    fn send(&self, op: Op) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Best-effort immediate SIGKILL without awaiting anything, for `Drop` paths.
    fn kill_now(&self);
    /// Where the instance's stdout and stderr are appended.
    fn log_path(&self) -> &Path;
}

/// A started instance: its id and how it will end.
pub struct Started {
    pub id: InstanceId,
    /// Resolves as soon as the instance has exited (the process backend awaits `child.wait()`).
    pub exit: BoxFuture<'static, Exit>,
}

/// What a running instance is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The command's stop signal (SIGTERM unless it says otherwise): exit gracefully.
    Terminate,
    /// SIGKILL to every process of the instance.
    Kill,
    /// SIGSTOP to every process of the instance (docker pause).
    Pause,
    /// SIGCONT to every process of the instance (docker unpause).
    Resume,
}

/// Identifies one started instance, for events and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceId {
    /// The process id, which is also its process group id.
    Pid(u32),
}

impl std::fmt::Display for InstanceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstanceId::Pid(pid) => write!(f, "pid {pid}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cannot open the log file {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("cannot signal {id}: {source}")]
    Signal { id: InstanceId, source: nix::Error },
    #[error("no user named `{0}` on this machine")]
    NoSuchUser(String),
    #[error("cannot look up user `{name}`: {source}")]
    UserLookup { name: String, source: nix::Error },
}
