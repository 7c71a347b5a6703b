//! Run directories and the files the supervisor reads and writes there. It runs as root, and a
//! run directory may be anybody's (`report DIR`, `run --out DIR`, `rerun DIR`): a directory
//! that is a symlink, or one holding a symlink, a hard link or a device anywhere beneath it, is
//! refused before anything is written (every child writes in it too: a node's database, a
//! client's files, a disk mounted on a data directory); so is one that others than root could
//! plant such a name in while the run writes. A file name that is a symlink or a hard link is
//! refused again at each open, and left as it is: nothing outside the directory is ever
//! written, truncated or read through it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

/// A symlink the supervisor itself puts in a run directory, and replaces before each use: a
/// PostgreSQL cluster run as `postgres` lives in a scratch directory that user can reach.
const OWN_LINKS: [&str; 1] = [crate::supervisor::services::postgres::NAME];

/// Makes `dir` (and its parents) if missing, or checks an existing one; returns its canonical
/// path. Refused: a `dir` that is a symlink or holds what the supervisor would write through
/// (a symlink, a hard link, a FIFO or a device anywhere beneath it), and a `dir` that others
/// than root can write in, or below a directory they can rename it in.
pub fn prepare_dir(dir: &Path) -> io::Result<PathBuf> {
    if let Ok(meta) = dir.symlink_metadata() {
        if meta.is_symlink() {
            return Err(refused(format!(
                "{} is a symlink: name the directory itself",
                dir.display()
            )));
        }
    }
    std::fs::create_dir_all(dir)?;
    let dir = check_dir(dir)?;
    nothing_planted(&dir, true)?;
    Ok(dir)
}

/// A directory that must exist and is written at its top only (`report DIR`, where every
/// file is opened refusing links): not a symlink, and only root can write in it or rename it;
/// returns its canonical path.
pub fn check_dir(dir: &Path) -> io::Result<PathBuf> {
    let meta = dir.symlink_metadata()?;
    if meta.is_symlink() || !meta.is_dir() {
        return Err(refused(format!(
            "{} is {}: name the directory itself",
            dir.display(),
            if meta.is_symlink() {
                "a symlink"
            } else {
                "no directory"
            }
        )));
    }
    let dir = dir.canonicalize()?;
    only_root_writes(&dir)?;
    Ok(dir)
}

/// Reads the whole of `path` in a run directory, refusing a symlink as its last name, a hard
/// link, a FIFO and a device: a run directory must not make the supervisor show another file
/// or wait on a pipe.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(refused(
            "not a file of its own (a hard link, or no regular file): not read".into(),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// As [`read`], as text.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn refused(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message)
}

/// `dir` and every directory above it: owned by root, this user or the user who ran `sudo`
/// (who is root already), and writable by nobody else, except a sticky directory above `dir`
/// (`/tmp`), where only `dir`'s owner may rename it.
fn only_root_writes(dir: &Path) -> io::Result<()> {
    let me = nix::unistd::geteuid().as_raw();
    let sudoer = std::env::var("SUDO_UID")
        .ok()
        .and_then(|uid| uid.parse::<u32>().ok());
    let trusted = |uid: u32| uid == 0 || uid == me || Some(uid) == sudoer;
    for (depth, at) in dir.ancestors().enumerate() {
        let meta = at.metadata()?;
        let mode = meta.mode() & 0o7777;
        let sticky = mode & 0o1000 != 0 && depth > 0;
        let others_write = mode & 0o022 != 0;
        if !trusted(meta.uid()) || (others_write && !sticky) {
            return Err(refused(format!(
                "{} is owned by uid {} with mode {mode:o}: others than root could plant links \
                 in the run directory {} while the run writes there; choose a directory only \
                 root can write in",
                at.display(),
                meta.uid(),
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Nothing beneath `dir` that a write or a mount would go through: no symlink (but the
/// supervisor's own, at the top), no hard link, no FIFO and no device.
fn nothing_planted(dir: &Path, top: bool) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = path.symlink_metadata()?;
        let kind = meta.file_type();
        let planted = if kind.is_symlink() {
            let own = top && OWN_LINKS.iter().any(|name| entry.file_name() == *name);
            (!own).then_some("a symlink")
        } else if kind.is_dir() {
            nothing_planted(&path, false)?;
            None
        } else if kind.is_fifo() || kind.is_char_device() || kind.is_block_device() {
            Some("a FIFO or a device")
        } else if kind.is_file() && meta.nlink() != 1 {
            Some("a hard link")
        } else {
            None
        };
        if let Some(what) = planted {
            return Err(refused(format!(
                "{} is {what}: a run directory holds only what the supervisor wrote there; \
                 remove it or choose another directory",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Opens `path` for writing, made if missing: emptied (`append` false) or at its end.
fn open(path: &Path, append: bool) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .append(append)
        .create(true)
        // A symlink as the last name fails (ELOOP) instead of being followed; a FIFO with no
        // reader fails (ENXIO) instead of holding the run up.
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)?;
    let meta = file.metadata()?;
    // A character device (/dev/null, /dev/full) is only ever made by root.
    let own_file = meta.is_file() && meta.nlink() == 1;
    if !own_file && !meta.file_type().is_char_device() {
        return Err(io::Error::other(format!(
            "{} is not a file of its own (a hard link, or no regular file): not written",
            path.display()
        )));
    }
    // Emptied only now that it is known to be this directory's own file.
    if !append && own_file {
        file.set_len(0)?;
    }
    Ok(file)
}

/// Creates or empties `path`, refusing a symlink or a hard link.
pub fn create(path: &Path) -> io::Result<File> {
    open(path, false)
}

/// Opens `path` to append, made if missing, refusing a symlink or a hard link.
pub fn append(path: &Path) -> io::Result<File> {
    open(path, true)
}

/// Writes `contents` as the whole of `path`, refusing a symlink or a hard link.
pub fn write(path: &Path, contents: impl AsRef<[u8]>) -> io::Result<()> {
    create(path)?.write_all(contents.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("anyplay-run-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_symlink_or_a_hard_link_in_a_run_directory_is_refused_and_its_target_kept() {
        let dir = scratch("links");
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let run = dir.join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::os::unix::fs::symlink(&victim, run.join("report.json")).unwrap();
        std::fs::hard_link(&victim, run.join("summary.md")).unwrap();
        nix::unistd::mkfifo(&run.join("events.jsonl"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        for name in ["report.json", "summary.md", "events.jsonl"] {
            assert!(write(&run.join(name), "x").is_err(), "{name} was written");
            assert!(append(&run.join(name)).is_err(), "{name} was opened");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_directory_holding_or_being_a_link_is_refused_before_anything_is_written() {
        let dir = scratch("planted");
        let victim = dir.join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        for (name, plant) in [
            ("logs", "dir-link"),
            ("cloud.db", "file-link"),
            ("node-1-data", "dir-link"),
            ("clients/rider/client.json", "file-link"),
            ("load.json", "hard-link"),
            ("events.jsonl", "fifo"),
        ] {
            let run = dir.join(format!("run-{}", name.replace('/', "-")));
            let path = run.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            match plant {
                "dir-link" | "file-link" => std::os::unix::fs::symlink(&victim, &path).unwrap(),
                "hard-link" => {
                    std::fs::write(victim.join("file"), "precious").unwrap();
                    std::fs::hard_link(victim.join("file"), &path).unwrap();
                }
                _ => nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap(),
            }
            let err = prepare_dir(&run).unwrap_err().to_string();
            assert!(err.contains(&path.display().to_string()), "{name}: {err}");
        }
        let link = dir.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(prepare_dir(&link)
            .unwrap_err()
            .to_string()
            .contains("is a symlink"));
        assert!(check_dir(&link)
            .unwrap_err()
            .to_string()
            .contains("is a symlink"));
        // The supervisor's own link to its PostgreSQL scratch is replaced before each use.
        let own = dir.join("own");
        std::fs::create_dir_all(&own).unwrap();
        std::os::unix::fs::symlink(&victim, own.join("postgres")).unwrap();
        assert_eq!(prepare_dir(&own).unwrap(), own.canonicalize().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_directory_others_can_write_in_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = scratch("writable");
        let open = dir.join("open");
        std::fs::create_dir_all(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(prepare_dir(&open)
            .unwrap_err()
            .to_string()
            .contains("mode 777"));
        // Below a world-writable directory without the sticky bit, anyone may rename it.
        let inside = open.join("run");
        assert!(prepare_dir(&inside)
            .unwrap_err()
            .to_string()
            .contains("mode 777"));
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        prepare_dir(&inside).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reading_refuses_a_link_a_fifo_and_a_device() {
        let dir = scratch("read");
        std::fs::write(dir.join("victim"), "secret").unwrap();
        std::os::unix::fs::symlink(dir.join("victim"), dir.join("plan.yaml")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("events.jsonl")).unwrap();
        std::fs::hard_link(dir.join("victim"), dir.join("load.json")).unwrap();
        nix::unistd::mkfifo(&dir.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        for name in ["plan.yaml", "events.jsonl", "load.json", "fifo"] {
            assert!(read(&dir.join(name)).is_err(), "{name} was read");
        }
        std::fs::write(dir.join("own"), "mine").unwrap();
        assert_eq!(read_to_string(&dir.join("own")).unwrap(), "mine");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_of_its_own_is_made_emptied_and_appended_to() {
        let dir = scratch("own");
        let path = dir.join("plan.yaml");
        write(&path, "first, longer").unwrap();
        write(&path, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        append(&path).unwrap().write_all(b" and more").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second and more");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
