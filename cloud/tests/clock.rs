//! A node whose wall clock steps (a bad NTP step) while players are connected, on two
//! nodes sharing PostgreSQL and NATS: the step must not expire anyone's connection
//! record, on either node, so no friend hears anyone leave.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::support::{Player, SteppedClock, TestCloud};

/// How often the nodes renew and expire leases (`Config::lease_renew`).
const LEASE_RENEW: Duration = Duration::from_secs(3);

/// Node B's wall clock 30 s ahead: its sweeps would see node A's leases as run out.
#[tokio::test]
async fn a_wall_clock_step_forward_on_one_node_keeps_the_other_node_s_players_online() {
    friends_stay_online_through_a_step(30).await;
}

/// Node B's wall clock 30 s behind: its renewals would give its own records leases
/// that node A's sweeps see as run out.
#[tokio::test]
async fn a_wall_clock_step_back_on_one_node_keeps_its_own_players_online() {
    friends_stay_online_through_a_step(-30).await;
}

/// Ann on node A and cat on node B, friends, both connected; B's wall clock steps by
/// `seconds`. For three lease renewals and a margin, neither hears any presence event
/// (nobody's presence changed), and each keeps listing the other online.
async fn friends_stay_online_through_a_step(seconds: i64) {
    let clock = SteppedClock::new();
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

    clock.step(seconds);
    clock.seen_by(b, seconds).await;
    let stepped = Instant::now();
    let until = stepped + 3 * LEASE_RENEW + Duration::from_secs(3);
    while Instant::now() < until {
        let slice = Duration::from_millis(500);
        for (who, events) in [("ann", &mut ann_ev), ("cat", &mut cat_ev)] {
            if let Some(e) = events.quiet_for(slice).await {
                panic!(
                    "{who} heard {e} {:?} after node B's clock stepped {seconds:+} s",
                    stepped.elapsed()
                );
            }
        }
        for (viewer, friend) in [(&ann, &cat), (&cat, &ann)] {
            let listed = online_in_friends_of(&cloud, viewer, friend).await;
            assert!(
                listed,
                "{} lists {} offline {:?} after node B's clock stepped {seconds:+} s",
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
