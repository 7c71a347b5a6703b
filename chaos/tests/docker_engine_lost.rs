//! The Docker backend when its engine goes away mid-run: reached through a small proxy socket
//! in front of the real engine (which keeps running: others use it), the backend loses the
//! engine when the test closes the proxy. That must be reported as a lost engine, not as an
//! exit of the container, which in truth still runs. Its own test binary: it points
//! `DOCKER_HOST` at the proxy for a moment, which would mislead any other test in the process.
//! Needs the engine and the local base image (deploy/test.sh); nothing is skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::support::containers::containers_of;
use anyplay_chaos::backend::{Command, Exit, Program};
use anyplay_chaos::supervisor::services::log_path;
use anyplay_chaos::supervisor::{Probe, ServiceSpec, Supervisor};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;

const IMAGE: &str = "anyplay/base:local";
const ENGINE: &str = "/var/run/docker.sock";

/// Forwards every connection on `socket` to the real engine until the returned set is dropped
/// (aborting the listener and every connection at once).
fn proxy(socket: &Path) -> JoinSet<()> {
    let listener = UnixListener::bind(socket).expect("bind the proxy socket");
    let mut tasks = JoinSet::new();
    tasks.spawn(async move {
        let mut connections = JoinSet::new();
        while let Ok((mut client, _)) = listener.accept().await {
            connections.spawn(async move {
                if let Ok(mut engine) = UnixStream::connect(ENGINE).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut engine).await;
                }
            });
        }
    });
    tasks
}

fn run_dir() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("anyplay-docker-engine-lost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn running_containers_of(dir: &Path) -> Vec<String> {
    let listed = std::process::Command::new("docker")
        .args(["ps", "--format", "{{.Names}}", "--filter"])
        .arg(format!("label=anyplay.chaos.run={}", dir.display()))
        .output()
        .expect("the docker CLI runs");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_engine_is_lost_not_an_exit() {
    let dir = run_dir();
    let socket = dir.join("engine.sock");
    let proxy = proxy(&socket);
    // Before anything of this binary (one test) reads the environment.
    std::env::set_var("DOCKER_HOST", format!("unix://{}", socket.display()));
    let (backend, _) = crate::support::containers::connect(&dir)
        .await
        .expect("the engine answers through the proxy (deploy/test.sh starts one)");
    // The backend keeps its client; the docker CLI below must reach the real engine.
    std::env::remove_var("DOCKER_HOST");
    assert!(
        backend.missing_images([IMAGE]).await.unwrap().is_empty(),
        "{IMAGE} is missing: run deploy/images/build.sh"
    );
    let (supervisor, _events) = Supervisor::new(Arc::new(backend));
    let command = Command::new(Program::Image(IMAGE.to_owned()), log_path(&dir, "sleeper")).args([
        "sh",
        "-c",
        "exec sleep 300",
    ]);
    let service = supervisor
        .add(ServiceSpec::new("sleeper", command, Probe::Launched))
        .await
        .expect("add");
    service.start().await.expect("start");

    drop(proxy);
    std::fs::remove_file(&socket).expect("the proxy socket goes");
    let exit = tokio::time::timeout(Duration::from_secs(20), service.wait_exit())
        .await
        .expect("the loss is seen");
    let still_running = running_containers_of(&dir);
    for name in containers_of(&dir) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "--force", "--volumes", &name])
            .output();
    }
    drop(supervisor);
    let _ = std::fs::remove_dir_all(&dir);

    assert!(
        matches!(&exit, Exit::EngineLost { .. }),
        "taken as an exit: {exit}"
    );
    assert_eq!(
        still_running.len(),
        1,
        "the container runs on: {still_running:?}"
    );
    assert!(
        exit.to_string().contains("may still run"),
        "the report names what may still run: {exit}"
    );
}
