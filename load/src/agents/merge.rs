//! The agents' reports of one phase merged into the run's: histograms added (so every
//! percentile is that of all the samples together), counters summed, and the per-second series
//! added second by second with `t` counted from the scenario's start on the earliest agent (each
//! agent's series is placed by the whole seconds it began after the phase's agreed start).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::agents::protocol::{ProtocolError, ScenarioResult};
use crate::measure::stats::Snapshot;
use crate::report::{DeliveryReport, PlayersReport, RateReport, ScenarioReport, StormReport};
use crate::scenarios::storm::back_times;

/// One agent's report of a scenario, begun `began_ms` after its phase's agreed start.
pub struct Part {
    pub began_ms: f64,
    pub report: ScenarioReport,
}

impl Part {
    pub fn of(result: &ScenarioResult) -> Result<Part, ProtocolError> {
        Ok(Part {
            began_ms: result.began_ms,
            report: result.report()?,
        })
    }
}

/// Every agent's results of one phase, merged scenario by scenario in the order they ran.
pub fn phase(agents: &[Vec<ScenarioResult>]) -> Result<Vec<ScenarioReport>, ProtocolError> {
    let mut order: Vec<&str> = Vec::new();
    let mut parts: BTreeMap<&str, Vec<Part>> = BTreeMap::new();
    for result in agents.iter().flatten() {
        if !order.contains(&result.scenario.as_str()) {
            order.push(&result.scenario);
        }
        parts
            .entry(&result.scenario)
            .or_default()
            .push(Part::of(result)?);
    }
    Ok(order
        .into_iter()
        .filter_map(|scenario| scenario_parts(&parts[&scenario]))
        .collect())
}

/// The parts of one scenario as one report; none without parts.
pub fn scenario_parts(parts: &[Part]) -> Option<ScenarioReport> {
    let first = parts.first()?;
    let second_of = |p: &Part| (p.began_ms / 1000.0).floor() as i64;
    let base = parts.iter().map(second_of).min().unwrap_or(0);
    let mut snapshot = Snapshot::default();
    for part in parts {
        let shift = usize::try_from(second_of(part) - base).unwrap_or(0);
        snapshot.merge_shifted(&part.report.snapshot, shift);
    }
    let seconds = parts.iter().map(|p| p.report.seconds).fold(0.0, f64::max);
    let reports: Vec<&ScenarioReport> = parts.iter().map(|p| &p.report).collect();
    let mut merged = ScenarioReport::new(
        first.report.name,
        &snapshot,
        Duration::try_from_secs_f64(seconds).unwrap_or_default(),
    );
    merged.skipped_saturated = reports.iter().map(|r| r.skipped_saturated).sum();
    merged.rate = rate(&reports);
    merged.players = players(&reports);
    merged.delivery = delivery(&reports, &snapshot);
    merged.storm = storm(&reports, &snapshot);
    Some(merged)
}

/// The agents started their parts of one schedule side by side: their rates add up.
fn rate(reports: &[&ScenarioReport]) -> Option<RateReport> {
    let rates: Vec<&RateReport> = reports.iter().filter_map(|r| r.rate.as_ref()).collect();
    (!rates.is_empty()).then(|| RateReport {
        target_per_s: rates.iter().map(|r| r.target_per_s).sum(),
        achieved_per_s: rates.iter().map(|r| r.achieved_per_s).sum(),
        reached: rates.iter().all(|r| r.reached),
    })
}

fn players(reports: &[&ScenarioReport]) -> Option<PlayersReport> {
    let all: Vec<&PlayersReport> = reports.iter().filter_map(|r| r.players.as_ref()).collect();
    (!all.is_empty()).then(|| PlayersReport {
        asked: all.iter().map(|p| p.asked).sum(),
        online: all.iter().map(|p| p.online).sum(),
    })
}

fn delivery(reports: &[&ScenarioReport], snapshot: &Snapshot) -> Option<DeliveryReport> {
    let all: Vec<&DeliveryReport> = reports.iter().filter_map(|r| r.delivery.as_ref()).collect();
    let sum = |f: fn(&DeliveryReport) -> u64| all.iter().map(|d| f(d)).sum();
    (!all.is_empty()).then(|| {
        DeliveryReport::new(
            sum(|d| d.changes),
            sum(|d| d.expected),
            sum(|d| d.received),
            snapshot,
        )
    })
}

/// Every agent broke its players' connections at the same agreed instant, so their times back
/// count from one break.
fn storm(reports: &[&ScenarioReport], snapshot: &Snapshot) -> Option<StormReport> {
    let all: Vec<&StormReport> = reports.iter().filter_map(|r| r.storm.as_ref()).collect();
    let first = all.first()?;
    let back: Vec<Duration> = all.iter().flat_map(|s| s.back.iter().copied()).collect();
    let players_hit = all.iter().map(|s| s.players_hit).sum();
    Some(StormReport {
        kind: first.kind,
        reconnect: first.reconnect,
        players_hit,
        players_back: back.len(),
        back_s: back_times(back.clone(), players_hit),
        errors: snapshot.http_calls().1,
        back,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::{histogram, Op, Recorder, Status};
    use rand::{Rng, SeedableRng};

    /// A scenario report of `latencies` (µs) of cards calls, all in its first second.
    fn report(latencies: &[u64]) -> ScenarioReport {
        let recorder = Recorder::new();
        for us in latencies {
            recorder.record(Op::Cards, Duration::from_micros(*us), Status::Http(200));
        }
        ScenarioReport::new("cards", &recorder.snapshot(), Duration::from_secs(1))
    }

    #[test]
    fn merged_serialized_histograms_equal_the_histogram_of_the_union() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut draw = |n, hi| -> Vec<u64> { (0..n).map(|_| rng.random_range(100..hi)).collect() };
        let (a, b) = (draw(3000, 50_000), draw(1000, 2_000_000));
        let results: Vec<Vec<ScenarioResult>> = [&a, &b]
            .iter()
            .map(|samples| vec![ScenarioResult::of(&report(samples), 10.0).expect("encodes")])
            .collect();
        // Through JSON, as over NATS.
        let results: Vec<Vec<ScenarioResult>> =
            serde_json::from_str(&serde_json::to_string(&results).expect("json")).expect("back");
        let merged = phase(&results).expect("decodes");
        let cards = &merged[0].snapshot.ops[&Op::Cards];
        let mut union = histogram(3);
        for us in a.iter().chain(&b) {
            union.saturating_record(*us);
        }
        assert_eq!(cards.count, 4000);
        assert_eq!(cards.latency.len(), union.len());
        for i in 0..=1000 {
            let q = f64::from(i) / 1000.0;
            assert_eq!(
                cards.latency.value_at_quantile(q),
                union.value_at_quantile(q),
                "quantile {q}"
            );
        }
        assert_eq!(merged[0].ops[&Op::Cards].status[&Status::Http(200)], 4000);
        assert_eq!(merged[0].series[0].calls, 4000);
    }

    #[test]
    fn series_align_on_the_whole_seconds_after_the_agreed_start() {
        let parts = [
            (300.0, vec![1_000]),
            (1_500.0, vec![2_000, 3_000]),
            (2_900.0, vec![9_000]),
        ]
        .map(|(began_ms, samples)| Part {
            began_ms,
            report: report(&samples),
        });
        let merged = scenario_parts(&parts).expect("parts");
        let calls: Vec<u64> = merged.series.iter().map(|s| s.calls).collect();
        assert_eq!(calls, [1, 2, 1]);
        let t: Vec<u64> = merged.series.iter().map(|s| s.t).collect();
        assert_eq!(t, [0, 1, 2]);
        // A second's p99 comes from that second's merged histogram.
        assert!(
            (2.9..=3.1).contains(&merged.series[1].p99_ms),
            "{:?}",
            merged.series[1]
        );
        // Each part's own second counts from its start: a part that began later is shifted.
        let late =
            [(4_200.0, vec![1_000]), (4_700.0, vec![1_000])].map(|(began_ms, samples)| Part {
                began_ms,
                report: report(&samples),
            });
        assert_eq!(scenario_parts(&late).expect("parts").series.len(), 1);
    }
}
