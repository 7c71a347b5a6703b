//! A skewed wall clock, as a bad NTP would make it: the service runs from its start with
//! libfaketime preloaded, which reads the offset from a file of the run (again at most once a
//! second), so `clock` only rewrites that file. Monotonic clocks are left alone: timers and
//! elapsed times still run true. Programs that read the clock without the C library (Go's
//! runtime, so nats-server) do not see the offset.

use std::io;
use std::path::{Path, PathBuf};

use super::FaultError;
use crate::supervisor::services::scratch::Scratch;

/// libfaketime's thread-safe build (Debian's `faketime` package).
pub const LIBRARY: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
/// The offset file's name in its scratch directory.
const FILE: &str = "offset";

/// Whether libfaketime is installed.
pub fn check_available() -> Result<(), String> {
    if Path::new(LIBRARY).is_file() {
        Ok(())
    } else {
        Err(format!(
            "clock faults need libfaketime ({LIBRARY} is missing): apt-get install faketime"
        ))
    }
}

/// One service's offset file, in a scratch directory of its own (others may read it: the
/// service may run as another user, or in a container).
#[derive(Debug)]
pub struct Clock {
    scratch: Scratch,
}

impl Clock {
    /// A file saying "no offset" for `service`.
    pub fn create(service: &str) -> Result<Clock, FaultError> {
        check_available().map_err(FaultError::Unavailable)?;
        let root = std::env::temp_dir();
        let scratch = Scratch::create(&root, &format!("clock-{service}"))
            .map_err(|source| FaultError::Io { path: root, source })?;
        let clock = Clock { scratch };
        clock.set(0).map_err(|source| FaultError::Io {
            path: clock.file(),
            source,
        })?;
        Ok(clock)
    }

    /// The file libfaketime reads.
    pub fn file(&self) -> PathBuf {
        self.scratch.path().join(FILE)
    }

    /// What the service's environment gets.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("LD_PRELOAD", LIBRARY.to_owned()),
            ("FAKETIME_TIMESTAMP_FILE", self.file().display().to_string()),
            // Read again once a second, not on every call.
            ("FAKETIME_CACHE_DURATION", "1".to_owned()),
            ("DONT_FAKE_MONOTONIC", "1".to_owned()),
        ]
        .map(|(key, value)| (key.to_owned(), value))
        .into()
    }

    /// What a container must see at the same paths: the library and the file's directory
    /// (the directory, because the file is replaced by a rename).
    pub fn binds(&self) -> Vec<PathBuf> {
        vec![PathBuf::from(LIBRARY), self.scratch.path().to_owned()]
    }

    /// Moves the service's wall clock `offset_ms` away from the true time (0: true again).
    pub fn set(&self, offset_ms: i64) -> io::Result<()> {
        let next = self.scratch.path().join(format!("{FILE}.next"));
        std::fs::write(&next, offset_text(offset_ms))?;
        // Whole, never half written: a reader sees the old file or the new one.
        std::fs::rename(&next, self.file())
    }

    /// Notes an instance that loaded libfaketime, whose shared memory is removed with the clock.
    pub fn started(&self, pid: u32) {
        use std::io::Write;
        let noted = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.scratch.path().join(PIDS))
            .and_then(|mut file| writeln!(file, "{pid}"));
        if let Err(error) = noted {
            tracing::warn!("cannot note pid {pid} for libfaketime's clean-up: {error}");
        }
    }

    /// Removes the file and its directory, and the shared memory libfaketime left in
    /// `/dev/shm` for the instances; again is a no-op.
    pub fn remove(&self) {
        remove_shared_memory(self.scratch.path());
        self.scratch.remove();
    }
}

impl Drop for Clock {
    fn drop(&mut self) {
        // Before the scratch directory (a field, dropped after this) takes the pid list along.
        remove_shared_memory(self.scratch.path());
    }
}

/// The file in a clock's directory listing the pids of the instances that loaded libfaketime.
const PIDS: &str = "pids";

/// libfaketime (0.9.10) makes a semaphore and a shared memory object named after the first
/// process that loads it, and never removes them: they go with the clock, or with the next
/// run's sweep of a dead one's clock directories (call before those directories go).
pub fn remove_shared_memory(clock_dir: &Path) {
    let pids = std::fs::read_to_string(clock_dir.join(PIDS)).unwrap_or_default();
    for pid in pids
        .lines()
        .filter_map(|line| line.trim().parse::<u32>().ok())
    {
        for name in [
            format!("faketime_shm_{pid}"),
            format!("sem.faketime_sem_{pid}"),
        ] {
            match std::fs::remove_file(Path::new("/dev/shm").join(&name)) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => tracing::warn!("cannot remove /dev/shm/{name}: {error}"),
            }
        }
    }
}

/// libfaketime's relative offset, e.g. `+30.000s` or `-0.250s`.
fn offset_text(offset_ms: i64) -> String {
    let sign = if offset_ms < 0 { '-' } else { '+' };
    let abs = offset_ms.unsigned_abs();
    format!("{sign}{}.{:03}s\n", abs / 1000, abs % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_libfaketime_offsets() {
        assert_eq!(offset_text(30_000), "+30.000s\n");
        assert_eq!(offset_text(-10_250), "-10.250s\n");
        assert_eq!(offset_text(0), "+0.000s\n");
    }

    #[test]
    fn a_clock_file_starts_true_and_goes_with_its_clock() {
        let clock = Clock::create("unit-test").expect("libfaketime is installed");
        let file = clock.file();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "+0.000s\n");
        clock.set(1500).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "+1.500s\n");
        assert!(clock
            .env()
            .iter()
            .any(|(k, v)| k == "LD_PRELOAD" && v == LIBRARY));
        drop(clock);
        assert!(!file.exists());
    }
}
