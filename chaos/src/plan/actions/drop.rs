//! `drop`: every player connection through the target cut at once with a TCP reset.

use super::{Keys, Reader};
use crate::plan::{Action, ActionKind, PlanError, Target};

pub(super) fn drop(r: &Reader<'_>) -> Result<Action, PlanError> {
    Ok(Action::Drop(r.target()?))
}

pub(super) fn write(target: Target, keys: &mut Keys) {
    keys.target(ActionKind::Drop, target);
}
