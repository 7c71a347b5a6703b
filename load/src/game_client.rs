//! `anyplay-load client`: one headless game client, as a team would write its own to ride
//! through a chaos run (a plan's `clients:`). It signs in with its address, holds its event
//! connection and reconnects by the contract's rule (moving to the next server when one goes
//! away), befriends the handles it is given, sets its presence and follows its friends', and
//! keeps a party. When its time is up it says what it saw (`client.json` in `--out`, and a
//! line each on stdout) and exits 1 naming every break: a friendship never made, a party
//! lost, a friend's presence that went back or stopped coming, a 4001 though nobody else signs
//! in as it, or longer than `--back-within` without a connection.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use crate::api::client::{http_client, Api, ClientError};
use crate::api::wire::{AccountId, CodeOutcome, FriendStatus, ServerMessage, SessionId, Tokens};
use crate::error::LoadError;
use crate::measure::stats::{CallClass, Status};
use crate::players::connection::{handshake, silence_limit, welcome, Socket};
use crate::players::fleet::events_url;
use crate::reconnect::{Break, Next, Reconnect, ReconnectMode, NO_STATUS, REPLACED};
use crate::settings::ClientArgs;
use crate::target::mail_log::{MailLog, DEFAULT_WAIT};
use crate::target::test_codes::TestCodes;
use crate::target::CodeSource;

/// What the client saw, as `client.json` has it.
#[derive(Debug, Default, Serialize)]
pub struct Seen {
    pub name: String,
    pub account: Option<u64>,
    pub welcomes: u32,
    /// Its connection's ends, by code (`no_close_frame`, `silent` when none).
    pub closes: BTreeMap<String, u32>,
    /// Events received, by type.
    pub events: BTreeMap<String, u32>,
    /// The handles it befriended.
    pub friends_made: BTreeSet<String>,
    /// The newest presence version it saw of each friend (by account id).
    pub friend_versions: BTreeMap<u64, u64>,
    pub presence_sets: u64,
    pub party: Option<String>,
    /// The longest it was without a welcomed connection, in seconds.
    pub longest_away_s: f64,
    /// Everything it saw break; empty when the cloud held its contract.
    pub breaks: Vec<String>,
}

/// How often it acts (befriends, sets its presence, reads its friends and its party).
const TICK: Duration = Duration::from_secs(2);
/// How long signing in may take before the client gives up.
const SIGN_IN_WITHIN: Duration = Duration::from_secs(60);
/// A party's size.
const PARTY: u32 = 4;

/// Plays until `--for` is up, then judges: what broke is in [`Seen::breaks`].
pub fn run(args: ClientArgs) -> BoxFuture<'static, Result<Seen, LoadError>> {
    Box::pin(async move {
        if let Some(ca) = &args.ca {
            crate::api::tls::trust_also(ca).map_err(|e| LoadError::Refused(e.to_string()))?;
        }
        let codes: Arc<dyn CodeSource> = match (&args.mail_log, &args.codes_from) {
            (Some(path), None) => Arc::new(MailLog::open(path, DEFAULT_WAIT)?),
            (None, Some(ops)) => {
                let token = args.admin_token_file.as_deref().unwrap_or_else(|| {
                    unreachable!("clap requires --admin-token-file with --codes-from")
                });
                Arc::new(TestCodes::new(ops, token)?)
            }
            _ => {
                return Err(LoadError::Refused(
                    "the client needs --mail-log or --codes-from to sign in".into(),
                ))
            }
        };
        let http = http_client(None)
            .map_err(|e| LoadError::Refused(format!("building the HTTP client: {e}")))?;
        let mut client = GameClient {
            email: args
                .email
                .clone()
                .unwrap_or_else(|| format!("{}@clients.anyplay.test", args.name.to_lowercase())),
            servers: args
                .server
                .iter()
                .map(|s| s.trim_end_matches('/').to_owned())
                .collect(),
            server: 0,
            http,
            codes,
            tokens: None,
            seen: Seen {
                name: args.name.clone(),
                ..Seen::default()
            },
            lagging: BTreeMap::new(),
            args,
        };
        client.play().await?;
        Ok(client.seen)
    })
}

struct GameClient {
    args: ClientArgs,
    email: String,
    servers: Vec<String>,
    /// Index of the server it talks to now.
    server: usize,
    http: reqwest::Client,
    codes: Arc<dyn CodeSource>,
    tokens: Option<Tokens>,
    seen: Seen,
    /// Friends whose presence the cloud shows newer than any event brought, since when.
    lagging: BTreeMap<u64, (u64, Instant)>,
}

impl GameClient {
    fn api(&self) -> Api<'_> {
        Api::new(&self.http, &self.servers[self.server])
    }

    fn next_server(&mut self) {
        self.server = (self.server + 1) % self.servers.len();
    }

    fn broke(&mut self, what: String) {
        eprintln!("client {}: {what}", self.seen.name);
        self.seen.breaks.push(what);
    }

    fn token(&self) -> &str {
        self.tokens.as_ref().map_or("", |t| t.access_token.as_str())
    }

    async fn play(&mut self) -> Result<(), LoadError> {
        let end = Instant::now() + self.args.duration;
        self.sign_in().await?;
        let mut rng = StdRng::seed_from_u64(self.seen.account.unwrap_or(0));
        let mut reconnect = Reconnect::new(ReconnectMode::Spec);
        let mut socket: Option<(Socket, Duration)> = None;
        let mut away_since = Some(Instant::now());
        let mut next_attempt = Instant::now();
        let mut tick = tokio::time::interval(TICK);
        let mut ticks = 0u64;
        loop {
            if socket.is_none() && Instant::now() >= next_attempt {
                match self.connect().await {
                    Ok(connected) => {
                        socket = Some(connected);
                        reconnect.after_welcome();
                        self.seen.welcomes += 1;
                        if let Some(since) = away_since.take() {
                            self.away(since.elapsed());
                        }
                    }
                    Err(_) => {
                        self.next_server();
                        next_attempt = Instant::now() + reconnect.after_failed_attempt(&mut rng);
                    }
                }
            }
            let ended = tokio::select! {
                () = tokio::time::sleep_until(end) => break,
                _ = tick.tick() => {
                    ticks += 1;
                    self.act(ticks, socket.is_some()).await;
                    None
                }
                () = tokio::time::sleep_until(next_attempt), if socket.is_none() => None,
                read = read(&mut socket), if socket.is_some() => match read {
                    Read::Event(text) => {
                        self.message(&text);
                        None
                    }
                    Read::Broke(brk) => Some(brk),
                },
            };
            let Some(brk) = ended else {
                continue;
            };
            socket = None;
            away_since = Some(Instant::now());
            *self.seen.closes.entry(close_name(&brk)).or_default() += 1;
            if brk.node_is_leaving() {
                self.next_server();
            }
            match reconnect.after_break(&brk, &mut rng) {
                Next::Wait(wait) => next_attempt = Instant::now() + wait,
                Next::SignIn => {
                    self.sign_in().await?;
                    next_attempt = Instant::now();
                }
                Next::Stop => {
                    self.broke(format!(
                        "closed {REPLACED} (replaced) though nothing else signs in as {}",
                        self.email
                    ));
                    next_attempt = end;
                }
            }
        }
        if let Some(since) = away_since {
            self.away(since.elapsed());
        }
        self.judge().await;
        Ok(())
    }

    /// The time without a connection that just ended.
    fn away(&mut self, away: Duration) {
        self.seen.longest_away_s = self.seen.longest_away_s.max(away.as_secs_f64());
        if away > self.args.back_within {
            self.broke(format!(
                "no connection for {:.1}s (at most {:?})",
                away.as_secs_f64(),
                self.args.back_within
            ));
        }
    }

    /// Signs in (up) on a server that answers, within [`SIGN_IN_WITHIN`].
    async fn sign_in(&mut self) -> Result<(), LoadError> {
        let deadline = Instant::now() + SIGN_IN_WITHIN;
        loop {
            match self.try_sign_in().await {
                Ok(tokens) => {
                    self.seen.account = tokens.account.as_ref().map(|a| a.id.0);
                    self.tokens = Some(tokens);
                    return Ok(());
                }
                Err(e) if refused_for_good(&e) => {
                    return Err(LoadError::Refused(format!(
                        "{} cannot sign in: {e}",
                        self.email
                    )))
                }
                Err(e) if Instant::now() >= deadline => {
                    return Err(LoadError::Refused(format!(
                        "{} could not sign in within {SIGN_IN_WITHIN:?}: {e}",
                        self.email
                    )))
                }
                Err(_) => {
                    self.next_server();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    async fn try_sign_in(&self) -> Result<Tokens, LoadError> {
        let api = self.api();
        let challenge = api.auth_email(&self.email).await?.body;
        let code = self.codes.code_for(&self.email).await?;
        match api.auth_code(&challenge.challenge_id, &code).await?.body {
            CodeOutcome::SignedIn(tokens) => Ok(tokens),
            CodeOutcome::SignupRequired { signup_token } => {
                Ok(api.auth_signup(&signup_token, &self.args.name).await?.body)
            }
        }
    }

    /// Opens the event connection on the current server; up once welcomed.
    async fn connect(&mut self) -> Result<(Socket, Duration), LoadError> {
        let refused = |e: String| LoadError::Refused(e);
        let api =
            reqwest::Url::parse(&self.servers[self.server]).map_err(|e| refused(e.to_string()))?;
        let (host, port) = api
            .host_str()
            .zip(api.port_or_known_default())
            .ok_or_else(|| refused(format!("{api}: no host or port")))?;
        let opened = async {
            let tcp = TcpStream::connect((host, port))
                .await
                .map_err(|e| refused(e.to_string()))?;
            let mut ws = handshake(tcp, &events_url(&api, host, port), self.token())
                .await
                .map_err(|e| refused(format!("{e:?}")))?;
            let welcome = welcome(&mut ws)
                .await
                .map_err(|code| refused(format!("no welcome (close {code:?})")))?;
            Ok::<_, LoadError>((ws, welcome))
        };
        let (ws, welcome) = tokio::time::timeout(Duration::from_secs(20), opened)
            .await
            .map_err(|_| refused("no welcome within 20 s".into()))??;
        let silence = silence_limit(welcome.ping_interval_s.unwrap_or(20));
        // The contract: after a welcome, read the friends list again.
        self.resync(true).await;
        Ok((ws, silence))
    }

    /// One event read: its presence news and its count.
    fn message(&mut self, text: &str) {
        let Ok(message) = serde_json::from_str::<ServerMessage>(text) else {
            return;
        };
        *self.seen.events.entry(message.kind.clone()).or_default() += 1;
        if let Some((account, version, _)) = message.presence() {
            let newest = self.seen.friend_versions.entry(account.0).or_default();
            *newest = (*newest).max(version);
            if self
                .lagging
                .get(&account.0)
                .is_some_and(|(v, _)| *v <= version)
            {
                self.lagging.remove(&account.0);
            }
        }
    }

    /// What it does each tick: befriends who is still to befriend, sets its presence, and
    /// reads its friends (every tick) and its party (every fifth).
    async fn act(&mut self, tick: u64, connected: bool) {
        for handle in self.args.friends.clone() {
            if self.seen.friends_made.contains(&handle) {
                continue;
            }
            let answer = self.api().friend_request(self.token(), &handle).await;
            let friends = match &answer {
                Ok(a) => a.body == FriendStatus::Friends,
                Err(e) => e.code() == Some("already_friends"),
            };
            if friends {
                self.seen.friends_made.insert(handle);
            } else {
                self.call_failed(&answer.err());
            }
        }
        self.seen.presence_sets += 1;
        let activity = format!("riding {tick}");
        let set = self
            .api()
            .presence_set(self.token(), &activity, self.seen.presence_sets)
            .await;
        self.call_failed(&set.err());
        self.resync(connected).await;
        if tick % 5 == 1 {
            self.keep_party().await;
        }
    }

    /// A failed call: a node that does not answer, or answers 5xx (a drain), is left.
    fn call_failed(&mut self, error: &Option<ClientError>) {
        if error
            .as_ref()
            .is_some_and(|e| Status::of_error(e).class() == CallClass::Failed)
        {
            self.next_server()
        }
    }

    /// Reads the friends list: a friend shown older than an event brought went back; one
    /// shown newer than any event while the connection was up is lagging, and lagging longer
    /// than `--back-within` is a break.
    async fn resync(&mut self, connected: bool) {
        let Ok(view) = self.api().friends(self.token()).await else {
            return;
        };
        let now = Instant::now();
        for friend in view.body.friends {
            let (AccountId(id), shown) = (friend.account_id, friend.presence.version);
            let newest = self.seen.friend_versions.get(&id).copied().unwrap_or(0);
            if shown < newest {
                self.broke(format!(
                    "friend {id}'s presence went back: an event brought version {newest}, \
                     GET /v1/friends then showed {shown}"
                ));
            }
            if shown > newest && connected {
                let since = self.lagging.entry(id).or_insert((shown, now)).1;
                if now - since > self.args.back_within {
                    self.broke(format!(
                        "friend {id}'s presence events stopped: GET /v1/friends shows version \
                         {shown}, the newest event {newest}, for {:.0}s",
                        (now - since).as_secs_f64()
                    ));
                    self.lagging.remove(&id);
                }
            } else if !connected {
                // Events missed while away come with the resync at the next welcome.
                self.lagging.remove(&id);
            }
            let newest = self.seen.friend_versions.entry(id).or_default();
            *newest = (*newest).max(shown);
        }
    }

    /// Makes its party once, then checks it is still a member.
    async fn keep_party(&mut self) {
        let Some(id) = self.seen.party.clone() else {
            if let Ok(session) = self.api().session_create(self.token(), PARTY).await {
                self.seen.party = Some(session.body.id.0);
            }
            return;
        };
        let me = self.seen.account.map(AccountId);
        match self
            .api()
            .session_get(self.token(), &SessionId(id.clone()))
            .await
        {
            Ok(session) if me.is_some_and(|me| session.body.members.contains(&me)) => {}
            Ok(session) => self.broke(format!(
                "party {id} no longer has it as a member: {:?}",
                session.body.members
            )),
            Err(e) if Status::of_error(&e).class() == CallClass::Failed => self.next_server(),
            Err(e) => self.broke(format!("party {id} is gone: {e}")),
        }
    }

    /// The end: every friendship made.
    async fn judge(&mut self) {
        for handle in self.args.friends.clone() {
            if !self.seen.friends_made.contains(&handle) {
                self.broke(format!("never became friends with {handle}"));
            }
        }
        if self.seen.party.is_none() {
            self.broke("never got a party".into());
        }
    }
}

/// What the connection gave next.
enum Read {
    Event(String),
    Broke(Break),
}

/// The connection's next event, or how it broke (pings are answered meanwhile).
async fn read(socket: &mut Option<(Socket, Duration)>) -> Read {
    let Some((ws, silence)) = socket.as_mut() else {
        return std::future::pending().await;
    };
    loop {
        match tokio::time::timeout(*silence, ws.next()).await {
            Err(_) => return Read::Broke(Break::Silent),
            Ok(Some(Ok(Message::Text(text)))) => return Read::Event(text.to_string()),
            Ok(Some(Ok(Message::Close(frame)))) => {
                let code = frame.map_or(NO_STATUS, |f| u16::from(f.code));
                return Read::Broke(Break::Closed(code));
            }
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(_)) | None) => return Read::Broke(Break::NoCloseFrame),
        }
    }
}

fn close_name(brk: &Break) -> String {
    match brk {
        Break::Closed(code) => code.to_string(),
        Break::NoCloseFrame => "no_close_frame".into(),
        Break::Dropped => "dropped".into(),
        Break::Silent => "silent".into(),
    }
}

/// Prints what the client saw, a line each, and writes `client.json` into `out`.
pub fn report(seen: &Seen, out: Option<&std::path::Path>) -> Result<(), LoadError> {
    println!(
        "client {}: account {}, {} welcomes, closes {:?}, events {:?}, friends {:?}, party {}, \
         longest without a connection {:.1}s",
        seen.name,
        seen.account.map_or("-".into(), |a| a.to_string()),
        seen.welcomes,
        seen.closes,
        seen.events,
        seen.friends_made,
        seen.party.as_deref().unwrap_or("-"),
        seen.longest_away_s
    );
    match seen.breaks.as_slice() {
        [] => println!("client {}: nothing broke", seen.name),
        breaks => breaks
            .iter()
            .for_each(|b| println!("client {}: BROKE: {b}", seen.name)),
    }
    let Some(dir) = out else {
        return Ok(());
    };
    let path = dir.join("client.json");
    let text = serde_json::to_string_pretty(seen).expect("what a client saw serializes");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|source| LoadError::Write { path, source })
}

/// A refusal that asking again will not change: the cloud's 4xx but a timeout or a rate
/// limit (a malformed address, a handle that breaks the rules).
fn refused_for_good(e: &LoadError) -> bool {
    matches!(e, LoadError::Client(ClientError::Api { status, .. })
        if (400..500).contains(status) && !matches!(status, 408 | 429))
}
