//! A player: identity, tokens (refreshed before they expire), the calls it makes (each write a
//! fact with its outcome), what it knows of its friends and session (its ledger, for choosing
//! whom to play with), and its devices' event connections: its own, and at times a second one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

use crate::api::client::{Answer, Api, ClientError};
use crate::api::wire::{
    AccountId, CodeOutcome, FriendStatus, FriendsView, Privacy, ServerMessage, Session, SessionId,
    Tokens,
};
use crate::error::LoadError;
use crate::measure::facts::{
    unix_micros, CardSeen, CloseCause, ConnId, Device, Fact, Received, WriteFact, WriteOp,
    WriteOutcome,
};
use crate::measure::stats::{Op, Status};
use crate::players::connection::{self, FirstAttempt, Owner, Task, Welcome};
use crate::players::ledger::Ledger;
use crate::players::shared::Shared;
use crate::sync::lock;

/// How long a login waits for the first welcome.
pub const WELCOME_WAIT: Duration = Duration::from_secs(10);

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

/// What a write was about, beside its op and outcome.
#[derive(Debug, Default)]
struct About {
    other: Option<AccountId>,
    session: Option<SessionId>,
    befriended: bool,
    privacy: Option<Privacy>,
}

impl About {
    fn other(other: Option<AccountId>) -> About {
        About {
            other,
            ..About::default()
        }
    }

    fn session(session: Option<SessionId>) -> About {
        About {
            session,
            ..About::default()
        }
    }
}

/// One simulated player.
pub struct Player {
    /// Its number in the run, across load agents (also picks the source address, the first
    /// node and its reconnect waits).
    pub index: usize,
    pub email: String,
    pub handle: String,
    shared: Arc<Shared>,
    /// Its account and tokens, once signed in.
    auth: Auth,
    /// Its own device and its second (`--second-devices`), by [`Device`].
    devices: [DeviceState; 2],
    /// What its connections lived.
    churn: Churn,
    /// What the cloud told it: friends and sessions acknowledged, presence received.
    knows: Knowledge,
    /// The newest presence version it sent.
    last_version: AtomicU64,
    /// Taken while the player is in a scenario's session, so two sessions never pick it at once.
    reserved: AtomicBool,
    /// Its own device's connection reads slowly (`--slow-readers`).
    reading_slowly: AtomicBool,
    /// Events that connection read slowly since it was last told to.
    slow_reads: AtomicU64,
}

/// A player's account and tokens.
#[derive(Default)]
struct Auth {
    account: OnceLock<AccountId>,
    tokens: tokio::sync::Mutex<Option<Credentials>>,
}

/// One of a player's devices.
struct DeviceState {
    /// The node its connection goes to (the player's own calls go to its own device's).
    node: AtomicUsize,
    /// Whether its connection has had its welcome and is still up.
    online: AtomicBool,
    connection: Mutex<Option<Task>>,
}

impl DeviceState {
    fn on(node: usize) -> DeviceState {
        DeviceState {
            node: AtomicUsize::new(node),
            online: AtomicBool::new(false),
            connection: Mutex::new(None),
        }
    }
}

/// Counts of what a player's connections lived.
#[derive(Default)]
struct Churn {
    /// Welcomes and closes of any of its connections, to tell a steady state from a changing one.
    changes: AtomicU64,
    /// Welcomes of its own device.
    welcomes: AtomicU64,
    /// Connections of its own device lost.
    losses: AtomicU64,
}

/// What the cloud told a player.
#[derive(Default)]
struct Knowledge {
    ledger: Mutex<Ledger>,
    /// The newest presence received per friend: its version, and whether it showed the
    /// friend online.
    inbox: Mutex<HashMap<AccountId, (u64, bool)>>,
}

impl Player {
    pub(crate) fn new(index: usize, tag: &str, node: usize, shared: Arc<Shared>) -> Player {
        Player {
            index,
            email: format!("{tag}.{index}@load.anyplay.test"),
            handle: format!("p{tag}_{index}"),
            shared,
            auth: Auth::default(),
            devices: [DeviceState::on(node), DeviceState::on(node)],
            churn: Churn::default(),
            knows: Knowledge::default(),
            last_version: AtomicU64::new(0),
            reserved: AtomicBool::new(false),
            reading_slowly: AtomicBool::new(false),
            slow_reads: AtomicU64::new(0),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The account, once signed in.
    pub fn account(&self) -> Option<AccountId> {
        self.auth.account.get().copied()
    }

    /// Emits a fact of this player, when somebody listens.
    pub(crate) fn emit(&self, fact: Fact) {
        self.shared.emit(self.index, self.account(), fact);
    }

    /// Records an op of this player that started at `since`, and its fact.
    /// Records an op that started at `since`; `node`: the node it was one call to.
    pub(crate) fn record(&self, op: Op, since: Instant, status: Status, node: Option<usize>) {
        self.shared
            .record(self.index, self.account(), op, since, status, node);
    }

    /// Whether one of its devices holds a welcomed event connection.
    pub fn is_online(&self) -> bool {
        self.devices
            .iter()
            .any(|d| d.online.load(Ordering::Acquire))
    }

    /// How many of its devices hold a welcomed event connection.
    pub fn connections(&self) -> usize {
        self.devices
            .iter()
            .filter(|d| d.online.load(Ordering::Acquire))
            .count()
    }

    /// Whether it holds a connection, and how many welcomes and closes its connections had:
    /// two equal readings mean it held (or lacked) a connection all along between them.
    pub fn connection_state(&self) -> (bool, u64) {
        let before = self.churn.changes.load(Ordering::Acquire);
        (self.is_online(), before)
    }

    /// Welcomes so far (a reconnect adds one).
    pub fn welcomes(&self) -> u64 {
        self.churn.welcomes.load(Ordering::Acquire)
    }

    /// Connections lost so far.
    pub fn losses(&self) -> u64 {
        self.churn.losses.load(Ordering::Acquire)
    }

    /// The index of the node it uses.
    pub fn node(&self) -> usize {
        self.node_of(Device::Primary)
    }

    /// What the cloud acknowledged to this player.
    pub fn ledger(&self) -> Ledger {
        lock(&self.knows.ledger).clone()
    }

    /// Friends by the ledger.
    pub fn friends(&self) -> Vec<AccountId> {
        lock(&self.knows.ledger).friends.iter().copied().collect()
    }

    /// The newest presence version received from `from`.
    pub fn received_version(&self, from: AccountId) -> Option<u64> {
        lock(&self.knows.inbox)
            .get(&from)
            .map(|&(version, _)| version)
    }

    pub(crate) fn try_reserve(&self) -> bool {
        self.reserved
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub(crate) fn release(&self) {
        self.reserved.store(false, Ordering::Release);
    }

    /// Whether its own device's connection reads slowly from now on; slowly, its reads are
    /// counted from none.
    pub(crate) fn read_slowly(&self, slowly: bool) {
        if slowly {
            self.slow_reads.store(0, Ordering::Release);
        }
        self.reading_slowly.store(slowly, Ordering::Release);
    }

    /// Events its own device's connection read slowly since it was last told to.
    pub(crate) fn slow_reads(&self) -> u64 {
        self.slow_reads.load(Ordering::Acquire)
    }

    pub(crate) fn reads_slowly(&self) -> bool {
        self.reading_slowly.load(Ordering::Acquire)
    }

    fn api(&self) -> Api<'_> {
        Api::new(
            self.shared.net.http(self.index),
            &self.shared.nodes[self.node()].endpoint.api,
        )
    }

    fn device(&self, device: Device) -> &DeviceState {
        match device {
            Device::Primary => &self.devices[0],
            Device::Second => &self.devices[1],
        }
    }

    /// The index of the node a device's connection goes to.
    pub(crate) fn node_of(&self, device: Device) -> usize {
        self.device(device).node.load(Ordering::Acquire)
    }

    /// Moves a device to the next node (after a failed attempt, or when its node said it is leaving).
    pub(crate) fn next_node_of(&self, device: Device) {
        let count = self.shared.nodes.len();
        let next = (self.node_of(device) + 1) % count;
        self.device(device).node.store(next, Ordering::Release);
    }

    /// Sends the player's own calls and connection to node `index` from now on.
    pub(crate) fn move_to(&self, index: usize) {
        self.device(Device::Primary)
            .node
            .store(index % self.shared.nodes.len(), Ordering::Release);
    }

    /// Awaits `call`, records it as `op` from `since`, and returns its body.
    async fn timed<T>(
        &self,
        op: Op,
        since: Instant,
        call: impl Future<Output = Result<Answer<T>, ClientError>>,
    ) -> Result<T, ClientError> {
        // The node it was sent to: a broken call may move the player on before it ends.
        let node = self.node();
        let result = call.await;
        self.record(op, since, Status::of(&result), Some(node));
        result.map(|answer| answer.body)
    }

    /// One signed-in call: a valid token, then `call` with it, timed as `op`.
    async fn authed<T, F>(
        &self,
        op: Op,
        since: Instant,
        call: impl FnOnce(String) -> F,
    ) -> Result<T, ClientError>
    where
        F: Future<Output = Result<Answer<T>, ClientError>>,
    {
        let token = self.token_for(op, since).await?;
        self.timed(op, since, call(token)).await
    }

    /// A valid access token for `op`; a failure to get one is recorded as the op's failure.
    async fn token_for(&self, op: Op, since: Instant) -> Result<String, ClientError> {
        self.access_token()
            .await
            .inspect_err(|e| self.record(op, since, Status::of_error(e), Some(self.node())))
    }

    /// The access token, refreshed first when it is near expiry.
    pub(crate) async fn access_token(&self) -> Result<String, ClientError> {
        let mut credentials = self.auth.tokens.lock().await;
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
                if Status::of_error(&e) == Status::Http(401) {
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
            if self.auth.account.set(account.id).is_ok() {
                self.shared.register(account.id, self.index);
            }
        }
        *self.auth.tokens.lock().await = Some(Credentials::new(&tokens));
        Ok(())
    }

    /// Signs out (`POST /v1/auth/logout`), then offers the refresh token it held, which the
    /// logout must have revoked. The connection's 4003 makes it sign in again by the rule.
    pub async fn log_out(&self) -> Result<(), ClientError> {
        let refresh = self
            .auth
            .tokens
            .lock()
            .await
            .as_ref()
            .map(|c| c.refresh.clone())
            .ok_or(ClientError::NotSignedIn)?;
        let sent = Instant::now();
        let api = self.api();
        let result = self
            .authed(Op::Logout, sent, |token| async move {
                api.auth_logout(&token).await
            })
            .await;
        let outcome = match &result {
            Ok(()) => WriteOutcome::Ok,
            Err(e) => WriteOutcome::of(Status::of_error(e)),
        };
        let stale_refresh_taken =
            outcome == WriteOutcome::Ok && self.api().auth_refresh(&refresh).await.is_ok();
        self.emit(Fact::LoggedOut {
            sent,
            outcome,
            stale_refresh_taken,
        });
        result
    }

    /// Forgets the tokens, so that the next sign-in is a returning player's.
    pub(crate) async fn forget_tokens(&self) {
        *self.auth.tokens.lock().await = None;
    }

    /// The contract's login: sign in, open the event connection (which then lives on, and
    /// reconnects by the rule until the fleet shuts down), wait for the welcome, then for the
    /// `GET /v1/friends` after it. `e2e_login` is recorded from `since` (the planned start) to
    /// the welcome; the answer is how it ended ([`Status::Done`] on a welcome).
    pub async fn log_in(self: &Arc<Self>, since: Instant) -> Status {
        let first = match self.sign_in().await {
            Err(e) => {
                note_failed_sign_in(self.index, &e);
                match e {
                    LoadError::Client(e) => FirstAttempt::Failed(Status::of_error(&e)),
                    _ => FirstAttempt::Failed(Status::NoAnswer),
                }
            }
            Ok(()) => self.connect(Device::Primary).await,
        };
        let status = match first {
            FirstAttempt::Failed(status) => status,
            FirstAttempt::Welcomed { .. } | FirstAttempt::AlreadyConnected => Status::Done,
        };
        self.record(Op::E2eLogin, since, status, None);
        if let FirstAttempt::Welcomed { resync } = first {
            // Only a panic ends it early, and that was reported where it happened.
            let _ = resync.await;
        }
        status
    }

    /// Starts a device's connection task unless it runs already, and waits (bounded) for its
    /// first attempt.
    pub(crate) async fn connect(self: &Arc<Self>, device: Device) -> FirstAttempt {
        let (first, outcome) = oneshot::channel();
        {
            let mut slot = lock(&self.device(device).connection);
            if slot.as_ref().is_some_and(|task| !task.handle.is_finished()) {
                return FirstAttempt::AlreadyConnected;
            }
            *slot = Some(connection::spawn(
                self.clone(),
                self.shared.clone(),
                device,
                first,
            ));
        }
        match tokio::time::timeout(WELCOME_WAIT, outcome).await {
            Ok(Ok(first)) => first,
            _ => FirstAttempt::Failed(Status::NoAnswer),
        }
    }

    /// Tells a device's connection to close (1000) and end, and waits for it until `deadline`.
    pub(crate) async fn disconnect(&self, device: Device, deadline: tokio::time::Instant) {
        let task = lock(&self.device(device).connection).take();
        if let Some(mut task) = task {
            task.leave.send_replace(true);
            if tokio::time::timeout_at(deadline, &mut task.handle)
                .await
                .is_err()
            {
                task.handle.abort();
            }
        }
    }

    /// Waits until `deadline` for the connection tasks to end (the fleet shut down), then ends them.
    pub(crate) async fn stop_connection(&self, deadline: tokio::time::Instant) {
        for device in [Device::Primary, Device::Second] {
            let task = lock(&self.device(device).connection).take();
            if let Some(mut task) = task {
                if tokio::time::timeout_at(deadline, &mut task.handle)
                    .await
                    .is_err()
                {
                    task.handle.abort();
                }
            }
        }
    }

    /// Notes a presence of `from`; its delivery time when it is an activity change made in
    /// this run, seen here first: newer than the last presence of `from` received, which
    /// showed it online as this one does. A friend coming online, or one seen for the first
    /// time, shows a version set earlier, maybe long before: state, not a change.
    fn delivered(&self, from: AccountId, version: u64, online: bool) -> Option<Duration> {
        let received = unix_micros();
        let mut inbox = lock(&self.knows.inbox);
        let news = News::of(inbox.get(&from).copied(), version, online);
        if news != News::Stale {
            inbox.insert(from, (version, online));
        }
        (news == News::Change && version >= self.shared.started_us && version <= received)
            .then(|| Duration::from_micros(received - version))
    }

    /// `GET /v1/friends`.
    pub async fn list_friends(&self, since: Instant) -> Result<FriendsView, ClientError> {
        let api = self.api();
        self.authed(Op::FriendsList, since, |token| async move {
            api.friends(&token).await
        })
        .await
    }

    /// Records a write's fact from its answer.
    fn wrote<T>(&self, op: WriteOp, about: About, sent: Instant, result: &Result<T, ClientError>) {
        let outcome = match result {
            Ok(_) => WriteOutcome::Ok,
            // Not signed in: nothing was sent.
            Err(ClientError::NotSignedIn) => WriteOutcome::Refused,
            Err(e) => WriteOutcome::of(Status::of_error(e)),
        };
        let refusal = match result {
            Err(e) if outcome == WriteOutcome::Refused => e.code().map(str::to_owned),
            _ => None,
        };
        self.emit(Fact::Write(WriteFact {
            op,
            other: about.other,
            session: about.session,
            outcome,
            refusal,
            befriended: about.befriended,
            privacy: about.privacy,
            sent,
        }));
    }

    /// Asks `to` to be friends; a `200 friends` (they had asked already) makes the friendship.
    pub async fn request_friend(
        &self,
        to: &Player,
        since: Instant,
    ) -> Result<FriendStatus, ClientError> {
        let sent = Instant::now();
        let api = self.api();
        let result = self
            .authed(Op::FriendRequest, since, |token| async move {
                api.friend_request(&token, &to.handle).await
            })
            .await;
        let befriended = matches!(result, Ok(FriendStatus::Friends));
        let about = About {
            befriended,
            ..About::other(to.account())
        };
        self.wrote(WriteOp::FriendRequest, about, sent, &result);
        if befriended {
            self.befriended(to);
        }
        result
    }

    /// Accepts the request of `from`.
    pub async fn accept_friend(&self, from: &Player, since: Instant) -> Result<(), ClientError> {
        let from_account = from.account().ok_or(ClientError::NotSignedIn)?;
        let sent = Instant::now();
        let api = self.api();
        let result = self
            .authed(Op::FriendAccept, since, |token| async move {
                api.friend_accept(&token, from_account).await
            })
            .await;
        self.wrote(
            WriteOp::FriendAccept,
            About::other(Some(from_account)),
            sent,
            &result,
        );
        result?;
        self.befriended(from);
        Ok(())
    }

    /// A friend write answered with no body: decline, cancel, unfriend, block or unblock of
    /// `other`.
    async fn friend_write(&self, op: WriteOp, other: &Player) -> Result<(), ClientError> {
        let other_account = other.account().ok_or(ClientError::NotSignedIn)?;
        let sent = Instant::now();
        let call_op = match op {
            WriteOp::FriendDecline => Op::FriendDecline,
            WriteOp::FriendCancel => Op::FriendCancel,
            WriteOp::Block => Op::Block,
            WriteOp::Unblock => Op::Unblock,
            _ => Op::Unfriend,
        };
        let api = self.api();
        let result = self
            .authed(call_op, sent, |token| async move {
                match op {
                    WriteOp::FriendDecline => api.friend_decline(&token, other_account).await,
                    WriteOp::FriendCancel => api.friend_cancel(&token, other_account).await,
                    WriteOp::Block => api.block(&token, other_account).await,
                    WriteOp::Unblock => api.unblock(&token, other_account).await,
                    _ => api.unfriend(&token, other_account).await,
                }
            })
            .await;
        self.wrote(op, About::other(Some(other_account)), sent, &result);
        result?;
        if matches!(op, WriteOp::Unfriend | WriteOp::Block) {
            if let (Some(mine), Some(theirs)) = (self.account(), other.account()) {
                lock(&self.knows.ledger).friends.remove(&theirs);
                lock(&other.knows.ledger).friends.remove(&mine);
            }
        }
        Ok(())
    }

    /// Declines the request of `from`.
    pub async fn decline_friend(&self, from: &Player) -> Result<(), ClientError> {
        self.friend_write(WriteOp::FriendDecline, from).await
    }

    /// Cancels its own request to `to`.
    pub async fn cancel_request(&self, to: &Player) -> Result<(), ClientError> {
        self.friend_write(WriteOp::FriendCancel, to).await
    }

    /// Ends the friendship with `other`.
    pub async fn unfriend(&self, other: &Player) -> Result<(), ClientError> {
        self.friend_write(WriteOp::Unfriend, other).await
    }

    /// Blocks `other`: their friendship and requests end, both ways.
    pub async fn block(&self, other: &Player) -> Result<(), ClientError> {
        self.friend_write(WriteOp::Block, other).await
    }

    pub async fn unblock(&self, other: &Player) -> Result<(), ClientError> {
        self.friend_write(WriteOp::Unblock, other).await
    }

    /// Sets who may see this player's card in full.
    pub async fn set_privacy(&self, privacy: Privacy) -> Result<(), ClientError> {
        let sent = Instant::now();
        let api = self.api();
        let result = self
            .authed(Op::PrivacySet, sent, |token| async move {
                api.privacy_set(&token, privacy).await
            })
            .await;
        let about = About {
            privacy: Some(privacy),
            ..About::default()
        };
        self.wrote(WriteOp::SetPrivacy, about, sent, &result);
        result
    }

    fn befriended(&self, other: &Player) {
        if let (Some(mine), Some(theirs)) = (self.account(), other.account()) {
            lock(&self.knows.ledger).friendship_acknowledged(theirs);
            lock(&other.knows.ledger).friendship_acknowledged(mine);
        }
    }

    /// A new activity whose version is its send time (µs since the epoch, strictly increasing).
    pub async fn set_presence(&self, activity: &str, since: Instant) -> Result<u64, ClientError> {
        self.set_presence_via(
            self.shared.net.http(self.index),
            self.node(),
            activity,
            since,
        )
        .await
    }

    /// [`Player::set_presence`] through `http` (bound to another source address), to the
    /// node numbered `node_index`.
    pub(crate) async fn set_presence_via(
        &self,
        http: &reqwest::Client,
        node_index: usize,
        activity: &str,
        since: Instant,
    ) -> Result<u64, ClientError> {
        let version = self.next_version();
        let sent = Instant::now();
        let api = Api::new(http, &self.shared.nodes[node_index].endpoint.api);
        let answered = self
            .authed(Op::PresenceSet, since, |token| async move {
                api.presence_set(&token, activity, version).await
            })
            .await;
        self.emit(match answered {
            Ok(_) => Fact::PresenceSet {
                version,
                sent,
                node_index,
            },
            Err(_) => Fact::PresenceUnanswered { version, sent },
        });
        answered.map(|_| version)
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

    /// A session answer: its view is a fact, and an ok create or join its write.
    fn session_answer(
        &self,
        op: WriteOp,
        id: Option<&SessionId>,
        sent: Instant,
        result: &Result<Session, ClientError>,
    ) {
        let session = match result {
            Ok(session) => Some(session.id.clone()),
            Err(_) => id.cloned(),
        };
        self.wrote(op, About::session(session), sent, result);
        if let Ok(session) = result {
            lock(&self.knows.ledger).session_acknowledged(session.id.clone());
            self.emit(Fact::SessionView(session.clone()));
        }
    }

    pub async fn create_session(
        &self,
        max_members: u32,
        since: Instant,
    ) -> Result<Session, ClientError> {
        let sent = Instant::now();
        let api = self.api();
        let result = self
            .authed(Op::SessionCreate, since, |token| async move {
                api.session_create(&token, max_members).await
            })
            .await;
        self.session_answer(WriteOp::SessionCreate, None, sent, &result);
        result
    }

    pub async fn join_session(
        &self,
        id: &SessionId,
        since: Instant,
    ) -> Result<Session, ClientError> {
        let sent = Instant::now();
        let api = self.api();
        let result = self
            .authed(Op::SessionJoin, since, |token| async move {
                api.session_join(&token, id).await
            })
            .await;
        self.session_answer(WriteOp::SessionJoin, Some(id), sent, &result);
        result
    }

    pub async fn leave_session(&self, id: &SessionId, since: Instant) -> Result<(), ClientError> {
        let sent = Instant::now();
        let api = self.api();
        let result = self
            .authed(Op::SessionLeave, since, |token| async move {
                api.session_leave(&token, id).await
            })
            .await;
        self.wrote(
            WriteOp::SessionLeave,
            About::session(Some(id.clone())),
            sent,
            &result,
        );
        result?;
        lock(&self.knows.ledger).session_left(id);
        Ok(())
    }

    /// `GET /v1/cards`: counted as `wrong_count` unless there is exactly one card per id, in
    /// order; what a right answer showed is a fact.
    pub async fn cards(&self, ids: &[AccountId], since: Instant) -> Result<(), ClientError> {
        let token = self.token_for(Op::Cards, since).await?;
        let (sent, node) = (Instant::now(), self.node());
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
            Ok(answer) => {
                let cards = answer
                    .body
                    .cards
                    .iter()
                    .map(|c| CardSeen(c.account_id, c.view(), c.relation))
                    .collect();
                self.emit(Fact::CardsRead { sent, cards });
                Status::of(&result)
            }
            other => Status::of(other),
        };
        self.record(Op::Cards, since, status, Some(node));
        result.map(drop)
    }

    /// A session as the cloud shows it to this player now; `None` when it answers 404 (this
    /// player is not a member, or the session is closed).
    pub async fn session(&self, id: &SessionId) -> Result<Option<Session>, ClientError> {
        let token = self.access_token().await?;
        match self.api().session_get(&token, id).await {
            Ok(answer) => Ok(Some(answer.body)),
            Err(e) if Status::of_error(&e) == Status::Http(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`Player::session`], its answer recorded as a view of the session.
    pub async fn read_session(&self, id: &SessionId) -> Result<Option<Session>, ClientError> {
        let session = self.session(id).await?;
        if let Some(session) = &session {
            self.emit(Fact::SessionView(session.clone()));
        }
        Ok(session)
    }

    /// Signs off: closes its connections itself (1000), bounded by `deadline`; `for_good`
    /// when it will not come back.
    pub async fn sign_off(&self, for_good: bool, deadline: tokio::time::Instant) {
        self.emit(Fact::SignOff { for_good });
        self.disconnect(Device::Second, deadline).await;
        self.disconnect(Device::Primary, deadline).await;
    }

    /// Comes back through node `index` after a sign-off (or a replacement): a new connection.
    pub async fn come_back(self: &Arc<Self>, index: usize) -> Status {
        self.move_to(index);
        match self.connect(Device::Primary).await {
            FirstAttempt::Failed(status) => status,
            FirstAttempt::Welcomed { .. } | FirstAttempt::AlreadyConnected => Status::Done,
        }
    }

    /// Opens the second device's connection through node `index`; its welcome replaces the
    /// player's own connection (4001 to the older one).
    pub(crate) async fn open_second_device(self: &Arc<Self>, index: usize) -> bool {
        self.device(Device::Second)
            .node
            .store(index % self.shared.nodes.len(), Ordering::Release);
        matches!(
            self.connect(Device::Second).await,
            FirstAttempt::Welcomed { .. }
        )
    }

    /// Whether a device's connection task still runs (it ends after a 4001).
    pub(crate) fn device_running(&self, device: Device) -> bool {
        lock(&self.device(device).connection)
            .as_ref()
            .is_some_and(|task| !task.handle.is_finished())
    }
}

/// How many failed sign-ins a process logs in full; the report counts every one.
const SIGN_IN_FAILURES_LOGGED: usize = 10;

/// Logs the first failed sign-ins with every cause (a `no_answer` in the report does not
/// say whether the connection was refused, reset or timed out).
fn note_failed_sign_in(player: usize, e: &LoadError) {
    static LOGGED: AtomicUsize = AtomicUsize::new(0);
    let n = LOGGED.fetch_add(1, Ordering::Relaxed);
    if n < SIGN_IN_FAILURES_LOGGED {
        let mut why = e.to_string();
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            // A message may already end with its source's (`no answer: {0}`).
            let text = c.to_string();
            if !why.ends_with(&text) {
                why.push_str(": ");
                why.push_str(&text);
            }
            cause = c.source();
        }
        tracing::warn!(player, "signing in failed: {why}");
    }
    if n + 1 == SIGN_IN_FAILURES_LOGGED {
        tracing::warn!("further failed sign-ins are only counted");
    }
}

/// What a presence event tells a player, against the last one it had of that friend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum News {
    /// No newer than what it had.
    Stale,
    /// Newer, but state: a friend seen for the first time, coming online or going offline
    /// (its version was set earlier).
    State,
    /// An activity change of a friend it saw online and still does.
    Change,
}

impl News {
    fn of(before: Option<(u64, bool)>, version: u64, online: bool) -> News {
        match before {
            Some((newest, _)) if version <= newest => News::Stale,
            Some((_, true)) if online => News::Change,
            _ => News::State,
        }
    }
}

/// The door a device's connection goes through: what it asks of the player, what it tells it.
impl Owner for Player {
    fn index(&self) -> usize {
        self.index
    }

    fn access_token(&self) -> BoxFuture<'_, Result<String, ClientError>> {
        Box::pin(Player::access_token(self))
    }

    fn sign_in(&self) -> BoxFuture<'_, Result<(), LoadError>> {
        Box::pin(Player::sign_in(self))
    }

    fn node_of(&self, device: Device) -> usize {
        Player::node_of(self, device)
    }

    fn next_node_of(&self, device: Device) {
        Player::next_node_of(self, device)
    }

    fn reads_slowly(&self) -> bool {
        Player::reads_slowly(self)
    }

    fn read_one_slowly(&self) {
        self.slow_reads.fetch_add(1, Ordering::AcqRel);
    }

    fn attempted(&self, opened: Instant, status: Status, node: usize) {
        self.record(Op::WsConnect, opened, status, Some(node));
    }

    fn welcomed(&self, device: Device, welcome: Welcome) {
        let Welcome {
            conn,
            node,
            node_index,
            opened,
            ping_interval_s,
        } = welcome;
        if device == Device::Primary {
            self.churn.welcomes.fetch_add(1, Ordering::AcqRel);
        }
        self.device(device).online.store(true, Ordering::Release);
        self.churn.changes.fetch_add(1, Ordering::AcqRel);
        self.emit(Fact::Welcome {
            conn,
            device,
            node,
            node_index,
            opened,
            ping_interval_s,
        });
    }

    fn closed(&self, device: Device, conn: ConnId, code: Option<u16>, cause: CloseCause) {
        self.device(device).online.store(false, Ordering::Release);
        self.churn.changes.fetch_add(1, Ordering::AcqRel);
        // The player's own leaving, or the run's end, is no loss.
        let lost = !matches!(cause, CloseCause::ClientClose | CloseCause::Shutdown);
        if device == Device::Primary && lost {
            self.churn.losses.fetch_add(1, Ordering::AcqRel);
        }
        self.emit(Fact::Closed {
            conn,
            device,
            code,
            cause,
        });
    }

    /// Handles one message of event connection `conn`.
    fn on_message(&self, conn: ConnId, text: &str) {
        let Ok(message) = serde_json::from_str::<ServerMessage>(text) else {
            return;
        };
        let presence = message.presence();
        let about = message.about();
        let delivery =
            presence.and_then(|(from, version, online)| self.delivered(from, version, online));
        if let Some(delivery) = delivery {
            self.shared
                .recorder()
                .record(Op::PresenceDelivery, delivery, Status::Done);
        }
        self.emit(Fact::Received {
            conn,
            event: Received {
                seq: message.seq,
                kind: message.kind,
                presence,
                delivery,
                about,
                session: message.session_id,
            },
        });
    }

    /// The `GET /v1/friends` after a welcome on `conn` (recorded as friends_list), as a fact.
    fn resync(&self, conn: ConnId) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let sent = Instant::now();
            if let Ok(view) = self.list_friends(sent).await {
                let friends: Vec<_> = view
                    .friends
                    .iter()
                    .map(|f| (f.account_id, f.presence.online, f.presence.version))
                    .collect();
                // What the player knows of its friends now: the next change of one is news.
                let mut inbox = lock(&self.knows.inbox);
                for &(friend, online, version) in &friends {
                    if News::of(inbox.get(&friend).copied(), version, online) != News::Stale {
                        inbox.insert(friend, (version, online));
                    }
                }
                drop(inbox);
                self.emit(Fact::Resync {
                    conn,
                    sent,
                    friends,
                });
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::News;

    #[test]
    fn only_an_activity_change_of_a_friend_seen_online_is_a_delivery() {
        assert_eq!(News::of(Some((5, true)), 6, true), News::Change);
        assert_eq!(News::of(Some((5, true)), 5, true), News::Stale);
        assert_eq!(News::of(Some((5, true)), 4, false), News::Stale);
        // Seen for the first time, or coming online with an older activity: state.
        assert_eq!(News::of(None, 6, true), News::State);
        assert_eq!(News::of(Some((5, false)), 6, true), News::State);
        assert_eq!(News::of(Some((5, true)), 6, false), News::State);
    }
}
