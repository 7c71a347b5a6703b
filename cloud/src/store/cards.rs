//! Gamer cards: what a viewer may see of a list of accounts, read in a fixed
//! number of queries (at most two) whatever the number of cards.

use std::collections::HashMap;

use serde::{Deserialize, Serialize, Serializer};
use sqlx::Row;

use super::json_list::{json_in, json_list};
use super::{cluster_now_ms, Backend, Privacy, Store, StoreResult};

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
    trophies: Trophies,
}

/// One element of the facts query's JSON array, in the order of its columns
/// (`facts_sql!`): the relation columns are the joined row's key, or null.
#[derive(Debug, Deserialize)]
struct FactsRow {
    id: i64,
    handle: String,
    avatar: Option<String>,
    privacy: String,
    friend: Option<i64>,
    incoming: Option<i64>,
    outgoing: Option<i64>,
    blocked_viewer: Option<i64>,
    online: Option<i64>,
    trophies: i64,
}

impl Facts {
    fn from_row(row: FactsRow) -> (i64, Facts) {
        (
            row.id,
            Facts {
                handle: row.handle,
                avatar: row.avatar,
                privacy: Privacy::parse(&row.privacy).unwrap_or(Privacy::Friends),
                friend: row.friend.is_some(),
                incoming: row.incoming.is_some(),
                outgoing: row.outgoing.is_some(),
                blocked_viewer: row.blocked_viewer.is_some(),
                online: row.online.is_some(),
                trophies: Trophies {
                    count: row.trophies,
                    // Filled by the second query, for the cards that show them.
                    recent: Vec::new(),
                },
            },
        )
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
    #[cfg(feature = "seeded-defects")]
    let through = crate::defects::active(crate::defects::SeededDefect::CardsThroughBlocks);
    #[cfg(not(feature = "seeded-defects"))]
    let through = false;
    if facts.blocked_viewer && !through {
        return Visibility::Missing;
    }
    #[cfg(feature = "seeded-defects")]
    if crate::defects::active(crate::defects::SeededDefect::PrivateCardsToFriends)
        && facts.privacy == Privacy::Private
        && facts.relation(viewer, id) == Relation::Friend
    {
        return Visibility::Full;
    }
    match (facts.privacy, facts.relation(viewer, id)) {
        (Privacy::Public, _) | (Privacy::Friends, Relation::Friend) => Visibility::Full,
        _ => Visibility::Limited,
    }
}

/// The card of `id` for `viewer`, from the facts of the account.
fn shape(viewer: i64, id: i64, facts: Option<&Facts>) -> Card {
    match (visibility(viewer, id, facts), facts) {
        (Visibility::Full, Some(f)) => Card::Full {
            account_id: id,
            handle: f.handle.clone(),
            avatar: f.avatar.clone(),
            trophies: f.trophies.clone(),
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

fn dedup(ids: &[i64]) -> Vec<i64> {
    let mut unique = ids.to_vec();
    unique.sort_unstable();
    unique.dedup();
    unique
}

/// The facts query: `$1` the viewer, `$2` now (an expired lease is a dead node's
/// record: offline), `$3` the asked ids. Each join matches at most one row (all
/// primary keys), so there is one element per existing account. The answer is one
/// JSON text in one row (`$agg` of `$array`s, the backend's JSON functions): the
/// driver's cost per row and per column, which dominated, is paid once.
macro_rules! facts_sql {
    ($db:ident, agg: $agg:literal, array: $array:literal) => {
        concat!(
            "SELECT CAST(",
            $agg,
            "(",
            $array,
            "(a.id, a.handle, a.avatar, a.privacy, \
               f.friend_id, ri.from_id, ro.to_id, b.blocker_id, c.account_id, \
               (SELECT COUNT(*) FROM trophies t WHERE t.account_id = a.id))) AS TEXT) \
             FROM accounts a \
             LEFT JOIN friendships f ON f.account_id = $1 AND f.friend_id = a.id \
             LEFT JOIN friend_requests ri ON ri.from_id = a.id AND ri.to_id = $1 \
             LEFT JOIN friend_requests ro ON ro.from_id = $1 AND ro.to_id = a.id \
             LEFT JOIN blocks b ON b.blocker_id = a.id AND b.blocked_id = $1 \
             LEFT JOIN connections c ON c.account_id = a.id AND c.lease_until >= $2 \
             WHERE ",
            json_in!($db, json_ids, "a.id", "$3")
        )
    };
}

/// The newest `$2` trophy names of the accounts `$1`, newest first per account,
/// with the account's count read beside them (a trophy granted between the two
/// queries must not show in the names without counting). Asked only for shown
/// cards with trophies: in the facts query these names cost a subquery per
/// account, half its time, most of it for cards that show none.
macro_rules! recent_sql {
    ($db:ident) => {
        concat!(
            "SELECT account_id, name, total FROM ( \
               SELECT account_id, name, \
                 ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY id DESC) AS n, \
                 COUNT(*) OVER (PARTITION BY account_id) AS total \
               FROM trophies WHERE ",
            json_in!($db, json_ids, "account_id", "$1"),
            " \
             ) t WHERE n <= $2 ORDER BY account_id, n"
        )
    };
}

/// The two queries in a backend's SQL.
struct Queries {
    facts: &'static str,
    recent: &'static str,
}

const SQLITE: Queries = Queries {
    facts: facts_sql!(sqlite, agg: "json_group_array", array: "json_array"),
    recent: recent_sql!(sqlite),
};

const POSTGRES: Queries = Queries {
    facts: facts_sql!(postgres, agg: "json_agg", array: "json_build_array"),
    recent: recent_sql!(postgres),
};

impl Store {
    /// One card per id in `ids` (duplicates included), in that order, as `viewer`
    /// may see them. Two queries on the read pool at most, whatever the length:
    /// the second only when a shown card has trophies.
    pub async fn cards(&self, viewer: i64, ids: &[i64]) -> StoreResult<Vec<Card>> {
        let unique = dedup(ids);
        if unique.is_empty() {
            return Ok(Vec::new());
        }
        let sql = match self.backend() {
            Backend::Sqlite => &SQLITE,
            Backend::Postgres => &POSTGRES,
        };
        let mut conn = self.reader().acquire().await?;
        let row = sqlx::query(&super::sql(sql.facts))
            .bind(viewer)
            .bind(cluster_now_ms())
            .bind(json_list(&unique))
            .fetch_one(&mut *conn)
            .await?;
        // Null when no asked account exists (PostgreSQL's aggregate of no rows).
        let mut facts: HashMap<i64, Facts> = match row.try_get::<Option<String>, _>(0)? {
            Some(json) => serde_json::from_str::<Vec<FactsRow>>(&json)
                .map_err(|e| sqlx::Error::Decode(e.into()))?
                .into_iter()
                .map(Facts::from_row)
                .collect(),
            None => HashMap::new(),
        };

        let with_trophies: Vec<i64> = facts
            .iter()
            .filter(|(&id, f)| {
                f.trophies.count > 0 && visibility(viewer, id, Some(f)) == Visibility::Full
            })
            .map(|(&id, _)| id)
            .collect();
        if !with_trophies.is_empty() {
            let rows = sqlx::query(sql.recent)
                .bind(json_list(&with_trophies))
                .bind(RECENT_TROPHIES)
                .fetch_all(&mut *conn)
                .await?;
            for row in rows {
                let id: i64 = row.try_get(0)?;
                if let Some(f) = facts.get_mut(&id) {
                    f.trophies.recent.push(row.try_get(1)?);
                    f.trophies.count = row.try_get(2)?;
                }
            }
        }

        Ok(ids
            .iter()
            .map(|&id| shape(viewer, id, facts.get(&id)))
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
            trophies: Trophies {
                count: 0,
                recent: Vec::new(),
            },
        }
    }

    fn json_of(card: &Card) -> serde_json::Value {
        serde_json::to_value(card).expect("serialise")
    }

    #[test]
    fn unknown_accounts_are_missing() {
        assert_eq!(
            json_of(&shape(VIEWER, 9, None)),
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
            json_of(&shape(VIEWER, 9, Some(&f))),
            json!({"account_id": 9, "missing": true})
        );
    }

    #[test]
    fn a_public_card_is_full_with_trophies() {
        let f = Facts {
            incoming: true,
            trophies: Trophies {
                count: 5,
                recent: vec!["c".into(), "b".into(), "a".into()],
            },
            ..facts(Privacy::Public)
        };
        assert_eq!(
            json_of(&shape(VIEWER, 9, Some(&f))),
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
        let card = json_of(&shape(VIEWER, 9, Some(&friend)));
        assert_eq!(card["relation"], "friend");
        assert_eq!(card["trophies"], json!({"count": 0, "recent": []}));
        let asked = Facts {
            outgoing: true,
            ..facts(Privacy::Friends)
        };
        assert_eq!(
            json_of(&shape(VIEWER, 9, Some(&asked))),
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
            json_of(&shape(VIEWER, 9, Some(&friend))),
            json!({"account_id": 9, "handle": "ann", "relation": "friend", "limited": true})
        );
        let me = json_of(&shape(VIEWER, VIEWER, Some(&facts(Privacy::Private))));
        assert_eq!(me["relation"], "self");
        assert_eq!(me["online"], true);
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
        // Quotes, a backslash and non-ASCII text survive the JSON the query answers with.
        exec(
            store,
            "UPDATE accounts SET avatar = 'fox \"\u{fc}\\' || CAST($2 AS TEXT) WHERE id = $1 AND $3 > 0",
            public,
            7,
        )
        .await;
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
        assert_eq!(got[0]["avatar"], "fox \"\u{fc}\\7");
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
        // Not one asked account exists: the query's aggregate has no rows.
        let none = store
            .cards(viewer, &[unknown, unknown])
            .await
            .expect("cards");
        assert_eq!(
            none.iter().map(json_of).collect::<Vec<_>>(),
            vec![got[1].clone(); 2]
        );
    }
}
