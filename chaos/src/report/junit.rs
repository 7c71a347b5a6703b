//! The checks of a run as JUnit XML, for CI (`run --junit FILE`): one `testsuite` named
//! after the plan, one `testcase` per check, a `failure` with the check's detail for each
//! failed one.

use std::fmt::Write as _;

use crate::checks::Verdict;
use crate::report::json::Report;

/// The whole XML document.
pub fn junit(report: &Report) -> String {
    let name = xml(report.plan_name());
    let tests = report.checks.len();
    let failures = report.checks.iter().filter(|c| !c.pass).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"anyplay-chaos\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{name}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">"
    );
    out.push_str("    <properties>\n");
    let properties = [
        ("seed", report.seed.to_string()),
        ("started_at", report.started_at.clone().unwrap_or_default()),
        ("tool.version", report.tool.version.clone()),
        ("tool.commit", report.tool.commit.clone()),
    ];
    for (key, value) in properties {
        let _ = writeln!(
            out,
            "      <property name=\"{key}\" value=\"{}\"/>",
            xml(&value)
        );
    }
    out.push_str("    </properties>\n");
    for check in &report.checks {
        let case = format!(
            "    <testcase name=\"{}\" classname=\"anyplay-chaos.{name}\"",
            xml(&check.name)
        );
        if check.pass {
            let _ = writeln!(out, "{case}/>");
            continue;
        }
        let value = check
            .value
            .map_or_else(|| "none".to_owned(), |v| v.to_string());
        // Too little evidence is no pass either, but CI shows it apart from a breach.
        let message = match check.result {
            Verdict::Unknown => format!("unknown: {}", check.detail),
            _ => check.detail.clone(),
        };
        let _ = writeln!(
            out,
            "{case}>\n      <failure message=\"{}\" type=\"{}\">limit {}, value {}\n{}</failure>\n    </testcase>",
            xml(&message),
            xml(&check.name),
            xml(&check.limit.to_string()),
            xml(&value),
            xml(&check.detail)
        );
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Text made safe for XML content and attribute values. Line breaks and tabs become
/// character references, which attribute normalisation would otherwise turn into spaces;
/// characters XML 1.0 cannot carry at all (other control characters) become U+FFFD.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::History;
    use crate::plan::Plan;

    fn report() -> Report {
        let plan = Plan::from_yaml("name: tiny\nseed: 4\nload: {players: 2}\n").unwrap();
        let mut report = Report::build(&plan, &History::default(), serde_json::Value::Null);
        report.checks[0].pass = true;
        report.checks[0].result = Verdict::Pass;
        report.checks[1].detail = "a <b> & \"c\" 'd'\u{1}".into();
        report.checks[1].result = Verdict::Fail;
        report
    }

    #[test]
    fn one_suite_one_case_per_check_and_failures_with_details() {
        let report = report();
        let xml = junit(&report);
        let failed = report.checks.iter().filter(|c| !c.pass).count();
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
        assert_eq!(xml.matches("<testsuite ").count(), 1);
        assert!(xml.contains("<testsuite name=\"tiny\""));
        assert!(xml.contains(&format!(
            "tests=\"{}\" failures=\"{failed}\"",
            report.checks.len()
        )));
        assert_eq!(xml.matches("<testcase ").count(), report.checks.len());
        assert_eq!(xml.matches("<failure ").count(), failed);
        assert!(xml.contains("<testcase name=\"players_back\" classname=\"anyplay-chaos.tiny\"/>"));
        assert!(xml.contains("<property name=\"seed\" value=\"4\"/>"));
        assert!(xml.contains("message=\"a &lt;b&gt; &amp; &quot;c&quot; &apos;d&apos;\u{FFFD}\""));
        assert!(xml.contains(">limit 0, value "), "{xml}");
    }

    #[test]
    fn a_parser_reads_back_the_suite_the_cases_and_the_details() {
        let report = report();
        let text = junit(&report);
        let doc = roxmltree::Document::parse(&text).unwrap();
        let suites: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testsuite"))
            .collect();
        assert_eq!(suites.len(), 1);
        assert_eq!(suites[0].attribute("name"), Some("tiny"));
        let cases: Vec<_> = suites[0]
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        let names: Vec<&str> = cases.iter().filter_map(|c| c.attribute("name")).collect();
        let expected: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, expected);
        for (case, check) in cases.iter().zip(&report.checks) {
            let failure = case.children().find(|n| n.has_tag_name("failure"));
            assert_eq!(failure.is_none(), check.pass, "{}", check.name);
        }
        let failure = cases[1]
            .children()
            .find(|n| n.has_tag_name("failure"))
            .unwrap();
        let detail = "a <b> & \"c\" 'd'\u{FFFD}";
        assert_eq!(failure.attribute("message"), Some(detail));
        assert!(failure.text().unwrap().ends_with(detail));
    }

    #[test]
    fn an_unknown_check_is_a_failure_whose_message_says_unknown() {
        let report = report();
        let text = junit(&report);
        let doc = roxmltree::Document::parse(&text).unwrap();
        let case = doc
            .descendants()
            .find(|n| n.attribute("name") == Some("lost_writes"))
            .unwrap();
        let failure = case.children().find(|n| n.has_tag_name("failure")).unwrap();
        assert_eq!(
            failure.attribute("message"),
            Some("unknown: no friend or session write was recorded")
        );
    }

    #[test]
    fn escaping_keeps_xml_well_formed() {
        assert_eq!(xml("a&b<c>\"'"), "a&amp;b&lt;c&gt;&quot;&apos;");
        assert_eq!(xml("x\ny"), "x&#10;y");
        assert_eq!(xml("\u{0}\u{1b}"), "\u{FFFD}\u{FFFD}");
        assert_eq!(xml("ünïcode — ok"), "ünïcode — ok");
    }
}
