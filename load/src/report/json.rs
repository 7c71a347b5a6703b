//! The JSON report: when it was made, and writing it to a file.

use std::path::Path;

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::error::LoadError;
use crate::report::Report;

/// Now, as RFC 3339 in UTC.
pub fn now() -> String {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_else(|_| "unknown".into())
}

/// Writes `report` to `path`, pretty-printed.
pub fn write(report: &Report, path: &Path) -> Result<(), LoadError> {
    let text = serde_json::to_string_pretty(report).expect("the report is plain data");
    std::fs::write(path, text + "\n").map_err(|source| LoadError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::generator::{GeneratorReport, LagReport, ProcessReport, ProcessUsage};
    use crate::measure::provenance::Machine;
    use crate::measure::stats::Snapshot;
    use crate::report::{ScenarioReport, SCHEMA};
    use crate::settings::Settings;
    use std::time::Duration;

    fn sample() -> Report {
        let usage = ProcessUsage {
            pid: 1,
            cpu_cores_avg: 0.5,
            rss_mb_peak: 10.0,
        };
        Report {
            schema: SCHEMA,
            machine: Machine::detect(),
            settings: Settings::default(),
            commit: "abc".into(),
            date: now(),
            generator: GeneratorReport {
                sched_lag_ms: LagReport {
                    p50: 0.1,
                    p99: 0.5,
                    max: 2.0,
                },
                cpu_cores_avg: 0.5,
                rss_mb_peak: 10.0,
                pool_busy: None,
            },
            scenarios: vec![ScenarioReport::new(
                "login",
                &Snapshot::default(),
                Duration::from_secs(1),
            )],
            server: Default::default(),
            process: ProcessReport {
                harness: usage,
                cloud_in_harness: true,
                nodes: vec![],
            },
            agents: None,
            incomplete: false,
        }
    }

    #[test]
    fn the_report_has_the_contract_top_level_fields() {
        let v = serde_json::to_value(sample()).expect("serializes");
        for key in [
            "schema",
            "machine",
            "settings",
            "commit",
            "date",
            "generator",
            "scenarios",
            "server",
            "process",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["schema"], "anyplay-load/report/v1");
        for key in ["p50", "p99", "max"] {
            assert!(
                v["generator"]["sched_lag_ms"].get(key).is_some(),
                "missing sched_lag_ms.{key}"
            );
        }
        assert!(
            v["generator"].get("cpu_cores_avg").is_some()
                && v["generator"].get("rss_mb_peak").is_some()
        );
        assert!(OffsetDateTime::parse(v["date"].as_str().expect("a string"), &Rfc3339).is_ok());
        // Durations are seconds, and the mode says which it is.
        assert_eq!(v["settings"]["presence"]["duration"], 10.0);
        assert_eq!(v["settings"]["mode"]["kind"], "in_process");
    }

    #[test]
    fn the_report_is_written_as_json() {
        let path =
            std::env::temp_dir().join(format!("anyplay-load-report-{}.json", std::process::id()));
        write(&sample(), &path).expect("written");
        let back: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("json");
        assert_eq!(back["commit"], "abc");
        std::fs::remove_file(&path).expect("cleanup");
    }
}
