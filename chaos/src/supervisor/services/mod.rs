//! Builders for the services a topology runs as processes: each turns settings into a
//! [`ServiceSpec`](super::ServiceSpec) (command and readiness probe) plus the URL clients use.
//!
//! - [`postgres`]: `initdb` once, then a fast throwaway PostgreSQL cluster.
//! - [`nats`]: `nats-server` on loopback.
//! - [`node`]: a cloud node, ready when its `/readyz` answers 200.
//! - [`scratch`]: a directory for the run's length outside the run directory.
//! - [`shared_memory`]: PostgreSQL's shared memory segments that SIGKILLed servers left.

pub mod nats;
pub(crate) mod node;
pub mod postgres;
pub(crate) mod scratch;
pub(crate) mod shared_memory;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::backend::{BackendError, Exit};

/// Where a service runs: the address it listens on and the network namespace of its host
/// (none: the supervisor's, on loopback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub address: Ipv4Addr,
    pub netns: Option<PathBuf>,
}

impl Default for Placement {
    fn default() -> Self {
        Placement {
            address: Ipv4Addr::LOCALHOST,
            netns: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    NotFound(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot pick a free port: {0}")]
    Port(std::io::Error),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("{what} ended with {exit}; see {}", log.display())]
    Failed {
        what: &'static str,
        exit: Exit,
        log: PathBuf,
    },
    #[error("{0}")]
    Unusable(String),
    #[error(transparent)]
    Fault(#[from] crate::supervisor::service_faults::FaultError),
}

/// Where a service's output goes in a run directory: `logs/<service>.log`.
pub fn log_path(run_dir: &Path, service: &str) -> PathBuf {
    run_dir.join("logs").join(format!("{service}.log"))
}

/// The port a plan asked for, else a free loopback one.
fn pick_port(asked: Option<u16>) -> Result<u16, SetupError> {
    match asked {
        Some(port) => Ok(port),
        None => anyplay_cloud::ports::free_port().map_err(SetupError::Port),
    }
}

/// The first executable `name` on `PATH`, then in `extra` directories (root's sbin directories
/// are not on every `PATH`).
pub(crate) fn find_program(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SetupError + '_ {
    move |source| SetupError::Io {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs() {
        assert!(find_program("sh", &[]).is_some());
        assert_eq!(find_program("no-such-program-anyplay", &["/bin"]), None);
    }

    #[test]
    fn logs_live_under_logs() {
        assert_eq!(
            log_path(Path::new("/r"), "node-1"),
            PathBuf::from("/r/logs/node-1.log")
        );
    }
}
