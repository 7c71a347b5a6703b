//! The events a connection carries after its welcome, as the contract names them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountRef {
    pub account_id: i64,
    pub handle: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Presence {
        account_id: i64,
        online: bool,
        activity: String,
        version: u64,
    },
    FriendRequest {
        from: AccountRef,
    },
    FriendAccepted {
        account_id: i64,
        handle: String,
    },
    FriendRemoved {
        account_id: i64,
    },
    FriendRequestCancelled {
        account_id: i64,
    },
    FriendRequestDeclined {
        account_id: i64,
    },
    SessionMemberJoined {
        session_id: i64,
        account_id: i64,
    },
    SessionMemberLeft {
        session_id: i64,
        account_id: i64,
    },
    SessionLeaderChanged {
        session_id: i64,
        leader: i64,
    },
    SessionClosed {
        session_id: i64,
    },
}

/// An event serialised once, to be sent to any number of connections; the
/// per-connection `seq` is spliced in when it is written. It carries when it was
/// made, so a connection opened after that never gets it (a late delivery would
/// overtake the newer state the client read with its resync).
#[derive(Debug, Clone)]
pub struct Payload {
    json: std::sync::Arc<str>,
    made_us: i64,
}

impl Payload {
    pub fn new(event: &Event) -> Payload {
        Payload {
            // Serialising these plain structs cannot fail.
            json: serde_json::to_string(event).unwrap_or_default().into(),
            made_us: crate::store::cluster_now_us(),
        }
    }

    /// An event made elsewhere (another node), at `made_us`.
    pub fn from_json(json: &str, made_us: i64) -> Option<Payload> {
        json.starts_with('{').then(|| Payload {
            json: json.into(),
            made_us,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.json
    }

    /// When the event was made, in µs since the Unix epoch.
    pub fn made_us(&self) -> i64 {
        self.made_us
    }

    /// The text frame for this connection: `{"seq":N,` followed by the event's fields.
    pub fn with_seq(&self, seq: u64) -> String {
        format!("{{\"seq\":{seq},{}", &self.json[1..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_is_spliced_into_the_object() {
        let p = Payload::new(&Event::FriendRemoved { account_id: 7 });
        let v: serde_json::Value = serde_json::from_str(&p.with_seq(3)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"seq": 3, "type": "friend_removed", "account_id": 7})
        );
    }

    #[test]
    fn friend_request_names_the_sender() {
        let e = Event::FriendRequest {
            from: AccountRef {
                account_id: 1,
                handle: "ann".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"type": "friend_request", "from": {"account_id": 1, "handle": "ann"}})
        );
    }
}
