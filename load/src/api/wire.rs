//! The contract's JSON bodies and event messages, as typed values (only the fields the harness reads).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// An account id: a positive integer in the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AccountId(pub u64);

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A node's id, as its welcome names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub String);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A session id. The contract does not fix its JSON type, so a number and a string are both taken.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct SessionId(pub String);

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        Ok(SessionId(match Raw::deserialize(deserializer)? {
            Raw::Number(n) => n.to_string(),
            Raw::Text(s) => s,
        }))
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `202` of `POST /v1/auth/email`.
#[derive(Debug, Deserialize)]
pub struct Challenge {
    pub challenge_id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Account {
    pub id: AccountId,
    pub handle: String,
}

/// Tokens from `auth/code`, `auth/signup` and `auth/refresh`.
#[derive(Debug, Deserialize)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in: u64,
    /// The contract names `account` for sign-in and sign-up; a refresh may leave it out.
    pub account: Option<Account>,
}

/// `200` of `POST /v1/auth/code`.
#[derive(Debug, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CodeOutcome {
    SignedIn(Tokens),
    SignupRequired { signup_token: String },
}

/// `200` of `GET /v1/friends` (the harness reads the friends' ids).
#[derive(Debug, Deserialize)]
pub struct FriendsView {
    pub friends: Vec<Friend>,
}

#[derive(Debug, Deserialize)]
pub struct Friend {
    pub account_id: AccountId,
    pub presence: FriendPresence,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct FriendPresence {
    pub online: bool,
    pub version: u64,
}

/// `201`/`200` of `POST /v1/friends/requests`, and `200` of an accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FriendStatus {
    Requested,
    Friends,
}

/// A session (party).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: SessionId,
    pub leader: AccountId,
    pub members: Vec<AccountId>,
    pub max_members: u32,
}

/// `200` of `GET /v1/cards`: the harness checks one card per id, in order, and records what
/// each showed.
#[derive(Debug, Deserialize)]
pub struct Cards {
    pub cards: Vec<CardHead>,
}

/// What the harness reads of a card: whose, its shape's markers and its relation.
#[derive(Debug, Deserialize)]
pub struct CardHead {
    pub account_id: AccountId,
    #[serde(default)]
    pub limited: bool,
    #[serde(default)]
    pub missing: bool,
    pub relation: Option<CardRelation>,
}

impl CardHead {
    /// Which of the contract's three shapes the card has.
    pub fn view(&self) -> CardView {
        match (self.missing, self.limited) {
            (true, _) => CardView::Missing,
            (false, true) => CardView::Limited,
            (false, false) => CardView::Full,
        }
    }
}

/// A card's shape: all of it, only the handle and relation, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardView {
    Full,
    Limited,
    Missing,
}

/// The viewer's relation to a card's account, as the card says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardRelation {
    #[serde(rename = "self")]
    Me,
    Friend,
    Incoming,
    Outgoing,
    None,
}

/// Who may see an account's card in full (`PATCH /v1/me`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Privacy {
    Public,
    Friends,
    Private,
}

/// Every error body: `{"error": {"code", "message"}}`.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// The ping interval a welcome that names none implies (the contract's default).
pub const DEFAULT_PING_INTERVAL_S: u64 = 20;

/// A message on the event WebSocket, with the fields the harness reads (all optional, so that
/// any event type parses, and once).
#[derive(Debug, Default, Deserialize)]
pub struct ServerMessage {
    #[serde(rename = "type")]
    pub kind: String,
    pub seq: Option<u64>,
    /// The welcome's node.
    pub node: Option<NodeId>,
    pub ping_interval_s: Option<u64>,
    /// Presence: whose, online, which version.
    pub account_id: Option<AccountId>,
    pub online: Option<bool>,
    pub version: Option<u64>,
    /// A session's news: which session, and a new leader.
    pub session_id: Option<SessionId>,
    pub leader: Option<AccountId>,
}

impl ServerMessage {
    pub fn is_welcome(&self) -> bool {
        self.kind == "welcome"
    }

    /// The welcome's ping interval, or the default when it names none.
    pub fn ping_interval_s(&self) -> u64 {
        self.ping_interval_s.unwrap_or(DEFAULT_PING_INTERVAL_S)
    }

    /// Whose event it is, when not presence: its `account_id`, or a new leader.
    pub fn about(&self) -> Option<AccountId> {
        (self.kind != "presence")
            .then(|| self.account_id.or(self.leader))
            .flatten()
    }

    /// `(account, version, online)` of a presence event.
    pub fn presence(&self) -> Option<(AccountId, u64, bool)> {
        if self.kind != "presence" {
            return None;
        }
        Some((self.account_id?, self.version?, self.online?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_outcome_parses_both_statuses() {
        let signed_in: CodeOutcome = serde_json::from_str(
            r#"{"status":"signed_in","access_token":"a","refresh_token":"r","expires_in":900,
               "account":{"id":7,"handle":"p_1","created_at":"2025-01-01T00:00:00Z","privacy":"friends","avatar":null}}"#,
        )
        .expect("valid body");
        assert!(
            matches!(signed_in, CodeOutcome::SignedIn(t) if t.account.as_ref().map(|a| a.id) == Some(AccountId(7)))
        );
        let signup: CodeOutcome =
            serde_json::from_str(r#"{"status":"signup_required","signup_token":"s"}"#)
                .expect("valid body");
        assert!(
            matches!(signup, CodeOutcome::SignupRequired { signup_token } if signup_token == "s")
        );
    }

    #[test]
    fn events_parse_known_and_unknown_types() {
        let welcome: ServerMessage = serde_json::from_str(
            r#"{"type":"welcome","node":"n1","connection_id":"c","account_id":3,"server_time":"x","ping_interval_s":20}"#,
        )
        .expect("welcome");
        assert!(welcome.is_welcome());
        assert_eq!(welcome.node, Some(NodeId("n1".into())));
        assert_eq!(welcome.ping_interval_s, Some(20));
        let presence: ServerMessage = serde_json::from_str(
            r#"{"type":"presence","seq":4,"account_id":3,"online":true,"activity":"x","version":99}"#,
        )
        .expect("presence");
        assert_eq!(presence.seq, Some(4));
        assert_eq!(presence.presence(), Some((AccountId(3), 99, true)));
        let other: ServerMessage =
            serde_json::from_str(r#"{"type":"session_closed","seq":5,"session_id":1}"#)
                .expect("other");
        assert_eq!(
            (other.kind.as_str(), other.seq, other.presence()),
            ("session_closed", Some(5), None)
        );
    }

    #[test]
    fn session_id_takes_numbers_and_strings() {
        let a: SessionId = serde_json::from_str("12").expect("number");
        let b: SessionId = serde_json::from_str("\"s-12\"").expect("string");
        assert_eq!((a.0.as_str(), b.0.as_str()), ("12", "s-12"));
    }
}
