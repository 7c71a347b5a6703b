//! The `reset_all` fault (the plan's `drop`): every connection open at that moment is closed with a
//! TCP RST (SO_LINGER 0, then close), so peers see "connection reset", never a clean close.

use tokio::net::TcpStream;
use tokio::sync::watch;

/// Counts resets; each connection watches for the next one after it opened.
#[derive(Debug)]
pub(crate) struct Reset(watch::Sender<u64>);

/// One connection's view of [`Reset`].
pub(crate) struct ResetSignal(watch::Receiver<u64>);

impl Reset {
    pub(crate) fn new() -> Self {
        Reset(watch::Sender::new(0))
    }

    pub(crate) fn fire(&self) {
        self.0.send_modify(|resets| *resets += 1);
    }

    /// A signal that fires at the next [`fire`](Self::fire), not at earlier ones.
    pub(crate) fn subscribe(&self) -> ResetSignal {
        ResetSignal(self.0.subscribe())
    }
}

impl ResetSignal {
    pub(crate) async fn fired(&mut self) {
        if self.0.changed().await.is_err() {
            // The proxy is gone and its tasks are being aborted; nothing will fire any more.
            std::future::pending::<()>().await;
        }
    }
}

/// Closes `stream` with an RST instead of a FIN.
pub(crate) fn abort(stream: TcpStream) {
    if let Err(error) = stream.set_zero_linger() {
        tracing::debug!(%error, "proxy: cannot set SO_LINGER 0; closing normally");
    }
    drop(stream);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;
    use tokio::time::timeout;

    #[tokio::test]
    async fn fires_only_for_later_resets() {
        let reset = Reset::new();
        reset.fire();
        let mut signal = reset.subscribe();
        assert!(timeout(Duration::from_millis(30), signal.fired())
            .await
            .is_err());
        reset.fire();
        assert!(timeout(Duration::from_secs(1), signal.fired())
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn abort_sends_a_reset() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut client = TcpStream::connect(addr).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        abort(server);
        let mut buf = [0u8; 8];
        let error = client.read(&mut buf).await.expect_err("a reset, not EOF");
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset);
    }
}
