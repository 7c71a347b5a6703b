//! The `slow_close` fault: when one side ends its stream, the shutdown passed on to the other side
//! waits `delay` (counted from the end) before it goes.

use tokio::time::Instant;

use super::connection::LinkFaults;
use super::settings::Woke;

/// Waits until the end seen at `ended` may be passed on; clearing the fault lets it go at once.
pub(crate) async fn hold(link: &mut LinkFaults<'_>, ended: Instant) {
    while let Some(delay) = link.now().slow_close {
        if link.sleep_or_change(Some(ended + delay)).await == Woke::Due {
            return;
        }
    }
}
