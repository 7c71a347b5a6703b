//! The stdout tables: one per scenario, then the generator's health.

use std::fmt::Write;

use crate::report::{Report, ScenarioReport};

/// The whole report as text tables.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for scenario in &report.scenarios {
        scenario_table(&mut out, scenario);
        out.push('\n');
    }
    let g = &report.generator;
    let _ = write!(
        out,
        "generator: scheduler late p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; cpu {:.2} cores; peak rss {:.0} MB",
        g.sched_lag_ms.p50, g.sched_lag_ms.p99, g.sched_lag_ms.max, g.cpu_cores_avg, g.rss_mb_peak
    );
    if report.process.cloud_in_harness {
        out.push_str(" (the cloud runs inside the harness and is counted too)");
    }
    out.push('\n');
    if let Some(pool) = &g.pool_busy {
        let _ = writeln!(
            out,
            "store pool busy: avg {:.1}, max {} ({} samples)",
            pool.avg, pool.max, pool.samples
        );
    }
    for node in &report.process.nodes {
        let _ = writeln!(
            out,
            "node pid {}: cpu {:.2} cores; peak rss {:.0} MB",
            node.pid, node.cpu_cores_avg, node.rss_mb_peak
        );
    }
    out
}

fn scenario_table(out: &mut String, s: &ScenarioReport) {
    let _ = write!(
        out,
        "== {}: {:.1} s, {:.1} HTTP calls/s",
        s.name, s.seconds, s.http_calls_per_s
    );
    if let Some(rate) = &s.rate {
        if rate.reached {
            let _ = write!(out, ", rate {:.1}/s reached", rate.target_per_s);
        } else {
            let _ = write!(
                out,
                ", RATE NOT REACHED: {:.1}/s of {:.1}/s, {} skipped (saturated)",
                rate.achieved_per_s, rate.target_per_s, s.skipped_saturated
            );
        }
    }
    out.push_str(" ==\n");
    let _ = writeln!(
        out,
        "{:<18} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}  status",
        "op", "count", "ok", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
    for (op, r) in &s.ops {
        let status: Vec<String> = r
            .status
            .iter()
            .map(|(k, n)| format!("{}:{n}", k.label()))
            .collect();
        let _ = writeln!(
            out,
            "{:<18} {:>8} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>9.2}  {}",
            op.name(),
            r.count,
            r.ok,
            r.p50_ms,
            r.p95_ms,
            r.p99_ms,
            r.max_ms,
            status.join(" ")
        );
    }
    if let Some(p) = &s.players {
        let _ = writeln!(out, "online: {} of {} players", p.online, p.asked);
    }
    if let Some(d) = &s.delivery {
        let _ = writeln!(
            out,
            "delivery: {} changes; {} expected, {} received, {} missing; p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            d.changes, d.expected, d.received, d.missing, d.p50_ms, d.p95_ms, d.p99_ms, d.max_ms
        );
    }
    if let Some(storm) = &s.storm {
        let back: Vec<String> = storm
            .back_s
            .shares()
            .iter()
            .map(|(share, secs)| match secs {
                Some(secs) => format!("{share}% {secs:.2} s"),
                None => format!("{share}% never"),
            })
            .collect();
        let _ = writeln!(
            out,
            "storm {} ({} reconnect): {} players hit, {} back; {}; {} errors",
            storm.kind,
            storm.reconnect.name(),
            storm.players_hit,
            storm.players_back,
            back.join(", "),
            storm.errors
        );
    }
    if let Some(ladder) = &s.ladder {
        let _ = writeln!(
            out,
            "{:>8} {:>8} {:>13} {:>15} {:>9} {:>8}  budget {:.1} ms",
            "players",
            "online",
            "ramp p99 ms",
            "steady p99 ms",
            "skipped",
            "within",
            ladder.budget_ms
        );
        for r in &ladder.rungs {
            let _ = writeln!(
                out,
                "{:>8} {:>8} {:>13.2} {:>15.2} {:>9} {:>8}",
                r.players,
                r.online,
                r.ramp_p99_ms,
                r.steady_p99_ms,
                r.skipped_saturated,
                r.within_budget
            );
        }
        match ladder.knee {
            Some(knee) => {
                let _ = writeln!(out, "knee: {knee} players");
            }
            None => out.push_str("knee: no rung within the budget\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::{Op, Recorder, Status};
    use crate::report::RateReport;
    use std::time::Duration;

    #[test]
    fn a_missed_rate_is_said_in_the_table() {
        let recorder = Recorder::new();
        recorder.record(Op::Cards, Duration::from_millis(2), Status::Http(200));
        let mut s = ScenarioReport::new("cards", &recorder.snapshot(), Duration::from_secs(1));
        s.skipped_saturated = 7;
        s.rate = Some(RateReport {
            target_per_s: 200.0,
            achieved_per_s: 120.0,
            reached: false,
        });
        let mut out = String::new();
        scenario_table(&mut out, &s);
        assert!(
            out.contains("RATE NOT REACHED: 120.0/s of 200.0/s, 7 skipped"),
            "{out}"
        );
        assert!(out.contains("cards") && out.contains("200:1"), "{out}");
    }
}
