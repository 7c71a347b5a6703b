//! A deployed cloud: two `anyplay-cloud` nodes serving HTTPS and WSS with a certificate of a
//! private CA (made here by openssl), their sign-in codes given out by `--test-codes`, played
//! by the `anyplay-load` binary through `--url https://…`, `--ca` and `--codes-from`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::processes::{load, Cluster};
use crate::support::{services, temp_path};

const TOKEN: &str = "tls-test-admin-token";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, and a certificate it signed for 127.0.0.1: `(ca.pem, node.pem, node-key.pem)`.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).expect("a directory for the certificates");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "1", "-subj", "/CN=anyplay test CA"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca-key.pem", "-out", "ca.pem"]);
    openssl(dir, &ca);
    let mut request = vec!["req", "-subj", "/CN=127.0.0.1"];
    request.extend(ec);
    request.extend(["-keyout", "node-key.pem", "-out", "node.csr"]);
    openssl(dir, &request);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").expect("san.ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "node.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "san.ext",
            "-out",
            "node.pem",
        ],
    );
    (
        dir.join("ca.pem"),
        dir.join("node.pem"),
        dir.join("node-key.pem"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_plays_a_tls_cluster_signing_in_through_test_codes() {
    let dir = temp_path("tls");
    let (ca, cert, key) = certificates(&dir);
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let node_flags = [
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--test-codes",
        "--admin-token",
        TOKEN,
    ];
    let cluster = Cluster::start(&services(), "tls", &node_flags).await;
    let token_file = dir.join("admin-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("the token file");
    let mut flags: Vec<String> = Vec::new();
    for node in &cluster.nodes {
        assert!(node.api.starts_with("https://"), "{}", node.api);
        flags.extend(["--url".into(), node.api.clone()]);
    }
    flags.extend(
        [
            "--codes-from",
            &cluster.nodes[0].ops,
            "--admin-token-file",
            &token_file.display().to_string(),
        ]
        .map(String::from),
    );
    let played = |trusted: bool, players: &str, json: &Path| {
        let mut args = flags.clone();
        if trusted {
            args.extend(["--ca".into(), ca.display().to_string()]);
        }
        args.extend(
            [
                "--players",
                players,
                "--rate",
                "100",
                "--friends",
                "4",
                "--scenarios",
                "presence",
                "--presence-rate",
                "40",
                "--presence-seconds",
                "1",
                "--json",
                &json.display().to_string(),
            ]
            .map(String::from),
        );
        args
    };

    // The nodes' CA is nobody's root: without --ca no player gets in.
    let untrusted = load(&played(false, "2", &dir.join("untrusted.json"))).await;
    assert!(
        !untrusted.status.success(),
        "a cloud whose certificate nothing trusts was played:\n{}",
        String::from_utf8_lossy(&untrusted.stdout)
    );

    let json = dir.join("report.json");
    let out = load(&played(true, "40", &json)).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "anyplay-load over TLS failed ({}):\n{stdout}\n{stderr}\nnode-1 log:\n{}",
        out.status,
        cluster.nodes[0].log()
    );
    assert!(stdout.contains("online: 40 of 40 players"), "{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the --json report"))
            .expect("JSON");
    let scenario = |name: &str| {
        report["scenarios"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["name"] == name))
            .unwrap_or_else(|| panic!("no {name} in {report}"))
            .clone()
    };
    // Every code came through --codes-from: the load was given no mail log.
    assert_eq!(scenario("login")["ops"]["e2e_login"]["ok"], 40);
    let delivery = &scenario("presence")["delivery"];
    assert!(delivery["expected"].as_u64() > Some(0), "{delivery}");
    assert_eq!(delivery["missing"], 0, "{delivery}");
    let _ = std::fs::remove_dir_all(&dir);
}
