//! What a player knows of its friends and its session from the cloud's answers: the players
//! it chooses among. (Whether writes survived is judged by `anyplay-chaos` from the facts.)

use std::collections::BTreeSet;

use serde::Serialize;

use crate::api::wire::{AccountId, SessionId};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Ledger {
    /// Friendships acknowledged by a `200 {"status": "friends"}`.
    pub friends: BTreeSet<AccountId>,
    /// The session this player was acknowledged to be in (created with 201 or joined with 200)
    /// and has not left with 204; membership survives disconnects.
    pub session: Option<SessionId>,
}

impl Ledger {
    pub fn friendship_acknowledged(&mut self, with: AccountId) {
        self.friends.insert(with);
    }

    pub fn session_acknowledged(&mut self, session: SessionId) {
        self.session = Some(session);
    }

    /// A `204` to leaving `session`.
    pub fn session_left(&mut self, session: &SessionId) {
        if self.session.as_ref() == Some(session) {
            self.session = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaving_the_session_undoes_the_membership() {
        let mut ledger = Ledger::default();
        let id = SessionId("1".into());
        ledger.session_acknowledged(id.clone());
        ledger.session_left(&SessionId("other".into()));
        assert_eq!(ledger.session, Some(id.clone()));
        ledger.session_left(&id);
        assert_eq!(ledger.session, None);
    }
}
