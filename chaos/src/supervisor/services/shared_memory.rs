//! PostgreSQL's dynamic shared memory segments (`/dev/shm/PostgreSQL.N`): a server removes its
//! own when it stops, and a restarted cluster those of its last life; but a SIGKILLed server
//! whose cluster is never started again (a run whose supervisor was SIGKILLed, a throwaway
//! cluster) leaves them there for good. A segment no process maps or holds open is such a
//! leftover: a live server keeps every segment of its own mapped.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

const DIR: &str = "/dev/shm";

/// Removes the segments in `/dev/shm` that no process uses; returns them.
pub fn sweep() -> Vec<PathBuf> {
    sweep_in(Path::new(DIR))
}

fn sweep_in(dir: &Path) -> Vec<PathBuf> {
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
        assert_eq!(sweep_in(&dir), vec![left.clone()]);
        assert!(!left.exists() && open.exists() && other.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
