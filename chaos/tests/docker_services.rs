//! The Docker backend under the supervisor, on a real engine, with the local base image
//! (`deploy/images/build.sh`; `deploy/test.sh` builds it and starts the engine): exit codes and
//! signals, the stop signal, pause and resume, output across restarts, and the removal of the
//! run's containers. Without an engine or the image these tests fail; nothing is skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::containers::containers_of;
use anyplay_chaos::backend::{Command, Exit, Program};
use anyplay_chaos::supervisor::services::log_path;
use anyplay_chaos::supervisor::{Probe, ServiceSpec, Supervisor};
use nix::sys::signal::Signal;

const IMAGE: &str = "anyplay/base:local";

fn run_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "anyplay-docker-units-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn supervisor(dir: &Path) -> Supervisor {
    let (backend, _orphans) = crate::support::containers::connect(dir)
        .await
        .expect("a Docker engine answers (deploy/test.sh starts one)");
    let missing = backend.missing_images([IMAGE]).await.unwrap();
    assert!(
        missing.is_empty(),
        "{IMAGE} is missing: run deploy/images/build.sh"
    );
    Supervisor::new(Arc::new(backend)).0
}

/// A service running `script` with the base image's shell (the image has no entrypoint).
fn shell(dir: &Path, name: &str, script: &str) -> ServiceSpec {
    let command = Command::new(Program::Image(IMAGE.to_owned()), log_path(dir, name))
        .args(["sh", "-c", script]);
    ServiceSpec::new(name, command, Probe::Launched)
}

fn count(file: &Path) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until `file` counts past `above`; returns the count seen.
async fn counts_past(file: &Path, above: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = count(file);
        if now > above {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{} stayed at {now}",
            file.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn exits_are_codes_or_signals_and_output_follows_every_start() {
    let dir = run_dir("exits");
    let supervisor = supervisor(&dir).await;
    let once = supervisor
        .add(shell(&dir, "once", "echo hello from the container; exit 3"))
        .await
        .unwrap();
    for _ in 0..2 {
        once.start().await.unwrap();
        assert_eq!(once.wait_exit().await, Exit::Code(3));
    }
    let log = std::fs::read_to_string(once.log_path()).unwrap();
    assert_eq!(
        log.matches("\nhello from the container\n").count(),
        2,
        "{log}"
    );
    assert_eq!(
        log.matches("starting once: image anyplay/base:local")
            .count(),
        2,
        "{log}"
    );

    let sleeper = supervisor
        .add(shell(&dir, "sleeper", "sleep 600"))
        .await
        .unwrap();
    sleeper.start().await.unwrap();
    assert_eq!(sleeper.kill().await.unwrap(), Exit::Signal(Signal::SIGKILL));

    assert_eq!(
        containers_of(&dir).len(),
        2,
        "created once each, kept across starts"
    );
    supervisor.shutdown_all(Duration::from_secs(5)).await;
    supervisor.clean_up().await;
    assert_eq!(containers_of(&dir).len(), 0, "removed at the end");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn stop_sends_the_stop_signal_and_pause_freezes_the_container() {
    let dir = run_dir("signals");
    let supervisor = supervisor(&dir).await;
    let counter = dir.join("count");
    // The run directory is mounted at its own path: the container writes where the test reads.
    let script = format!(
        "trap 'exit 7' TERM; i=0; while :; do i=$((i+1)); echo $i > {}; sleep 0.05; done",
        counter.display()
    );
    let worker = supervisor
        .add(shell(&dir, "worker", &script))
        .await
        .unwrap();
    worker.start().await.unwrap();
    let before = counts_past(&counter, 0).await;

    worker.pause().await.unwrap();
    let paused = count(&counter);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(count(&counter), paused, "a paused container does nothing");
    assert!(paused >= before);
    worker.resume().await.unwrap();
    counts_past(&counter, paused).await;

    // SIGTERM, which the script traps: its own exit code, well within the grace.
    let stopped = Instant::now();
    assert_eq!(
        worker.stop(Duration::from_secs(20)).await.unwrap(),
        Exit::Code(7)
    );
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "{:?}",
        stopped.elapsed()
    );

    supervisor.shutdown_all(Duration::from_secs(5)).await;
    supervisor.clean_up().await;
    assert_eq!(containers_of(&dir).len(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A container as a run of supervisor `process` on `host` leaves it, made with the docker CLI.
fn left_container(dir: &Path, name: &str, host: &str, process: &str) {
    let created = std::process::Command::new("docker")
        .args(["create", "--name", name])
        .args(["--label", &format!("anyplay.chaos.supervisor={process}")])
        .args(["--label", &format!("anyplay.chaos.host={host}")])
        .args(["--label", &format!("anyplay.chaos.run={}", dir.display())])
        .args([IMAGE, "sleep", "600"])
        .output()
        .expect("the docker CLI runs");
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
}

#[tokio::test]
async fn only_containers_of_a_provably_dead_supervisor_are_swept() {
    use std::os::unix::fs::MetadataExt;
    let dir = run_dir("sweep");
    // This host as the labels name it: boot id and PID namespace (read here, not via the crate).
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let namespace = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    let here = format!("{}/{namespace}", boot.trim());
    let pid = std::process::id();
    // Dead here: no such pid (above pid_max).
    let dead = format!("anyplay-test-dead-{pid}");
    left_container(&dir, &dead, &here, "4194305@1");
    // The same dead-looking pid, but in another PID namespace or on another machine sharing
    // the engine: our /proc says nothing about it, so it must stay.
    let foreign = format!("anyplay-test-foreign-{pid}");
    left_container(&dir, &foreign, "another-host/4026531836", "4194305@1");

    let supervisor = supervisor(&dir).await;
    let left = containers_of(&dir);
    for name in &left {
        let _ = std::process::Command::new("docker")
            .args(["rm", "--force", name])
            .output();
    }
    drop(supervisor);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        left,
        [foreign],
        "only the foreign supervisor's container stays"
    );
}
