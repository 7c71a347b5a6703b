//! A watchman for one process group, for when the supervisor dies without a word (SIGKILL).
//!
//! The parent-death signal reaches only the leader: a shell's background children are not its
//! children, so they would outlive the run. The guard is a tiny `sh` outside the group and
//! without a parent-death signal, blocked reading a pipe whose other end only the supervisor
//! holds. The kernel closes that end when the supervisor dies, however it dies; the guard then
//! SIGKILLs the whole group. On a normal exit the guard is killed first and does nothing.

use std::io;
use std::process::Stdio;

use nix::unistd::Pid;

/// Reads until end of file (the supervisor is gone), then kills the group named by `$1`.
const SCRIPT: &str = "read _; kill -9 -\"$1\"";

/// A running guard; dropping it ends the guard without touching the group.
pub(super) struct Guard {
    child: tokio::process::Child,
}

impl Guard {
    /// Starts a guard for the process group `group` (led by the process of that pid).
    pub(super) fn start(group: Pid) -> io::Result<Guard> {
        let child = tokio::process::Command::new("/bin/sh")
            .args(["-c", SCRIPT, "anyplay-chaos-guard", &group.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Outside the terminal's group: a Ctrl-C meant for the supervisor leaves it alone.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        Ok(Guard { child })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // SIGKILL before the pipe closes (with the child, right after), so a guard whose group
        // has ended normally never runs its `kill`: the group's id may be reused by then.
        let _ = self.child.start_kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
        })
    }

    fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while !done() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        done()
    }

    #[tokio::test]
    async fn the_pipe_closing_ends_the_group_and_a_dropped_guard_does_nothing() {
        let group = || {
            std::process::Command::new("/bin/sh")
                .args(["-c", "sleep 300 & echo $!; wait"])
                .stdout(Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("a group")
        };
        let grandchild = |leader: &mut std::process::Child| {
            let mut line = String::new();
            let stdout = leader.stdout.take().expect("stdout");
            std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
                .expect("the child's pid");
            line.trim().parse::<u32>().expect("a pid")
        };
        let pid = |leader: &std::process::Child| {
            Pid::from_raw(i32::try_from(leader.id()).expect("a pid"))
        };

        // As when the supervisor dies: the kernel closes its end of the pipe.
        let mut leader = group();
        let sleeper = grandchild(&mut leader);
        let mut guard = Guard::start(pid(&leader)).expect("a guard");
        drop(guard.child.stdin.take());
        assert!(wait_until(Duration::from_secs(5), || !running(sleeper)));
        let _ = leader.wait();

        // A guard dropped while the supervisor lives leaves the group alone.
        let mut leader = group();
        let sleeper = grandchild(&mut leader);
        drop(Guard::start(pid(&leader)).expect("a guard"));
        std::thread::sleep(Duration::from_millis(300));
        let survived = running(sleeper);
        let _ = nix::sys::signal::killpg(pid(&leader), nix::sys::signal::Signal::SIGKILL);
        let _ = leader.wait();
        assert!(survived, "a dropped guard killed the group");
    }
}
