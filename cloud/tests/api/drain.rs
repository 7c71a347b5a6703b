//! Graceful drain: readiness off, new calls 503 `draining`, sockets closed with 1001, exit 0.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};

use crate::support::{End, TestNode};

#[tokio::test]
async fn sigterm_drains_and_exits_zero() {
    let mut node = TestNode::start(&["--drain-timeout", "5s"]).await;
    let ann = node.signup("ann").await;
    let bob = node.signup("bob").await;
    // Not read until the drain is under way: the node waits for the closing
    // handshake, which keeps the drain open long enough to observe it.
    let (mut ann_ev, _) = node.connect(&ann).await;
    let (mut bob_ev, _) = node.connect(&bob).await;

    let pid = nix::unistd::Pid::from_raw(node.child.as_ref().unwrap().id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
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
    let status = node.terminate();
    assert_eq!(status.code(), Some(0), "log:\n{}", node.log());
}

#[tokio::test]
async fn the_admin_drain_call_does_the_same() {
    let mut node = TestNode::start(&["--admin-token", "s3cret"]).await;
    let ann = node.signup("ann").await;
    let (mut ev, _) = node.connect(&ann).await;
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
    let child = node.child.as_mut().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "node did not exit after the drain call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0));
}
