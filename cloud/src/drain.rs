//! The drain switch and the count of open event connections.
//!
//! axum's graceful shutdown stops accepting and waits for HTTP calls, but an
//! upgraded WebSocket is no longer an HTTP call: the node counts its sockets
//! itself and waits for them to close (with 1001) before it exits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{watch, Notify};

#[derive(Clone)]
pub struct Drain {
    started: watch::Sender<bool>,
    sockets: Arc<Sockets>,
}

#[derive(Default)]
struct Sockets {
    open: AtomicUsize,
    closed: Notify,
}

/// Held by a socket task; dropping it counts the socket as closed.
pub struct SocketGuard(Arc<Sockets>);

impl Drop for SocketGuard {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.closed.notify_waiters();
        }
    }
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            started: watch::channel(false).0,
            sockets: Arc::default(),
        }
    }
}

impl Drain {
    /// Starts the drain; true the first time.
    pub fn start(&self) -> bool {
        !self.started.send_replace(true)
    }

    pub fn is_draining(&self) -> bool {
        *self.started.borrow()
    }

    /// Resolves once the drain has started.
    pub async fn started(&self) {
        let mut rx = self.started.subscribe();
        let _ = rx.wait_for(|d| *d).await;
    }

    pub fn socket_opened(&self) -> SocketGuard {
        self.sockets.open.fetch_add(1, Ordering::AcqRel);
        SocketGuard(self.sockets.clone())
    }

    pub fn open_sockets(&self) -> usize {
        self.sockets.open.load(Ordering::Acquire)
    }

    /// Resolves when no socket is open.
    pub async fn sockets_closed(&self) {
        loop {
            let closed = self.sockets.closed.notified();
            if self.open_sockets() == 0 {
                return;
            }
            closed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn waits_for_the_last_socket() {
        let drain = Drain::default();
        let a = drain.socket_opened();
        let b = drain.socket_opened();
        assert!(drain.start());
        assert!(!drain.start());
        drop(a);
        let waiting = tokio::time::timeout(Duration::from_millis(50), drain.sockets_closed()).await;
        assert!(waiting.is_err(), "one socket is still open");
        drop(b);
        tokio::time::timeout(Duration::from_secs(5), drain.sockets_closed())
            .await
            .unwrap();
    }
}
