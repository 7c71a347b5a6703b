//! What players read once a chaos run is over, over healed links: every player's friends
//! (with who is shown online), every (account, session) pair a session write touched, and
//! which accounts held a connection (or none) all through the reads. The same reads serve a
//! fleet in the supervisor and a load agent's share; their results add up by concatenation.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::api::wire::{AccountId, Session, SessionId};
use crate::measure::facts::{Fact, Stamped};
use crate::players::fleet::Fleet;
use crate::players::player::Player;
use crate::sync::lock;

/// Reads at once.
const AT_ONCE: usize = 32;

/// A session as one of its members saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionView {
    pub account: u64,
    pub session: String,
    pub leader: u64,
    pub members: Vec<u64>,
    pub max_members: u32,
}

impl SessionView {
    /// `session` as `account` read it.
    pub fn of(account: u64, session: &Session) -> SessionView {
        SessionView {
            account,
            session: session.id.0.clone(),
            leader: session.leader.0,
            members: session.members.iter().map(|m| m.0).collect(),
            max_members: session.max_members,
        }
    }
}

/// One player's friends at the end, and which of them the cloud showed online.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FriendList {
    pub account: u64,
    pub friends: Vec<u64>,
    #[serde(default)]
    pub online: Vec<u64>,
}

/// Whether `account` is a member of `session` at the end (`GET /v1/sessions/{id}` as that
/// account: 200 listing it, or 404), with the session as it answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub account: u64,
    pub session: String,
    pub member: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<SessionView>,
}

/// What the reads found; what was not read in time is missing, never guessed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalReads {
    pub friends: Vec<FriendList>,
    pub memberships: Vec<Membership>,
    /// Accounts that held a connection all through the reads.
    pub connected: Vec<u64>,
    /// Accounts that held none all through the reads.
    pub offline: Vec<u64>,
    /// The reads did not end within their limit.
    pub late: bool,
}

impl FinalReads {
    /// Adds another share's reads (a load agent's) to these.
    pub fn extend(&mut self, other: FinalReads) {
        self.friends.extend(other.friends);
        self.memberships.extend(other.memberships);
        self.connected.extend(other.connected);
        self.offline.extend(other.offline);
        self.late |= other.late;
    }

    /// These reads cut into parts of at most `per_part` friend lists and memberships each, so
    /// that each part fits one message; the first part carries the rest. Extending one
    /// `FinalReads` with every part gives these back.
    pub fn into_parts(self, per_part: usize) -> Vec<FinalReads> {
        let per_part = per_part.max(1);
        let mut friends = self.friends.into_iter();
        let mut memberships = self.memberships.into_iter();
        let mut parts = vec![FinalReads {
            friends: friends.by_ref().take(per_part).collect(),
            memberships: memberships.by_ref().take(per_part).collect(),
            connected: self.connected,
            offline: self.offline,
            late: self.late,
        }];
        loop {
            let part = FinalReads {
                friends: friends.by_ref().take(per_part).collect(),
                memberships: memberships.by_ref().take(per_part).collect(),
                ..FinalReads::default()
            };
            if part.friends.is_empty() && part.memberships.is_empty() {
                return parts;
            }
            parts.push(part);
        }
    }

    /// In account order, so a history does not depend on which read answered first.
    pub fn sort(&mut self) {
        self.friends.sort_by_key(|f| f.account);
        self.memberships
            .sort_by(|a, b| (a.account, &a.session).cmp(&(b.account, &b.session)));
        self.connected.sort_unstable();
        self.offline.sort_unstable();
    }
}

/// Every (account, session) pair a session write touched, as the facts tell: the pairs the
/// final reads read again. Shared by the task that notes facts and the one that reads at the
/// end; only a session write takes the lock, so noting every fact costs a match.
#[derive(Debug, Default)]
pub struct Touched(Mutex<BTreeSet<(u64, SessionId)>>);

impl Touched {
    pub fn note<T>(&self, stamped: &Stamped<T>) {
        if let (Some(account), Fact::Write(write)) = (stamped.account, &stamped.fact) {
            if let Some(session) = &write.session {
                lock(&self.0).insert((account.0, session.clone()));
            }
        }
    }

    pub fn pairs(&self) -> Vec<(u64, SessionId)> {
        lock(&self.0).iter().cloned().collect()
    }
}

/// The reads of `fleet`'s signed-in players, and of the `sessions` pairs whose account is one
/// of them, together bounded by `limit`.
pub async fn read(fleet: &Fleet, sessions: &[(u64, SessionId)], limit: Duration) -> FinalReads {
    let players: Vec<&Arc<Player>> = fleet
        .players()
        .iter()
        .filter(|p| p.account().is_some())
        .collect();
    let before: Vec<(bool, u64)> = players.iter().map(|p| p.connection_state()).collect();
    let friends = Mutex::new(Vec::new());
    let memberships = Mutex::new(Vec::new());
    let reads = async {
        let memberships = &memberships;
        futures_util::stream::iter(players.iter())
            .for_each_concurrent(AT_ONCE, |player| async {
                let Some(me) = player.account() else { return };
                match player.list_friends(Instant::now()).await {
                    Ok(view) => lock(&friends).push(FriendList {
                        account: me.0,
                        friends: view.friends.iter().map(|f| f.account_id.0).collect(),
                        online: view
                            .friends
                            .iter()
                            .filter(|f| f.presence.online)
                            .map(|f| f.account_id.0)
                            .collect(),
                    }),
                    Err(e) => tracing::warn!("final friends of {me}: {e}"),
                }
            })
            .await;
        futures_util::stream::iter(sessions)
            .for_each_concurrent(AT_ONCE, |(account, session)| async move {
                let Some(player) = fleet.by_account(AccountId(*account)) else {
                    return;
                };
                match player.session(session).await {
                    Ok(found) => lock(memberships).push(Membership {
                        account: *account,
                        session: session.0.clone(),
                        member: found
                            .as_ref()
                            .is_some_and(|s| s.members.iter().any(|m| m.0 == *account)),
                        view: found.as_ref().map(|s| SessionView::of(*account, s)),
                    }),
                    Err(e) => tracing::warn!("final session {session} of {account}: {e}"),
                }
            })
            .await;
    };
    let late = tokio::time::timeout(limit, reads).await.is_err();
    let (mut connected, mut offline) = (Vec::new(), Vec::new());
    for (player, before) in players.iter().zip(before) {
        let (Some(account), after) = (player.account(), player.connection_state()) else {
            continue;
        };
        if before == after {
            if after.0 {
                connected.push(account.0);
            } else {
                offline.push(account.0);
            }
        }
    }
    let mut reads = FinalReads {
        friends: friends.into_inner().unwrap_or_else(|p| p.into_inner()),
        memberships: memberships.into_inner().unwrap_or_else(|p| p.into_inner()),
        connected,
        offline,
        late,
    };
    reads.sort();
    reads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(accounts: &[u64], late: bool) -> FinalReads {
        FinalReads {
            friends: accounts
                .iter()
                .map(|&account| FriendList {
                    account,
                    friends: vec![],
                    online: vec![],
                })
                .collect(),
            memberships: vec![],
            connected: accounts.to_vec(),
            offline: vec![],
            late,
        }
    }

    #[test]
    fn the_shares_of_agents_add_up_in_account_order() {
        let mut reads = share(&[5, 1], false);
        reads.extend(share(&[3], true));
        reads.sort();
        let accounts: Vec<u64> = reads.friends.iter().map(|f| f.account).collect();
        assert_eq!(accounts, [1, 3, 5]);
        assert_eq!(reads.connected, [1, 3, 5]);
        // One late share makes the whole late.
        assert!(reads.late);
    }

    #[test]
    fn reads_cut_into_parts_add_up_to_the_whole() {
        let whole = share(&[1, 2, 3, 4, 5], true);
        let parts = whole.clone().into_parts(2);
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.friends.len() <= 2));
        let mut again = FinalReads::default();
        for part in parts {
            again.extend(part);
        }
        assert_eq!(again, whole);
        assert_eq!(FinalReads::default().into_parts(2).len(), 1);
    }
}
