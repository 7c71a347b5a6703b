//! A service handle: start (returns once ready), stop with a grace, kill, pause, resume and
//! wait for the exit, each a checked move of the service's state, each reported as an event.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::time::timeout;

use super::event::{ServiceEvent, ServiceEventKind};
use super::ready::{self, Probe, ProbeError};
use super::service_faults::{Clock, Disk, FaultError, ServiceFault, ServiceFaultKind};
use super::spec::ServiceSpec;
use super::state::{State, Transition};
use crate::backend::{BackendError, BoxFuture, Command, Exit, Limit, Order, Unit};
use crate::sync::lock;

/// How long a SIGKILLed instance may take to be seen gone before we call it unkillable.
const KILL_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{service}: {source}")]
    Backend {
        service: String,
        source: BackendError,
    },
    #[error("{service} is {state}, so it cannot {action}")]
    WrongState {
        service: String,
        state: State,
        action: &'static str,
    },
    #[error("{service} was not ready within {limit:?} (last probe: {last}); see {}", log.display())]
    NotReady {
        service: String,
        limit: Duration,
        last: ProbeError,
        log: PathBuf,
    },
    #[error("{service} ended with {exit} before it was ready; see {}", log.display())]
    ExitedWhileStarting {
        service: String,
        exit: Exit,
        log: PathBuf,
    },
    #[error("{service} was {state} before it was ready")]
    Interrupted { service: String, state: State },
    #[error("{service} did not exit within {KILL_WAIT:?} of SIGKILL")]
    Unkillable { service: String },
    #[error("a service named {0} exists already")]
    Duplicate(String),
    #[error("{service}: {source}")]
    Fault { service: String, source: FaultError },
    #[error("{service} was not made ready for {fault} faults before it started")]
    NotReadyFor {
        service: String,
        fault: ServiceFaultKind,
    },
}

/// A cheap, cloneable handle on one supervised service.
#[derive(Clone)]
pub struct Supervised {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    unit: Box<dyn Unit>,
    probe: Probe,
    ready_timeout: Duration,
    state: watch::Sender<State>,
    events: mpsc::UnboundedSender<ServiceEvent>,
    /// What `disk_full` fills; `None` when not made ready for it, or released.
    disk: Mutex<Option<Arc<Disk>>>,
    /// What `clock` sets; `None` when not made ready for it, or released.
    clock: Mutex<Option<Clock>>,
    /// What its instances run, when it says (a node's version).
    build: Mutex<Option<String>>,
}

impl Supervised {
    pub(crate) fn new(
        spec: ServiceSpec,
        unit: Box<dyn Unit>,
        clock: Option<Clock>,
        events: mpsc::UnboundedSender<ServiceEvent>,
    ) -> Self {
        Supervised {
            inner: Arc::new(Inner {
                name: spec.name,
                unit,
                probe: spec.probe,
                ready_timeout: spec.ready_timeout,
                state: watch::Sender::new(State::Pending),
                events,
                disk: Mutex::new(spec.faults.disk),
                clock: Mutex::new(clock),
                build: Mutex::new(spec.build),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn state(&self) -> State {
        self.inner.state.borrow().clone()
    }

    /// Every state change from now on.
    pub fn subscribe(&self) -> watch::Receiver<State> {
        self.inner.state.subscribe()
    }

    pub fn log_path(&self) -> &Path {
        self.inner.unit.log_path()
    }

    /// Launches the service and returns once its probe passes. On a failed start nothing of it is
    /// left running: an instance that is not ready in time is SIGKILLed. Boxed, as every entry
    /// point a binary or test awaits, so its future tree (the probes' clients) is compiled once,
    /// in this crate (results/ci).
    pub fn start(&self) -> BoxFuture<'_, Result<(), ServiceError>> {
        Box::pin(async move {
            let previous = self
                .make(Transition::Start)
                .map_err(|state| self.wrong(state, "start"))?;
            let started = match self.inner.unit.start().await {
                Ok(started) => started,
                Err(source) => {
                    self.inner.state.send_if_modified(|state| {
                        let undo = *state == State::Starting;
                        if undo {
                            *state = previous;
                        }
                        undo
                    });
                    return Err(self.backend(source));
                }
            };
            if let Some(clock) = lock(&self.inner.clock).as_ref() {
                clock.started(started.id.host_pid());
            }
            self.emit(ServiceEventKind::Started {
                instance: started.id,
                build: lock(&self.inner.build).clone(),
            });
            let watcher = self.clone();
            tokio::spawn(async move {
                let exit = started.exit.await;
                // A start always ends with an exit, and only live states can be left by it.
                let _ = watcher.make(Transition::Exit(exit));
            });

            let mut states = self.subscribe();
            tokio::select! {
                ready = ready::wait_ready(&self.inner.probe, self.inner.ready_timeout) => match ready {
                    Ok(()) => self.make(Transition::Ready).map(drop).map_err(|state| match state {
                        State::Exited(exit) => self.exited_while_starting(exit),
                        state => ServiceError::Interrupted { service: self.inner.name.clone(), state },
                    }),
                    Err(last) => {
                        self.send(Order::Kill).await?;
                        self.wait_killed().await?;
                        Err(ServiceError::NotReady {
                            service: self.inner.name.clone(),
                            limit: self.inner.ready_timeout,
                            last,
                            log: self.log_path().to_owned(),
                        })
                    }
                },
                exit = exited(&mut states) => Err(self.exited_while_starting(exit)),
            }
        })
    }

    /// Makes its next start run `command`, another `build` of it: only while no instance runs.
    pub async fn retarget(&self, command: Command, build: String) -> Result<(), ServiceError> {
        let state = self.state();
        if !matches!(state, State::Pending | State::Exited(_)) {
            return Err(self.wrong(state, "change the build of"));
        }
        self.inner
            .unit
            .retarget(command)
            .await
            .map_err(|source| self.backend(source))?;
        *lock(&self.inner.build) = Some(build);
        Ok(())
    }

    /// SIGTERM to the whole tree (and SIGCONT when paused, so it can act on it); SIGKILL once
    /// `grace` has passed. Returns how it ended.
    pub async fn stop(&self, grace: Duration) -> Result<Exit, ServiceError> {
        let previous = self
            .make(Transition::Stop)
            .map_err(|state| self.wrong(state, "stop"))?;
        self.send(Order::Terminate).await?;
        if previous == State::Paused {
            self.send(Order::Resume).await?;
        }
        match timeout(grace, self.wait_exit()).await {
            Ok(exit) => Ok(exit),
            Err(_) => {
                self.send(Order::Kill).await?;
                self.wait_killed().await
            }
        }
    }

    /// SIGKILL to the whole tree; returns once the exit is recorded.
    pub async fn kill(&self) -> Result<Exit, ServiceError> {
        let state = self.state();
        if !state.is_live() {
            return Err(self.wrong(state, "be killed"));
        }
        self.send(Order::Kill).await?;
        self.wait_killed().await
    }

    /// SIGSTOP to the whole tree.
    pub async fn pause(&self) -> Result<(), ServiceError> {
        self.make(Transition::Pause)
            .map_err(|state| self.wrong(state, "pause"))?;
        self.send(Order::Pause).await
    }

    /// SIGCONT to the whole tree.
    pub async fn resume(&self) -> Result<(), ServiceError> {
        self.make(Transition::Resume)
            .map_err(|state| self.wrong(state, "resume"))?;
        self.send(Order::Resume).await
    }

    /// Puts `fault` on the service: on the running instance and the next ones, until cleared.
    /// Applying a fault of a kind again replaces it (a new limit, a new offset).
    pub async fn apply(&self, fault: ServiceFault) -> Result<(), ServiceError> {
        match fault {
            ServiceFault::Cpu { cores } if !(cores > 0.0 && cores.is_finite()) => {
                Err(self.fault(FaultError::Cores(cores)))
            }
            ServiceFault::Cpu { cores } => self.limit(Limit::Cpu(Some(cores))).await,
            ServiceFault::Memory { bytes } => self.limit(Limit::Memory(Some(bytes))).await,
            ServiceFault::DiskFull => {
                let disk = self.disk()?;
                // About the disk's size in writes: off the runtime's threads.
                tokio::task::spawn_blocking(move || disk.fill())
                    .await
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic.into_panic()))
                    .map_err(|source| self.fault(source))
            }
            ServiceFault::Clock { offset_ms } => self.set_clock(fault.kind(), offset_ms),
        }
    }

    /// Lifts the fault of `kind`: no limit, room on the disk, the true time.
    pub async fn clear(&self, kind: ServiceFaultKind) -> Result<(), ServiceError> {
        match kind {
            ServiceFaultKind::Cpu => self.limit(Limit::Cpu(None)).await,
            ServiceFaultKind::Memory => self.limit(Limit::Memory(None)).await,
            ServiceFaultKind::DiskFull => self.disk()?.clear().map_err(|e| self.fault(e)),
            ServiceFaultKind::Clock => self.set_clock(kind, 0),
        }
    }

    /// Unmounts its disk and removes its clock file (once it has exited); later faults of
    /// those kinds fail.
    pub(crate) fn release_faults(&self) {
        if let Some(disk) = lock(&self.inner.disk).take() {
            disk.unmount();
        }
        if let Some(clock) = lock(&self.inner.clock).take() {
            clock.remove();
        }
    }

    async fn limit(&self, limit: Limit) -> Result<(), ServiceError> {
        self.inner
            .unit
            .limit(limit)
            .await
            .map_err(|source| self.backend(source))
    }

    fn disk(&self) -> Result<Arc<Disk>, ServiceError> {
        lock(&self.inner.disk)
            .clone()
            .ok_or_else(|| self.not_ready_for(ServiceFaultKind::DiskFull))
    }

    fn set_clock(&self, kind: ServiceFaultKind, offset_ms: i64) -> Result<(), ServiceError> {
        let clock = lock(&self.inner.clock);
        let clock = clock.as_ref().ok_or_else(|| self.not_ready_for(kind))?;
        clock.set(offset_ms).map_err(|source| {
            self.fault(FaultError::Io {
                path: clock.file(),
                source,
            })
        })
    }

    fn fault(&self, source: FaultError) -> ServiceError {
        ServiceError::Fault {
            service: self.inner.name.clone(),
            source,
        }
    }

    fn not_ready_for(&self, fault: ServiceFaultKind) -> ServiceError {
        ServiceError::NotReadyFor {
            service: self.inner.name.clone(),
            fault,
        }
    }

    /// The current instance's exit: at once when it has exited, else when it does.
    pub async fn wait_exit(&self) -> Exit {
        exited(&mut self.subscribe()).await
    }

    /// SIGKILL without waiting, for `Drop` paths.
    pub(crate) fn kill_now(&self) {
        if self.state().is_live() {
            self.inner.unit.kill_now();
        }
    }

    /// Applies `transition` if the current state allows it and reports it in the same critical
    /// section, so events keep the order of the states. Returns the state before, or the state
    /// that refused the transition.
    fn make(&self, transition: Transition) -> Result<State, State> {
        let mut outcome = Err(State::Pending);
        self.inner
            .state
            .send_if_modified(|state| match state.next(&transition) {
                Some(next) => {
                    let before = std::mem::replace(state, next);
                    if let Some(kind) = event_of(&transition) {
                        self.emit(kind);
                    }
                    outcome = Ok(before);
                    true
                }
                None => {
                    outcome = Err(state.clone());
                    false
                }
            });
        outcome
    }

    fn emit(&self, kind: ServiceEventKind) {
        // Nobody listening is fine: the events are a report, not a control path.
        let _ = self.inner.events.send(ServiceEvent {
            service: self.inner.name.clone(),
            kind,
            at: Instant::now(),
        });
    }

    async fn send(&self, order: Order) -> Result<(), ServiceError> {
        self.inner
            .unit
            .send(order)
            .await
            .map_err(|source| self.backend(source))
    }

    async fn wait_killed(&self) -> Result<Exit, ServiceError> {
        timeout(KILL_WAIT, self.wait_exit())
            .await
            .map_err(|_| ServiceError::Unkillable {
                service: self.inner.name.clone(),
            })
    }

    fn wrong(&self, state: State, action: &'static str) -> ServiceError {
        ServiceError::WrongState {
            service: self.inner.name.clone(),
            state,
            action,
        }
    }

    fn backend(&self, source: BackendError) -> ServiceError {
        ServiceError::Backend {
            service: self.inner.name.clone(),
            source,
        }
    }

    fn exited_while_starting(&self, exit: Exit) -> ServiceError {
        ServiceError::ExitedWhileStarting {
            service: self.inner.name.clone(),
            exit,
            log: self.log_path().to_owned(),
        }
    }
}

fn event_of(transition: &Transition) -> Option<ServiceEventKind> {
    match transition {
        // `Started` carries the instance id, known only after the launch.
        Transition::Start => None,
        Transition::Ready => Some(ServiceEventKind::Up),
        Transition::Pause => Some(ServiceEventKind::Paused),
        Transition::Resume => Some(ServiceEventKind::Resumed),
        Transition::Stop => Some(ServiceEventKind::Stopping),
        Transition::Exit(exit) => Some(ServiceEventKind::Exit(exit.clone())),
    }
}

/// Waits until `states` shows an exit.
async fn exited(states: &mut watch::Receiver<State>) -> Exit {
    loop {
        if let State::Exited(exit) = &*states.borrow_and_update() {
            return exit.clone();
        }
        if states.changed().await.is_err() {
            // The sender lives in the service itself; this is only reachable while it is dropped.
            return Exit::Unknown("the service was dropped".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Command, InstanceId, Started};
    use nix::sys::signal::Signal;
    use std::sync::Mutex;
    use tokio::sync::oneshot;

    /// A fake child: records what it was sent and exits as a real process would react to it.
    #[derive(Default)]
    struct Fake {
        sent: Mutex<Vec<Order>>,
        exit: Mutex<Option<oneshot::Sender<Exit>>>,
        /// Like a program that traps SIGTERM.
        ignore_terminate: bool,
    }

    impl Unit for Arc<Fake> {
        fn start(&self) -> BoxFuture<'_, Result<Started, BackendError>> {
            let (tx, rx) = oneshot::channel();
            *self.exit.lock().expect("lock") = Some(tx);
            Box::pin(async move {
                Ok(Started {
                    id: InstanceId::Pid(42),
                    exit: Box::pin(async move { rx.await.unwrap_or(Exit::Code(-1)) }),
                })
            })
        }

        fn send(&self, order: Order) -> BoxFuture<'_, Result<(), BackendError>> {
            self.sent.lock().expect("lock").push(order);
            let exit = match order {
                Order::Kill => Some(Exit::Signal(Signal::SIGKILL)),
                Order::Terminate if !self.ignore_terminate => Some(Exit::Code(0)),
                _ => None,
            };
            if let Some(exit) = exit {
                if let Some(tx) = self.exit.lock().expect("lock").take() {
                    let _ = tx.send(exit);
                }
            }
            Box::pin(std::future::ready(Ok(())))
        }

        fn kill_now(&self) {}

        fn log_path(&self) -> &Path {
            Path::new("/dev/null")
        }

        fn limit(&self, _: Limit) -> BoxFuture<'_, Result<(), BackendError>> {
            Box::pin(std::future::ready(Ok(())))
        }

        fn retarget(&self, _: Command) -> BoxFuture<'_, Result<(), BackendError>> {
            Box::pin(std::future::ready(Ok(())))
        }
    }

    fn service(fake: &Arc<Fake>) -> (Supervised, mpsc::UnboundedReceiver<ServiceEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let spec = ServiceSpec::new("fake", Command::new("fake", "/dev/null"), Probe::Launched);
        (
            Supervised::new(spec, Box::new(Arc::clone(fake)), None, tx),
            rx,
        )
    }

    fn kinds(rx: &mut mpsc::UnboundedReceiver<ServiceEvent>) -> Vec<ServiceEventKind> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|event| event.kind)
            .collect()
    }

    #[tokio::test]
    async fn start_pause_resume_stop() {
        let fake = Arc::new(Fake::default());
        let (service, mut events) = service(&fake);
        service.start().await.expect("start");
        assert_eq!(service.state(), State::Running);
        assert!(matches!(
            service.start().await,
            Err(ServiceError::WrongState { .. })
        ));
        service.pause().await.expect("pause");
        assert_eq!(service.state(), State::Paused);
        let exit = service.stop(Duration::from_secs(5)).await.expect("stop");
        assert_eq!(exit, Exit::Code(0));
        assert_eq!(service.state(), State::Exited(Exit::Code(0)));
        // A paused service is continued after SIGTERM so that it can act on it.
        assert_eq!(
            *fake.sent.lock().expect("lock"),
            vec![Order::Pause, Order::Terminate, Order::Resume]
        );
        assert_eq!(
            kinds(&mut events),
            vec![
                ServiceEventKind::Started {
                    instance: InstanceId::Pid(42),
                    build: None,
                },
                ServiceEventKind::Up,
                ServiceEventKind::Paused,
                ServiceEventKind::Stopping,
                ServiceEventKind::Exit(Exit::Code(0)),
            ]
        );
    }

    #[tokio::test]
    async fn stop_escalates_after_the_grace() {
        let fake = Arc::new(Fake {
            ignore_terminate: true,
            ..Fake::default()
        });
        let (service, _events) = service(&fake);
        service.start().await.expect("start");
        let asked = Instant::now();
        let exit = service
            .stop(Duration::from_millis(100))
            .await
            .expect("stop");
        assert_eq!(exit, Exit::Signal(Signal::SIGKILL));
        assert!(asked.elapsed() >= Duration::from_millis(100));
        assert_eq!(
            *fake.sent.lock().expect("lock"),
            vec![Order::Terminate, Order::Kill]
        );
    }

    #[tokio::test]
    async fn restarts_after_a_kill() {
        let fake = Arc::new(Fake::default());
        let (service, _events) = service(&fake);
        assert!(matches!(
            service.kill().await,
            Err(ServiceError::WrongState { .. })
        ));
        service.start().await.expect("start");
        assert_eq!(
            service.kill().await.expect("kill"),
            Exit::Signal(Signal::SIGKILL)
        );
        assert!(matches!(
            service.resume().await,
            Err(ServiceError::WrongState { .. })
        ));
        service.start().await.expect("start again");
        assert_eq!(service.state(), State::Running);
    }
}
