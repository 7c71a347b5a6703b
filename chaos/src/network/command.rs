//! The system tools a run's network is made with (`ip`, `nft`, `iptables`), run to their end
//! with their error output kept for the message.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::NetworkError;
use crate::supervisor::services::find_program;

/// Where `program` is: on `PATH`, or in root's sbin directories (not on every `PATH`).
pub(super) fn locate(program: &str) -> Option<PathBuf> {
    find_program(program, &["/usr/sbin", "/sbin"])
}

/// Runs `program args…` (with `input` on stdin when given); fails with its stderr.
pub(super) fn run(program: &str, args: &[&str], input: Option<&str>) -> Result<(), NetworkError> {
    let failed = |message: String| NetworkError::Command {
        command: format!("{program} {}", args.join(" ")),
        message,
    };
    let path = locate(program).ok_or_else(|| failed("not installed".into()))?;
    let mut child = Command::new(path)
        .args(args)
        .stdin(match input {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(e.to_string()))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| failed(e.to_string()))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| failed(e.to_string()))?;
    match output.status.success() {
        true => Ok(()),
        false => Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        )),
    }
}
