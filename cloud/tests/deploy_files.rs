//! The deploy files the cloud ships with (`deploy/`): what they must never do.

use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// A scratch copy of the repository layout that `record-run.sh` works in: the script
/// under `deploy/`, an existing `results/`, and a `keep/` beside it that it must not touch.
struct Scratch(PathBuf);

impl Scratch {
    fn new(case: usize) -> Scratch {
        let root =
            std::env::temp_dir().join(format!("anyplay-record-run-{}-{case}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["deploy", "results/older", "keep", "bin"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::copy(
            deploy_dir().join("record-run.sh"),
            root.join("deploy/record-run.sh"),
        )
        .unwrap();
        std::fs::write(root.join("keep/marker"), "keep").unwrap();
        std::fs::write(root.join("results/older/marker"), "keep").unwrap();
        // Nothing real is ever run: a `cargo` that fails at once.
        let cargo = root.join("bin/cargo");
        std::fs::write(&cargo, "#!/bin/sh\nexit 1\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scratch(root)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Regression (issue 12): `record-run.sh PLAN NAME` ran `rm -rf results/$NAME` on any
/// name, so `..` or `../keep` removed directories outside `results/`.
#[test]
fn record_run_refuses_a_name_that_leaves_results_before_removing_anything() {
    for (case, name) in [
        "../keep",
        "..",
        ".",
        "older/../../keep",
        "a b",
        "x/y",
        "*",
        "-rf",
        "Node",
    ]
    .into_iter()
    .enumerate()
    {
        let scratch = Scratch::new(case);
        let root = &scratch.0;
        let path = format!(
            "{}:{}",
            root.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("bash")
            .arg(root.join("deploy/record-run.sh"))
            .args(["plans/quickstart.yaml", name])
            .env("PATH", path)
            .output()
            .expect("bash runs the script");
        assert_eq!(
            out.status.code(),
            Some(2),
            "name {name:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("bad name"),
            "name {name:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for kept in [
            "keep/marker",
            "results/older/marker",
            "deploy/record-run.sh",
        ] {
            assert!(root.join(kept).exists(), "name {name:?} removed {kept}");
        }
    }
}

/// The compose cluster publishes the nodes' ops ports, so it must not start them
/// without an admin token: the variable is required, with no default to fall back on.
#[test]
fn compose_requires_an_admin_token_for_every_node() {
    let text = std::fs::read_to_string(deploy_dir().join("docker-compose.yml")).unwrap();
    let required = "ANYPLAY_ADMIN_TOKEN: ${ANYPLAY_ADMIN_TOKEN:?";
    assert!(
        text.lines().any(|l| l.trim_start().starts_with(required)),
        "the node environment needs `{required}...}}`"
    );
    // Every node takes the shared environment that holds it.
    let nodes = text
        .lines()
        .filter(|l| l.starts_with("  node-") && l.ends_with(':'))
        .count();
    assert!(nodes >= 2, "{nodes} nodes");
    assert_eq!(text.matches("<<: *node-env").count(), nodes);
}
