//! Mail sinks for sign-in codes: a log file (one line per code, flushed at once,
//! readable by its owner only)
//! or memory (for a cloud inside the load harness). Nothing else depends on how
//! a code travels, so an SMTP sink can be added beside these.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::config::MailSinkConfig;

#[derive(Debug, thiserror::Error)]
#[error("cannot write the mail log {path}: {source}")]
pub struct MailError {
    path: PathBuf,
    source: std::io::Error,
}

#[derive(Clone)]
pub enum MailSink {
    Log(Arc<LogSink>),
    Memory(MemoryMail),
}

pub struct LogSink {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl MailSink {
    pub fn open(config: &MailSinkConfig) -> Result<MailSink, MailError> {
        match config {
            MailSinkConfig::Log(path) => {
                let file = open_append(path).map_err(|source| MailError {
                    path: path.clone(),
                    source,
                })?;
                Ok(MailSink::Log(Arc::new(LogSink {
                    path: path.clone(),
                    file: Mutex::new(file),
                })))
            }
            MailSinkConfig::Memory(memory) => Ok(MailSink::Memory(memory.clone())),
        }
    }

    /// Delivers a sign-in code.
    pub fn send_code(&self, email: &str, code: &str) -> Result<(), MailError> {
        match self {
            MailSink::Log(sink) => {
                let line = format!(
                    "{} to={email} code={code}\n",
                    crate::store::rfc3339(crate::store::now_ms())
                );
                let mut file = sink.file.lock().unwrap_or_else(|p| p.into_inner());
                file.write_all(line.as_bytes())
                    .and_then(|_| file.flush())
                    .map_err(|source| MailError {
                        path: sink.path.clone(),
                        source,
                    })
            }
            MailSink::Memory(memory) => {
                memory.put(email, code);
                Ok(())
            }
        }
    }
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    // The codes sign anyone in: the owner alone may read them, whatever the umask.
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    // The mode applies only to a new file; an older one is narrowed.
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Codes kept in process: the newest code per address, and a wake-up for waiters.
/// Clones share one box, so several in-process nodes can deliver into it.
#[derive(Clone, Default)]
pub struct MemoryMail {
    inner: Arc<MemoryInner>,
}

impl std::fmt::Debug for MemoryMail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryMail")
    }
}

impl PartialEq for MemoryMail {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for MemoryMail {}

#[derive(Default)]
struct MemoryInner {
    codes: Mutex<HashMap<String, String>>,
    arrived: Notify,
}

impl MemoryMail {
    fn put(&self, email: &str, code: &str) {
        let mut codes = self.inner.codes.lock().unwrap_or_else(|p| p.into_inner());
        codes.insert(email.to_string(), code.to_string());
        drop(codes);
        self.inner.arrived.notify_waiters();
    }

    /// Takes the newest code sent to `email`, waiting for it to arrive.
    pub async fn take_code(&self, email: &str) -> String {
        loop {
            let arrived = self.inner.arrived.notified();
            if let Some(code) = self
                .inner
                .codes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(email)
            {
                return code;
            }
            arrived.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_waits_for_the_code() {
        let sink = MailSink::open(&MailSinkConfig::Memory(MemoryMail::default())).unwrap();
        let MailSink::Memory(memory) = sink.clone() else {
            unreachable!()
        };
        let waiter = tokio::spawn(async move { memory.take_code("a@b.c").await });
        tokio::task::yield_now().await;
        sink.send_code("a@b.c", "123456").unwrap();
        assert_eq!(waiter.await.unwrap(), "123456");
    }

    /// Regression (issue 12): the log was created with the process umask (0644 as a
    /// rule), so every local user could read the codes and sign in as anyone.
    #[test]
    fn the_log_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("anyplay-mail-mode-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (fresh, loose) = (dir.join("fresh.log"), dir.join("loose.log"));
        std::fs::create_dir_all(&dir).unwrap();
        // One made by someone else with the usual mode: narrowed when opened.
        std::fs::write(&loose, "").unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        for path in [&fresh, &loose] {
            MailSink::open(&MailSinkConfig::Log(path.clone())).unwrap();
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}: {mode:o}", path.display());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn log_lines_follow_the_contract() {
        let path = std::env::temp_dir().join(format!("anyplay-mail-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sink = MailSink::open(&MailSinkConfig::Log(path.clone())).unwrap();
        sink.send_code("a@b.c", "042042").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text.lines().next().unwrap();
        let (time, rest) = line.split_once(' ').unwrap();
        assert!(time.ends_with('Z'), "{time}");
        assert_eq!(rest, "to=a@b.c code=042042");
    }
}
