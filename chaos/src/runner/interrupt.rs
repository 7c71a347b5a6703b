//! What cuts a run short, listened for once: Ctrl-C, SIGTERM or SIGHUP, or the plan's `abort`
//! giving the run up. Each phase that waits races it, and the first one it cuts short notes in
//! the history where the run stopped.

use std::future::Future;
use std::pin::Pin;

use nix::sys::signal::Signal;
use tokio::sync::watch;

use crate::events::EventLog;

pub struct Interrupt {
    signal: Pin<Box<dyn Future<Output = Signal>>>,
    /// The reason the plan's `abort` gave the run up, once it did.
    abort: watch::Receiver<Option<String>>,
    heard: bool,
    signalled: bool,
}

impl Interrupt {
    /// Listens from now on, to the signals and to `abort` (a closed channel never aborts).
    pub fn listen(abort: watch::Receiver<Option<String>>) -> std::io::Result<Interrupt> {
        let signal = crate::supervisor::signals::termination_requested()?;
        Ok(Interrupt {
            signal: Box::pin(signal),
            abort,
            heard: false,
            signalled: false,
        })
    }

    /// Whether the run was cut short, by a signal or by its `abort`.
    pub fn heard(&self) -> bool {
        self.heard
    }

    /// Whether a termination request cut it short (not its `abort`).
    pub fn signalled(&self) -> bool {
        self.signalled
    }

    /// `work`'s output, or `None` when a termination request or the abort comes first (or
    /// came before): then the history says "SIGINT {during}: the run stops".
    pub async fn or_stop<T>(
        &mut self,
        work: impl Future<Output = T>,
        during: &str,
        log: &EventLog,
    ) -> Option<T> {
        if self.heard {
            return None;
        }
        tokio::select! {
            out = work => Some(out),
            signal = &mut self.signal => {
                self.heard = true;
                self.signalled = true;
                super::note(log, format!("{signal} {during}: the run stops"));
                None
            }
            Ok(reason) = self.abort.wait_for(Option::is_some) => {
                let reason = reason.clone().unwrap_or_default();
                self.heard = true;
                super::note(log, format!("abort ({reason}) {during}: the run stops"));
                None
            }
        }
    }

    /// Waits for a termination request; `None` when the run was cut short already.
    pub async fn wait(&mut self) -> Option<Signal> {
        if self.heard {
            return None;
        }
        self.heard = true;
        self.signalled = true;
        Some((&mut self.signal).await)
    }
}
