//! The Docker backend: each unit is one container of the run, created once with the run's
//! labels and started again after every kill or stop (so PostgreSQL keeps its data, as a
//! process keeps its directory); made again from another image only when a node changes
//! builds (`upgrade`). Host networking keeps every port on the host's loopback,
//! exactly where the process backend puts them, so proxies, probes and players do not know
//! which backend runs. The run directory is mounted at its own path in every container: a
//! node finds its SQLite file and mail log where a process would.
//!
//! - [`engine`]: reaching the engine; which images are missing.
//! - [`leftovers`]: the run's labels, and removing the containers of runs that died.
//! - [`output`]: container output (from the engine's log) into `logs/<service>.log`.

mod engine;
mod leftovers;
mod output;
mod tls;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::errors::Error;
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerUpdateBody, HostConfig,
    HostConfigLogConfig,
};
use bollard::query_parameters::{
    CreateContainerOptions, KillContainerOptions, WaitContainerOptions,
};
use bollard::Docker;
use futures_util::StreamExt;
use nix::sys::signal::Signal;

pub use engine::EngineError;

use crate::backend::owner::Owner;
use crate::sync::lock;

use super::{
    cpu_quota_us, Backend, BackendError, BoxFuture, Command, Exit, InstanceId, Limit, Order,
    Program, Started, Unit, CPU_PERIOD_US,
};

/// How long the end of a run waits for the engine to remove the run's containers.
const REMOVE_WAIT: Duration = Duration::from_secs(30);
/// How long an exited instance's last output may take to reach its log.
const LOG_DRAIN: Duration = Duration::from_secs(2);
/// A "lifted" memory limit: the engine cannot remove one once set (it refuses -1 and takes 0
/// for "unchanged"), so it is raised beyond any machine's memory (1 PiB).
const NO_MEMORY_LIMIT: i64 = 1 << 50;

/// Runs every unit as a container of one engine.
pub struct DockerBackend {
    maker: Arc<Maker>,
}

/// What makes the run's containers on one engine, for the backend and its units alike.
struct Maker {
    docker: Docker,
    /// Mounted at its own path in every container.
    run_dir: PathBuf,
    /// Tells this run's container names apart from another run's on the same engine.
    prefix: String,
    owner: Owner,
    /// Every container created, for `clean_up` (and `Drop` when no clean-up ran).
    created: Mutex<Vec<String>>,
}

impl DockerBackend {
    /// Connects to the engine and removes the containers of runs whose supervisor died; returns
    /// the backend and the names of the removed containers. Boxed, as every entry point a
    /// binary or test awaits, so its future tree is compiled once, in this crate (results/ci).
    pub fn connect<'a>(
        run_dir: &'a Path,
    ) -> BoxFuture<'a, Result<(Self, Vec<String>), EngineError>> {
        Box::pin(async move { Self::on(engine::connect().await?, run_dir).await })
    }

    /// As [`DockerBackend::connect`], to the engine a plan's host names. Boxed, as `connect`.
    pub fn connect_to<'a>(
        engine: &'a crate::plan::Engine,
        run_dir: &'a Path,
    ) -> BoxFuture<'a, Result<(Self, Vec<String>), EngineError>> {
        Box::pin(async move { Self::on(engine::connect_to(engine).await?, run_dir).await })
    }

    async fn on(docker: Docker, run_dir: &Path) -> Result<(Self, Vec<String>), EngineError> {
        let removed = leftovers::remove_orphans(&docker).await?;
        let owner = Owner::this();
        let maker = Maker {
            docker,
            run_dir: run_dir.to_owned(),
            prefix: name_prefix(&owner),
            owner,
            created: Default::default(),
        };
        Ok((
            DockerBackend {
                maker: Arc::new(maker),
            },
            removed,
        ))
    }

    /// The images of `wanted` that the engine lacks.
    pub async fn missing_images<'a>(
        &self,
        wanted: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<&'a str>, EngineError> {
        engine::missing_images(&self.maker.docker, wanted).await
    }
}

impl Maker {
    /// Creates unit `name`'s container, which runs `command` (an image); returns its id.
    async fn create(&self, name: &str, command: &Command) -> Result<String, BackendError> {
        let Program::Image(image) = &command.program else {
            return Err(BackendError::WrongProgram {
                backend: "docker",
                program: command.program.to_string(),
            });
        };
        if command.netns.is_some() {
            return Err(BackendError::NetnsInContainer(name.to_owned()));
        }
        let container_name = format!("{}-{name}", self.prefix);
        let body = self.container_body(name, image, command);
        let created = self
            .docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(container_name.clone()),
                    ..Default::default()
                }),
                body,
            )
            .await
            .map_err(docker_error("create", &container_name))?;
        lock(&self.created).push(created.id.clone());
        Ok(created.id)
    }

    fn container_body(&self, name: &str, image: &str, command: &Command) -> ContainerCreateBody {
        let labels = HashMap::from([
            (leftovers::SUPERVISOR.to_owned(), self.owner.process.clone()),
            (leftovers::HOST.to_owned(), self.owner.host.clone()),
            (
                leftovers::RUN.to_owned(),
                self.run_dir.display().to_string(),
            ),
            (leftovers::SERVICE.to_owned(), name.to_owned()),
        ]);
        let mount = self.run_dir.display().to_string();
        let mut binds = vec![format!("{mount}:{mount}")];
        binds.extend(command.binds.iter().map(|path| {
            let path = path.display();
            format!("{path}:{path}:ro")
        }));
        ContainerCreateBody {
            image: Some(image.to_owned()),
            // The image's entrypoint gets the arguments, as with `docker run IMAGE ARGS`.
            cmd: Some(command.args.clone()),
            env: Some(
                command
                    .env
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect(),
            ),
            working_dir: command.cwd.as_ref().map(|dir| dir.display().to_string()),
            user: command
                .user
                .as_ref()
                .map(|user| format!("{}:{}", user.uid, user.gid)),
            labels: Some(labels),
            stop_signal: Some(command.stop_signal.as_str().to_owned()),
            host_config: Some(HostConfig {
                network_mode: Some("host".to_owned()),
                binds: Some(binds),
                // The output is read back from the engine's log: a driver that keeps it.
                log_config: Some(HostConfigLogConfig {
                    typ: Some("json-file".to_owned()),
                    config: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

impl Backend for DockerBackend {
    fn create(
        &self,
        name: String,
        command: Command,
    ) -> BoxFuture<'_, Result<Box<dyn Unit>, BackendError>> {
        Box::pin(async move {
            let id = self.maker.create(&name, &command).await?;
            let unit: Box<dyn Unit> = Box::new(DockerUnit {
                maker: self.maker.clone(),
                name,
                id: Mutex::new(id),
                log: command.log.clone(),
                command: Mutex::new(command),
                limits: Mutex::default(),
                copied: Default::default(),
            });
            Ok(unit)
        })
    }

    fn clean_up(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let containers = std::mem::take(&mut *lock(&self.maker.created));
            let removals = containers.iter().map(|id| async move {
                let removal = self
                    .maker
                    .docker
                    .remove_container(id, Some(leftovers::force()));
                match tokio::time::timeout(REMOVE_WAIT, removal).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::warn!("cannot remove container {id}, which may still run: {error}")
                    }
                    Err(_) => tracing::warn!(
                        "removing container {id} took over {REMOVE_WAIT:?}: it may still run"
                    ),
                }
            });
            futures_util::future::join_all(removals).await;
        })
    }
}

impl Drop for DockerBackend {
    /// A run that unwound without `clean_up` (a panic, an early error) still removes its
    /// containers; from a thread of its own, because `Drop` cannot await.
    fn drop(&mut self) {
        let containers = std::mem::take(&mut *lock(&self.maker.created));
        if !containers.is_empty() {
            blocking(move |docker| async move {
                for id in &containers {
                    let _ = docker.remove_container(id, Some(leftovers::force())).await;
                }
            });
        }
    }
}

struct DockerUnit {
    maker: Arc<Maker>,
    name: String,
    /// The container: made again from another image by [`Unit::retarget`].
    id: Mutex<String>,
    command: Mutex<Command>,
    /// Every container's, whatever it runs.
    log: PathBuf,
    /// The CPU and memory limits in place, for a container made again.
    limits: Mutex<Vec<Limit>>,
    /// How far the container's output has been copied into the log, across starts.
    copied: output::LastCopied,
}

impl DockerUnit {
    fn id(&self) -> String {
        lock(&self.id).clone()
    }

    fn docker(&self) -> &Docker {
        &self.maker.docker
    }

    async fn signal(&self, signal: Signal) -> Result<(), BackendError> {
        let id = self.id();
        let kill = self.docker().kill_container(
            &id,
            Some(KillContainerOptions {
                signal: signal.as_str().to_owned(),
            }),
        );
        match kill.await {
            Ok(()) => Ok(()),
            // Not running (409) or gone (404): it exited on its own between our look and now.
            Err(Error::DockerResponseServerError {
                status_code: 404 | 409,
                ..
            }) => Ok(()),
            Err(source) => Err(docker_error("signal", &id)(source)),
        }
    }

    fn short_id(&self) -> String {
        self.id().chars().take(12).collect()
    }
}

impl Unit for DockerUnit {
    fn start(&self) -> BoxFuture<'_, Result<Started, BackendError>> {
        Box::pin(async move {
            let id = self.id();
            self.docker()
                .start_container(&id, None)
                .await
                .map_err(docker_error("start", &id))?;
            let command = lock(&self.command).clone();
            let logs = output::follow(
                self.docker(),
                &id,
                &command,
                &self.name,
                self.copied.clone(),
            )?;
            let inspected = self
                .docker()
                .inspect_container(&id, None)
                .await
                .map_err(docker_error("inspect", &id))?;
            let pid = inspected
                .state
                .and_then(|state| state.pid)
                .and_then(|pid| u32::try_from(pid).ok())
                .unwrap_or(0);
            let docker = self.docker().clone();
            let exit = Box::pin(async move {
                let exit = wait_exit(&docker, &id).await;
                // The output of its last moments, before anyone reads the log.
                let _ = tokio::time::timeout(LOG_DRAIN, logs).await;
                exit
            });
            Ok(Started {
                id: InstanceId::Container {
                    id: self.short_id(),
                    pid,
                },
                exit,
            })
        })
    }

    fn send(&self, order: Order) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let id = self.id();
            match order {
                Order::Terminate => {
                    let stop = lock(&self.command).stop_signal;
                    self.signal(stop).await
                }
                Order::Kill => self.signal(Signal::SIGKILL).await,
                Order::Pause => self
                    .docker()
                    .pause_container(&id)
                    .await
                    .map_err(docker_error("pause", &id)),
                Order::Resume => self
                    .docker()
                    .unpause_container(&id)
                    .await
                    .map_err(docker_error("unpause", &id)),
            }
        })
    }

    fn kill_now(&self) {
        let id = self.id();
        blocking(move |docker| async move {
            let kill = KillContainerOptions {
                signal: "SIGKILL".to_owned(),
            };
            let _ = docker.kill_container(&id, Some(kill)).await;
        });
    }

    fn log_path(&self) -> &Path {
        &self.log
    }

    /// A container runs the image it was made with: this one is removed, and another made
    /// under the same name from `command`'s image, with the limits in place.
    fn retarget(&self, command: Command) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let old = self.id();
            self.docker()
                .remove_container(&old, Some(leftovers::force()))
                .await
                .map_err(docker_error("remove", &old))?;
            lock(&self.maker.created).retain(|id| *id != old);
            let command = Command {
                log: self.log.clone(),
                ..command
            };
            let id = self.maker.create(&self.name, &command).await?;
            *lock(&self.id) = id.clone();
            *lock(&self.command) = command;
            let limits = lock(&self.limits).clone();
            for limit in limits {
                self.docker()
                    .update_container(&id, update_of(limit))
                    .await
                    .map_err(docker_error("update the limits of", &id))?;
            }
            Ok(())
        })
    }

    fn limit(&self, limit: Limit) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move {
            let id = self.id();
            self.docker()
                .update_container(&id, update_of(limit))
                .await
                .map_err(docker_error("update the limits of", &id))?;
            let mut limits = lock(&self.limits);
            limits.retain(|l| std::mem::discriminant(l) != std::mem::discriminant(&limit));
            limits.push(limit);
            Ok(())
        })
    }
}

/// The engine's update for `limit`: a CPU quota per period, or memory with as much memory and
/// swap together (no swap on top).
fn update_of(limit: Limit) -> ContainerUpdateBody {
    match limit {
        Limit::Cpu(cores) => ContainerUpdateBody {
            cpu_period: Some(CPU_PERIOD_US),
            cpu_quota: Some(cpu_quota_us(cores)),
            ..Default::default()
        },
        Limit::Memory(bytes) => {
            let bytes = bytes.map_or(NO_MEMORY_LIMIT, |b| i64::try_from(b).unwrap_or(i64::MAX));
            ContainerUpdateBody {
                memory: Some(bytes),
                memory_swap: Some(bytes),
                ..Default::default()
            }
        }
    }
}

/// How long to wait before asking again after the engine broke off a wait it then said runs.
const REWAIT_PAUSE: Duration = Duration::from_millis(200);

/// Resolves when the container stops running, with how it ended; or with [`Exit::EngineLost`]
/// once the engine stops answering, which is no exit: the container may still run.
async fn wait_exit(docker: &Docker, id: &str) -> Exit {
    loop {
        // Asked after the start returned: "not-running" then answers for this instance, even
        // if it already ended.
        let mut waits = docker.wait_container(
            id,
            Some(WaitContainerOptions {
                condition: "not-running".to_owned(),
            }),
        );
        let status = match waits.next().await {
            Some(Ok(response)) => response.status_code,
            // bollard reports a non-zero status as an error that carries it.
            Some(Err(Error::DockerContainerWaitError { code, .. })) => code,
            // The wait broke off (the engine restarted, died, or dropped the connection): only
            // the engine itself can say whether the container ended.
            Some(Err(_)) | None => {
                let inspected = docker.inspect_container(id, None).await;
                if let Some(exit) = after_broken_wait(id, inspected) {
                    if exit.engine_lost() {
                        tracing::error!("{exit}");
                    }
                    return exit;
                }
                tokio::time::sleep(REWAIT_PAUSE).await;
                continue;
            }
        };
        let exit = Exit::from_container_status(status);
        // Only a SIGKILL can be the OOM killer's; the engine marks the container then.
        if exit != Exit::Signal(Signal::SIGKILL) {
            return exit;
        }
        let state = docker
            .inspect_container(id, None)
            .await
            .ok()
            .and_then(|i| i.state);
        return exit.or_oom_killed(|| state.and_then(|s| s.oom_killed) == Some(true));
    }
}

/// What a look at the container says after its wait broke off: its exit, `None` while it runs
/// (wait again), or the engine lost when the engine does not answer at all.
fn after_broken_wait(id: &str, inspected: Result<ContainerInspectResponse, Error>) -> Option<Exit> {
    let state = match inspected {
        Ok(inspected) => inspected.state.unwrap_or_default(),
        Err(Error::DockerResponseServerError {
            status_code: 404, ..
        }) => return Some(Exit::Unknown("the container was removed".to_owned())),
        Err(Error::DockerResponseServerError {
            status_code,
            message,
        }) => {
            return Some(Exit::Unknown(format!(
                "docker inspect answered {status_code}: {message}"
            )))
        }
        Err(error) => {
            return Some(Exit::EngineLost {
                container: id.chars().take(12).collect(),
                error: error.to_string(),
            })
        }
    };
    if state.running == Some(true) {
        return None;
    }
    Some(match state.exit_code {
        Some(code) => {
            Exit::from_container_status(code).or_oom_killed(|| state.oom_killed == Some(true))
        }
        None => Exit::Unknown("the engine tells no exit code".to_owned()),
    })
}

/// Unique on the engine: the owner's pid and start time, and its host (a supervisor in another
/// PID namespace may have the same pid, started at the same tick).
fn name_prefix(owner: &Owner) -> String {
    let (boot, namespace) = owner.host.split_once('/').unwrap_or_default();
    let boot = boot.get(..8).unwrap_or(boot);
    format!(
        "anyplay-{}-{boot}-{namespace}",
        owner.process.replace('@', "-")
    )
}

/// Runs `work` with a fresh engine client on a thread and runtime of its own, and waits for
/// it: for `Drop` paths, which cannot await, and whose own runtime may be shutting down.
fn blocking<W, F>(work: W)
where
    W: FnOnce(Docker) -> F + Send + 'static,
    F: std::future::Future<Output = ()>,
{
    let thread = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            if let Ok(docker) = engine::connect().await {
                let _ = tokio::time::timeout(REMOVE_WAIT, work(docker)).await;
            }
        });
    });
    let _ = thread.join();
}

fn docker_error<'a>(
    action: &'static str,
    container: &'a str,
) -> impl FnOnce(Error) -> BackendError + 'a {
    move |source| BackendError::Docker {
        action,
        container: container.to_owned(),
        source: Box::new(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::ContainerState;

    fn with_state(running: bool, exit_code: i64) -> ContainerInspectResponse {
        ContainerInspectResponse {
            state: Some(ContainerState {
                running: Some(running),
                exit_code: Some(exit_code),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_silent_engine_is_lost_not_an_exit() {
        let refused = Error::IOError {
            err: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        let exit = after_broken_wait("0123456789abcdef", Err(refused));
        assert!(
            matches!(&exit, Some(Exit::EngineLost { container, .. }) if container == "0123456789ab"),
            "{exit:?}"
        );
        let exit = exit.unwrap();
        assert_eq!((exit.code(), exit.signal_name()), (None, None));
        assert!(exit.to_string().contains("may still run"), "{exit}");
    }

    #[test]
    fn an_answering_engine_tells_the_exit_or_to_wait_again() {
        assert_eq!(after_broken_wait("c", Ok(with_state(true, 0))), None);
        assert_eq!(
            after_broken_wait("c", Ok(with_state(false, 137))),
            Some(Exit::Signal(Signal::SIGKILL))
        );
        assert_eq!(
            after_broken_wait("c", Ok(with_state(false, 3))),
            Some(Exit::Code(3))
        );
        let removed = Error::DockerResponseServerError {
            status_code: 404,
            message: "no such container".into(),
        };
        assert!(matches!(
            after_broken_wait("c", Err(removed)),
            Some(Exit::Unknown(_))
        ));
    }
}
