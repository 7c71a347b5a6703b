//! The labels that tie a container to the supervisor that made it, and the removal, at the next
//! start, of containers whose supervisor died without cleaning up (SIGKILL, power loss): Docker
//! has no parent-death signal, so this is how a killed run leaves nothing behind for long.

use std::collections::HashMap;

use bollard::query_parameters::{ListContainersOptions, RemoveContainerOptions};
use bollard::Docker;

use super::engine::EngineError;

/// On every container of a run: `<pid>@<start time>` of its supervisor (a pid alone can be
/// reused by an unrelated process).
pub const SUPERVISOR: &str = "anyplay.chaos.supervisor";
/// On every container of a run: the run directory.
pub const RUN: &str = "anyplay.chaos.run";
/// On every container of a run: the service it runs.
pub const SERVICE: &str = "anyplay.chaos.service";

/// This process, as the [`SUPERVISOR`] label names it.
pub fn this_supervisor() -> String {
    let pid = std::process::id();
    format!("{pid}@{}", start_time(pid).unwrap_or_default())
}

/// Whether the supervisor a label names is still running.
fn alive(label: &str) -> bool {
    let Some((pid, started)) = label.split_once('@') else {
        return false;
    };
    pid.parse()
        .ok()
        .and_then(start_time)
        .is_some_and(|now| now.to_string() == started)
}

/// The process's start time in clock ticks since boot (`/proc/PID/stat`, field 22).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Removes (killing first) every container whose supervisor is gone; returns their names.
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
        let owner = container
            .labels
            .as_ref()
            .and_then(|labels| labels.get(SUPERVISOR));
        if owner.is_some_and(|owner| alive(owner)) {
            continue;
        }
        let Some(id) = container.id else { continue };
        match docker.remove_container(&id, Some(force())).await {
            Ok(()) => {}
            // Removed by someone else meanwhile.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
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
    fn this_process_is_alive_and_a_reused_pid_is_not() {
        let me = this_supervisor();
        assert!(alive(&me), "{me}");
        let (pid, _) = me.split_once('@').unwrap();
        assert!(!alive(&format!("{pid}@1")));
        assert!(!alive("4194305@1"), "above pid_max");
        assert!(!alive("garbage"));
    }
}
