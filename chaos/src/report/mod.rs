//! The run report, rendered from a run directory (`plan.yaml`, `events.jsonl`, and the load
//! report when present) into `report.json`, `summary.md` and `report.html`, so the end of a
//! run and `anyplay-chaos report DIR` share one code path; and what is made from reports:
//! JUnit XML for CI, and the comparison of two runs.

pub mod compare;
pub(crate) mod html;
pub(crate) mod json;
pub mod junit;
pub mod markdown;

use std::path::{Path, PathBuf};

use crate::events::{read_history, EventsError, History, EVENTS_FILE};
use crate::plan::{Plan, PlanError};

pub use json::{Report, Verdict};

/// The files of a run directory.
pub const PLAN_FILE: &str = "plan.yaml";
pub const LOAD_REPORT_FILE: &str = "load.json";
pub const REPORT_FILE: &str = "report.json";
pub const SUMMARY_FILE: &str = "summary.md";
pub const HTML_FILE: &str = "report.html";

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("the run's plan: {0}")]
    Plan(#[from] PlanError),
    #[error("the run's events: {0}")]
    Events(#[from] EventsError),
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not JSON: {source}", path.display())]
    LoadReport {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A run directory read back and judged, nothing written.
#[derive(Debug)]
pub struct Judged {
    pub report: Report,
    pub history: History,
}

/// Judges the run in `dir` and writes its `report.json`, `summary.md` and `report.html`.
pub fn render_dir(dir: &Path) -> Result<Report, ReportError> {
    let Judged { report, history } = judge_dir(dir)?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        crate::run_files::write(&path, text).map_err(|source| ReportError::Write { path, source })
    };
    // Plain data: serializing it cannot fail.
    write(
        REPORT_FILE,
        serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    )?;
    write(SUMMARY_FILE, markdown::summary(&report))?;
    write(HTML_FILE, html::page(&report, &history))?;
    Ok(report)
}

/// Reads the run in `dir` (plan, history, load report) and judges it.
pub fn judge_dir(dir: &Path) -> Result<Judged, ReportError> {
    let plan = Plan::load_recorded(&dir.join(PLAN_FILE))?;
    let history = read_history(&dir.join(EVENTS_FILE))?;
    let load_path = dir.join(LOAD_REPORT_FILE);
    let load = match crate::run_files::read_to_string(&load_path) {
        Ok(text) => serde_json::from_str(&text).map_err(|source| ReportError::LoadReport {
            path: load_path.clone(),
            source,
        })?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => serde_json::Value::Null,
        Err(source) => {
            return Err(ReportError::Read {
                path: load_path,
                source,
            })
        }
    };
    Ok(Judged {
        report: Report::build(&plan, &history, load),
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventLog, RunMeta};
    use std::time::Instant;

    #[test]
    fn a_run_directory_renders_every_file() {
        let dir = std::env::temp_dir().join(format!("anyplay-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plan = Plan::from_yaml("name: tiny\nload: {players: 2}\n").unwrap();
        std::fs::write(dir.join(PLAN_FILE), plan.to_yaml()).unwrap();
        std::fs::write(
            dir.join(LOAD_REPORT_FILE),
            r#"{"schema": "anyplay-load/report/v1"}"#,
        )
        .unwrap();
        let log = EventLog::create(&dir.join(EVENTS_FILE), Instant::now()).unwrap();
        log.record(Event::RunStart(RunMeta::now("tiny", 1)))
            .unwrap();

        let report = render_dir(&dir).unwrap();
        assert_eq!(report.load["schema"], "anyplay-load/report/v1");
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(REPORT_FILE)).unwrap()).unwrap();
        assert_eq!(written["schema"], json::SCHEMA);
        let summary = std::fs::read_to_string(dir.join(SUMMARY_FILE)).unwrap();
        assert!(summary.contains("## Checks") && summary.contains("## Faults"));
        let html = std::fs::read_to_string(dir.join(HTML_FILE)).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
