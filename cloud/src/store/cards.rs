//! Gamer cards: what a viewer may see of a list of accounts, read in a fixed
//! number of queries (at most two) whatever the number of cards.

use std::collections::HashMap;

use serde::{Serialize, Serializer};
use sqlx::any::AnyRow;
use sqlx::Row;

use super::{now_ms, placeholders, Privacy, Store, StoreResult};

/// The viewer's relation to the card's account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Relation {
    #[serde(rename = "self")]
    Me,
    #[serde(rename = "friend")]
    Friend,
    /// The account asked the viewer to be friends.
    #[serde(rename = "incoming")]
    Incoming,
    /// The viewer asked the account.
    #[serde(rename = "outgoing")]
    Outgoing,
    #[serde(rename = "none")]
    Stranger,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trophies {
    pub count: i64,
    /// Up to [`RECENT_TROPHIES`] names, newest first.
    pub recent: Vec<String>,
}

pub const RECENT_TROPHIES: i64 = 3;

/// One card, in one of the three shapes of the contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Card {
    Full {
        account_id: i64,
        handle: String,
        avatar: Option<String>,
        trophies: Trophies,
        relation: Relation,
        online: bool,
    },
    /// The account's privacy hides the rest from this viewer.
    Limited {
        account_id: i64,
        handle: String,
        relation: Relation,
        limited: True,
    },
    /// No such account, or it blocked the viewer (the two look the same).
    Missing { account_id: i64, missing: True },
}

/// The marker field of limited and missing cards: always `true` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct True;

impl Serialize for True {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(true)
    }
}

/// What the store knows of one asked account, relative to the viewer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Facts {
    handle: String,
    avatar: Option<String>,
    privacy: Privacy,
    friend: bool,
    incoming: bool,
    outgoing: bool,
    blocked_viewer: bool,
    online: bool,
}

impl Facts {
    fn from_row(row: &AnyRow) -> StoreResult<(i64, Facts)> {
        let present = |column: &str| -> StoreResult<bool> {
            Ok(row.try_get::<Option<i64>, _>(column)?.is_some())
        };
        let privacy: String = row.try_get("privacy")?;
        Ok((
            row.try_get("id")?,
            Facts {
                handle: row.try_get("handle")?,
                avatar: row.try_get("avatar")?,
                privacy: Privacy::parse(&privacy).unwrap_or(Privacy::Friends),
                friend: present("friend")?,
                incoming: present("incoming")?,
                outgoing: present("outgoing")?,
                blocked_viewer: present("blocked_viewer")?,
                online: present("online")?,
            },
        ))
    }

    fn relation(&self, viewer: i64, id: i64) -> Relation {
        if id == viewer {
            Relation::Me
        } else if self.friend {
            Relation::Friend
        } else if self.incoming {
            Relation::Incoming
        } else if self.outgoing {
            Relation::Outgoing
        } else {
            Relation::Stranger
        }
    }
}

/// What a viewer may see of one account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visibility {
    Full,
    Limited,
    Missing,
}

fn visibility(viewer: i64, id: i64, facts: Option<&Facts>) -> Visibility {
    let Some(facts) = facts else {
        return Visibility::Missing;
    };
    if id == viewer {
        return Visibility::Full;
    }
    if facts.blocked_viewer {
        return Visibility::Missing;
    }
    match (facts.privacy, facts.relation(viewer, id)) {
        (Privacy::Public, _) | (Privacy::Friends, Relation::Friend) => Visibility::Full,
        _ => Visibility::Limited,
    }
}

/// The card of `id` for `viewer`, from the facts of the account and its trophies
/// (absent when it has none).
fn shape(viewer: i64, id: i64, facts: Option<&Facts>, trophies: Option<&Trophies>) -> Card {
    match (visibility(viewer, id, facts), facts) {
        (Visibility::Full, Some(f)) => Card::Full {
            account_id: id,
            handle: f.handle.clone(),
            avatar: f.avatar.clone(),
            trophies: trophies.cloned().unwrap_or(Trophies {
                count: 0,
                recent: Vec::new(),
            }),
            relation: f.relation(viewer, id),
            online: f.online,
        },
        (Visibility::Limited, Some(f)) => Card::Limited {
            account_id: id,
            handle: f.handle.clone(),
            relation: f.relation(viewer, id),
            limited: True,
        },
        _ => Card::Missing {
            account_id: id,
            missing: True,
        },
    }
}

/// Trophy rows (`account_id`, `name`, `total`), newest first per account, into
/// each account's count and recent names.
fn group_trophies(rows: impl IntoIterator<Item = (i64, String, i64)>) -> HashMap<i64, Trophies> {
    let mut by_account: HashMap<i64, Trophies> = HashMap::new();
    for (account_id, name, total) in rows {
        by_account
            .entry(account_id)
            .or_insert_with(|| Trophies {
                count: total,
                recent: Vec::new(),
            })
            .recent
            .push(name);
    }
    by_account
}

fn dedup(ids: &[i64]) -> Vec<i64> {
    let mut unique = ids.to_vec();
    unique.sort_unstable();
    unique.dedup();
    unique
}

impl Store {
    /// One card per id in `ids` (duplicates included), in that order, as `viewer`
    /// may see them. Two queries on the read pool at most, whatever the length.
    pub async fn cards(&self, viewer: i64, ids: &[i64]) -> StoreResult<Vec<Card>> {
        let unique = dedup(ids);
        if unique.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.reader().acquire().await?;

        // Each join matches at most one row (all primary keys), so this is one row
        // per existing account. An expired lease is a dead node's record: offline.
        let sql = format!(
            "SELECT a.id, a.handle, a.avatar, a.privacy, \
               f.friend_id AS friend, ri.from_id AS incoming, ro.to_id AS outgoing, \
               b.blocker_id AS blocked_viewer, c.account_id AS online \
             FROM accounts a \
             LEFT JOIN friendships f ON f.account_id = $1 AND f.friend_id = a.id \
             LEFT JOIN friend_requests ri ON ri.from_id = a.id AND ri.to_id = $1 \
             LEFT JOIN friend_requests ro ON ro.from_id = $1 AND ro.to_id = a.id \
             LEFT JOIN blocks b ON b.blocker_id = a.id AND b.blocked_id = $1 \
             LEFT JOIN connections c ON c.account_id = a.id AND c.lease_until >= $2 \
             WHERE a.id IN ({})",
            placeholders(3, unique.len())
        );
        let mut query = sqlx::query(&sql).bind(viewer).bind(now_ms());
        for id in &unique {
            query = query.bind(*id);
        }
        let facts = query
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(Facts::from_row)
            .collect::<StoreResult<HashMap<i64, Facts>>>()?;

        let full: Vec<i64> = unique
            .iter()
            .copied()
            .filter(|&id| visibility(viewer, id, facts.get(&id)) == Visibility::Full)
            .collect();
        let trophies = if full.is_empty() {
            HashMap::new()
        } else {
            let sql = format!(
                "SELECT account_id, name, total FROM ( \
                   SELECT account_id, name, \
                     ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY id DESC) AS n, \
                     COUNT(*) OVER (PARTITION BY account_id) AS total \
                   FROM trophies WHERE account_id IN ({}) \
                 ) t WHERE n <= $1 ORDER BY account_id, n",
                placeholders(2, full.len())
            );
            let mut query = sqlx::query(&sql).bind(RECENT_TROPHIES);
            for id in &full {
                query = query.bind(*id);
            }
            let rows = query.fetch_all(&mut *conn).await?;
            group_trophies(
                rows.iter()
                    .map(|r| {
                        Ok((
                            r.try_get("account_id")?,
                            r.try_get("name")?,
                            r.try_get("total")?,
                        ))
                    })
                    .collect::<StoreResult<Vec<_>>>()?,
            )
        };

        Ok(ids
            .iter()
            .map(|&id| shape(viewer, id, facts.get(&id), trophies.get(&id)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::sessions::fixture::{account, befriend, block, exec, postgres, sqlite};
    use super::*;
    use serde_json::json;

    const VIEWER: i64 = 1;

    fn facts(privacy: Privacy) -> Facts {
        Facts {
            handle: "ann".into(),
            avatar: Some("fox".into()),
            privacy,
            friend: false,
            incoming: false,
            outgoing: false,
            blocked_viewer: false,
            online: true,
        }
    }

    fn json_of(card: &Card) -> serde_json::Value {
        serde_json::to_value(card).expect("serialise")
    }

    #[test]
    fn unknown_accounts_are_missing() {
        assert_eq!(
            json_of(&shape(VIEWER, 9, None, None)),
            json!({"account_id": 9, "missing": true})
        );
    }

    #[test]
    fn an_account_that_blocked_the_viewer_is_missing() {
        let f = Facts {
            blocked_viewer: true,
            ..facts(Privacy::Public)
        };
        assert_eq!(
            json_of(&shape(VIEWER, 9, Some(&f), None)),
            json!({"account_id": 9, "missing": true})
        );
    }

    #[test]
    fn a_public_card_is_full_with_trophies() {
        let t = Trophies {
            count: 5,
            recent: vec!["c".into(), "b".into(), "a".into()],
        };
        let f = Facts {
            incoming: true,
            ..facts(Privacy::Public)
        };
        assert_eq!(
            json_of(&shape(VIEWER, 9, Some(&f), Some(&t))),
            json!({"account_id": 9, "handle": "ann", "avatar": "fox",
                   "trophies": {"count": 5, "recent": ["c", "b", "a"]},
                   "relation": "incoming", "online": true})
        );
    }

    #[test]
    fn friends_privacy_is_full_for_friends_only() {
        let friend = Facts {
            friend: true,
            ..facts(Privacy::Friends)
        };
        let card = json_of(&shape(VIEWER, 9, Some(&friend), None));
        assert_eq!(card["relation"], "friend");
        assert_eq!(card["trophies"], json!({"count": 0, "recent": []}));
        let asked = Facts {
            outgoing: true,
            ..facts(Privacy::Friends)
        };
        assert_eq!(
            json_of(&shape(VIEWER, 9, Some(&asked), None)),
            json!({"account_id": 9, "handle": "ann", "relation": "outgoing", "limited": true})
        );
    }

    #[test]
    fn private_is_limited_even_for_friends_but_never_for_self() {
        let friend = Facts {
            friend: true,
            ..facts(Privacy::Private)
        };
        assert_eq!(
            json_of(&shape(VIEWER, 9, Some(&friend), None)),
            json!({"account_id": 9, "handle": "ann", "relation": "friend", "limited": true})
        );
        let me = json_of(&shape(VIEWER, VIEWER, Some(&facts(Privacy::Private)), None));
        assert_eq!(me["relation"], "self");
        assert_eq!(me["online"], true);
    }

    #[test]
    fn trophies_group_per_account_in_row_order() {
        let grouped = group_trophies([
            (1, "z".to_string(), 4),
            (1, "y".to_string(), 4),
            (2, "q".to_string(), 1),
        ]);
        assert_eq!(
            grouped[&1],
            Trophies {
                count: 4,
                recent: vec!["z".into(), "y".into()]
            }
        );
        assert_eq!(
            grouped[&2],
            Trophies {
                count: 1,
                recent: vec!["q".into()]
            }
        );
    }

    #[test]
    fn dedup_keeps_each_id_once() {
        assert_eq!(dedup(&[3, 1, 3, 2, 1]), vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn cards_on_sqlite() {
        cards_come_in_the_order_asked_with_what_the_viewer_may_see(&sqlite().await.store).await;
    }

    #[tokio::test]
    async fn cards_on_postgres() {
        cards_come_in_the_order_asked_with_what_the_viewer_may_see(&postgres().await).await;
    }

    async fn cards_come_in_the_order_asked_with_what_the_viewer_may_see(store: &Store) {
        let viewer = account(store, "private").await;
        let public = account(store, "public").await;
        let friend = account(store, "friends").await;
        let asker = account(store, "friends").await;
        let blocker = account(store, "public").await;
        befriend(store, viewer, friend).await;
        exec(
            store,
            "INSERT INTO friend_requests (from_id, to_id, at) VALUES ($1, $2, $3)",
            asker,
            viewer,
        )
        .await;
        block(store, blocker, viewer).await;
        for name in ["first", "second", "third", "fourth"] {
            store.add_trophy(public, name).await.expect("trophy");
        }
        exec(
            store,
            "INSERT INTO connections (account_id, connection_id, node, since, lease_until) \
             VALUES ($1, 'c' || CAST($1 AS TEXT), 'n1', $3, $3 + $2)",
            friend,
            60_000,
        )
        .await;

        let unknown = i64::MAX;
        let asked = [public, unknown, friend, viewer, asker, blocker, public];
        let cards = store.cards(viewer, &asked).await.expect("cards");
        let got: Vec<_> = cards.iter().map(json_of).collect();
        assert_eq!(got.len(), asked.len());
        assert_eq!(
            got[0]["trophies"],
            json!({"count": 4, "recent": ["fourth", "third", "second"]})
        );
        assert_eq!(
            (&got[0]["relation"], &got[0]["online"]),
            (&json!("none"), &json!(false))
        );
        assert_eq!(got[1], json!({"account_id": unknown, "missing": true}));
        assert_eq!(
            (&got[2]["relation"], &got[2]["online"]),
            (&json!("friend"), &json!(true))
        );
        assert_eq!(got[3]["relation"], "self");
        assert_eq!(got[4]["relation"], "incoming");
        assert_eq!(got[4]["limited"], true);
        assert_eq!(got[5], json!({"account_id": blocker, "missing": true}));
        assert_eq!(got[6], got[0]);
        // The asker sees the viewer's request from the other side, limited (private).
        let back = store.cards(asker, &[viewer]).await.expect("cards");
        assert_eq!(json_of(&back[0])["relation"], "outgoing");
        assert_eq!(json_of(&back[0])["limited"], true);
    }
}
