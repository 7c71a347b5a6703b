//! The supervisor's own termination requests (Ctrl-C, SIGTERM, and SIGHUP: a closed terminal
//! must not leave containers, namespaces, firewall rules or disks behind), so a binary can end
//! every child with `Supervisor::shutdown_all` before it exits.

use std::future::Future;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// Starts listening for SIGINT, SIGTERM and SIGHUP at once (from then on they no longer end
/// the process) and resolves with the first that arrives. Call it early, inside the runtime.
pub fn termination_requested() -> std::io::Result<impl Future<Output = Signal>> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => Signal::SIGINT,
            _ = terminate.recv() => Signal::SIGTERM,
            _ = hangup.recv() => Signal::SIGHUP,
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A closed terminal (SIGHUP) ends a run as Ctrl-C does, with its clean-up, instead of
    /// killing the supervisor on the spot.
    #[tokio::test]
    async fn a_hangup_is_a_termination_request() {
        let requested = termination_requested().expect("listening");
        nix::sys::signal::raise(Signal::SIGHUP).expect("raise");
        let signal = tokio::time::timeout(Duration::from_secs(10), requested)
            .await
            .expect("the hangup was heard");
        assert_eq!(signal, Signal::SIGHUP);
    }
}
