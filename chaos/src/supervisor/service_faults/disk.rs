//! A size-limited filesystem under a service's data: a tmpfs of a fixed size mounted where the
//! service keeps its data, so that `disk_full` can fill it (a filler file written until
//! ENOSPC) and empty it again (the filler deleted). A container sees it through the run
//! directory's bind mount when it lies there, or through a bind of its own.
//!
//! The mount's source names the supervisor that made it ([`Owner::to_name`]), as a mount
//! holds no marker file: a later run unmounts those of a supervisor that died.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::unistd::geteuid;

use super::FaultError;
use crate::backend::owner::Owner;
use crate::backend::RunAs;

/// A run's tmpfs has the source `anyplay-chaos-disk@<owner name>`.
const SOURCE: &str = "anyplay-chaos-disk@";
/// The file that fills the disk.
const FILLER: &str = "anyplay-chaos-filler";

/// Whether this machine lets us mount: root.
pub fn check_available() -> Result<(), String> {
    if geteuid().is_root() {
        Ok(())
    } else {
        Err("disk_full needs root (it mounts a size-limited tmpfs under the service's data)".into())
    }
}

/// A mounted tmpfs; unmounted on [`Disk::unmount`] or drop.
#[derive(Debug)]
pub struct Disk {
    path: PathBuf,
}

impl Disk {
    /// Unmounts what dead runs left, then mounts a tmpfs of `bytes` at `path` (made when
    /// missing, and empty), writable by `user` (else by root only; others may read).
    pub fn mount(path: &Path, bytes: u64, user: Option<&RunAs>) -> Result<Disk, FaultError> {
        check_available().map_err(FaultError::Unavailable)?;
        for left in sweep() {
            tracing::info!("unmounted {}, left by a run that died", left.display());
        }
        let io = |source| FaultError::Io {
            path: path.to_owned(),
            source,
        };
        std::fs::create_dir_all(path).map_err(io)?;
        if std::fs::read_dir(path).map_err(io)?.next().is_some() {
            return Err(FaultError::NotEmpty {
                path: path.to_owned(),
            });
        }
        let mut options = format!("size={bytes},mode=0755");
        if let Some(user) = user {
            options.push_str(&format!(",uid={},gid={}", user.uid, user.gid));
        }
        let source = format!("{SOURCE}{}", Owner::this().to_name());
        mount(
            Some(source.as_str()),
            path,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(options.as_str()),
        )
        .map_err(|source| FaultError::Mount {
            path: path.to_owned(),
            source,
        })?;
        Ok(Disk {
            path: path.to_owned(),
        })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the filler until the filesystem has no byte left.
    pub fn fill(&self) -> Result<(), FaultError> {
        let path = self.path.join(FILLER);
        let io = |source| FaultError::Io {
            path: path.clone(),
            source,
        };
        let mut file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let chunk = vec![0u8; 1 << 20];
        // A partial write takes what is left; the next one fails with ENOSPC.
        loop {
            match file.write_all(&chunk) {
                Ok(()) => {}
                Err(error) if error.raw_os_error() == Some(nix::libc::ENOSPC) => return Ok(()),
                Err(error) => return Err(io(error)),
            }
        }
    }

    /// Deletes the filler: the space is free again.
    pub fn clear(&self) -> Result<(), FaultError> {
        let path = self.path.join(FILLER);
        match std::fs::remove_file(&path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(FaultError::Io {
                path,
                source: error,
            }),
            _ => Ok(()),
        }
    }

    /// Unmounts it (lazily: a process that still has a file open there keeps it until it
    /// closes); again is a no-op.
    pub fn unmount(&self) {
        unmount(&self.path);
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.unmount();
    }
}

fn unmount(path: &Path) {
    match umount2(path, MntFlags::MNT_DETACH) {
        // EINVAL: not a mount point (any more); ENOENT: gone.
        Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => {}
        Err(error) => tracing::warn!("cannot unmount {}: {error}", path.display()),
    }
}

/// Unmounts every tmpfs of a provably dead owner; returns their mount points.
pub fn sweep() -> Vec<PathBuf> {
    let dead: Vec<PathBuf> = our_mounts()
        .into_iter()
        .filter(|(owner, _)| Owner::from_name(owner).is_some_and(|o| o.is_provably_dead()))
        .map(|(_, path)| path)
        .collect();
    for path in &dead {
        unmount(path);
    }
    dead
}

/// Unmounts every tmpfs of ours below `dir` (before `dir` is removed: a removal would
/// otherwise stop at the mount point, and the mount would stay).
pub(crate) fn unmount_below(dir: &Path) {
    for (_, path) in our_mounts() {
        if path.starts_with(dir) {
            unmount(&path);
        }
    }
}

/// `(owner name, mount point)` of every run's tmpfs this mount namespace has, deepest first.
fn our_mounts() -> Vec<(String, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<(String, PathBuf)> = text.lines().filter_map(parse_mountinfo).collect();
    mounts.sort_by_key(|(_, path)| std::cmp::Reverse(path.components().count()));
    mounts
}

/// One line of `/proc/self/mountinfo`: "id parent dev root MOUNT_POINT options [tags] -
/// FSTYPE SOURCE superoptions"; `Some` for a tmpfs whose source is ours.
fn parse_mountinfo(line: &str) -> Option<(String, PathBuf)> {
    let (before, after) = line.split_once(" - ")?;
    let mount_point = before.split(' ').nth(4)?;
    let mut after = after.split(' ');
    let (fstype, source) = (after.next()?, after.next()?);
    let owner = source.strip_prefix(SOURCE)?;
    (fstype == "tmpfs").then(|| (owner.to_owned(), PathBuf::from(unescape(mount_point))))
}

/// The kernel writes a space, tab, newline or backslash in a path as `\ooo` (octal).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest
            .get(at + 1..at + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_mounts_from_mountinfo() {
        let ours = "36 35 0:40 / /tmp/run\\040x/data rw,nosuid - tmpfs anyplay-chaos-disk@7@9_b_1 rw,size=1024k";
        assert_eq!(
            parse_mountinfo(ours),
            Some(("7@9_b_1".to_owned(), PathBuf::from("/tmp/run x/data")))
        );
        let other = "37 35 0:41 / /dev/shm rw shared:2 - tmpfs tmpfs rw";
        assert_eq!(parse_mountinfo(other), None);
    }

    #[test]
    fn a_dead_owner_s_tmpfs_is_unmounted_and_a_full_disk_refuses_writes() {
        let root = std::env::temp_dir().join(format!("anyplay-disk-unit-{}", std::process::id()));
        let (dead_at, live_at) = (root.join("dead"), root.join("live"));
        std::fs::create_dir_all(&dead_at).unwrap();
        let dead = Owner {
            process: "4194305@1".into(),
            ..Owner::this()
        };
        let source = format!("{SOURCE}{}", dead.to_name());
        mount(
            Some(source.as_str()),
            &dead_at,
            Some("tmpfs"),
            MsFlags::empty(),
            Some("size=1m"),
        )
        .expect("mount as root");

        let disk = Disk::mount(&live_at, 1 << 20, None).expect("a disk");
        let mounted = |path: &Path| our_mounts().iter().any(|(_, p)| p == path);
        assert!(!mounted(&dead_at), "the dead run's tmpfs was left");
        assert!(mounted(&live_at));
        disk.fill().expect("fill");
        let write = || std::fs::write(live_at.join("more"), [1u8; 8192]);
        assert_eq!(write().unwrap_err().raw_os_error(), Some(nix::libc::ENOSPC));
        disk.clear().expect("clear");
        write().expect("room again");
        drop(disk);
        assert!(!mounted(&live_at), "dropped, yet mounted");
        let _ = std::fs::remove_dir_all(&root);
    }
}
