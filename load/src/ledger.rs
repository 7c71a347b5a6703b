//! A player's friend ledger: the friendships and the session membership that the cloud
//! acknowledged (2xx) and that no later acknowledged call undid, so a checker can compare them
//! with what the cloud shows at the end.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::wire::{AccountId, SessionId};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Ledger {
    /// Friendships acknowledged by a `200 {"status": "friends"}`.
    pub friends: BTreeSet<AccountId>,
    /// The session this player was acknowledged to be in (created with 201 or joined with 200)
    /// and has not left with 204; membership survives disconnects.
    pub session: Option<SessionId>,
}

/// An acknowledged write that the cloud no longer shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LostWrite {
    Friendship { with: AccountId },
    SessionMembership { session: SessionId },
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

    /// Compares the ledger with the final state: the friends the cloud lists, and whether the
    /// ledger's session still holds this player (`None` when the player has no session in the ledger).
    pub fn check(&self, friends: &BTreeSet<AccountId>, in_session: Option<bool>) -> Vec<LostWrite> {
        let mut lost: Vec<LostWrite> = self
            .friends
            .difference(friends)
            .map(|with| LostWrite::Friendship { with: *with })
            .collect();
        if let (Some(session), Some(false)) = (&self.session, in_session) {
            lost.push(LostWrite::SessionMembership {
                session: session.clone(),
            });
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledged_writes_missing_at_the_end_are_lost() {
        let mut ledger = Ledger::default();
        ledger.friendship_acknowledged(AccountId(2));
        ledger.friendship_acknowledged(AccountId(3));
        ledger.session_acknowledged(SessionId("9".into()));
        let shown: BTreeSet<_> = [AccountId(3), AccountId(4)].into();
        assert_eq!(
            ledger.check(&shown, Some(false)),
            [
                LostWrite::Friendship { with: AccountId(2) },
                LostWrite::SessionMembership {
                    session: SessionId("9".into())
                }
            ]
        );
        assert_eq!(
            ledger.check(&[AccountId(2), AccountId(3)].into(), Some(true)),
            []
        );
    }

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
