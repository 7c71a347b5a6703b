//! Graceful drain: readiness off, new calls 503 `draining`, sockets closed with
//! 1001, exit 0 — for one node's process, and for one node of a pair while the
//! other keeps serving.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use reqwest::{Method, StatusCode};

use crate::support::{End, TestCloud, Topology};

#[tokio::test]
async fn sigterm_drains_and_exits_zero() {
    let mut cloud = TestCloud::start(Topology::Single, &["--drain-timeout", "5s"]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    // Not read until the drain is under way: the node waits for the closing
    // handshake, which keeps the drain open long enough to observe it.
    let (mut ann_ev, _) = cloud.connect(&ann).await;
    let (mut bob_ev, _) = cloud.connect(&bob).await;

    let node = cloud.node(0);
    node.signal(Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (s, _) = node.ops_get("/readyz").await;
        if s == StatusCode::SERVICE_UNAVAILABLE {
            break;
        }
        assert!(Instant::now() < deadline, "readiness never turned 503");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (s, v) = node
        .call(Method::GET, "/v1/me", Some(&ann.access), None)
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("draining"))
    );

    assert_eq!(ann_ev.closed().await, End::Close(1001));
    assert_eq!(bob_ev.closed().await, End::Close(1001));
    let node = cloud.node_mut(0);
    let status = node.exit_status(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "log:\n{}", node.log());
}

#[tokio::test]
async fn the_admin_drain_call_does_the_same() {
    let mut cloud = TestCloud::start(Topology::Single, &["--admin-token", "s3cret"]).await;
    let ann = cloud.signup("ann").await;
    let (mut ev, _) = cloud.connect(&ann).await;
    let node = cloud.node(0);
    let url = format!("{}/v1/admin/drain", node.ops);
    let s = node.http.post(&url).send().await.unwrap().status();
    assert_eq!(s, StatusCode::UNAUTHORIZED, "the admin token is required");
    let s = node
        .http
        .post(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(ev.closed().await, End::Close(1001));
    let status = cloud.node_mut(0).exit_status(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn draining_one_node_of_a_pair_leaves_the_other_serving() {
    let mut cloud = TestCloud::pair(&["--drain-timeout", "5s"]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    // Placed by hand: ann's socket on A, bob's on B. They become friends while
    // online, so every presence event bob gets is about the ann of that moment.
    let (mut ann_ev, _) = cloud.node(0).connect(&ann).await;
    let (mut bob_ev, _) = cloud.node(1).connect(&bob).await;
    cloud.befriend(&ann, &bob).await;
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(true)),
        "{e}"
    );

    let a = cloud.node(0);
    let s = a
        .http
        .post(format!("{}/v1/admin/drain", a.ops))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(ann_ev.closed().await, End::Close(1001));
    let status = cloud.node_mut(0).exit_status(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "log:\n{}", cloud.node(0).log());

    // B kept its socket and its calls, and its player heard ann leave.
    let b = cloud.node(1);
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(false)),
        "{e}"
    );
    assert_eq!(b.ops_get("/readyz").await.0, StatusCode::OK);
    let (s, list) = b
        .call(Method::GET, "/v1/friends", Some(&bob.access), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["friends"][0]["presence"]["online"], false, "{list}");

    // Back on B, as the reconnect rule after 1001 has it: bob sees ann online.
    let (_ann_ev, welcome) = b.connect(&ann).await;
    assert_eq!(welcome["node"], b.id.as_str());
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(true)),
        "{e}"
    );
    let listed: Vec<_> = b
        .connections()
        .await
        .iter()
        .map(|c| c["account_id"].clone())
        .collect();
    assert!(
        listed.contains(&ann.id.into()) && listed.contains(&bob.id.into()),
        "{listed:?}"
    );
}
