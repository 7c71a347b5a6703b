//! A directory for the length of one run, outside the run directory: for files that a service
//! running as another user must reach (PostgreSQL as `postgres` cannot enter a run directory
//! inside a `mktemp -d`, mode 700). It is made in the system's temporary directory and marked
//! with its owner; the run's end removes it, and a later run removes one whose supervisor is
//! provably dead (SIGKILLed: no end ran).

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::geteuid;

use crate::backend::owner::Owner;
use crate::supervisor::service_faults::{clock, disk};

/// Every scratch directory's name starts so.
const PREFIX: &str = "anyplay-chaos-";
/// The file in a scratch directory that names its owner.
const MARKER: &str = "owner";

/// A run's scratch directory; removed on [`Scratch::remove`] or drop, whichever comes first.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Removes what dead runs left in `root`, then makes `<root>/anyplay-chaos-<what>-XXXXXX`
    /// (mode 755: others may pass) marked as this process's.
    pub fn create(root: &Path, what: &str) -> io::Result<Scratch> {
        // A dead run's tmpfs may lie in its scratch directory: unmounted first, or the
        // directory could not be removed.
        for left in disk::sweep() {
            tracing::info!("unmounted {}, left by a run that died", left.display());
        }
        for left in sweep(root) {
            tracing::info!("removed {}, left by a run that died", left.display());
        }
        let path = nix::unistd::mkdtemp(&root.join(format!("{PREFIX}{what}-XXXXXX")))?;
        let scratch = Scratch { path };
        std::fs::set_permissions(&scratch.path, std::fs::Permissions::from_mode(0o755))?;
        std::fs::write(scratch.path.join(MARKER), Owner::this().to_text())?;
        Ok(scratch)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything in it (unmounting the run's tmpfs there first);
    /// again is a no-op.
    pub fn remove(&self) {
        disk::unmount_below(&self.path);
        match std::fs::remove_dir_all(&self.path) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => tracing::warn!("cannot remove {}: {error}", self.path.display()),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes the scratch directories in `root` that are ours to judge (our user's, not links) and
/// whose marker names a provably dead owner; returns them.
pub(crate) fn sweep(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let me = geteuid().as_raw();
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(PREFIX))
        .map(|entry| entry.path())
        .filter(|path| {
            path.symlink_metadata()
                .is_ok_and(|meta| meta.is_dir() && meta.uid() == me)
        })
        .filter(|path| {
            std::fs::read_to_string(path.join(MARKER))
                .ok()
                .and_then(|text| Owner::from_text(&text))
                .is_some_and(|owner| owner.is_provably_dead())
        })
        .filter(|path| {
            // A dead run's clock directory names the shared memory libfaketime left.
            clock::remove_shared_memory(path);
            std::fs::remove_dir_all(path).is_ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left_by(root: &Path, name: &str, owner: &Owner) -> PathBuf {
        let dir = root.join(format!("{PREFIX}{name}"));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join(MARKER), owner.to_text()).unwrap();
        dir
    }

    #[test]
    fn a_new_run_removes_only_what_provably_dead_runs_left() {
        let root = std::env::temp_dir().join(format!("anyplay-scratch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let me = Owner::this();
        let dead = left_by(
            &root,
            "dead",
            &Owner {
                process: "4194305@1".into(),
                ..me.clone()
            },
        );
        let alive = left_by(&root, "alive", &me);
        let foreign = left_by(
            &root,
            "foreign",
            &Owner {
                host: "another-host/1".into(),
                process: "4194305@1".into(),
            },
        );
        let unmarked = root.join(format!("{PREFIX}unmarked"));
        std::fs::create_dir_all(&unmarked).unwrap();

        let scratch = Scratch::create(&root, "postgres").unwrap();
        assert!(!dead.exists(), "a dead run's directory was kept");
        for kept in [&alive, &foreign, &unmarked] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        let made = scratch.path().to_owned();
        assert!(made.starts_with(&root));
        let mode = made.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let marker = std::fs::read_to_string(made.join(MARKER)).unwrap();
        assert_eq!(Owner::from_text(&marker), Some(me));
        drop(scratch);
        assert!(!made.exists(), "the run's end removes it");
        let _ = std::fs::remove_dir_all(&root);
    }
}
