//! The `timeout` fault: data stops in the covered directions (held in the sockets, not read) and
//! the whole connection is closed `after` the fault reached it. Without `after` the connection
//! stays open and clearing the fault lets the held data flow.

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeout {
    pub(crate) after: Option<Duration>,
    /// Closed with an RST, not a FIN.
    pub(crate) reset: bool,
    /// When the fault was set.
    pub(crate) since: Instant,
}

impl Timeout {
    /// When a connection opened at `opened` is closed, if ever.
    pub(crate) fn deadline(&self, opened: Instant) -> Option<Instant> {
        self.after.map(|after| self.since.max(opened) + after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_the_later_of_setting_and_opening() {
        let since = Instant::now();
        let timeout = Timeout {
            after: Some(Duration::from_secs(2)),
            reset: false,
            since,
        };
        let earlier = since.checked_sub(Duration::from_secs(5)).unwrap_or(since);
        assert_eq!(
            timeout.deadline(earlier),
            Some(since + Duration::from_secs(2))
        );
        let later = since + Duration::from_secs(1);
        assert_eq!(
            timeout.deadline(later),
            Some(later + Duration::from_secs(2))
        );
        let forever = Timeout {
            after: None,
            reset: false,
            since,
        };
        assert_eq!(forever.deadline(later), None);
    }
}
