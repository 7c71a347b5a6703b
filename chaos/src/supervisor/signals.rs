//! The supervisor's own termination requests (Ctrl-C, SIGTERM), so a binary can end every child
//! with `Supervisor::shutdown_all` before it exits.

use std::future::Future;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// Starts listening for SIGINT and SIGTERM at once (from then on they no longer end the process)
/// and resolves with the first that arrives. Call it early, inside the runtime.
pub fn termination_requested() -> std::io::Result<impl Future<Output = Signal>> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => Signal::SIGINT,
            _ = terminate.recv() => Signal::SIGTERM,
        }
    })
}
