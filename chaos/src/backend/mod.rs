//! How a service actually runs: one small trait pair that the process backend and the Docker
//! backend implement, so the supervisor drives every service the same way.
//!
//! A [`Backend`] creates a [`Unit`] per service once; the unit is then started any number of times
//! (a Docker container is created once and started again after a kill, which keeps its data). Each
//! start hands back the instance's id and a future that resolves to its [`Exit`]. A plan whose
//! services live on several hosts runs each with its host's backend ([`placed`]).

mod command;
pub mod docker;
mod exit;
mod log;
pub mod owner;
pub(crate) mod placed;
pub mod process;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

pub use command::{Command, Program, RunAs};
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

    /// Removes what the units left behind once every one has exited (Docker's containers);
    /// nothing for processes.
    fn clean_up(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// One service as the backend knows it: started, signalled, and logged.
pub trait Unit: Send + Sync {
    /// Starts a fresh instance. The caller must not start again before the last exit resolved.
    fn start(&self) -> BoxFuture<'_, Result<Started, BackendError>>;
    /// Delivers `op` to the running instance (the whole process tree); a no-op once it has exited.
    fn send(&self, order: Order) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Best-effort immediate SIGKILL without awaiting (it may block briefly), for `Drop` paths.
    fn kill_now(&self);
    /// Where the instance's stdout and stderr are appended.
    fn log_path(&self) -> &Path;
    /// Sets or lifts a CPU or memory limit of the service, for this instance and the next ones.
    /// A process needs its command's `cgroup`; a container always has one.
    fn limit(&self, limit: Limit) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Makes the next start run `command` (another build: an upgrade), between two instances;
    /// the log stays where it was.
    fn retarget(&self, command: Command) -> BoxFuture<'_, Result<(), BackendError>>;
}

/// The CFS period a CPU quota is a share of, in microseconds.
const CPU_PERIOD_US: i64 = 100_000;

/// The CFS quota per [`CPU_PERIOD_US`] that gives `cores` (-1 for none): at least the kernel's
/// smallest, 1 ms.
fn cpu_quota_us(cores: Option<f64>) -> i64 {
    cores.map_or(-1, |cores| {
        ((cores * CPU_PERIOD_US as f64).round() as i64).max(1000)
    })
}

/// A resource limit that a fault puts on a service (`None` lifts it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// CPU time, in cores (0.2: a fifth of one core).
    Cpu(Option<f64>),
    /// Memory, in bytes; reaching it wakes the OOM killer.
    Memory(Option<u64>),
}

/// A started instance: its id and how it will end.
pub struct Started {
    pub id: InstanceId,
    /// Resolves as soon as the instance has exited (the process backend awaits `child.wait()`).
    pub exit: BoxFuture<'static, Exit>,
}

/// What a running instance is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
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
    /// A container (its short id) and the host's pid of its main process.
    Container { id: String, pid: u32 },
}

impl InstanceId {
    /// The main process as the host sees it, for CPU and memory samples.
    pub fn host_pid(&self) -> u32 {
        match self {
            InstanceId::Pid(pid) | InstanceId::Container { pid, .. } => *pid,
        }
    }
}

impl std::fmt::Display for InstanceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstanceId::Pid(pid) => write!(f, "pid {pid}"),
            InstanceId::Container { id, pid } => write!(f, "container {id} (pid {pid})"),
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
    #[error("the {backend} backend cannot run {program}")]
    WrongProgram {
        backend: &'static str,
        program: String,
    },
    #[error("{0}: a container joins no network namespace of a run (netns hosts run processes)")]
    NetnsInContainer(String),
    #[error("cgroup {}: {source}", path.display())]
    Cgroup {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot limit {service}'s memory to {limit} bytes: it uses {usage} bytes now, which the \
         kernel cannot reclaim"
    )]
    MemoryInUse {
        service: String,
        limit: u64,
        usage: u64,
    },
    #[error("{service} runs without a cgroup of its own, so its {what} cannot be limited")]
    NoCgroup { service: String, what: &'static str },
    #[error("docker: cannot {action} {container}: {source}")]
    Docker {
        action: &'static str,
        container: String,
        // Boxed: with TLS, the engine's error is larger than every other variant together.
        source: Box<bollard::errors::Error>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_share_is_a_quota_per_period() {
        assert_eq!(cpu_quota_us(Some(0.2)), 20_000);
        assert_eq!(cpu_quota_us(Some(1.5)), 150_000);
        assert_eq!(cpu_quota_us(Some(0.001)), 1000, "the kernel's smallest");
        assert_eq!(cpu_quota_us(None), -1);
    }
}
