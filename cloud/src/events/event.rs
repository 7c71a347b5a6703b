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
/// per-connection `seq` is spliced in when it is written.
#[derive(Debug, Clone)]
pub struct Payload(std::sync::Arc<str>);

impl Payload {
    pub fn new(event: &Event) -> Payload {
        // Serialising these plain structs cannot fail.
        Payload(serde_json::to_string(event).unwrap_or_default().into())
    }

    pub fn from_json(json: &str) -> Option<Payload> {
        json.starts_with('{').then(|| Payload(json.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text frame for this connection: `{"seq":N,` followed by the event's fields.
    pub fn with_seq(&self, seq: u64) -> String {
        format!("{{\"seq\":{seq},{}", &self.0[1..])
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
