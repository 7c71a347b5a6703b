//! The actions on a service's processes: `kill`, `stop`, `start`, `restart`, `pause`, and the
//! nodes taken out in turn, `rolling` and `upgrade`.

use std::time::Duration;

use super::{Keys, Reader};
use crate::plan::{Action, PlanError};

pub(super) fn kill(r: &Reader<'_>) -> Result<Action, PlanError> {
    Ok(Action::Kill(r.target()?))
}

pub(super) fn stop(r: &Reader<'_>) -> Result<Action, PlanError> {
    Ok(Action::Stop(r.target()?))
}

pub(super) fn start(r: &Reader<'_>) -> Result<Action, PlanError> {
    Ok(Action::Start(r.target()?))
}

pub(super) fn restart(r: &Reader<'_>) -> Result<Action, PlanError> {
    Ok(Action::Restart(r.target()?))
}

pub(super) fn pause(r: &Reader<'_>) -> Result<Action, PlanError> {
    Ok(Action::Pause {
        target: r.target()?,
        duration: r.hold()?,
    })
}

pub(super) fn rolling(r: &Reader<'_>) -> Result<Action, PlanError> {
    Ok(Action::Rolling {
        target: r.target()?,
        gap: gap(r)?,
    })
}

pub(super) fn upgrade(r: &Reader<'_>) -> Result<Action, PlanError> {
    let target = r.target()?;
    let to = r.needed("to", r.text("to")?, "the version to move to")?;
    Ok(Action::Upgrade {
        target,
        to: to.parse().map_err(|m| r.err("to", m))?,
        gap: gap(r)?,
    })
}

/// `gap`: the pause between two nodes taken out in turn (none when absent).
fn gap(r: &Reader<'_>) -> Result<Duration, PlanError> {
    Ok(r.duration("gap")?.unwrap_or_default())
}

pub(super) fn write(action: &Action, keys: &mut Keys) {
    if let Some(target) = action.target() {
        keys.target(action.kind(), target);
    }
    match action {
        Action::Rolling { gap, .. } => keys.duration("gap", *gap),
        Action::Upgrade { to, gap, .. } => {
            keys.set("to", to.to_string());
            keys.duration("gap", *gap);
        }
        Action::Pause { duration, .. } => keys.duration("for", *duration),
        _ => {}
    }
}
