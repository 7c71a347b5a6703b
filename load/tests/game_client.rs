//! `anyplay-load client`, the headless game client of a plan's `clients:`: two of them
//! befriend each other, follow each other's presence and keep their parties while a node of
//! their cluster drains away, and exit 0; with every node gone, they exit 1 saying so.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::processes::{CloudProcess, Cluster, LOAD};
use crate::support::{services, temp_path};

/// Starts client `name` befriending `friend` on `servers` for `seconds`, allowed
/// `back_within` seconds without a connection.
fn client(
    (name, friend): (&str, &str),
    servers: &str,
    (seconds, back_within): (u32, u32),
    mail_log: &Path,
    out: &Path,
) -> tokio::process::Child {
    tokio::process::Command::new(LOAD)
        .args([
            "client", "--server", servers, "--name", name, "--friend", friend,
        ])
        .args(["--for", &format!("{seconds}s")])
        .args(["--back-within", &format!("{back_within}s")])
        .arg("--mail-log")
        .arg(mail_log)
        .arg("--out")
        .arg(out.join(name))
        .kill_on_drop(true)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("anyplay-load client starts")
}

async fn ended(child: tokio::process::Child) -> Output {
    tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .expect("the client ends by itself")
        .expect("the client runs")
}

fn signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_ride_through_a_drain_and_name_a_lost_cloud() {
    let cluster = Cluster::start(&services(), "riders", &[]).await;
    let out = temp_path("riders");
    let servers = format!("{},{}", cluster.nodes[0].api, cluster.nodes[1].api);
    // A drained node's players come back within the rule's 10 s window, and a connect.
    let riders = [
        client(
            ("rider_a", "rider_b"),
            &servers,
            (25, 15),
            &cluster.mail_log,
            &out,
        ),
        client(
            ("rider_b", "rider_a"),
            &servers,
            (25, 15),
            &cluster.mail_log,
            &out,
        ),
    ];
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Drained, node-1 closes its connections 1001 and the riders move to node-2.
    signal(cluster.nodes[0].child.id(), "-TERM");
    for (rider, name) in riders.into_iter().zip(["rider_a", "rider_b"]) {
        let output = ended(rider).await;
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{name} saw something break:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let seen: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(name).join("client.json")).expect("client.json"),
        )
        .expect("JSON");
        assert_eq!(
            seen["friends_made"].as_array().map(Vec::len),
            Some(1),
            "{seen}"
        );
        assert!(seen["party"].is_string(), "{seen}");
        assert!(seen["events"]["presence"].as_u64() > Some(0), "{seen}");
        assert!(
            seen["welcomes"].as_u64() >= Some(2),
            "came back after the drain: {seen}"
        );
    }

    // Every node gone: the riders say it and fail.
    let servers = cluster.nodes[1].api.clone();
    let riders = [
        client(
            ("rider_a", "rider_b"),
            &servers,
            (16, 6),
            &cluster.mail_log,
            &out,
        ),
        client(
            ("rider_b", "rider_a"),
            &servers,
            (16, 6),
            &cluster.mail_log,
            &out,
        ),
    ];
    tokio::time::sleep(Duration::from_secs(4)).await;
    signal(cluster.nodes[1].child.id(), "-KILL");
    for rider in riders {
        let output = ended(rider).await;
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{stdout}");
        assert!(stdout.contains("BROKE: no connection for"), "{stdout}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A client the cloud refuses for good (a handle that breaks its rules) says so and exits 1 at
/// once, instead of asking again for a minute. (An outside test saw 61 s of retries against a
/// permanent 422, even with `--for 2s`.)
#[tokio::test]
async fn a_client_refused_for_good_exits_at_once() {
    let cloud = CloudProcess::sqlite().await;
    let out = temp_path("refused-client");
    let started = std::time::Instant::now();
    let child = client(
        ("not a handle!", "nobody"),
        &cloud.api,
        (30, 10),
        &cloud.mail_log(),
        &out,
    );
    let output = ended(child).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot sign in"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
