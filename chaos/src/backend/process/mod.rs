//! The process backend: each instance is a real OS process leading its own process group, with its
//! output appended to its log file, dying with the supervisor even when the supervisor is
//! SIGKILLed (the leader by its parent-death signal, the rest of its group by a guard; see
//! `spawn` and `guard`).
//!
//! A [`Leader`] is also what runs a plan's client programs, so they get the same guarantees.
//!
//! Graceful stops go to the leader's process group (a shell wrapper's children included); kill,
//! pause and resume go to the whole process tree as well, because PostgreSQL's children leave the
//! group (`setsid`) and a paused or killed service must not keep half of itself running.

pub(crate) mod cgroup;
mod guard;
mod spawn;
pub(crate) mod tree;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

pub(crate) use spawn::spawn_joined;
pub use spawn::{run_to_exit, spawn, Leader};
pub(crate) use tree::start_time;
use tree::Proc;

use crate::sync::lock;

use cgroup::Cgroup;

use super::{Backend, BackendError, BoxFuture, Command, InstanceId, Limit, Order, Started, Unit};

/// How long a start waits for the last instance's killed processes to be gone.
const LEFTOVER_WAIT: Duration = Duration::from_secs(5);

/// Runs every unit as a local process.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessBackend;

impl Backend for ProcessBackend {
    fn create(
        &self,
        name: String,
        command: Command,
    ) -> BoxFuture<'_, Result<Box<dyn Unit>, BackendError>> {
        let created = (|| {
            let cgroup = match command.cgroup {
                true => Some(Arc::new(Cgroup::create(&name)?)),
                false => None,
            };
            let unit: Box<dyn Unit> = Box::new(ProcessUnit {
                name,
                log: command.log.clone(),
                command: Mutex::new(command),
                cgroup,
                instance: Arc::new(Mutex::new(Instance::default())),
            });
            Ok(unit)
        })();
        Box::pin(std::future::ready(created))
    }
}

struct ProcessUnit {
    name: String,
    /// What the next start runs ([`Unit::retarget`] changes it between instances).
    command: Mutex<Command>,
    /// Every instance's, whatever it runs.
    log: std::path::PathBuf,
    /// Every instance joins it before it executes; shared with the exit futures, which read
    /// its OOM kills.
    cgroup: Option<Arc<Cgroup>>,
    instance: Arc<Mutex<Instance>>,
}

#[derive(Debug, Default)]
struct Instance {
    /// The running leader (its pid names its process group); `None` once it has exited.
    leader: Option<Pid>,
    /// Processes of a killed tree that may still be dying; the next start waits for them (a new
    /// PostgreSQL refuses to start while an old backend holds the shared memory).
    killed: Vec<Proc>,
}

impl ProcessUnit {
    fn leader(&self) -> Option<Pid> {
        lock(&self.instance).leader
    }

    fn send_now(&self, order: Order) -> Result<(), BackendError> {
        let Some(leader) = self.leader() else {
            return Ok(());
        };
        match order {
            Order::Terminate => signal_group(leader, lock(&self.command).stop_signal),
            Order::Kill => {
                let killed = signal_tree(leader, Signal::SIGKILL)?;
                lock(&self.instance).killed = killed;
                Ok(())
            }
            Order::Pause => {
                // Twice: a child forked while the first pass ran is caught by the second.
                signal_tree(leader, Signal::SIGSTOP)?;
                signal_tree(leader, Signal::SIGSTOP).map(drop)
            }
            Order::Resume => signal_tree(leader, Signal::SIGCONT).map(drop),
        }
    }

    async fn wait_for_killed(&self) {
        let killed = std::mem::take(&mut lock(&self.instance).killed);
        let deadline = tokio::time::Instant::now() + LEFTOVER_WAIT;
        while killed.iter().any(tree::alive) {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    "{}: starting although processes of the last instance still run",
                    self.name
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Unit for ProcessUnit {
    fn start(&self) -> BoxFuture<'_, Result<Started, BackendError>> {
        Box::pin(async move {
            self.wait_for_killed().await;
            let join = self.cgroup.as_ref().map(|c| c.join_fds().to_vec());
            let command = lock(&self.command).clone();
            let leader = spawn::spawn_joined(&command, &self.name, join.as_deref().unwrap_or(&[]))?;
            let pid = leader.pid();
            lock(&self.instance).leader = Some(pid);
            let instance = Arc::clone(&self.instance);
            let cgroup = self.cgroup.clone();
            let oom_before = cgroup.as_ref().map(|c| c.oom_kills());
            let exit = Box::pin(async move {
                // A SIGKILL while the OOM killer struck in its cgroup is the OOM killer's.
                let exit = leader
                    .wait()
                    .await
                    .or_oom_killed(|| cgroup.as_ref().map(|c| c.oom_kills()) > oom_before);
                let mut instance = lock(&instance);
                if instance.leader == Some(pid) {
                    instance.leader = None;
                }
                exit
            });
            Ok(Started {
                id: InstanceId::Pid(pid.as_raw().unsigned_abs()),
                exit,
            })
        })
    }

    fn send(&self, order: Order) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(std::future::ready(self.send_now(order)))
    }

    fn kill_now(&self) {
        let _ = self.send_now(Order::Kill);
    }

    fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    fn retarget(&self, command: Command) -> BoxFuture<'_, Result<(), BackendError>> {
        *lock(&self.command) = Command {
            log: self.log.clone(),
            ..command
        };
        Box::pin(std::future::ready(Ok(())))
    }

    fn limit(&self, limit: Limit) -> BoxFuture<'_, Result<(), BackendError>> {
        let set = match (&self.cgroup, limit) {
            (Some(cgroup), Limit::Cpu(cores)) => cgroup.set_cpu(cores),
            (Some(cgroup), Limit::Memory(bytes)) => cgroup.set_memory(bytes),
            (None, limit) => Err(BackendError::NoCgroup {
                service: self.name.clone(),
                what: match limit {
                    Limit::Cpu(_) => "CPU",
                    Limit::Memory(_) => "memory",
                },
            }),
        };
        Box::pin(std::future::ready(set))
    }
}

impl Leader {
    /// SIGKILL to the leader's group and every descendant, as a killed service gets.
    pub fn kill(&self) -> Result<(), BackendError> {
        signal_tree(self.pid(), Signal::SIGKILL).map(drop)
    }
}

/// Signals the leader's process group.
fn signal_group(leader: Pid, signal: Signal) -> Result<(), BackendError> {
    match killpg(leader, signal) {
        // It exited on its own between our look and the signal.
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(source) => Err(signal_error(leader, source)),
    }
}

/// Signals the group and every descendant of the leader; returns the tree it saw.
fn signal_tree(leader: Pid, signal: Signal) -> Result<Vec<Proc>, BackendError> {
    let seen = tree::tree(leader);
    signal_group(leader, signal)?;
    tree::signal_all(&seen, signal).map_err(|source| signal_error(leader, source))?;
    Ok(seen)
}

fn signal_error(leader: Pid, source: Errno) -> BackendError {
    BackendError::Signal {
        id: InstanceId::Pid(leader.as_raw().unsigned_abs()),
        source,
    }
}
