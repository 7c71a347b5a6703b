//! A node's wall clock that a test steps, as a bad NTP step would: the node runs with
//! libfaketime preloaded and reads the offset from a file of the test's own. Only the
//! wall clock moves (`DONT_FAKE_MONOTONIC`); the monotonic clock goes on as before.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use super::TestNode;

/// Debian's `libfaketime` package.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The offset file of one faked clock, in a directory removed on drop.
pub struct SteppedClock {
    dir: PathBuf,
    /// Processes seen on this clock: libfaketime leaves a semaphore and a shared memory
    /// object in /dev/shm named after each, removed on drop.
    pids: std::sync::Mutex<Vec<u32>>,
}

impl SteppedClock {
    /// A clock that tells the true time until [`SteppedClock::step`].
    pub fn new() -> SteppedClock {
        assert!(
            Path::new(LIBFAKETIME).exists(),
            "{LIBFAKETIME} is missing: the clock tests need Debian's libfaketime"
        );
        let dir = std::env::temp_dir().join(format!(
            "anyplay-clock-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("clock directory");
        let clock = SteppedClock {
            dir,
            pids: std::sync::Mutex::new(Vec::new()),
        };
        clock.step(0);
        clock
    }

    fn offset_file(&self) -> PathBuf {
        self.dir.join("offset")
    }

    /// The environment that puts a node on this clock.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("LD_PRELOAD", LIBFAKETIME.to_string()),
            (
                "FAKETIME_TIMESTAMP_FILE",
                self.offset_file().display().to_string(),
            ),
            // The file is read again once a second.
            ("FAKETIME_CACHE_DURATION", "1".to_string()),
            ("DONT_FAKE_MONOTONIC", "1".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Sets the clock `seconds` off the true time (negative: behind).
    pub fn step(&self, seconds: i64) {
        // Written whole, then renamed in: a node never reads half an offset.
        let next = self.dir.join("offset.next");
        std::fs::write(&next, format!("{seconds:+}s\n")).expect("write the clock offset");
        std::fs::rename(&next, self.offset_file()).expect("set the clock offset");
    }

    /// Waits until the clock's step by `seconds` is in effect on `node`: the node runs
    /// with libfaketime loaded, a program on this clock reads that offset, and the node
    /// has read the offset file again since. (A node's own answers cannot show it: after
    /// a step back, the `Date` it sends stays as it was until the clock catches up.)
    pub async fn seen_by(&self, node: &TestNode, seconds: i64) {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", node.pid()))
            .expect("the node's memory map");
        assert!(
            maps.contains("libfaketime"),
            "node {} runs without libfaketime",
            node.id
        );
        let probe = Command::new("date")
            .arg("+%s")
            .envs(self.env())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run date on the faked clock");
        self.noted(&[node.pid(), probe.id()]);
        let probe = probe.wait_with_output().expect("date's output");
        let shown: i64 = String::from_utf8_lossy(&probe.stdout)
            .trim()
            .parse()
            .expect("seconds since the epoch");
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("after the epoch")
            .as_secs() as i64;
        assert!(
            (shown - now - seconds).abs() <= 2,
            "the faked clock is {} s off the true time, not {seconds} s",
            shown - now
        );
        // FAKETIME_CACHE_DURATION: the node reads the file again within a second.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

impl SteppedClock {
    fn noted(&self, pids: &[u32]) {
        self.pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(pids);
    }
}

impl Drop for SteppedClock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let pids = self.pids.lock().unwrap_or_else(|e| e.into_inner());
        for pid in pids.iter() {
            let _ = std::fs::remove_file(format!("/dev/shm/faketime_shm_{pid}"));
            let _ = std::fs::remove_file(format!("/dev/shm/sem.faketime_sem_{pid}"));
        }
    }
}
