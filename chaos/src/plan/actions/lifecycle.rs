//! The actions on a service's processes: `kill`, `stop`, `start`, `restart`, `pause`, and the
//! nodes taken out in turn, `rolling` and `upgrade`.

use std::time::Duration;

use anyplay_cloud::duration;

use super::{Keys, Reader};
use crate::plan::timeline::{services_of, Among, Hold, Resource, Walk, INSTANT};
use crate::plan::{Act, Action, PlanError, TimedAct};

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

pub(super) fn draw(walk: &mut Walk<'_>, action: Action, at: Duration) -> Result<Action, String> {
    Ok(match action {
        Action::Kill(t) => Action::Kill(walk.pick(t, Among::Running, at)?),
        Action::Stop(t) => Action::Stop(walk.pick(t, Among::Running, at)?),
        Action::Restart(t) => Action::Restart(walk.pick(t, Among::Running, at)?),
        Action::Start(t) => Action::Start(walk.pick(t, Among::Stopped, at)?),
        Action::Pause { target, duration } => Action::Pause {
            target: walk.pick(target, Among::Running, at)?,
            duration,
        },
        // Taken in turn: every node, none drawn.
        other => other,
    })
}

/// Whether the targets must run before the action, and whether they run after it.
pub(super) fn process_states(action: &Action) -> (bool, bool) {
    match action {
        Action::Kill(_) | Action::Stop(_) => (true, false),
        Action::Start(_) => (false, true),
        _ => (true, true),
    }
}

pub(super) fn holds(action: &Action, at: Duration, count: u32) -> Vec<Hold> {
    let (target, until) = match *action {
        Action::Rolling { target, gap } | Action::Upgrade { target, gap, .. } => {
            (target, at + gap * count.saturating_sub(1) + INSTANT)
        }
        Action::Pause { target, duration } => (target, at + duration),
        _ => match action.target() {
            Some(target) => (target, at + INSTANT),
            None => return Vec::new(),
        },
    };
    services_of(target, count)
        .into_iter()
        .map(|s| (Resource::Process(s), at, until))
        .collect()
}

pub(super) fn expand(action: &Action, at: Duration, count: u32) -> Vec<TimedAct> {
    let each = |t, act: fn(_) -> Act| {
        services_of(t, count)
            .into_iter()
            .map(|s| TimedAct::fixed(at, act(s)))
            .collect()
    };
    match *action {
        Action::Kill(t) => each(t, Act::Kill),
        Action::Stop(t) => each(t, Act::Stop),
        Action::Start(t) => each(t, Act::Start),
        Action::Restart(t) => {
            let services = services_of(t, count);
            let then = |act: fn(_) -> Act| {
                services
                    .iter()
                    .map(move |&s| TimedAct::chained(at, Duration::ZERO, act(s)))
            };
            let mut acts: Vec<TimedAct> = services
                .iter()
                .map(|&s| TimedAct::fixed(at, Act::Stop(s)))
                .collect();
            acts.extend(then(Act::Start));
            acts.extend(then(Act::WaitReady));
            acts
        }
        Action::Rolling { target, gap } | Action::Upgrade { target, gap, .. } => {
            let to = match *action {
                Action::Upgrade { to, .. } => Some(to),
                _ => None,
            };
            let mut acts = Vec::new();
            for (k, s) in services_of(target, count).into_iter().enumerate() {
                let earliest = at + gap * k as u32;
                let next = |act| TimedAct::chained(earliest, Duration::ZERO, act);
                acts.push(match k {
                    0 => TimedAct::fixed(at, Act::Stop(s)),
                    _ => TimedAct::chained(earliest, gap, Act::Stop(s)),
                });
                if let Some(version) = to {
                    acts.push(next(Act::Install {
                        service: s,
                        version,
                    }));
                }
                acts.push(next(Act::Start(s)));
                acts.push(next(Act::WaitReady(s)));
            }
            acts
        }
        Action::Pause { target, duration } => TimedAct::lasting(
            &services_of(target, count),
            at,
            duration,
            Act::Pause,
            Act::Resume,
        ),
        _ => Vec::new(),
    }
}

pub(super) fn print_details(action: &Action, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match action {
        Action::Rolling { gap, .. } => write!(f, ", gap {}", duration::format(*gap)),
        Action::Upgrade { to, gap, .. } => write!(f, " to {to}, gap {}", duration::format(*gap)),
        Action::Pause { duration: d, .. } => write!(f, " for {}", duration::format(*d)),
        _ => Ok(()),
    }
}
