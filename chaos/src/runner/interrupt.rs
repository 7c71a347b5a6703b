//! Ctrl-C, SIGTERM or SIGHUP during a run, listened for once: each phase that waits races
//! it, and the first one it cuts short notes in the history where the run stopped.

use std::future::Future;
use std::pin::Pin;

use nix::sys::signal::Signal;

use crate::events::EventLog;

pub struct Interrupt {
    signal: Pin<Box<dyn Future<Output = Signal>>>,
    heard: bool,
}

impl Interrupt {
    /// Listens from now on.
    pub fn listen() -> std::io::Result<Interrupt> {
        let signal = crate::supervisor::signals::termination_requested()?;
        Ok(Interrupt {
            signal: Box::pin(signal),
            heard: false,
        })
    }

    /// Whether a termination request came.
    pub fn heard(&self) -> bool {
        self.heard
    }

    /// `work`'s output, or `None` when a termination request comes first (or came before):
    /// then the history says "SIGINT {during}: the run stops".
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
                super::note(log, format!("{signal} {during}: the run stops"));
                None
            }
        }
    }

    /// Waits for the request; `None` when it came already.
    pub async fn wait(&mut self) -> Option<Signal> {
        if self.heard {
            return None;
        }
        self.heard = true;
        Some((&mut self.signal).await)
    }
}
