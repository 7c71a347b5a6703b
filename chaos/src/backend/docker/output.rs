//! A container's stdout and stderr, appended to its service's log file as they come.

use bollard::container::LogOutput;
use bollard::query_parameters::AttachContainerOptions;
use bollard::Docker;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

use crate::backend::log::open_log;
use crate::backend::{BackendError, Command};

/// Attaches to `container` before it starts (so no line is lost) and copies its output into
/// the log until the instance exits; the handle ends then.
pub async fn follow(
    docker: &Docker,
    container: &str,
    command: &Command,
    name: &str,
) -> Result<JoinHandle<()>, BackendError> {
    let file = open_log(command, name)?;
    let attached = docker
        .attach_container(
            container,
            Some(AttachContainerOptions {
                stdout: true,
                stderr: true,
                stream: true,
                logs: false,
                ..Default::default()
            }),
        )
        .await
        .map_err(|source| BackendError::Docker {
            action: "attach to",
            container: container.to_owned(),
            source,
        })?;
    let mut output = attached.output;
    let mut file = tokio::fs::File::from_std(file);
    let log = command.log.clone();
    Ok(tokio::spawn(async move {
        while let Some(chunk) = output.next().await {
            let bytes = match chunk {
                Ok(LogOutput::StdOut { message } | LogOutput::StdErr { message })
                | Ok(LogOutput::Console { message }) => message,
                Ok(LogOutput::StdIn { .. }) => continue,
                // The engine closed the stream: the instance is gone (or the engine is).
                Err(_) => break,
            };
            if let Err(error) = file.write_all(&bytes).await {
                tracing::warn!("cannot append to {}: {error}", log.display());
                break;
            }
        }
        let _ = file.flush().await;
    }))
}
