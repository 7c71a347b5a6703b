//! What the whole-run tests share: the real binary, scratch directories, the shipped plans cut
//! down to a quick size, and one run at a time.

pub mod containers;
pub mod loopback;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Whole runs at the tests' reduced sizes take about a third of 2 cores each (the self-test's
/// case measured 60 % of one core): two at a time still leave their timings meaning something;
/// more would not.
const RUNS_AT_ONCE: usize = 2;
static RUNNING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// A turn to run a whole plan, held until dropped.
pub struct RunTurn(());

impl Drop for RunTurn {
    fn drop(&mut self) {
        let (running, freed) = &RUNNING;
        *running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) -= 1;
        freed.notify_one();
    }
}

pub fn a_run_turn() -> RunTurn {
    let (running, freed) = &RUNNING;
    let mut running = running
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while *running >= RUNS_AT_ONCE {
        running = freed
            .wait(running)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    *running += 1;
    RunTurn(())
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A fresh directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("anyplay-chaos-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The shipped plan `name` with the load and the settle cut down, written into `dir`.
pub fn reduced_plan(name: &str, dir: &Path, players: u32, settle: &str) -> PathBuf {
    reduced_plan_with(name, dir, players, settle, |_| {})
}

/// [`reduced_plan`], changed further by `edit`.
pub fn reduced_plan_with(
    name: &str,
    dir: &Path,
    players: u32,
    settle: &str,
    edit: impl FnOnce(&mut serde_yaml::Value),
) -> PathBuf {
    let text =
        std::fs::read_to_string(workspace().join("plans").join(format!("{name}.yaml"))).unwrap();
    let mut plan: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    plan["load"]["players"] = players.into();
    plan["load"]["login_rate"] = 100.into();
    plan["settle"] = settle.into();
    edit(&mut plan);
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, serde_yaml::to_string(&plan).unwrap()).unwrap();
    path
}

pub fn chaos(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_anyplay-chaos"));
    command.args(args);
    command
}

/// `anyplay-chaos run PLAN --out OUT EXTRA…` to its end.
pub fn run_plan(plan: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    chaos(&args).output().expect("anyplay-chaos runs")
}

/// Asserts that a run passed; if not, says which checks failed before the whole output, so
/// that a log that keeps only the first lines of a failure still names them.
pub fn assert_passed(output: &Output, what: &str) {
    if output.status.code() == Some(0) {
        return;
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains("| FAIL ") || line.contains("| UNKNOWN "))
        .collect();
    panic!(
        "{what} did not pass ({}):\n{}\n\n{stdout}\n{}",
        output.status,
        failed.join("\n"),
        String::from_utf8_lossy(&output.stderr)
    );
}

pub fn report(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report.json"))
        .unwrap()
}
