//! The external [`CodeSource`]: tails the cloud's mail-log file, one line per code,
//! `<rfc3339> to=<email> code=<6 digits>`.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use crate::error::LoadError;
use crate::sync::lock;
use crate::target::CodeSource;

/// How long a player waits for its code before the sign-in fails.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// How often the file is read while someone waits; many waiters share each read. The code
/// is usually there already (the sink flushes before the cloud answers), so this bounds the
/// added login latency.
const POLL: Duration = Duration::from_millis(2);

/// Codes seen in the mail log since the harness opened it.
pub struct MailLog {
    path: PathBuf,
    wait: Duration,
    tail: Mutex<Tail>,
}

struct Tail {
    /// The file being tailed, kept open between reads, with its identity `(dev, ino)`.
    file: Option<(File, (u64, u64))>,
    offset: u64,
    /// The end of the file when it does not end in a newline yet.
    partial: Vec<u8>,
    /// The newest unread code per email.
    codes: HashMap<String, String>,
    last_read: Option<Instant>,
}

/// `(email, code)` of one mail-log line.
pub fn parse_line(line: &str) -> Option<(&str, &str)> {
    let mut fields = line.split_whitespace();
    fields.next()?; // the time
    let email = fields.next()?.strip_prefix("to=")?;
    let code = fields.next()?.strip_prefix("code=")?;
    (code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit())).then_some((email, code))
}

impl MailLog {
    /// Starts at the file's current end, so codes of earlier runs are never used; a file that
    /// does not exist yet is read from its start once the cloud creates it.
    pub fn open(path: &Path, wait: Duration) -> Result<MailLog, LoadError> {
        let offset = match std::fs::metadata(path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => {
                return Err(LoadError::MailLog {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let tail = Tail {
            file: None,
            offset,
            partial: Vec::new(),
            codes: HashMap::new(),
            last_read: None,
        };
        Ok(MailLog {
            path: path.to_path_buf(),
            wait,
            tail: Mutex::new(tail),
        })
    }

    /// Takes the newest unread code of `email`, reading what the file gained since the last read.
    ///
    /// The read is synchronous on purpose: what a local file gained since the last read takes
    /// a few microseconds to read (two system calls), where `tokio::fs` would hand every step
    /// (open, stat, seek, read) to the blocking pool, two thread switches apiece, for each login.
    fn take(&self, email: &str) -> Result<Option<String>, LoadError> {
        let mut tail = lock(&self.tail);
        if let Some(code) = tail.codes.remove(email) {
            return Ok(Some(code));
        }
        if tail.last_read.is_none_or(|at| at.elapsed() >= POLL) {
            let fresh = tail
                .read_new(&self.path)
                .map_err(|source| LoadError::MailLog {
                    path: self.path.clone(),
                    source,
                })?;
            tail.last_read = Some(Instant::now());
            if fresh {
                return Ok(tail.codes.remove(email));
            }
        }
        Ok(None)
    }
}

impl Tail {
    /// Reads appended bytes into `codes`; true when a line was added.
    fn read_new(&mut self, path: &Path) -> std::io::Result<bool> {
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let identity = (meta.dev(), meta.ino());
        let replaced = self.file.as_ref().is_some_and(|(_, id)| *id != identity);
        if replaced || meta.len() < self.offset {
            // Truncated or replaced: start over.
            self.file = None;
            self.offset = 0;
            self.partial.clear();
        }
        if meta.len() == self.offset {
            return Ok(false);
        }
        let file = match &self.file {
            Some((file, _)) => file,
            None => &self.file.insert((File::open(path)?, identity)).0,
        };
        let mut bytes = std::mem::take(&mut self.partial);
        let start = bytes.len();
        // What the file held at the stat; a line appended since is read next time.
        bytes.resize(
            start + usize::try_from(meta.len() - self.offset).unwrap_or(0),
            0,
        );
        let mut filled = start;
        while filled < bytes.len() {
            match file.read_at(&mut bytes[filled..], self.offset)? {
                0 => break,
                read => {
                    filled += read;
                    self.offset += read as u64;
                }
            }
        }
        bytes.truncate(filled);
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.partial = bytes.split_off(complete);
        let mut added = false;
        for line in String::from_utf8_lossy(&bytes).lines() {
            if let Some((email, code)) = parse_line(line) {
                self.codes.insert(email.to_string(), code.to_string());
                added = true;
            }
        }
        Ok(added)
    }
}

impl CodeSource for MailLog {
    fn code_for<'a>(&'a self, email: &'a str) -> BoxFuture<'a, Result<String, LoadError>> {
        Box::pin(async move {
            let deadline = Instant::now() + self.wait;
            loop {
                if let Some(code) = self.take(email)? {
                    return Ok(code);
                }
                if Instant::now() >= deadline {
                    return Err(LoadError::NoCode {
                        email: email.to_string(),
                        waited: self.wait,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_parse_to_email_and_code() {
        assert_eq!(
            parse_line("2025-01-01T00:00:00Z to=a.1@load.test code=012345"),
            Some(("a.1@load.test", "012345"))
        );
        assert_eq!(parse_line("2025-01-01T00:00:00Z to=a@b.c code=12345"), None);
        assert_eq!(parse_line("garbage"), None);
    }

    #[tokio::test]
    async fn waits_for_the_newest_code_and_ignores_earlier_runs() {
        let path =
            std::env::temp_dir().join(format!("anyplay-load-mail-{}.log", std::process::id()));
        let mut file = std::fs::File::create(&path).expect("temp file");
        writeln!(file, "2025-01-01T00:00:00Z to=a@x.test code=111111").expect("write");
        let log = MailLog::open(&path, Duration::from_secs(5)).expect("open");
        let writer = {
            let path = path.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .expect("reopen");
                // A line written in two pieces, then a newer code for the same email.
                write!(file, "2025-01-01T00:00:01Z to=a@x.test ").expect("write");
                file.flush().expect("flush");
                tokio::time::sleep(Duration::from_millis(30)).await;
                writeln!(file, "code=222222").expect("write");
                writeln!(file, "2025-01-01T00:00:02Z to=a@x.test code=333333").expect("write");
            })
        };
        let code = log.code_for("a@x.test").await.expect("a code");
        writer.await.expect("writer");
        assert!(code == "222222" || code == "333333", "got {code}");
        let short = MailLog::open(&path, Duration::from_millis(50)).expect("open");
        assert!(matches!(
            short.code_for("b@x.test").await,
            Err(LoadError::NoCode { .. })
        ));
        std::fs::remove_file(&path).expect("cleanup");
    }
}
