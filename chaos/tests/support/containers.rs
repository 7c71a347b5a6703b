//! The containers a run left on the engine, as the Docker tests look for them (by the run
//! directory's label, with the docker CLI so the check does not share code with the backend).

use std::path::Path;
use std::process::Command;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use anyplay_chaos::backend::docker::{DockerBackend, EngineError};

/// Every run that starts on the local engine removes the containers of runs whose supervisor
/// died. Runs share the engine; a test that leaves such containers on purpose, to count them,
/// holds it alone meanwhile.
static ENGINE: RwLock<()> = RwLock::new(());

/// A share of the local engine, for a test that starts runs on it.
pub fn engine_shared() -> RwLockReadGuard<'static, ()> {
    ENGINE.read().unwrap_or_else(PoisonError::into_inner)
}

/// `DockerBackend::connect` (which sweeps dead runs' containers) with a share of the engine.
#[allow(clippy::await_holding_lock)] // held only while connecting
pub async fn connect(dir: &Path) -> Result<(DockerBackend, Vec<String>), EngineError> {
    let _engine = engine_shared();
    DockerBackend::connect(dir).await
}

/// The local engine alone: no other test's run starts there until this is dropped.
pub fn engine_alone() -> RwLockWriteGuard<'static, ()> {
    ENGINE.write().unwrap_or_else(PoisonError::into_inner)
}

/// Names of the containers (running or not) labelled with run directory `dir`.
pub fn containers_of(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let listed = Command::new("docker")
        .args(["ps", "--all", "--format", "{{.Names}}", "--filter"])
        .arg(format!("label=anyplay.chaos.run={}", dir.display()))
        .output()
        .expect("the docker CLI runs (Debian package docker.io)");
    assert!(
        listed.status.success(),
        "docker ps failed (is dockerd running?): {}",
        String::from_utf8_lossy(&listed.stderr)
    );
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}
