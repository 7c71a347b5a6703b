//! Files the supervisor writes into a run directory. It runs as root, and a run directory may
//! be anybody's (`report DIR`, `run --out DIR`): a name there that is a symlink, or a file with
//! another name elsewhere (a hard link), is refused and left as it is, so nothing outside the
//! directory is ever written or truncated through it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use nix::fcntl::OFlag;

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
