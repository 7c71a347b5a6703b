//! Defects seeded on purpose (cargo feature `seeded-defects`, never in a default build):
//! `anyplay-chaos selftest` starts nodes with one of them to prove that the check named for
//! it fails. Each defect is a few lines at the place it breaks, behind
//! `#[cfg(feature = "seeded-defects")]` and a test of [`active`].
//!
//! The node's [`Config`](crate::Config) carries the defect; [`Node::start`](crate::Node)
//! installs it here, process-wide, so that the hub's socket loop and the store can test it
//! without a parameter through every signature. A self-test runs each node as a process
//! of its own, so one defect per process is all it needs.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};

/// A named defect, and (in the self-test's table) the check that must catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SeededDefect {
    /// A new connection never closes the account's older one on another node (no 4001),
    /// neither over the bus nor when the old node finds its record taken.
    NoCrossNodeReplace,
    /// Events from another node about one account in fifty (ids 7, 57, 107, …) are
    /// dropped: all through the run, not bunched into the traffic after each fault,
    /// where fault windows excuse them.
    DropCrossNodeEvents,
    /// One acknowledged session join in four is undone right after its 200.
    UndoSessionJoin,
    /// Every second friend accept acknowledged within a while of a fault the node saw
    /// (a store error or out of reach, a peer's records expired) is undone.
    UndoFriendshipInFault,
    /// Expiry does nothing: a crashed node's connection records stay for good.
    LeasesNeverExpire,
    /// A connection skips a `seq` number every 50th event.
    SkipSeq,
    /// A session admits one member more than its `max_members`.
    SessionOneTooMany,
    /// Every 150th event a node sends ends its connection with 4001 instead, though nobody
    /// replaced it: the client never comes back (a 4001 tells it not to).
    UnreplacedClose,
    /// Every 150th event a node sends ends its connection without a close frame instead, on
    /// a healthy link.
    DropHealthyConnections,
    /// Every activity change also goes to a stranger (the account 97 ids further on).
    PresenceToStrangers,
    /// Every eighth friend accept is answered 404 `not_found`, its request still open.
    RefuseAccepts,
    /// A leader's leaving hands leadership to the newest member, not the longest-standing.
    NewestLeads,
    /// Every second leave of a session tells the other members nothing.
    SilentLeaves,
    /// A block leaves the friendship standing (and tells nobody).
    BlockKeepsFriends,
    /// A private card shows in full to the account's friends.
    PrivateCardsToFriends,
    /// A card shows (limited or full) to an account its owner blocked.
    CardsThroughBlocks,
    /// A friend request across a block gets the other side's answer: 403 to the blocked,
    /// 404 to the blocker.
    BlockRefusalsSwapped,
    /// A logout revokes no token.
    LogoutKeepsTokens,
    /// A logout leaves the account's event connection open.
    LogoutLeavesSocket,
    /// Every second account going offline tells its friends nothing.
    SilentSignOffs,
    /// A leader's leaving tells the members who leads now only every second time.
    SilentLeaderChanges,
    /// A session refuses its last seat as `session_full`.
    FullASeatEarly,
    /// A young account may open only half its daily friend requests.
    DailyLimitHalved,
    /// A 429 comes without its `Retry-After`.
    NoRetryAfter,
    /// Every second call over the per-address call limit goes through all the same.
    LenientLimits,
    /// A full outbound queue drops the event and keeps its connection, instead of closing
    /// it as a slow consumer (1013).
    SlowConsumersKept,
    /// An activity change reaches the friends with its version plus one.
    PresenceVersionBumped,
    /// A young account's daily friend requests are not counted: it may open any number.
    DailyLimitIgnored,
    /// A release defect: the nodes' bus messages name an event's recipients `recipients`,
    /// not `to`, and read only that name. Alike nodes understand each other; a node of the
    /// release before cannot read them, nor they its own.
    BusFieldRenamed,
    /// A release defect: the node's migration renames `accounts.avatar` to `avatar_url`,
    /// and the node reads the new name. A node of the release before reads `avatar` on
    /// every account it loads, and fails.
    MigrationRenamesColumn,
}

impl SeededDefect {
    pub const ALL: [SeededDefect; 30] = [
        SeededDefect::NoCrossNodeReplace,
        SeededDefect::DropCrossNodeEvents,
        SeededDefect::UndoSessionJoin,
        SeededDefect::UndoFriendshipInFault,
        SeededDefect::LeasesNeverExpire,
        SeededDefect::SkipSeq,
        SeededDefect::SessionOneTooMany,
        SeededDefect::UnreplacedClose,
        SeededDefect::DropHealthyConnections,
        SeededDefect::PresenceToStrangers,
        SeededDefect::RefuseAccepts,
        SeededDefect::NewestLeads,
        SeededDefect::SilentLeaves,
        SeededDefect::BlockKeepsFriends,
        SeededDefect::PrivateCardsToFriends,
        SeededDefect::CardsThroughBlocks,
        SeededDefect::BlockRefusalsSwapped,
        SeededDefect::LogoutKeepsTokens,
        SeededDefect::LogoutLeavesSocket,
        SeededDefect::SilentSignOffs,
        SeededDefect::SilentLeaderChanges,
        SeededDefect::FullASeatEarly,
        SeededDefect::DailyLimitHalved,
        SeededDefect::NoRetryAfter,
        SeededDefect::LenientLimits,
        SeededDefect::SlowConsumersKept,
        SeededDefect::PresenceVersionBumped,
        SeededDefect::DailyLimitIgnored,
        SeededDefect::BusFieldRenamed,
        SeededDefect::MigrationRenamesColumn,
    ];

    /// The flag's spelling (`skip-seq`).
    pub fn name(self) -> &'static str {
        match self {
            SeededDefect::NoCrossNodeReplace => "no-cross-node-replace",
            SeededDefect::DropCrossNodeEvents => "drop-cross-node-events",
            SeededDefect::UndoSessionJoin => "undo-session-join",
            SeededDefect::UndoFriendshipInFault => "undo-friendship-in-fault",
            SeededDefect::LeasesNeverExpire => "leases-never-expire",
            SeededDefect::SkipSeq => "skip-seq",
            SeededDefect::SessionOneTooMany => "session-one-too-many",
            SeededDefect::UnreplacedClose => "unreplaced-close",
            SeededDefect::DropHealthyConnections => "drop-healthy-connections",
            SeededDefect::PresenceToStrangers => "presence-to-strangers",
            SeededDefect::RefuseAccepts => "refuse-accepts",
            SeededDefect::NewestLeads => "newest-leads",
            SeededDefect::SilentLeaves => "silent-leaves",
            SeededDefect::BlockKeepsFriends => "block-keeps-friends",
            SeededDefect::PrivateCardsToFriends => "private-cards-to-friends",
            SeededDefect::CardsThroughBlocks => "cards-through-blocks",
            SeededDefect::BlockRefusalsSwapped => "block-refusals-swapped",
            SeededDefect::LogoutKeepsTokens => "logout-keeps-tokens",
            SeededDefect::LogoutLeavesSocket => "logout-leaves-socket",
            SeededDefect::SilentSignOffs => "silent-sign-offs",
            SeededDefect::SilentLeaderChanges => "silent-leader-changes",
            SeededDefect::FullASeatEarly => "full-a-seat-early",
            SeededDefect::DailyLimitHalved => "daily-limit-halved",
            SeededDefect::NoRetryAfter => "no-retry-after",
            SeededDefect::LenientLimits => "lenient-limits",
            SeededDefect::SlowConsumersKept => "slow-consumers-kept",
            SeededDefect::PresenceVersionBumped => "presence-version-bumped",
            SeededDefect::DailyLimitIgnored => "daily-limit-ignored",
            SeededDefect::BusFieldRenamed => "bus-field-renamed",
            SeededDefect::MigrationRenamesColumn => "migration-renames-column",
        }
    }

    /// Whether it breaks only a cluster that mixes this build with the release before it
    /// (an upgrade shows it; alike nodes do not).
    pub fn between_releases(self) -> bool {
        matches!(
            self,
            SeededDefect::BusFieldRenamed | SeededDefect::MigrationRenamesColumn
        )
    }

    fn index(self) -> usize {
        SeededDefect::ALL
            .iter()
            .position(|d| *d == self)
            .expect("every defect is in ALL")
    }
}

impl std::fmt::Display for SeededDefect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// 0: none; else the index in `ALL` plus one.
static ACTIVE: AtomicU8 = AtomicU8::new(0);
/// How often each defect's place was reached, for the "now and then" ones.
static REACHED: [AtomicU64; SeededDefect::ALL.len()] =
    [const { AtomicU64::new(0) }; SeededDefect::ALL.len()];
/// When this node last saw a fault, in ms since the epoch (0: never).
static FAULT_SEEN_MS: AtomicI64 = AtomicI64::new(0);

/// How long after a fault the node counts as "in a fault" for `undo-friendship-in-fault`.
const FAULT_WINDOW_MS: i64 = 15_000;

/// Makes `defect` the process's defect (`None`: the cloud as it is).
pub fn install(defect: Option<SeededDefect>) {
    let code = defect.map_or(0, |d| d.index() as u8 + 1);
    ACTIVE.store(code, Ordering::Relaxed);
    if defect.is_some() {
        tracing::warn!(defect = %defect.map_or("", |d| d.name()), "running with a seeded defect");
    }
}

/// True when `defect` is the installed one.
pub fn active(defect: SeededDefect) -> bool {
    ACTIVE.load(Ordering::Relaxed) as usize == defect.index() + 1
}

/// True when `defect` is installed and this is the `every`-th time its place is reached.
pub fn every(defect: SeededDefect, every: u64) -> bool {
    active(defect) && (REACHED[defect.index()].fetch_add(1, Ordering::Relaxed) + 1) % every == 0
}

/// For [`SeededDefect::DropCrossNodeEvents`]: whether this event (JSON) from another node
/// is about an account whose events it drops.
pub fn dropped_about(event: &str) -> bool {
    active(SeededDefect::DropCrossNodeEvents)
        && serde_json::from_str::<serde_json::Value>(event)
            .ok()
            .and_then(|e| e["account_id"].as_i64())
            .is_some_and(|id| id % 50 == 7)
}

/// For [`SeededDefect::BusFieldRenamed`]: a bus message as this build writes it (`to`
/// renamed `recipients`), or as it reads one (`recipients` back to `to`; a message that names
/// `to` is one it cannot read, so `to` goes).
pub fn bus_field(mut message: serde_json::Value, writing: bool) -> serde_json::Value {
    if let Some(fields) = message.as_object_mut() {
        let (from, to) = match writing {
            true => ("to", "recipients"),
            false => ("recipients", "to"),
        };
        let value = fields.remove(from);
        fields.remove(to);
        if let Some(value) = value {
            fields.insert(to.to_owned(), value);
        }
    }
    message
}

/// For [`SeededDefect::MigrationRenamesColumn`]: `sql` as this build writes it.
pub fn renamed_column(sql: &str) -> std::borrow::Cow<'_, str> {
    match active(SeededDefect::MigrationRenamesColumn) {
        true => sql.replace("avatar", "avatar_url").into(),
        false => sql.into(),
    }
}

/// The node saw a fault (a store error or out of reach, a peer's records expired).
pub fn fault_seen() {
    FAULT_SEEN_MS.store(crate::store::now_ms(), Ordering::Relaxed);
}

/// True when the node saw a fault within the last [`FAULT_WINDOW_MS`].
pub fn in_fault() -> bool {
    let seen = FAULT_SEEN_MS.load(Ordering::Relaxed);
    seen > 0 && crate::store::now_ms() - seen <= FAULT_WINDOW_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_flag_spellings() {
        use clap::ValueEnum as _;
        for defect in SeededDefect::ALL {
            assert_eq!(
                SeededDefect::from_str(defect.name(), false),
                Ok(defect),
                "{defect}"
            );
        }
    }

    #[test]
    fn a_renamed_bus_field_is_read_only_by_a_build_that_renamed_it() {
        let written = bus_field(serde_json::json!({"kind": "event", "to": [1, 2]}), true);
        assert_eq!(
            written,
            serde_json::json!({"kind": "event", "recipients": [1, 2]})
        );
        assert_eq!(
            bus_field(written, false),
            serde_json::json!({"kind": "event", "to": [1, 2]})
        );
        // A message of the release before names `to`: unreadable here.
        assert_eq!(
            bus_field(serde_json::json!({"kind": "event", "to": [1]}), false),
            serde_json::json!({"kind": "event"})
        );
    }

    #[test]
    fn the_hidden_flag_reaches_the_config_and_stays_out_of_the_help() {
        use clap::{CommandFactory as _, Parser as _};
        let config = crate::Args::parse_from(["anyplay-cloud", "--seeded-defect", "skip-seq"])
            .into_config()
            .unwrap();
        assert_eq!(config.seeded_defect, Some(SeededDefect::SkipSeq));
        let help = crate::Args::command().render_long_help().to_string();
        assert!(!help.contains("seeded"), "{help}");
    }
}
