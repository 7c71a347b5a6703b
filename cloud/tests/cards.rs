//! Gamer cards: one per id asked, in order; limited and missing cards.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{each_topology, TestCloud, Topology};

each_topology!(a_hundred_cards_with_one_unknown_and_one_private);

async fn a_hundred_cards_with_one_unknown_and_one_private(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let viewer = cloud.signup("viewer").await;
    let friend = cloud.signup("friend").await;
    let private = cloud.signup("hermit").await;
    let stranger = cloud.signup("stranger").await;
    cloud.befriend(&viewer, &friend).await;
    let (s, _) = cloud
        .call(
            &private,
            Method::PATCH,
            "/v1/me",
            Some(json!({"privacy": "private"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    for name in ["a", "b", "c", "d"] {
        cloud
            .call(
                &friend,
                Method::POST,
                "/v1/me/trophies",
                Some(json!({"name": name})),
            )
            .await;
    }
    let (_ev, _) = cloud.connect(&friend).await;

    let unknown = 999_999;
    let mut ids = vec![viewer.id, friend.id, private.id, stranger.id, unknown];
    while ids.len() < 100 {
        ids.push(friend.id);
    }
    let list = ids
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let (s, v) = cloud
        .call(&viewer, Method::GET, &format!("/v1/cards?ids={list}"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let cards = v["cards"].as_array().unwrap();
    assert_eq!(cards.len(), 100);
    for (card, id) in cards.iter().zip(&ids) {
        assert_eq!(card["account_id"], *id);
    }
    assert_eq!(cards[0]["relation"], "self");
    let f = &cards[1];
    assert_eq!(
        (f["relation"].as_str(), f["online"].as_bool()),
        (Some("friend"), Some(true))
    );
    assert_eq!(f["trophies"]["count"], 4);
    assert_eq!(f["trophies"]["recent"].as_array().unwrap().len(), 3);
    assert_eq!(
        cards[2],
        json!({"account_id": private.id, "handle": "hermit", "relation": "none", "limited": true})
    );
    assert_eq!(
        cards[3]["limited"], true,
        "privacy `friends` and not a friend"
    );
    assert_eq!(cards[4], json!({"account_id": unknown, "missing": true}));

    let too_many = (1..=101)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let (s, v) = cloud
        .call(
            &viewer,
            Method::GET,
            &format!("/v1/cards?ids={too_many}"),
            None,
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("too_many_ids"))
    );
    for bad in ["", "1,,2", "a", "-1", "1;DROP TABLE accounts"] {
        let (s, v) = cloud
            .call(&viewer, Method::GET, &format!("/v1/cards?ids={bad}"), None)
            .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("bad_request")),
            "{bad:?}"
        );
    }
}
