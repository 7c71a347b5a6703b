//! PostgreSQL's dynamic shared memory segments (`/dev/shm/PostgreSQL.N`): a server removes its
//! own when it stops, and a restarted cluster those of its last life; but a SIGKILLed server
//! whose cluster is never started again (a run whose supervisor was SIGKILLed, a throwaway
//! cluster) leaves them there for good. A live server need not map every segment of its own: one
//! pinned by a backend that has exited (the statistics' shared area grows so) waits unmapped for
//! the next backend to open it, and removing it fails every later connection. So a leftover is a
//! segment no process maps or holds open *and* older than every PostgreSQL process running now:
//! none of them can have made it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::backend::process::tree;

const DIR: &str = "/dev/shm";

/// Clock ticks and file times disagree by up to a tick; a second is room for both.
const MARGIN: Duration = Duration::from_secs(1);

/// Removes the segments in `/dev/shm` that no running server can own; returns them.
pub fn sweep() -> Vec<PathBuf> {
    sweep_in(Path::new(DIR), oldest_server_start())
}

/// `servers_since`: when the oldest PostgreSQL process running now started, if one runs.
fn sweep_in(dir: &Path, servers_since: Option<SystemTime>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let segments: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_segment)
        })
        .filter(|p| servers_since.is_none_or(|since| made_before(p, since)))
        .collect();
    if segments.is_empty() {
        return segments;
    }
    let used = in_use(dir);
    segments
        .into_iter()
        .filter(|p| !used.contains(p) && std::fs::remove_file(p).is_ok())
        .collect()
}

fn made_before(path: &Path, since: SystemTime) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|made| made + MARGIN < since)
}

/// When the longest-running process called `postgres` started (a server in a container too:
/// erring towards keeping a segment only leaves it for a later run).
fn oldest_server_start() -> Option<SystemTime> {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0)?;
    let boot = boot_time()?;
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "postgres")
        })
        .filter_map(tree::start_time)
        .min()
        .map(|start| boot + Duration::from_millis(start.saturating_mul(1000) / ticks))
}

/// The machine's boot, from the `btime` line of `/proc/stat`.
fn boot_time() -> Option<SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let seconds = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// `PostgreSQL.<digits>`, as `dsm_impl_posix` names them.
fn is_segment(name: &str) -> bool {
    name.strip_prefix("PostgreSQL.")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Every file under `dir` that some process maps or has open.
fn in_use(dir: &Path) -> HashSet<PathBuf> {
    let mut used = HashSet::new();
    let processes = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    for process in processes.filter(|p| p.file_name().to_string_lossy().parse::<u32>().is_ok()) {
        let maps = std::fs::read_to_string(process.path().join("maps")).unwrap_or_default();
        used.extend(
            maps.lines()
                .filter_map(|line| line.split_whitespace().nth(5))
                .map(PathBuf::from)
                .filter(|p| p.starts_with(dir)),
        );
        let fds = std::fs::read_dir(process.path().join("fd"))
            .into_iter()
            .flatten();
        used.extend(
            fds.flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .filter(|p| p.starts_with(dir)),
        );
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_segments_nobody_uses_go() {
        let dir = std::env::temp_dir().join(format!("anyplay-shm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let left = dir.join("PostgreSQL.4242");
        let open = dir.join("PostgreSQL.4343");
        let other = dir.join("PostgreSQL.conf");
        for path in [&left, &open, &other] {
            std::fs::write(path, b"x").unwrap();
        }
        let _held = std::fs::File::open(&open).unwrap();
        assert_eq!(sweep_in(&dir, None), vec![left.clone()]);
        assert!(!left.exists() && open.exists() && other.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_segment_younger_than_a_running_server_may_be_its_own_and_stays() {
        let dir = std::env::temp_dir().join(format!("anyplay-shm-age-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pinned = dir.join("PostgreSQL.1111");
        let older = dir.join("PostgreSQL.2222");
        std::fs::write(&pinned, b"x").unwrap();
        std::fs::write(&older, b"x").unwrap();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&older)
            .unwrap()
            .set_modified(hour_ago - Duration::from_secs(60))
            .unwrap();
        assert_eq!(sweep_in(&dir, Some(hour_ago)), vec![older.clone()]);
        assert!(pinned.exists() && !older.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_oldest_server_started_before_now() {
        let dir = std::env::temp_dir().join(format!("anyplay-shm-pg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let postgres = dir.join("postgres");
        std::fs::copy("/bin/sleep", &postgres).unwrap();
        let mut sleeper = std::process::Command::new(&postgres)
            .arg("30")
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let started = oldest_server_start();
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let started = started.expect("a process called postgres runs");
        assert!(started <= SystemTime::now());
        assert!(started > SystemTime::now() - Duration::from_secs(30 * 24 * 3600));
    }
}
