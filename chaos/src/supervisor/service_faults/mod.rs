//! Service faults: limits on a service's CPU and memory, a full disk under its data, and a
//! skewed wall clock, each applied while it runs and cleared again. What a fault needs must be
//! prepared before the service's first start ([`FaultReadiness`]): a cgroup of its own (for
//! processes), a size-limited filesystem holding its data, libfaketime preloaded.
//!
//! - [`disk`]: a tmpfs of a fixed size, filled and emptied.
//! - [`clock`]: the file libfaketime reads the wall clock's offset from.

pub(crate) mod clock;
pub(crate) mod disk;

use std::path::PathBuf;
use std::sync::Arc;

pub use clock::Clock;
pub use disk::Disk;

use crate::backend::process::cgroup;

/// What a service is made ready for before its first start; a restarted instance keeps it.
#[derive(Debug, Clone, Default)]
pub struct FaultReadiness {
    /// `cpu` and `memory` faults: a process gets a cgroup of its own (a container has one).
    pub cgroup: bool,
    /// `disk_full`: the size-limited filesystem holding the service's data, mounted by whoever
    /// builds the service before anything is written there (see [`Disk::mount`]).
    pub disk: Option<Arc<Disk>>,
    /// `clock`: libfaketime preloaded, reading its offset from a file of the run.
    pub clock: bool,
}

/// A fault on one service.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ServiceFault {
    /// At most this much CPU time per second, in cores (0.2: a fifth of a core); > 0.
    Cpu { cores: f64 },
    /// At most this much memory; reaching it wakes the OOM killer.
    Memory { bytes: u64 },
    /// Its data's filesystem filled to the last byte.
    DiskFull,
    /// Its wall clock moved by this many milliseconds (monotonic clocks are left alone).
    Clock { offset_ms: i64 },
}

/// Which fault, for clearing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceFaultKind {
    Cpu,
    Memory,
    DiskFull,
    Clock,
}

impl ServiceFault {
    pub fn kind(&self) -> ServiceFaultKind {
        match self {
            ServiceFault::Cpu { .. } => ServiceFaultKind::Cpu,
            ServiceFault::Memory { .. } => ServiceFaultKind::Memory,
            ServiceFault::DiskFull => ServiceFaultKind::DiskFull,
            ServiceFault::Clock { .. } => ServiceFaultKind::Clock,
        }
    }
}

impl std::fmt::Display for ServiceFaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServiceFaultKind::Cpu => "cpu",
            ServiceFaultKind::Memory => "memory",
            ServiceFaultKind::DiskFull => "disk_full",
            ServiceFaultKind::Clock => "clock",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("{0}")]
    Unavailable(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot mount a tmpfs at {}: {source}", path.display())]
    Mount { path: PathBuf, source: nix::Error },
    #[error("{} must be empty to hold a size-limited filesystem", path.display())]
    NotEmpty { path: PathBuf },
    #[error("a CPU limit must be a positive number of cores, not {0}")]
    Cores(f64),
}

/// Removes what provably dead runs left behind (a SIGKILLed supervisor runs no clean-up):
/// their cgroups, their tmpfs disks, their scratch directories with the clock files in
/// them, and the shared memory of their SIGKILLed PostgreSQL servers. Every run does it at
/// its start, whatever faults it has itself.
pub fn remove_leftovers() {
    for left in cgroup::sweep() {
        tracing::info!("removed {}, left by a run that died", left.display());
    }
    for left in disk::sweep() {
        tracing::info!("unmounted {}, left by a run that died", left.display());
    }
    for left in crate::supervisor::services::scratch::sweep(&std::env::temp_dir()) {
        tracing::info!("removed {}, left by a run that died", left.display());
    }
    for left in crate::supervisor::services::shared_memory::sweep() {
        tracing::info!(
            "removed {}, left by a PostgreSQL that was killed",
            left.display()
        );
    }
}

/// What the service faults of a run need of this machine, checked before anything starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultNeeds {
    /// A process gets a cgroup (`cpu` or `memory` on the process backend).
    pub cgroup: bool,
    /// A tmpfs is mounted (`disk_full`, either backend).
    pub disk: bool,
    /// libfaketime is preloaded (`clock`, either backend).
    pub clock: bool,
}

impl FaultNeeds {
    /// Fails with what is missing: root, a cgroup controller, libfaketime.
    pub fn check(&self) -> Result<(), FaultError> {
        if self.cgroup {
            cgroup::check_available().map_err(FaultError::Unavailable)?;
        }
        if self.disk {
            disk::check_available().map_err(FaultError::Unavailable)?;
        }
        if self.clock {
            clock::check_available().map_err(FaultError::Unavailable)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_has_what_every_fault_needs() {
        // Sessions and CI run as root with cgroup v1 and libfaketime: all three are there.
        let all = FaultNeeds {
            cgroup: true,
            disk: true,
            clock: true,
        };
        all.check().expect("root, cgroup v1 and libfaketime");
        FaultNeeds::default().check().expect("nothing needed");
    }

    #[test]
    fn a_fault_names_its_kind() {
        assert_eq!(
            ServiceFault::Cpu { cores: 0.2 }.kind(),
            ServiceFaultKind::Cpu
        );
        assert_eq!(
            ServiceFault::Clock { offset_ms: -1 }.kind().to_string(),
            "clock"
        );
        assert_eq!(ServiceFault::DiskFull.kind().to_string(), "disk_full");
    }
}
