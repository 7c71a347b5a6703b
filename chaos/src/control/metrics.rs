//! `--metrics ADDR`: the run's own series as OpenMetrics text while it runs, made from the
//! events the history records as it records them (so what is scraped is what the report will
//! judge): players online, calls and errors (per second and in all), welcomes, disconnects,
//! the faults active by action and target, and the checks' running counters.

use std::sync::Arc;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::events::{Event, PlayerFact, WriteOutcome};

type Labels = Vec<(String, String)>;

pub struct Metrics {
    registry: Registry,
    online: Gauge,
    calls_per_second: Gauge,
    errors_per_second: Gauge,
    calls: Counter,
    errors: Counter,
    welcomes: Counter,
    disconnects: Counter,
    faults_active: Family<Labels, Gauge>,
    duplicate_rounds: Counter,
    duplicate_accounts: Counter,
    players_lost: Counter,
    players_back: Counter,
    writes: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut metrics = Metrics {
            registry: Registry::with_prefix("anyplay"),
            online: Gauge::default(),
            calls_per_second: Gauge::default(),
            errors_per_second: Gauge::default(),
            calls: Counter::default(),
            errors: Counter::default(),
            welcomes: Counter::default(),
            disconnects: Counter::default(),
            faults_active: Family::default(),
            duplicate_rounds: Counter::default(),
            duplicate_accounts: Counter::default(),
            players_lost: Counter::default(),
            players_back: Counter::default(),
            writes: Family::default(),
        };
        let r = &mut metrics.registry;
        r.register(
            "players_online",
            "Players online in the last second",
            metrics.online.clone(),
        );
        r.register(
            "calls_per_second",
            "The players' HTTP calls in the last second",
            metrics.calls_per_second.clone(),
        );
        r.register(
            "call_errors_per_second",
            "The players' failed HTTP calls in the last second",
            metrics.errors_per_second.clone(),
        );
        r.register("calls", "The players' HTTP calls", metrics.calls.clone());
        r.register(
            "call_errors",
            "The players' failed HTTP calls",
            metrics.errors.clone(),
        );
        r.register(
            "welcomes",
            "Welcomes the players received",
            metrics.welcomes.clone(),
        );
        r.register(
            "disconnects",
            "The players' event connections that ended",
            metrics.disconnects.clone(),
        );
        r.register(
            "faults_active",
            "Actions under way (a lasting fault until its end), by action and target",
            metrics.faults_active.clone(),
        );
        r.register(
            "check_duplicate_sessions_rounds",
            "duplicate_sessions: rounds of every node's connections sampled",
            metrics.duplicate_rounds.clone(),
        );
        r.register(
            "check_duplicate_sessions_accounts",
            "duplicate_sessions: accounts seen on two connections in one round",
            metrics.duplicate_accounts.clone(),
        );
        r.register(
            "check_players_back_lost",
            "players_back: players whose connection ended without a replacement",
            metrics.players_lost.clone(),
        );
        r.register(
            "check_players_back_back",
            "players_back: players welcomed again after a loss",
            metrics.players_back.clone(),
        );
        r.register(
            "check_lost_writes_writes",
            "lost_writes: the players' writes by outcome (ok, refused, unknown)",
            metrics.writes.clone(),
        );
        metrics
    }

    /// Takes in one event of the history.
    pub fn observe(&self, event: &Event) {
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        match event {
            Event::LoadTick(tick) => {
                self.online.set(gauge(tick.online));
                self.calls_per_second.set(gauge(tick.http_calls));
                self.errors_per_second.set(gauge(tick.http_errors));
                self.calls.inc_by(tick.http_calls);
                self.errors.inc_by(tick.http_errors);
                self.welcomes.inc_by(tick.welcomes);
                self.disconnects.inc_by(tick.disconnects);
            }
            Event::ActionStart { action, target, .. } => {
                self.faults_active
                    .get_or_create(&labels(action, target))
                    .inc();
            }
            Event::ActionEnd { action, target, .. } => {
                self.faults_active
                    .get_or_create(&labels(action, target))
                    .dec();
            }
            Event::CheckSample { duplicates, .. } => {
                self.duplicate_rounds.inc();
                self.duplicate_accounts.inc_by(duplicates.len() as u64);
            }
            Event::PlayerLost { .. } => {
                self.players_lost.inc();
            }
            Event::PlayerBack { .. } => {
                self.players_back.inc();
            }
            Event::Player {
                fact: PlayerFact::Write(write),
                ..
            } => {
                let outcome = match write.outcome {
                    WriteOutcome::Ok => "ok",
                    WriteOutcome::Refused => "refused",
                    WriteOutcome::Unknown => "unknown",
                };
                let outcome = vec![("outcome".to_owned(), outcome.to_owned())];
                self.writes.get_or_create(&outcome).inc();
            }
            _ => {}
        }
    }

    /// The text a scrape gets (OpenMetrics, ending in `# EOF`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

fn labels(action: &crate::plan::ActionKind, target: &str) -> Labels {
    vec![
        ("action".to_owned(), action.to_string()),
        ("target".to_owned(), target.to_owned()),
    ]
}

/// `GET /metrics`.
pub fn routes(metrics: Arc<Metrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let text = metrics.render();
            async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    text,
                )
                    .into_response()
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Tick;
    use crate::plan::ActionKind;

    #[test]
    fn the_series_follow_the_history() {
        let metrics = Metrics::new();
        metrics.observe(&Event::LoadTick(Tick {
            online: 57,
            welcomes: 3,
            http_calls: 40,
            http_errors: 2,
            ..Tick::default()
        }));
        metrics.observe(&Event::ActionStart {
            action: ActionKind::Latency,
            target: "node-1<->players".into(),
            at: 1.0,
            via: None,
            to: None,
            toxic: None,
        });
        metrics.observe(&Event::CheckSample {
            round: 1,
            duplicates: vec![4],
        });
        let text = metrics.render();
        for line in [
            "anyplay_players_online 57",
            "anyplay_calls_per_second 40",
            "anyplay_call_errors_total 2",
            "anyplay_welcomes_total 3",
            r#"anyplay_faults_active{action="latency",target="node-1<->players"} 1"#,
            "anyplay_check_duplicate_sessions_accounts_total 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        metrics.observe(&Event::ActionEnd {
            action: ActionKind::Latency,
            target: "node-1<->players".into(),
            at: 1.0,
            error: None,
        });
        assert!(metrics
            .render()
            .contains(r#"anyplay_faults_active{action="latency",target="node-1<->players"} 0"#));
    }
}
