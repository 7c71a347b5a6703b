//! `drop`: every player connection through the target cut at once with a TCP reset.

use std::time::Duration;

use super::{Keys, Reader};
use crate::plan::timeline::{Among, Walk};
use crate::plan::{Act, Action, DropScope, PlanError, Target, TimedAct};

pub(super) fn drop(r: &Reader<'_>) -> Result<Action, PlanError> {
    Ok(Action::Drop(r.target()?))
}

pub(super) fn write(action: &Action, keys: &mut Keys) {
    if let Some(target) = action.target() {
        keys.target(action.kind(), target);
    }
}

pub(super) fn draw(walk: &mut Walk<'_>, action: Action, at: Duration) -> Result<Action, String> {
    Ok(match action {
        Action::Drop(t) => Action::Drop(walk.pick(t, Among::WithPlayers, at)?),
        other => other,
    })
}

pub(super) fn expand(action: &Action, at: Duration) -> Vec<TimedAct> {
    let scope = match action.target() {
        Some(Target::Node(n)) => DropScope::Node(n),
        _ => DropScope::AllPlayers,
    };
    vec![TimedAct::fixed(at, Act::Drop(scope))]
}
