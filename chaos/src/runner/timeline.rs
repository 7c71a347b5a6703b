//! Fires the resolved timeline: each step at its time (steps run side by side, so a lasting
//! fault does not hold up the next one), its acts in order, chained acts after the one before,
//! with `action_start` and `action_end` in the history.

use std::sync::Arc;

use futures_util::future::join_all;
use indicatif::ProgressBar;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::events::{Event, EventLog};
use crate::plan::{Step, Timeline};

use super::topology::Topology;

/// Runs every step of `timeline`, offsets counted from `zero`; returns when all are done.
pub async fn fire(
    timeline: &Timeline,
    zero: Instant,
    topology: Arc<Topology>,
    log: &EventLog,
    bar: &ProgressBar,
) {
    join_all(timeline.steps.iter().map(|step| {
        let topology = topology.clone();
        async move {
            if let Some(error) = fire_step(step, zero, &topology, log, None).await {
                bar.println(format!(
                    "  {} {}: {error}",
                    step.action.kind(),
                    step.action.target_label()
                ));
            }
            bar.inc(1);
        }
    }))
    .await;
}

/// One step, its `action_start` and `action_end` recorded; the first failure ends the step
/// and is returned. `first` hears how its first act went (the control API answers with it).
pub(crate) async fn fire_step(
    step: &Step,
    zero: Instant,
    topology: &Topology,
    log: &EventLog,
    mut first: Option<oneshot::Sender<Result<(), String>>>,
) -> Option<String> {
    tokio::time::sleep_until(zero + step.at).await;
    let _ = log.record(Event::action_start(step));
    let mut error = None;
    for act in &step.acts {
        match act.after {
            Some(gap) => tokio::time::sleep(gap).await,
            None => tokio::time::sleep_until(zero + act.at).await,
        }
        let done = topology
            .apply(act.act)
            .await
            .map_err(|e| format!("{}: {e}", act.act));
        if let Some(first) = first.take() {
            let _ = first.send(done.clone());
        }
        if let Err(e) = done {
            error = Some(e);
            break;
        }
    }
    let _ = log.record(Event::action_end(step, error.clone()));
    error
}
