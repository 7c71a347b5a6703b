//! `POST /anyplay/actions`: anyplay's own actions while the topology is up, a plan's timeline
//! entry without `at`, fired as the timeline fires a step.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;

use super::toxiproxy::ApiError;
use super::Control;
use crate::plan::{ActionKind, PlanError};
use crate::runner::timeline::fire_step;

/// The actions `POST /anyplay/actions` takes: the plan's own on one service, and `drop` (the
/// players' connections reset at once). Link faults go through Toxiproxy's endpoints.
const SERVICE_ACTIONS: [ActionKind; 10] = [
    ActionKind::Kill,
    ActionKind::Stop,
    ActionKind::Start,
    ActionKind::Restart,
    ActionKind::Pause,
    ActionKind::Cpu,
    ActionKind::Memory,
    ActionKind::Clock,
    ActionKind::DiskFull,
    ActionKind::Drop,
];

impl Control {
    /// `POST /anyplay/actions`: a plan entry without `at` (`{"pause": "nats", "for": "5s"}`),
    /// fired now as the timeline fires it (`action_start`, its ops, `action_end`); answered
    /// once its first op is done, with the action, its target and its `at`.
    pub async fn act(self: &Arc<Self>, body: &Value) -> Result<Value, ApiError> {
        let at = self.zero.elapsed();
        let stopped = self
            .plan
            .topology()
            .into_iter()
            .filter(|service| !self.topology.is_running(*service))
            .collect();
        let step = self
            .plan
            .entry_now(body, at, &stopped)
            .map_err(|e| match e {
                PlanError::Invalid { key, message, .. } => {
                    let key = key.strip_prefix("timeline[0]").unwrap_or(&key);
                    let key = key.trim_start_matches('.');
                    ApiError::bad_request(
                        format!("{key}: {message}")
                            .trim_start_matches(": ")
                            .to_owned(),
                    )
                }
                other => ApiError::bad_request(other.to_string()),
            })?;
        let kind = step.action.kind();
        if !SERVICE_ACTIONS.contains(&kind) {
            let names: Vec<&str> = SERVICE_ACTIONS.iter().map(|k| k.name()).collect();
            return Err(ApiError::bad_request(format!(
                "`{kind}` is not a service action ({}); faults on links go through the proxies' toxics",
                names.join(", ")
            )));
        }
        let answer = serde_json::json!({
            "action": kind,
            "target": step.action.target_label(),
            "at": step.at.as_secs_f64(),
        });
        let (at, written) = (step.at, step.written);
        let (first, done) = oneshot::channel();
        let control = self.clone();
        crate::sync::lock(&self.actions).spawn(async move {
            let (topology, log) = (&control.topology, &control.log);
            fire_step(&step, control.zero, topology, log, Some(first)).await;
        });
        match done.await {
            Ok(Ok(())) => {
                self.note_done(at, written);
                Ok(answer)
            }
            Ok(Err(error)) => Err(ApiError::conflict(error)),
            Err(_) => Err(ApiError::conflict("the action was cut short")),
        }
    }

    /// Waits for the service actions under way to end (each within its `for`).
    pub async fn finish_actions(&self) {
        let mut actions = std::mem::take(&mut *crate::sync::lock(&self.actions));
        while actions.join_next().await.is_some() {}
    }
}
