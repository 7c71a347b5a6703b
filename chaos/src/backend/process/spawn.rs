//! Forking a command: its log, its user, its own process group, the parent-death signal, and a
//! [`Guard`] that ends the group's other members when the supervisor dies.
//!
//! The parent-death signal fires when the *thread* that forked the child exits, not the process.
//! So spawn only from threads that live as long as the supervisor: the main thread or a tokio
//! runtime worker (any `async fn` polled by the runtime runs on one). Never from `spawn_blocking`
//! or `block_in_place`: those threads are transient, and their children would be SIGKILLed when
//! the thread idles out.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::process::Stdio;

use crate::backend::log::open_log;
use crate::backend::{BackendError, Command, Exit, Program};
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getpid, getppid, setgid, setgroups, setuid, Gid, Pid, Uid};

use super::guard::Guard;

/// Runs `command` to its end (one-shot tools such as `initdb`), with the same user, log and
/// parent-death handling as a service.
pub async fn run_to_exit(command: &Command, name: &str) -> Result<Exit, BackendError> {
    Ok(spawn(command, name)?.wait().await)
}

/// A started command: the leader of its own process group, watched by a guard.
pub struct Leader {
    child: tokio::process::Child,
    pid: Pid,
    _guard: Guard,
}

impl Leader {
    /// The leader's pid, which is also its process group's id.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Waits for the leader's exit, then SIGKILLs what is left of its group (a shell's
    /// background children), and ends the guard.
    pub async fn wait(mut self) -> Exit {
        let exit = match self.child.wait().await {
            Ok(status) => Exit::from(status),
            Err(error) => Exit::Unknown(format!("wait failed: {error}")),
        };
        let _ = killpg(self.pid, Signal::SIGKILL);
        exit
    }
}

/// Forks and executes `command` on the calling thread (see the module docs for why that matters).
pub fn spawn(command: &Command, name: &str) -> Result<Leader, BackendError> {
    spawn_joined(command, name, &[])
}

/// As [`spawn`], and the child joins the cgroups whose `cgroup.procs` are open as `join` before
/// it executes, so whatever it forks is in them too.
pub(crate) fn spawn_joined(
    command: &Command,
    name: &str,
    join: &[RawFd],
) -> Result<Leader, BackendError> {
    let Program::Executable(program) = &command.program else {
        return Err(BackendError::WrongProgram {
            backend: "process",
            program: command.program.to_string(),
        });
    };
    let log = open_log(command, name)?;
    let log_error = |source| BackendError::Log {
        path: command.log.clone(),
        source,
    };
    let stdout = log.try_clone().map_err(log_error)?;

    let mut child = tokio::process::Command::new(program);
    child
        .args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(log)
        // A new process group led by the child, so one signal reaches a shell's children too.
        .process_group(0)
        // The last line of defence when the supervisor unwinds without a shutdown.
        .kill_on_drop(true);
    if let Some(dir) = &command.cwd {
        child.current_dir(dir);
    }
    let parent = getpid();
    let user = command.user.as_ref().map(|user| (user.uid, user.gid));
    let join: Vec<RawFd> = join.to_vec();
    let spawn_error = |source| BackendError::Spawn {
        program: command.display(),
        source,
    };
    // Opened here and kept until the spawn returned: the child joins it before it executes.
    let netns = match &command.netns {
        Some(path) => Some(std::fs::File::open(path).map_err(|e| {
            spawn_error(io::Error::other(format!(
                "its network namespace {}: {e}",
                path.display()
            )))
        })?),
        None => None,
    };
    let netns_fd = netns.as_ref().map(|f| f.as_raw_fd());
    // SAFETY: `in_child` only makes async-signal-safe system calls and does not allocate.
    unsafe {
        child.pre_exec(move || in_child(parent, user, &join, netns_fd));
    }
    let child = child.spawn().map_err(spawn_error)?;
    // `id()` is `None` only once the child was reaped, and pids always fit an i32.
    let pid = child
        .id()
        .and_then(|raw| i32::try_from(raw).ok())
        .map(Pid::from_raw)
        .ok_or_else(|| spawn_error(io::Error::other("the child has no pid")))?;
    // On failure the dropped child is SIGKILLed (kill_on_drop), so nothing runs unguarded.
    let guard = Guard::start(pid)
        .map_err(|error| spawn_error(io::Error::other(format!("its guard: {error}"))))?;
    Ok(Leader {
        child,
        pid,
        _guard: guard,
    })
}

/// Runs in the forked child just before `exec`.
fn in_child(
    parent: Pid,
    user: Option<(Uid, Gid)>,
    join: &[RawFd],
    netns: Option<RawFd>,
) -> io::Result<()> {
    // Before the user switch: joining a namespace takes CAP_SYS_ADMIN.
    if let Some(fd) = netns {
        // SAFETY: the parent keeps the namespace file open until the spawn returned.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET)?;
    }
    // Before the user switch: only root may move a process into a cgroup. "0" is the writer.
    for &fd in join {
        // SAFETY: the parent keeps these descriptors open until the spawn returned.
        nix::unistd::write(unsafe { BorrowedFd::borrow_raw(fd) }, b"0")?;
    }
    if let Some((uid, gid)) = user {
        // Group first: after setuid we would no longer be allowed to change it.
        setgroups(&[gid])?;
        setgid(gid)?;
        setuid(uid)?;
    }
    // After the user switch, because changing credentials clears the parent-death signal.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    // The supervisor may have died between fork and prctl; then no signal would ever come.
    if getppid() != parent {
        return Err(Errno::ESRCH.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_in(dir: &str) -> std::path::PathBuf {
        std::env::temp_dir()
            .join(format!("anyplay-chaos-unit-{}-{dir}", std::process::id()))
            .join("logs/x.log")
    }

    #[tokio::test]
    async fn runs_to_exit_and_appends_the_log() {
        let log = log_in("append");
        let echo = Command::new("/bin/sh", &log).args(["-c", "echo out; echo err >&2; exit 3"]);
        assert_eq!(run_to_exit(&echo, "x").await.ok(), Some(Exit::Code(3)));
        assert_eq!(run_to_exit(&echo, "x").await.ok(), Some(Exit::Code(3)));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(text.matches("out\nerr\n").count(), 2, "{text}");
        assert_eq!(text.matches("starting x: /bin/sh").count(), 2, "{text}");
        if let Some(dir) = log.parent().and_then(|logs| logs.parent()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let log = log_in("missing");
        let command = Command::new("/nonexistent/program", &log);
        assert!(matches!(
            run_to_exit(&command, "x").await,
            Err(BackendError::Spawn { .. })
        ));
        if let Some(dir) = log.parent().and_then(|logs| logs.parent()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
