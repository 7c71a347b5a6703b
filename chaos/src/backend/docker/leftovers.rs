//! The labels that tie a container to the supervisor that made it, and the removal, at the next
//! start, of containers whose supervisor died without cleaning up (SIGKILL, power loss): Docker
//! has no parent-death signal, so this is how a killed run leaves nothing behind for long.
//! Only what is provably dead goes (see [`Owner`]): the engine may serve supervisors in other
//! PID namespaces or on other machines, whose pids mean nothing here.

use std::collections::HashMap;

use bollard::query_parameters::{ListContainersOptions, RemoveContainerOptions};
use bollard::Docker;

use super::engine::EngineError;
use crate::backend::owner::Owner;

/// On every container of a run: `<pid>@<start time>` of its supervisor (a pid alone can be
/// reused by an unrelated process).
pub const SUPERVISOR: &str = "anyplay.chaos.supervisor";
/// On every container of a run: the host where that pid means something ([`Owner::host`]).
pub const HOST: &str = "anyplay.chaos.host";
/// On every container of a run: the run directory.
pub const RUN: &str = "anyplay.chaos.run";
/// On every container of a run: the service it runs.
pub const SERVICE: &str = "anyplay.chaos.service";

/// The owner a container's labels name.
fn owner_of(labels: &HashMap<String, String>) -> Owner {
    let label = |key| labels.get(key).cloned().unwrap_or_default();
    Owner {
        host: label(HOST),
        process: label(SUPERVISOR),
    }
}

/// Removes (killing first) every container whose supervisor is provably dead; returns their
/// names.
pub async fn remove_orphans(docker: &Docker) -> Result<Vec<String>, EngineError> {
    let filters = HashMap::from([("label".to_owned(), vec![SUPERVISOR.to_owned()])]);
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .map_err(|source| EngineError::Call {
            action: "list the containers of earlier runs".into(),
            source,
        })?;
    let mut removed = Vec::new();
    for container in containers {
        let owner = owner_of(&container.labels.clone().unwrap_or_default());
        if !owner.is_provably_dead() {
            continue;
        }
        let Some(id) = container.id else { continue };
        match docker.remove_container(&id, Some(force())).await {
            Ok(()) => {}
            Err(error) if removed_meanwhile(&error) => {}
            Err(source) => {
                return Err(EngineError::Call {
                    action: format!("remove the orphaned container {id}"),
                    source,
                })
            }
        }
        let name = container
            .names
            .and_then(|names| names.into_iter().next())
            .unwrap_or(id);
        removed.push(name.trim_start_matches('/').to_owned());
    }
    Ok(removed)
}

/// Whether a removal failed only because somebody else removed the container, or is removing it
/// (another run starting at the same time sweeps the same orphans).
fn removed_meanwhile(error: &bollard::errors::Error) -> bool {
    match error {
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        } => true,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            message,
        } => message.contains("already in progress"),
        _ => false,
    }
}

/// Kill and remove, anonymous volumes included (the official postgres image declares one).
pub fn force() -> RemoveContainerOptions {
    RemoveContainerOptions {
        force: true,
        v: true,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_labels_name_the_owner() {
        let me = Owner::this();
        let labels = HashMap::from([
            (SUPERVISOR.to_owned(), me.process.clone()),
            (HOST.to_owned(), me.host.clone()),
        ]);
        assert_eq!(owner_of(&labels), me);
        // Without a host label (an older run's container) nothing is provable.
        let older = HashMap::from([(SUPERVISOR.to_owned(), "4194305@1".to_owned())]);
        assert!(!owner_of(&older).is_provably_dead());
    }

    /// Regression: two runs starting at once both swept one orphan; the second's removal
    /// got 409 "already in progress" and its run stopped.
    #[test]
    fn an_orphan_removed_by_somebody_else_meanwhile_is_gone() {
        let answer =
            |status_code: u16, message: &str| bollard::errors::Error::DockerResponseServerError {
                status_code,
                message: message.to_owned(),
            };
        assert!(removed_meanwhile(&answer(404, "No such container: f0")));
        assert!(removed_meanwhile(&answer(
            409,
            "removal of container f0 is already in progress"
        )));
        assert!(!removed_meanwhile(&answer(409, "container f0 is paused")));
        assert!(!removed_meanwhile(&answer(500, "driver failed")));
    }
}
