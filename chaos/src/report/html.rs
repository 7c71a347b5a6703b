//! `report.html`: the run as one self-contained page — inline SVG charts of the run's
//! series on one shared time axis, each service's state as bands, every action as a
//! marker, then the checks and faults tables and the run's identity. No network, no
//! external script, font or style (its content security policy forbids loading any): it
//! opens from a CI artifact or a mail attachment.
//!
//! - `scale`: data to pixels, nice ticks.
//! - `bands`: service states derived from the history.
//! - `chart`: the SVG.
//! - `drawn`: the one inline script, which measures what the browser drew.

mod bands;
mod chart;
mod drawn;
mod scale;

use std::fmt::Write as _;

use crate::checks::fault_table::{self, fmt_num, shown};
use crate::events::{Event, History, Tick};
use crate::plan::ActionKind;
use crate::report::json::{Report, Verdict};
use crate::report::markdown::{
    check_row, fault_row, CHECK_COLUMNS, CHECK_RIGHT, FAULT_COLUMNS, FAULT_RIGHT,
};

use chart::{Figure, Marker, Panel, Series, Style};

/// Nothing may be fetched: only the page's own style and script run.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'";

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d2433;margin:24px;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.verdict{display:inline-block;padding:1px 10px;border-radius:4px;color:#fff;font-size:15px;vertical-align:2px}
.pass{background:#2e9a57}.fail{background:#c8372f}
.description{color:#4a5568;margin:0 0 10px}
.shortfall{color:#9c4221;margin:0 0 10px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0 0 16px}
dl.facts dt{color:#5a6478}dl.facts dd{margin:0}
table{border-collapse:collapse;margin:4px 0 8px}
th,td{border:1px solid #d5dae3;padding:3px 9px;text-align:left;vertical-align:top}
th{background:#f1f3f7}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.failed td{background:#fdecea}td.result-fail{color:#b3261e;font-weight:600}
td.result-unknown{color:#8a5a00;font-weight:600}
svg.figure{display:block;max-width:100%;height:auto;font:11px system-ui,sans-serif}
svg .title{font-size:13px;font-weight:600;fill:#1d2433}svg .legend,svg .tick{fill:#4a5568}svg .version{font-size:10px;fill:#1d2433}
svg .empty{fill:#8a93a5;text-anchor:middle}
svg .grid{stroke:#e6e9ef;stroke-width:1}svg .frame{fill:none;stroke:#c9cfda}
svg .axis{stroke:#8a93a5}
svg .line{fill:none;stroke-width:1.8;stroke-linejoin:round;stroke-linecap:round}
svg .window{fill:#8a93a5;fill-opacity:.12}
svg .marker line{stroke:#1d2433;stroke-width:1.4;stroke-dasharray:4 3}svg .marker text{fill:#1d2433;font-weight:600}
svg .marker.heal line{stroke:#8a93a5;stroke-width:1}svg .marker.heal text{fill:#5a6478;font-weight:400}
svg .marker.failed line{stroke:#c8372f}svg .marker.failed text{fill:#c8372f}
footer{margin-top:28px;color:#8a93a5;font-size:12px}
";

/// The whole page for `report`; the history gives the service bands and the actions'
/// actual times.
pub fn page(report: &Report, history: &History) -> String {
    let (verdict, class) = match report.verdict {
        Verdict::Pass => ("PASS", "pass"),
        Verdict::Fail => ("FAIL", "fail"),
    };
    let name = escape(report.plan_name());
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>anyplay-chaos: {name} — {verdict}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>anyplay-chaos: {name} <span class=\"verdict {class}\">{verdict}</span></h1>\n"
    );
    if let Some(description) = report.plan.get("description").and_then(|d| d.as_str()) {
        let _ = writeln!(html, "<p class=\"description\">{}</p>", escape(description));
    }
    html.push_str(&facts(report));
    if let Some(shortfall) = report.login_shortfall() {
        let _ = writeln!(
            html,
            "<p class=\"shortfall\"><b>Load:</b> {}.</p>",
            escape(&shortfall.to_string())
        );
    }
    html.push_str(&figure(report, history).svg());
    html.push_str("\n<h2>Checks</h2>\n");
    html.push_str(&checks_table(report));
    html.push_str("<h2>Faults</h2>\n");
    html.push_str(&faults_table(report));
    html.push_str(&hosts_table(history));
    let _ = write!(
        html,
        "<footer>Written by anyplay-chaos {} from the run's events.jsonl; \
         <code>anyplay-chaos report DIR</code> writes it again.</footer>\n{}</body>\n</html>\n",
        escape(&report.tool.version),
        drawn::SCRIPT
    );
    html
}

/// Text made safe for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The run's identity: plan, seed, verdict, start, tool and machine.
fn facts(report: &Report) -> String {
    let verdict = match report.verdict {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
    };
    let machine = report.machine.as_ref().map_or_else(
        || "unknown (the history has no run_start line)".to_owned(),
        |m| {
            format!(
                "{}, {}, {}, {} cores, {} MB",
                m.os, m.arch, m.cpu, m.cores, m.memory_mb
            )
        },
    );
    let rows = [
        ("plan", report.plan_name().to_owned()),
        ("seed", report.seed.to_string()),
        ("verdict", verdict.to_owned()),
        (
            "started",
            report.started_at.clone().unwrap_or_else(|| "?".to_owned()),
        ),
        (
            "tool",
            format!(
                "anyplay-chaos {} (commit {})",
                report.tool.version, report.tool.commit
            ),
        ),
        ("machine", machine),
    ];
    let mut out = String::from("<dl class=\"facts\">\n");
    for (key, value) in rows {
        let _ = writeln!(out, "<dt>{key}</dt><dd>{}</dd>", escape(&value));
    }
    out.push_str("</dl>\n");
    out
}

/// The run's series, bands and actions on the time axis `[0, end of the run]`.
fn figure(report: &Report, history: &History) -> Figure {
    let series = |name, color, style, value: fn(&Tick) -> Option<f64>| Series {
        name,
        color,
        style,
        points: report
            .series
            .iter()
            .map(|p| (p.t, value(&p.tick)))
            .collect(),
    };
    let end = report
        .series
        .iter()
        .map(|p| p.t)
        .fold(history.end(), f64::max);
    Figure {
        end,
        panels: vec![
            Panel {
                title: "Players online",
                counts: true,
                series: vec![series("online", "#2f6fd6", Style::Line, |t| {
                    Some(t.online as f64)
                })],
            },
            Panel {
                title: "Welcomes and disconnects per second",
                counts: true,
                series: vec![
                    series("welcomes", "#3fb56b", Style::Line, |t| {
                        Some(t.welcomes as f64)
                    }),
                    series("disconnects", "#d9423b", Style::Line, |t| {
                        Some(t.disconnects as f64)
                    }),
                ],
            },
            Panel {
                title: "HTTP calls and errors per second",
                counts: true,
                series: vec![
                    series("calls", "#2f6fd6", Style::Line, |t| {
                        Some(t.http_calls as f64)
                    }),
                    series("errors", "#d9423b", Style::Bars, |t| {
                        Some(t.http_errors as f64)
                    }),
                ],
            },
            Panel {
                title: "Latency p99, ms",
                counts: false,
                series: vec![
                    series("HTTP p99", "#7a4fc9", Style::Line, |t| t.p99_ms),
                    series("presence delivery p99", "#e08a1e", Style::Line, |t| {
                        t.presence_p99_ms
                    }),
                ],
            },
        ],
        bands: bands::bands(history),
        markers: markers(history),
    }
}

/// Every action of the history, with its schedule and actual times for the tooltip.
fn markers(history: &History) -> Vec<Marker> {
    fault_table::faults(history)
        .into_iter()
        .map(|fault| {
            let error = history.iter().find_map(|(_, e)| match e {
                Event::ActionEnd {
                    action,
                    target,
                    at,
                    error: Some(error),
                } if *action == fault.action && *target == fault.target && *at == fault.at => {
                    Some(error.clone())
                }
                _ => None,
            });
            let (action, target) = shown(
                fault.action,
                &fault.target,
                fault.to.as_deref(),
                fault.toxic.as_ref(),
            );
            let label = format!("{action} {target}");
            let mut detail = format!(
                "{label}: at {}s on the timeline; ran from {}s to {}s of the run",
                fmt_num(fault.at),
                fmt_num(fault.start),
                fmt_num(fault.end)
            );
            if let Some(error) = &error {
                let _ = write!(detail, "; failed: {error}");
            }
            Marker {
                label,
                detail,
                start: fault.start,
                end: fault.end,
                failed: error.is_some(),
                heal: fault.action == ActionKind::Start,
            }
        })
        .collect()
}

/// An HTML table; `numeric` columns align right, `failed` rows are highlighted.
fn table(headers: &[&str], numeric: &[bool], rows: &[(bool, Vec<String>)]) -> String {
    let is_num = |i: usize| numeric.get(i).copied().unwrap_or(false);
    let mut out = String::from("<table>\n<tr>");
    for (i, h) in headers.iter().enumerate() {
        let class = if is_num(i) { " class=\"num\"" } else { "" };
        let _ = write!(out, "<th{class}>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for (failed, cells) in rows {
        out.push_str(if *failed {
            "<tr class=\"failed\">"
        } else {
            "<tr>"
        });
        for (i, cell) in cells.iter().enumerate() {
            let class = if is_num(i) {
                " class=\"num\""
            } else if *failed && cell == "FAIL" {
                " class=\"result-fail\""
            } else if *failed && cell == "UNKNOWN" {
                " class=\"result-unknown\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// The checks as summary.md shows them.
fn checks_table(report: &Report) -> String {
    let rows: Vec<(bool, Vec<String>)> = report
        .checks
        .iter()
        .map(|c| (!c.pass, check_row(c)))
        .collect();
    table(&CHECK_COLUMNS, &CHECK_RIGHT, &rows)
}

/// The faults as summary.md shows them.
fn faults_table(report: &Report) -> String {
    if report.faults.is_empty() {
        return "<p>(no actions)</p>\n".to_owned();
    }
    let rows: Vec<(bool, Vec<String>)> = report
        .faults
        .iter()
        .map(|f| (f.players_hit > 0 && f.back_s.p100.is_none(), fault_row(f)))
        .collect();
    table(&FAULT_COLUMNS, &FAULT_RIGHT, &rows)
}

/// The plan's hosts as the run made them (`host_up`); nothing when it placed no services.
fn hosts_table(history: &History) -> String {
    let rows: Vec<(bool, Vec<String>)> = history
        .iter()
        .filter_map(|(_, e)| match e {
            Event::HostUp {
                host,
                host_kind,
                address,
                services,
            } => {
                let services: Vec<String> = services.iter().map(|s| s.to_string()).collect();
                Some((
                    false,
                    vec![
                        host.clone(),
                        host_kind.to_string(),
                        address.clone(),
                        services.join(", "),
                    ],
                ))
            }
            _ => None,
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h2>Hosts</h2>\n");
    out.push_str(&table(&["host", "kind", "address", "services"], &[], &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::RunMeta;
    use crate::plan::{ActionKind, Plan, Service};

    fn run() -> (Report, History) {
        let plan = Plan::from_yaml(
            "name: tiny\ndescription: \"drop <all> & \\\"see\\\"\"\nload: {players: 2, through_proxy: true}\ntimeline:\n  - {at: 1s, kill: node-1}\n",
        )
        .unwrap();
        let tick = |online| {
            Event::LoadTick(Tick {
                online,
                http_calls: 10,
                http_errors: 2,
                p99_ms: Some(3.5),
                ..Tick::default()
            })
        };
        let history: History = [
            (0.0, Event::RunStart(RunMeta::now("tiny", 1))),
            (
                0.1,
                Event::ServiceUp {
                    service: Service::Node(1),
                    addr: None,
                },
            ),
            (1.0, tick(2)),
            (
                1.5,
                Event::ActionStart {
                    action: ActionKind::Kill,
                    target: "node-1".into(),
                    at: 1.0,
                    via: None,
                    to: None,
                    toxic: None,
                },
            ),
            (
                1.6,
                Event::ServiceExit {
                    service: Service::Node(1),
                    code: None,
                    signal: Some("SIGKILL".into()),
                    reason: None,
                },
            ),
            (
                1.6,
                Event::ActionEnd {
                    action: ActionKind::Kill,
                    target: "node-1".into(),
                    at: 1.0,
                    error: None,
                },
            ),
            (2.0, tick(0)),
        ]
        .into_iter()
        .collect();
        let mut report = Report::build(&plan, &history, serde_json::Value::Null);
        report.checks[0].detail = "<script>alert('x')</script> see https://example.invalid".into();
        (report, history)
    }

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("node-1 · 2s"), "node-1 · 2s");
    }

    #[test]
    fn the_page_is_self_contained() {
        let (report, history) = run();
        let html = page(&report, &history);
        // The only URL is in a check's detail, and there it is plain escaped text.
        let without_detail = html.replace("https://example.invalid", "");
        for reference in [
            "http://",
            "https://",
            "src=",
            "href=",
            "url(",
            "@import",
            "<link",
            "fetch(",
            "XMLHttpRequest",
            "WebSocket",
            "import(",
        ] {
            assert!(
                !without_detail.contains(reference),
                "{reference} in the page"
            );
        }
        // One script, inline, and a policy that lets the browser load nothing.
        assert_eq!(html.matches("<script").count(), 1);
        assert!(html.contains("<script>\n"));
        assert!(html.contains(&format!("content=\"{POLICY}\"")));
        assert!(POLICY.starts_with("default-src 'none';"));
        assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    }

    #[test]
    fn the_page_has_charts_bands_markers_tables_and_identity() {
        let (report, history) = run();
        let html = page(&report, &history);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("anyplay-chaos: tiny <span class=\"verdict fail\">FAIL</span>"));
        assert!(html.contains("drop &lt;all&gt; &amp; &quot;see&quot;"));
        assert_eq!(html.matches("<svg").count(), 1);
        for part in [
            "Players online",
            "Welcomes and disconnects per second",
            "HTTP calls and errors per second",
            "Latency p99, ms",
            "Services",
            ">kill node-1</text>",
            "node-1 up: 0.1s to 1.6s",
            "node-1 down: 1.6s to 2.0s",
            "<th>check</th>",
            "<td>players_back</td>",
            "<th class=\"num\">players hit</th>",
            "<dt>seed</dt><dd>1</dd>",
            "<dt>machine</dt>",
            "(commit ",
        ] {
            assert!(html.contains(part), "{part} missing");
        }
    }

    #[test]
    fn hosts_are_shown_only_when_the_plan_placed_services() {
        let (report, history) = run();
        assert!(!page(&report, &history).contains("<h2>Hosts</h2>"));
        let placed: History = [(
            0.1,
            Event::HostUp {
                host: "db".into(),
                host_kind: crate::plan::HostKind::Netns,
                address: "10.213.7.2".into(),
                services: vec![Service::Postgres],
            },
        )]
        .into_iter()
        .collect();
        assert!(page(&report, &placed).contains(
            "<h2>Hosts</h2>\n<table>\n<tr><th>host</th><th>kind</th><th>address</th><th>services</th></tr>\n<tr><td>db</td><td>netns</td><td>10.213.7.2</td><td>postgres</td></tr>"
        ));
    }

    #[test]
    fn an_unknown_check_is_marked_apart_from_a_failure() {
        let (report, history) = run();
        let html = page(&report, &history);
        assert!(
            html.contains("<td>duplicate_sessions</td><td class=\"num\">0</td><td class=\"num\">—</td><td class=\"result-unknown\">UNKNOWN</td>"),
            "{html}"
        );
    }

    #[test]
    fn a_failed_action_is_marked_with_its_error() {
        let history: History = [
            (
                1.0,
                Event::ActionStart {
                    action: ActionKind::Stop,
                    target: "node-2".into(),
                    at: 1.0,
                    via: None,
                    to: None,
                    toxic: None,
                },
            ),
            (
                1.2,
                Event::ActionEnd {
                    action: ActionKind::Stop,
                    target: "node-2".into(),
                    at: 1.0,
                    error: Some("no such node".into()),
                },
            ),
        ]
        .into_iter()
        .collect();
        let markers = markers(&history);
        assert_eq!(markers.len(), 1);
        assert!(markers[0].failed);
        assert_eq!(markers[0].label, "stop node-2");
        assert!(markers[0].detail.ends_with("failed: no such node"));
    }
}
