//! The small files an operator names on a command line (certificates, keys, tokens, secrets,
//! configs, plans): read only when they are regular files of bounded size, so that a device
//! (`/dev/zero`), a FIFO or a wrong, huge file given by mistake is a clear error, not a hang
//! or the whole memory.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::fcntl::OFlag;

/// Far above any certificate bundle, token, config or plan.
pub const MAX_BYTES: u64 = 4 << 20;

/// The bytes of the regular file at `path`, at most [`MAX_BYTES`] of them.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    // Non-blocking: opening a FIFO must not wait for a writer.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {} MiB", MAX_BYTES >> 20),
        ));
    }
    Ok(bytes)
}

/// The text of the regular file at `path`, as [`read`] bounds it.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of this test's own, empty.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("anyplay-small-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_small_regular_file_is_read() {
        let dir = scratch("token");
        let path = dir.join("token");
        std::fs::write(&path, "s3cret\n").unwrap();
        assert_eq!(read_to_string(&path).unwrap(), "s3cret\n");
    }

    #[test]
    fn a_device_a_fifo_and_a_directory_are_refused_at_once() {
        let dir = scratch("fifo");
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for path in [Path::new("/dev/zero"), &fifo, &dir] {
            let refused = read(path).unwrap_err();
            assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{path:?}");
        }
    }

    #[test]
    fn a_file_past_the_bound_is_refused() {
        let dir = scratch("huge");
        let path = dir.join("huge");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(MAX_BYTES + 1)
            .unwrap();
        assert_eq!(read(&path).unwrap_err().kind(), io::ErrorKind::InvalidData);
    }
}
