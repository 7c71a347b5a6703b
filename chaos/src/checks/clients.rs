//! client:<name>: a real client program that rode through the run must have exited with the
//! code its plan entry expects.

use super::{CheckResult, Quantity, Verdict};
use crate::events::{Event, History};

pub fn check(history: &History, name: &str, expect_exit: i32) -> CheckResult {
    let exit = history.iter().find_map(|(_, e)| match e {
        Event::ClientExit {
            name: n,
            code,
            signal,
        } if n == name => Some((*code, signal.clone())),
        _ => None,
    });
    let (value, result, detail) = match exit {
        Some((Some(code), _)) => (
            Some(Quantity::ExitCode(code)),
            Verdict::of(code == expect_exit),
            format!("exited with code {code}"),
        ),
        Some((None, signal)) => (
            None,
            Verdict::Fail,
            format!(
                "ended by {}",
                signal.as_deref().unwrap_or("an unknown signal")
            ),
        ),
        None => (None, Verdict::Unknown, "no exit recorded".to_owned()),
    };
    CheckResult::new(
        format!("client:{name}"),
        Quantity::ExitCode(expect_exit),
        value,
        result,
        detail,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: Option<i32>, signal: Option<&str>) -> History {
        [(
            50.0,
            Event::ClientExit {
                name: "headless-1".into(),
                code,
                signal: signal.map(str::to_owned),
            },
        )]
        .into_iter()
        .collect()
    }

    #[test]
    fn the_expected_code_passes() {
        let result = check(&exit(Some(0), None), "headless-1", 0);
        assert!(result.pass);
        assert_eq!(result.name, "client:headless-1");
    }

    #[test]
    fn another_code_a_signal_or_no_exit_fail() {
        assert!(!check(&exit(Some(3), None), "headless-1", 0).pass);
        assert!(!check(&exit(None, Some("SIGKILL")), "headless-1", 0).pass);
        assert_eq!(
            check(&exit(Some(0), None), "other", 0).result,
            Verdict::Unknown
        );
    }
}
