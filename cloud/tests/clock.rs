//! A node whose wall clock steps (a bad NTP step) while players are connected, or was
//! wrong already when it started, on two nodes sharing PostgreSQL and NATS: neither may
//! expire anyone's connection record, on either node, so no friend hears anyone leave.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::support::{Player, SteppedClock, TestCloud};

/// How often the nodes renew and expire leases (`Config::lease_renew`).
const LEASE_RENEW: Duration = Duration::from_secs(3);

/// Node B's wall clock 30 s ahead: its sweeps would see node A's leases as run out.
#[tokio::test]
async fn a_wall_clock_step_forward_on_one_node_keeps_the_other_node_s_players_online() {
    friends_stay_online(30, When::Connected).await;
}

/// Node B's wall clock 30 s behind: its renewals would give its own records leases
/// that node A's sweeps see as run out.
#[tokio::test]
async fn a_wall_clock_step_back_on_one_node_keeps_its_own_players_online() {
    friends_stay_online(-30, When::Connected).await;
}

/// Node B started 8 s ahead: judged on its own clock, every sweep of its would delete
/// node A's live records (their leases seen run out).
#[tokio::test]
async fn a_node_started_with_its_clock_ahead_keeps_the_other_node_s_players_online() {
    friends_stay_online(8, When::BeforeStart).await;
}

/// Node B started 30 s behind: judged on its own clock, its leases would be run out for
/// node A as soon as written.
#[tokio::test]
async fn a_node_started_with_its_clock_behind_keeps_its_own_players_online() {
    friends_stay_online(-30, When::BeforeStart).await;
}

/// When node B's clock goes wrong.
#[derive(Clone, Copy, PartialEq)]
enum When {
    BeforeStart,
    Connected,
}

/// Ann on node A and cat on node B, friends, both connected; B's wall clock is off by
/// `seconds` (from its start, or stepped once both are connected). For three lease
/// renewals and a margin after that, neither hears any presence event (nobody's presence
/// changed), and each keeps listing the other online.
async fn friends_stay_online(seconds: i64, when: When) {
    let clock = SteppedClock::new();
    if when == When::BeforeStart {
        clock.step(seconds);
    }
    let cloud = TestCloud::pair_builder()
        .env(1, clock.env())
        .start(&["--no-rate-limits"])
        .await;
    let (a, b) = (cloud.node(0), cloud.node(1));
    let ann = cloud.signup("ann").await;
    let cat = cloud.signup("cat").await;
    cloud.befriend(&ann, &cat).await;
    let (mut ann_ev, _) = a.connect(&ann).await;
    let (mut cat_ev, _) = b.connect(&cat).await;
    let e = ann_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(cat.id), Some(true)),
        "{e}"
    );
    // What the two connections brought may still be on its way (one friend's coming online,
    // made as the other connected); the step is judged from here.
    for events in [&mut ann_ev, &mut cat_ev] {
        while let Some(e) = events.quiet_for(Duration::from_millis(500)).await {
            assert_eq!(
                (e["type"].as_str(), e["online"].as_bool()),
                (Some("presence"), Some(true)),
                "before the step: {e}"
            );
        }
    }

    clock.step(seconds);
    clock.seen_by(b, seconds).await;
    let stepped = Instant::now();
    let until = stepped + 3 * LEASE_RENEW + Duration::from_secs(3);
    while Instant::now() < until {
        let slice = Duration::from_millis(500);
        for (who, events) in [("ann", &mut ann_ev), ("cat", &mut cat_ev)] {
            if let Some(e) = events.quiet_for(slice).await {
                panic!(
                    "{who} heard {e} {:?} after node B's clock went {seconds:+} s",
                    stepped.elapsed()
                );
            }
        }
        for (viewer, friend) in [(&ann, &cat), (&cat, &ann)] {
            let listed = online_in_friends_of(&cloud, viewer, friend).await;
            assert!(
                listed,
                "{} lists {} offline {:?} after node B's clock went {seconds:+} s",
                viewer.handle,
                friend.handle,
                stepped.elapsed()
            );
        }
    }
}

/// Whether `viewer`'s `GET /v1/friends` shows `friend` online.
async fn online_in_friends_of(cloud: &TestCloud, viewer: &Player, friend: &Player) -> bool {
    let (s, list) = cloud.call(viewer, Method::GET, "/v1/friends", None).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let entry = list["friends"]
        .as_array()
        .expect("a friend list")
        .iter()
        .find(|f| f["account_id"] == friend.id)
        .unwrap_or_else(|| panic!("{} is not in {list}", friend.handle));
    entry["presence"]["online"] == Value::Bool(true)
}
