//! A container's stdout and stderr, appended to its service's log file. Read from the engine's
//! log rather than an attach: the log driver keeps every line, even those of an instance that
//! exits before an attach is in place (an attach to a restarted container can miss them), and
//! its timestamps tell this start's lines from the ones already copied.

use std::sync::{Arc, Mutex};

use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptions;
use bollard::Docker;
use futures_util::StreamExt;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

use crate::backend::log::open_log;
use crate::backend::{BackendError, Command};
use crate::sync::lock;

/// The timestamp of the last line copied into the log (Docker's RFC 3339 with nanoseconds,
/// fixed width, so later is greater as text).
pub type LastCopied = Arc<Mutex<Option<String>>>;

/// Marks a new start in the log, then copies the container's output from the engine until the
/// instance stops (when the engine ends the followed log); the handle ends then.
pub fn follow(
    docker: &Docker,
    container: &str,
    command: &Command,
    name: &str,
    last: LastCopied,
) -> Result<JoinHandle<()>, BackendError> {
    let file = open_log(command, name)?;
    let since = lock(&last).as_deref().map_or(0, unix_seconds);
    let mut lines = docker.logs(
        container,
        Some(LogsOptions {
            follow: true,
            stdout: true,
            stderr: true,
            timestamps: true,
            since,
            ..Default::default()
        }),
    );
    let mut file = tokio::fs::File::from_std(file);
    let log = command.log.clone();
    Ok(tokio::spawn(async move {
        while let Some(chunk) = lines.next().await {
            let bytes = match chunk {
                Ok(LogOutput::StdOut { message } | LogOutput::StdErr { message })
                | Ok(LogOutput::Console { message }) => message,
                Ok(LogOutput::StdIn { .. }) => continue,
                // The engine closed the stream: the instance is gone (or the engine is).
                Err(_) => break,
            };
            let line = String::from_utf8_lossy(&bytes);
            let Some((stamp, text)) = line.split_once(' ') else {
                continue;
            };
            {
                let mut last = lock(&last);
                if last.as_deref().is_some_and(|seen| stamp <= seen) {
                    continue;
                }
                *last = Some(stamp.to_owned());
            }
            if let Err(error) = file.write_all(text.as_bytes()).await {
                tracing::warn!("cannot append to {}: {error}", log.display());
                break;
            }
        }
        let _ = file.flush().await;
    }))
}

/// Whole seconds since the epoch of a Docker log timestamp (0 when it does not parse).
fn unix_seconds(stamp: &str) -> i32 {
    OffsetDateTime::parse(stamp, &Rfc3339)
        .ok()
        .and_then(|at| i32::try_from(at.unix_timestamp()).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_docker_timestamps() {
        assert_eq!(unix_seconds("1970-01-01T00:01:40.123456789Z"), 100);
        assert_eq!(unix_seconds("not a time"), 0);
        // Fixed width: text order is time order.
        assert!("2026-11-30T04:04:02.336918335Z" < "2026-11-30T04:04:02.934123009Z");
    }
}
