//! What the whole-run tests share: the real binary, scratch directories, the shipped plans cut
//! down to a quick size, and one run at a time.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Whole runs take the machine: one at a time, so their timings mean something on 2 cores.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
    let text =
        std::fs::read_to_string(workspace().join("plans").join(format!("{name}.yaml"))).unwrap();
    let mut plan: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    plan["load"]["players"] = players.into();
    plan["load"]["login_rate"] = 100.into();
    plan["settle"] = settle.into();
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

pub fn report(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report.json"))
        .unwrap()
}
