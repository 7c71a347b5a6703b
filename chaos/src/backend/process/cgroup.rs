//! A cgroup (v1) of one's own for a service process, in the `cpu` and `memory` hierarchies, so
//! that its CPU quota and memory limit can change while it runs. Every instance joins it before
//! it executes (a restarted one too), and so does every child it forks (PostgreSQL's backends).
//!
//! They live at `/sys/fs/cgroup/<controller>/anyplay/<owner>/<service>`: the owner's name
//! ([`Owner::to_name`]) says which supervisor made them, so a later run removes those of a
//! supervisor that died without cleaning up (a cgroup directory holds no marker file).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::backend::owner::Owner;
use crate::backend::{cpu_quota_us, BackendError, CPU_PERIOD_US};

/// Where the v1 hierarchies are mounted.
const ROOT: &str = "/sys/fs/cgroup";
/// Below each hierarchy's root, the parent of every owner's cgroups.
const PARENT: &str = "anyplay";
/// How long removal waits for the processes of a cgroup to be gone.
const EMPTY_WAIT: Duration = Duration::from_secs(5);

/// The controllers a service's limits need, each a hierarchy of its own under cgroup v1.
#[derive(Debug, Clone, Copy)]
enum Controller {
    Cpu,
    Memory,
}

const CONTROLLERS: [Controller; 2] = [Controller::Cpu, Controller::Memory];

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Memory => "memory",
        }
    }

    /// A file only this controller's hierarchy has: proof that it is mounted, and v1.
    fn probe(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu.cfs_quota_us",
            Controller::Memory => "memory.limit_in_bytes",
        }
    }

    fn root(self) -> PathBuf {
        Path::new(ROOT).join(self.name())
    }
}

/// Whether this machine lets us make such cgroups: root, and both v1 controllers mounted.
pub fn check_available() -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("CPU and memory limits need root (cgroups)".to_owned());
    }
    for controller in CONTROLLERS {
        let probe = controller.root().join(controller.probe());
        if !probe.exists() {
            return Err(format!(
                "CPU and memory limits need the cgroup v1 `{}` controller, and {} does not exist",
                controller.name(),
                probe.display()
            ));
        }
    }
    Ok(())
}

/// One service's cgroup in both hierarchies; removed on drop (after its processes are gone).
#[derive(Debug)]
pub struct Cgroup {
    service: String,
    /// The cgroup's directory in each of [`CONTROLLERS`], in that order.
    dirs: [PathBuf; 2],
    /// `cgroup.procs` of each, open for writing before any fork, so a child joins with one
    /// `write` (allowed between fork and exec).
    procs: [File; 2],
}

impl Cgroup {
    /// Removes what dead supervisors left, then makes the cgroup of `service` for this process.
    pub fn create(service: &str) -> Result<Cgroup, BackendError> {
        check_available().map_err(|reason| BackendError::Cgroup {
            path: PathBuf::from(ROOT),
            source: io::Error::new(io::ErrorKind::Unsupported, reason),
        })?;
        for left in sweep() {
            tracing::info!("removed {}, left by a run that died", left.display());
        }
        let owner = Owner::this().to_name();
        let dirs = CONTROLLERS.map(|c| c.root().join(PARENT).join(&owner).join(service));
        for dir in &dirs {
            make_dir(dir)?;
        }
        let open = |dir: &PathBuf| {
            let path = dir.join("cgroup.procs");
            File::options()
                .write(true)
                .open(&path)
                .map_err(cgroup_error(&path))
        };
        let procs = [open(&dirs[0])?, open(&dirs[1])?];
        Ok(Cgroup {
            service: service.to_owned(),
            dirs,
            procs,
        })
    }

    /// The descriptors a child writes `0` (itself) to, between fork and exec.
    pub fn join_fds(&self) -> [RawFd; 2] {
        [self.procs[0].as_raw_fd(), self.procs[1].as_raw_fd()]
    }

    /// `cores` of CPU time per second at most (`None`: no limit).
    pub fn set_cpu(&self, cores: Option<f64>) -> Result<(), BackendError> {
        let dir = &self.dirs[0];
        write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
        write(
            &dir.join("cpu.cfs_quota_us"),
            &cpu_quota_us(cores).to_string(),
        )
    }

    /// At most `bytes` of memory (`None`: no limit). A limit below what the service uses and
    /// the kernel cannot reclaim fails (EBUSY) with the usage in the error.
    pub fn set_memory(&self, bytes: Option<u64>) -> Result<(), BackendError> {
        let path = self.dirs[1].join("memory.limit_in_bytes");
        let value = bytes.map_or_else(|| "-1".to_owned(), |b| b.to_string());
        match std::fs::write(&path, value) {
            Err(error) if error.raw_os_error() == Some(Errno::EBUSY as i32) => {
                Err(BackendError::MemoryInUse {
                    service: self.service.clone(),
                    limit: bytes.unwrap_or_default(),
                    usage: self.memory_usage(),
                })
            }
            other => other.map_err(cgroup_error(&path)),
        }
    }

    /// Bytes charged to the cgroup now.
    fn memory_usage(&self) -> u64 {
        read_u64(&self.dirs[1].join("memory.usage_in_bytes")).unwrap_or_default()
    }

    /// SIGKILLs every process in the cgroup: whatever the first one started, double-forked
    /// or in a session of its own, is still in it.
    pub fn kill_members(&self) {
        for dir in &self.dirs {
            kill_members(dir);
        }
    }

    /// How many processes of the cgroup the OOM killer has killed so far.
    pub fn oom_kills(&self) -> u64 {
        std::fs::read_to_string(self.dirs[1].join("memory.oom_control"))
            .ok()
            .and_then(|text| oom_kills_in(&text))
            .unwrap_or_default()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for dir in &self.dirs {
            if let Err(error) = remove(dir) {
                tracing::warn!("cannot remove the cgroup {}: {error}", dir.display());
            }
        }
    }
}

/// The `oom_kill` counter of a `memory.oom_control` (kernels since 4.13 keep it).
fn oom_kills_in(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

/// Makes `dir` and its parents; retries when a concurrent removal of an empty owner directory
/// took a parent away in between.
fn make_dir(dir: &Path) -> Result<(), BackendError> {
    let mut tries = 0;
    loop {
        match std::fs::create_dir_all(dir) {
            Ok(()) if dir.is_dir() => return Ok(()),
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound && tries < 5 => {}
            Err(error) => return Err(cgroup_error(dir)(error)),
        }
        tries += 1;
    }
}

/// Removes the cgroup `dir` once its processes are gone, then its owner's directory when that
/// is empty.
fn remove(dir: &Path) -> io::Result<()> {
    let deadline = Instant::now() + EMPTY_WAIT;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => break,
            Err(error) if error.kind() == io::ErrorKind::NotFound => break,
            // EBUSY: processes (dying ones too) are still in it.
            Err(error)
                if Instant::now() < deadline
                    && error.raw_os_error() == Some(Errno::EBUSY as i32) =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(error) => return Err(error),
        }
    }
    if let Some(owner) = dir.parent() {
        // Fails while another service of the owner still has its cgroup: that one removes it.
        let _ = std::fs::remove_dir(owner);
    }
    Ok(())
}

/// Removes the cgroups of every provably dead owner (SIGKILLing what still runs in them);
/// returns the directories removed.
pub fn sweep() -> Vec<PathBuf> {
    remove_owners(|owner| owner.is_provably_dead())
}

/// Removes this process's own cgroups (SIGKILLing what still runs in them), for an exit that
/// drops nothing (a second Ctrl-C); returns the directories removed.
pub fn remove_own() -> Vec<PathBuf> {
    let me = Owner::this();
    remove_owners(|owner| *owner == me)
}

fn remove_owners(whose: impl Fn(&Owner) -> bool) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for controller in CONTROLLERS {
        let parent = controller.root().join(PARENT);
        let Ok(owners) = std::fs::read_dir(&parent) else {
            continue;
        };
        for owner_dir in owners.flatten() {
            let chosen = owner_dir
                .file_name()
                .to_str()
                .and_then(Owner::from_name)
                .is_some_and(|owner| whose(&owner));
            if !chosen {
                continue;
            }
            let services = std::fs::read_dir(owner_dir.path()).into_iter().flatten();
            for service in services.flatten().filter(|s| s.path().is_dir()) {
                let dir = service.path();
                kill_members(&dir);
                if remove(&dir).is_ok() {
                    removed.push(dir);
                }
            }
            // Removed with its last service; an owner with none is removed here.
            if std::fs::remove_dir(owner_dir.path()).is_ok() {
                removed.push(owner_dir.path());
            }
        }
    }
    removed
}

/// SIGKILLs every process in the cgroup `dir` (they belong to a run that died or is ending).
fn kill_members(dir: &Path) {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|line| line.trim().parse().ok()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

fn write(path: &Path, value: &str) -> Result<(), BackendError> {
    std::fs::write(path, value).map_err(cgroup_error(path))
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn cgroup_error(path: &Path) -> impl FnOnce(io::Error) -> BackendError + '_ {
    move |source| BackendError::Cgroup {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_oom_kill_counter() {
        let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(oom_kills_in(text), Some(3));
        assert_eq!(oom_kills_in("oom_kill_disable 0\nunder_oom 0\n"), None);
    }
}
