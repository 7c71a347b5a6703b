//! The `cut` fault, a partition: while set, a link neither reads nor writes and new connections are
//! held without connecting upstream. TCP keeps what is sent meanwhile (like dropped packets that
//! get retransmitted), and everything in hand flows on, in order, once the cut is removed.

use tokio::sync::watch;

#[derive(Debug)]
pub(crate) struct Cut(watch::Sender<bool>);

impl Cut {
    pub(crate) fn new() -> Self {
        Cut(watch::Sender::new(false))
    }

    pub(crate) fn set(&self, cut: bool) {
        self.0.send_replace(cut);
    }

    pub(crate) fn is_cut(&self) -> bool {
        *self.0.borrow()
    }

    /// Returns at once when not cut, else when the cut is removed.
    pub(crate) async fn wait_clear(&self) {
        // The sender lives in `self`, so the wait cannot fail.
        let _ = self.0.subscribe().wait_for(|cut| !cut).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::timeout;

    #[tokio::test]
    async fn holds_while_cut() {
        let cut = Cut::new();
        assert!(!cut.is_cut());
        cut.wait_clear().await;

        cut.set(true);
        assert!(cut.is_cut());
        assert!(timeout(Duration::from_millis(50), cut.wait_clear())
            .await
            .is_err());

        let waiting = async {
            cut.wait_clear().await;
        };
        let healing = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            cut.set(false);
        };
        let (waited, ()) = tokio::join!(timeout(Duration::from_secs(2), waiting), healing);
        assert!(waited.is_ok());
    }
}
