//! The containers a run left on the engine, as the Docker tests look for them (by the run
//! directory's label, with the docker CLI so the check does not share code with the backend).

use std::path::Path;
use std::process::Command;

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
