//! A process tree read from `/proc`: a leader and every descendant, each remembered with its start
//! time so that a pid reused by someone else is never taken for ours.
//!
//! Process groups are not enough: PostgreSQL's children call `setsid()`, so signalling the
//! postmaster's group misses every backend.

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// One process, as `/proc/<pid>/stat` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    pub(crate) pid: Pid,
    /// Clock ticks after boot; with the pid, unique for the machine's uptime.
    start: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    state: char,
    ppid: i32,
    start: u64,
}

/// `root` and all its descendants that are alive now (zombies do not count).
pub(crate) fn tree(root: Pid) -> Vec<Proc> {
    let all = all_processes();
    let mut found: Vec<Proc> = all
        .iter()
        .filter(|(pid, stat)| *pid == root.as_raw() && running(stat))
        .map(|(pid, stat)| proc(*pid, stat))
        .collect();
    let mut next = 0;
    while let Some(parent) = found.get(next).map(|p| p.pid.as_raw()) {
        found.extend(
            all.iter()
                .filter(|(_, stat)| stat.ppid == parent && running(stat))
                .map(|(pid, stat)| proc(*pid, stat)),
        );
        next += 1;
    }
    found
}

/// True while `process` (the same pid *and* start time) runs and is not a zombie.
pub(crate) fn alive(process: &Proc) -> bool {
    start_time(process.pid.as_raw()) == Some(process.start)
}

/// When the process `pid` started (clock ticks after boot), while it runs and is not a zombie.
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    read_stat(pid).filter(running).map(|stat| stat.start)
}

/// Sends `signal` to each process of `tree` that is still the one we saw.
pub(crate) fn signal_all(tree: &[Proc], signal: Signal) -> Result<(), Errno> {
    for process in tree.iter().filter(|p| alive(p)) {
        match kill(process.pid, signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

fn proc(pid: i32, stat: &Stat) -> Proc {
    Proc {
        pid: Pid::from_raw(pid),
        start: stat.start,
    }
}

fn running(stat: &Stat) -> bool {
    !matches!(stat.state, 'Z' | 'X')
}

fn all_processes() -> Vec<(i32, Stat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter_map(|pid| Some((pid, read_stat(pid)?)))
        .collect()
}

fn read_stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Parses "pid (comm) S ppid pgrp session tty tpgid flags … starttime …". The command name may
/// hold spaces and parentheses, so fields count from the last `)`; starttime is field 22.
fn parse_stat(stat: &str) -> Option<Stat> {
    let (_, rest) = stat.rsplit_once(") ")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines() {
        let line = "4242 (postgres: a (b)) S 4200 4242 4242 0 -1 4194560 120 0 0 0 0 0 0 0 20 0 \
                    1 0 987654 170000000 1000 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                state: 'S',
                ppid: 4200,
                start: 987_654
            })
        );
        assert_eq!(parse_stat("7 (sleep) Z 1 6"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn finds_children_and_grandchildren() {
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .expect("spawn");
        let root = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut found = tree(root);
        while found.len() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            found = tree(root);
        }
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0].pid, root);
        assert!(found.iter().all(alive));
        signal_all(&found, Signal::SIGKILL).expect("kill");
        let _ = child.wait();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while found.iter().any(alive) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!found.iter().any(alive));
    }
}
