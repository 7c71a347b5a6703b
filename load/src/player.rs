//! A player: identity, tokens (refreshed before they expire), the calls it makes, its ledger
//! of acknowledged writes, and what its event connection told it.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::client::{status_of, Answer, Api, ClientError};
use crate::connection::{self, FirstAttempt};
use crate::error::LoadError;
use crate::fleet::{EventKind, Shared};
use crate::ledger::{Ledger, LostWrite};
use crate::reconnect::Break;
use crate::stats::{Op, Status};
use crate::sync::lock;
use crate::wire::{
    AccountId, CodeOutcome, FriendStatus, FriendsView, ServerEvent, Session, SessionId, Tokens,
};

/// How long a login waits for the first welcome.
pub const WELCOME_WAIT: Duration = Duration::from_secs(10);

/// Microseconds since the Unix epoch: presence versions carry their send time in it.
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

struct Credentials {
    access: String,
    refresh: String,
    expires_at: Instant,
    lifetime: Duration,
}

impl Credentials {
    fn new(tokens: &Tokens) -> Self {
        let lifetime = Duration::from_secs(tokens.expires_in);
        Credentials {
            access: tokens.access_token.clone(),
            refresh: tokens.refresh_token.clone(),
            expires_at: Instant::now() + lifetime,
            lifetime,
        }
    }

    /// Refreshed this long before expiry, so no call ever carries an expired token.
    fn needs_refresh(&self) -> bool {
        let margin = (self.lifetime / 4).min(Duration::from_secs(60));
        self.expires_at.saturating_duration_since(Instant::now()) <= margin
    }
}

/// One simulated player.
pub struct Player {
    /// Index in the fleet (also picks the source address and the first node).
    pub index: usize,
    pub email: String,
    pub handle: String,
    shared: Arc<Shared>,
    account: OnceLock<AccountId>,
    credentials: tokio::sync::Mutex<Option<Credentials>>,
    /// The node its calls and connection go to.
    node: AtomicUsize,
    online: AtomicBool,
    welcomes: AtomicU64,
    losses: AtomicU64,
    ledger: Mutex<Ledger>,
    /// The newest presence version received per friend.
    inbox: Mutex<HashMap<AccountId, u64>>,
    last_version: AtomicU64,
    /// Taken while the player is in a scenario's session, so two sessions never pick it at once.
    reserved: AtomicBool,
    connection: Mutex<Option<JoinHandle<()>>>,
}

impl Player {
    pub(crate) fn new(index: usize, tag: &str, node: usize, shared: Arc<Shared>) -> Player {
        Player {
            index,
            email: format!("{tag}.{index}@load.anyplay.test"),
            handle: format!("p{tag}_{index}"),
            shared,
            account: OnceLock::new(),
            credentials: tokio::sync::Mutex::new(None),
            node: AtomicUsize::new(node),
            online: AtomicBool::new(false),
            welcomes: AtomicU64::new(0),
            losses: AtomicU64::new(0),
            ledger: Mutex::new(Ledger::default()),
            inbox: Mutex::new(HashMap::new()),
            last_version: AtomicU64::new(0),
            reserved: AtomicBool::new(false),
            connection: Mutex::new(None),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The account, once signed in.
    pub fn account(&self) -> Option<AccountId> {
        self.account.get().copied()
    }

    /// Whether its event connection has had a welcome and is still up.
    pub fn is_online(&self) -> bool {
        self.online.load(Ordering::Acquire)
    }

    /// Welcomes so far (a reconnect adds one).
    pub fn welcomes(&self) -> u64 {
        self.welcomes.load(Ordering::Acquire)
    }

    /// Connections lost so far.
    pub fn losses(&self) -> u64 {
        self.losses.load(Ordering::Acquire)
    }

    /// The index of the node it uses.
    pub fn node(&self) -> usize {
        self.node.load(Ordering::Acquire)
    }

    /// What the cloud acknowledged to this player.
    pub fn ledger(&self) -> Ledger {
        lock(&self.ledger).clone()
    }

    /// Friends by the ledger.
    pub fn friends(&self) -> Vec<AccountId> {
        lock(&self.ledger).friends.iter().copied().collect()
    }

    /// The newest presence version received from `from`.
    pub fn received_version(&self, from: AccountId) -> Option<u64> {
        lock(&self.inbox).get(&from).copied()
    }

    pub(crate) fn try_reserve(&self) -> bool {
        self.reserved
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub(crate) fn release(&self) {
        self.reserved.store(false, Ordering::Release);
    }

    fn api(&self) -> Api<'_> {
        Api::new(
            self.shared.net.http(self.index),
            &self.shared.nodes[self.node()].endpoint.api,
        )
    }

    /// Moves to the next node (after a failed attempt, or when its node said it is leaving).
    pub(crate) fn next_node(&self) {
        let count = self.shared.nodes.len();
        self.node
            .store((self.node() + 1) % count, Ordering::Release);
    }

    /// Awaits `call`, records it as `op` from `since`, and returns its body.
    async fn timed<T>(
        &self,
        op: Op,
        since: Instant,
        call: impl Future<Output = Result<Answer<T>, ClientError>>,
    ) -> Result<T, ClientError> {
        let result = call.await;
        self.shared
            .record(self.index, op, since, status_of(&result));
        result.map(|answer| answer.body)
    }

    /// A valid access token for `op`; a failure to get one is recorded as the op's failure.
    async fn token_for(&self, op: Op, since: Instant) -> Result<String, ClientError> {
        self.access_token()
            .await
            .inspect_err(|e| self.shared.record(self.index, op, since, e.status()))
    }

    /// The access token, refreshed first when it is near expiry.
    pub(crate) async fn access_token(&self) -> Result<String, ClientError> {
        let mut credentials = self.credentials.lock().await;
        let current = credentials.as_ref().ok_or(ClientError::NotSignedIn)?;
        if !current.needs_refresh() {
            return Ok(current.access.clone());
        }
        match self.api().auth_refresh(&current.refresh).await {
            Ok(answer) => {
                let fresh = Credentials::new(&answer.body);
                let token = fresh.access.clone();
                *credentials = Some(fresh);
                Ok(token)
            }
            Err(e) => {
                if e.status() == Status::Http(401) {
                    // The refresh token was refused: only signing in again helps.
                    *credentials = None;
                }
                Err(e)
            }
        }
    }

    /// Signs in by email code (signing up when the account does not exist yet).
    pub async fn sign_in(&self) -> Result<(), LoadError> {
        let api = self.api();
        let challenge = self
            .timed(Op::AuthEmail, Instant::now(), api.auth_email(&self.email))
            .await?;
        let code = self.shared.codes.code_for(&self.email).await?;
        let outcome = self
            .timed(
                Op::AuthCode,
                Instant::now(),
                api.auth_code(&challenge.challenge_id, &code),
            )
            .await?;
        let tokens = match outcome {
            CodeOutcome::SignedIn(tokens) => tokens,
            CodeOutcome::SignupRequired { signup_token } => {
                self.timed(
                    Op::AuthSignup,
                    Instant::now(),
                    api.auth_signup(&signup_token, &self.handle),
                )
                .await?
            }
        };
        if let Some(account) = &tokens.account {
            if self.account.set(account.id).is_ok() {
                self.shared.register(account.id, self.index);
            }
        }
        *self.credentials.lock().await = Some(Credentials::new(&tokens));
        Ok(())
    }

    /// Forgets the tokens, so that the next sign-in is a returning player's.
    pub(crate) async fn forget_tokens(&self) {
        *self.credentials.lock().await = None;
    }

    /// The contract's login: sign in, open the event connection (which then lives on, and
    /// reconnects by the rule until the fleet shuts down), wait for the welcome, then for the
    /// `GET /v1/friends` after it. `e2e_login` is recorded from `since` (the planned start) to
    /// the welcome; the answer is how it ended ([`Status::Done`] on a welcome).
    pub async fn log_in(self: &Arc<Self>, since: Instant) -> Status {
        let first = match self.sign_in().await {
            Err(LoadError::Client(e)) => FirstAttempt::Failed(e.status()),
            Err(_) => FirstAttempt::Failed(Status::NoAnswer),
            Ok(()) => match tokio::time::timeout(WELCOME_WAIT, self.connect()).await {
                Ok(Ok(first)) => first,
                _ => FirstAttempt::Failed(Status::NoAnswer),
            },
        };
        let status = match first {
            FirstAttempt::Failed(status) => status,
            FirstAttempt::Welcomed { .. } | FirstAttempt::AlreadyConnected => Status::Done,
        };
        self.shared.record(self.index, Op::E2eLogin, since, status);
        if let FirstAttempt::Welcomed { resync } = first {
            // Only a panic ends it early, and that was reported where it happened.
            let _ = resync.await;
        }
        status
    }

    /// Starts the event connection task unless it runs already.
    fn connect(self: &Arc<Self>) -> oneshot::Receiver<FirstAttempt> {
        let (first, outcome) = oneshot::channel();
        let mut slot = lock(&self.connection);
        if slot.as_ref().is_some_and(|task| !task.is_finished()) {
            let _ = first.send(FirstAttempt::AlreadyConnected);
        } else {
            *slot = Some(tokio::spawn(connection::run(self.clone(), first)));
        }
        outcome
    }

    /// Waits until `deadline` for the connection task to end, then ends it.
    pub(crate) async fn stop_connection(&self, deadline: tokio::time::Instant) {
        let task = lock(&self.connection).take();
        if let Some(mut task) = task {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
            }
        }
    }

    pub(crate) fn welcomed(&self, node: String, node_index: usize) {
        self.welcomes.fetch_add(1, Ordering::AcqRel);
        self.online.store(true, Ordering::Release);
        self.shared
            .emit(self.index, EventKind::Welcome { node, node_index });
    }

    pub(crate) fn lost(&self, reason: Break) {
        self.online.store(false, Ordering::Release);
        self.losses.fetch_add(1, Ordering::AcqRel);
        self.shared.emit(self.index, EventKind::Lost { reason });
    }

    /// Handles one event of the event connection.
    pub(crate) fn on_event(&self, text: &str) {
        let Ok(ServerEvent::Presence {
            account_id,
            version,
            ..
        }) = serde_json::from_str::<ServerEvent>(text)
        else {
            return;
        };
        let received = unix_micros();
        let delivery = {
            let mut inbox = lock(&self.inbox);
            let newest = inbox.entry(account_id).or_insert(0);
            if version <= *newest {
                return;
            }
            *newest = version;
            // Only changes made in this run carry a send time; older versions are state.
            (version >= self.shared.started_us && version <= received)
                .then(|| Duration::from_micros(received - version))
        };
        if let Some(delivery) = delivery {
            self.shared
                .recorder()
                .record(Op::PresenceDelivery, delivery, Status::Done);
        }
        self.shared.emit(
            self.index,
            EventKind::Presence {
                from: account_id,
                version,
                delivery,
            },
        );
    }

    /// `GET /v1/friends`.
    pub async fn list_friends(&self, since: Instant) -> Result<FriendsView, ClientError> {
        let token = self.token_for(Op::FriendsList, since).await?;
        self.timed(Op::FriendsList, since, self.api().friends(&token))
            .await
    }

    /// Asks `to` to be friends; a `200 friends` (they had asked already) goes in both ledgers.
    pub async fn request_friend(
        &self,
        to: &Player,
        since: Instant,
    ) -> Result<FriendStatus, ClientError> {
        let token = self.token_for(Op::FriendRequest, since).await?;
        let status = self
            .timed(
                Op::FriendRequest,
                since,
                self.api().friend_request(&token, &to.handle),
            )
            .await?;
        if status == FriendStatus::Friends {
            self.befriended(to);
        }
        Ok(status)
    }

    /// Accepts the request of `from`; the friendship goes in both ledgers.
    pub async fn accept_friend(&self, from: &Player, since: Instant) -> Result<(), ClientError> {
        let from_account = from.account().ok_or(ClientError::NotSignedIn)?;
        let token = self.token_for(Op::FriendAccept, since).await?;
        self.timed(
            Op::FriendAccept,
            since,
            self.api().friend_accept(&token, from_account),
        )
        .await?;
        self.befriended(from);
        Ok(())
    }

    fn befriended(&self, other: &Player) {
        if let (Some(mine), Some(theirs)) = (self.account(), other.account()) {
            lock(&self.ledger).friendship_acknowledged(theirs);
            lock(&other.ledger).friendship_acknowledged(mine);
        }
    }

    /// A new activity whose version is its send time (µs since the epoch, strictly increasing).
    pub async fn set_presence(&self, activity: &str, since: Instant) -> Result<u64, ClientError> {
        let version = self.next_version();
        let token = self.token_for(Op::PresenceSet, since).await?;
        self.timed(
            Op::PresenceSet,
            since,
            self.api().presence_set(&token, activity, version),
        )
        .await?;
        self.shared
            .emit(self.index, EventKind::PresenceSet { version });
        Ok(version)
    }

    fn next_version(&self) -> u64 {
        let now = unix_micros();
        let previous = self
            .last_version
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
                Some(now.max(last + 1))
            })
            .unwrap_or_else(|last| last);
        now.max(previous + 1)
    }

    pub async fn create_session(
        &self,
        max_members: u32,
        since: Instant,
    ) -> Result<Session, ClientError> {
        let token = self.token_for(Op::SessionCreate, since).await?;
        let session = self
            .timed(
                Op::SessionCreate,
                since,
                self.api().session_create(&token, max_members),
            )
            .await?;
        lock(&self.ledger).session_acknowledged(session.id.clone());
        Ok(session)
    }

    pub async fn join_session(
        &self,
        id: &SessionId,
        since: Instant,
    ) -> Result<Session, ClientError> {
        let token = self.token_for(Op::SessionJoin, since).await?;
        let session = self
            .timed(Op::SessionJoin, since, self.api().session_join(&token, id))
            .await?;
        lock(&self.ledger).session_acknowledged(session.id.clone());
        Ok(session)
    }

    pub async fn leave_session(&self, id: &SessionId, since: Instant) -> Result<(), ClientError> {
        let token = self.token_for(Op::SessionLeave, since).await?;
        self.timed(
            Op::SessionLeave,
            since,
            self.api().session_leave(&token, id),
        )
        .await?;
        lock(&self.ledger).session_left(id);
        Ok(())
    }

    /// `GET /v1/cards`: counted as `wrong_count` unless there is exactly one card per id, in order.
    pub async fn cards(&self, ids: &[AccountId], since: Instant) -> Result<(), ClientError> {
        let token = self.token_for(Op::Cards, since).await?;
        let result = self.api().cards(&token, ids).await;
        let status = match &result {
            Ok(answer)
                if answer
                    .body
                    .cards
                    .iter()
                    .map(|c| c.account_id)
                    .ne(ids.iter().copied()) =>
            {
                Status::WrongCount
            }
            other => status_of(other),
        };
        self.shared.record(self.index, Op::Cards, since, status);
        result.map(drop)
    }

    /// The members of a session as the cloud shows it now; `None` when it answers 404 (this
    /// player is not a member, or the session is closed).
    pub async fn session_members(
        &self,
        id: &SessionId,
    ) -> Result<Option<Vec<AccountId>>, ClientError> {
        let token = self.access_token().await?;
        match self.api().session_get(&token, id).await {
            Ok(answer) => Ok(Some(answer.body.members)),
            Err(e) if e.status() == Status::Http(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Compares the ledger with what the cloud shows now (`GET /v1/friends` and the session).
    pub async fn verify_ledger(&self) -> Result<Vec<LostWrite>, ClientError> {
        let ledger = self.ledger();
        let friends: BTreeSet<AccountId> = self
            .list_friends(Instant::now())
            .await?
            .friends
            .into_iter()
            .map(|f| f.account_id)
            .collect();
        let in_session = match &ledger.session {
            None => None,
            Some(id) => Some(
                self.account()
                    .zip(self.session_members(id).await?)
                    .is_some_and(|(me, members)| members.contains(&me)),
            ),
        };
        Ok(ledger.check(&friends, in_session))
    }
}
