//! One event connection of a player's device: connect from its source address, wait for the
//! welcome, fetch the friends list, read events (each one a fact, with its `seq`), give the
//! connection up when it falls silent, and reconnect by the rule when it breaks, until the
//! device is told to leave.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{header::AUTHORIZATION, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::api::client::ClientError;
use crate::api::wire::{NodeId, ServerMessage};
use crate::error::LoadError;
use crate::measure::facts::{CloseCause, ConnId, Device};
use crate::measure::stats::Status;
use crate::players::choices::{self, Purpose};
use crate::players::shared::{Node, Shared};
use crate::reconnect::{Break, Next, Reconnect, NO_STATUS, SIGNED_OUT};
use crate::scenarios::slow_readers;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);
/// Server events are a few hundred bytes; the default 128 KiB read buffer per socket would cost
/// gigabytes across thousands of players, and even 4 KiB was a fifth of an idle player's
/// memory. A larger frame still arrives whole: the buffer grows to fit it.
const READ_BUFFER: usize = 1024;
/// A slow reader's pause after each event it reads (`--slow-readers`): its pace.
const SLOW_READ_PAUSE: Duration = Duration::from_millis(1000 / slow_readers::READ_RATE);

pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a connection may hear nothing, no event and no ping, before the client gives it up
/// as dead: `2 × ping_interval + 5 s`.
pub fn silence_limit(ping_interval_s: u64) -> Duration {
    Duration::from_secs(2 * ping_interval_s + 5)
}

/// All a device's connection asks of its player and all it tells it: the player starts its
/// devices' connections, and a connection knows nothing more of it.
pub(crate) trait Owner: Send + Sync {
    /// Its number in the run: its source address and the stream of its reconnect waits.
    fn index(&self) -> usize;
    /// A current access token, refreshed when due.
    fn access_token(&self) -> BoxFuture<'_, Result<String, ClientError>>;
    /// Signs in again: its tokens are gone or were refused.
    fn sign_in(&self) -> BoxFuture<'_, Result<(), LoadError>>;
    /// The node `device` connects through.
    fn node_of(&self, device: Device) -> usize;
    /// Moves `device` on to the next node, its own having failed it.
    fn next_node_of(&self, device: Device);
    /// Whether its own device reads slowly (`--slow-readers`).
    fn reads_slowly(&self) -> bool;
    /// Its own device read one event slowly.
    fn read_one_slowly(&self);
    /// A connection attempt to node `node` opened at `opened` ended its handshake with `status`.
    fn attempted(&self, opened: Instant, status: Status, node: usize);
    /// A connection of `device` had its welcome.
    fn welcomed(&self, device: Device, welcome: Welcome);
    /// The friends list read again after a welcome on `conn`: a connection replays nothing
    /// that was missed.
    fn resync(&self, conn: ConnId) -> BoxFuture<'_, ()>;
    /// One message of connection `conn`.
    fn on_message(&self, conn: ConnId, text: &str);
    /// Connection `conn` of `device` ended, with `code` if a close frame came.
    fn closed(&self, device: Device, conn: ConnId, code: Option<u16>, cause: CloseCause);
}

/// A connection's welcome, as its player is told of it.
pub(crate) struct Welcome {
    pub conn: ConnId,
    /// The node that welcomed it, and its index in the fleet's nodes.
    pub node: NodeId,
    pub node_index: usize,
    /// When the attempt that was welcomed began.
    pub opened: Instant,
    /// How often the node said it pings.
    pub ping_interval_s: u64,
}

/// The outcome of a device's first connection attempt, for its login.
pub(crate) enum FirstAttempt {
    /// A welcome; `resync` is the `GET /v1/friends` that follows it.
    Welcomed {
        resync: JoinHandle<()>,
    },
    Failed(Status),
    /// The device's connection was already running.
    AlreadyConnected,
}

/// A running connection task of one device, and how to tell it to leave.
pub(crate) struct Task {
    pub handle: JoinHandle<()>,
    /// `true`: close with 1000 and end.
    pub leave: watch::Sender<bool>,
}

/// How one connection attempt ended.
enum Ended {
    /// The fleet shuts down, or the device was told to leave.
    Stop,
    /// No welcome: the attempt failed with this status.
    Failed(Status),
    /// The tokens are gone or refused: sign in again.
    NeedsSignIn(Status),
    /// The connection had its welcome, then broke.
    Lost(Break),
}

/// Starts the connection task of `device`; `first` gets the first attempt's outcome.
pub(crate) fn spawn(
    player: Arc<dyn Owner>,
    shared: Arc<Shared>,
    device: Device,
    first: oneshot::Sender<FirstAttempt>,
) -> Task {
    let (leave, leaving) = watch::channel(false);
    Task {
        handle: tokio::spawn(run(player, shared, device, first, leaving)),
        leave,
    }
}

async fn run(
    player: Arc<dyn Owner>,
    shared: Arc<Shared>,
    device: Device,
    first: oneshot::Sender<FirstAttempt>,
    mut leaving: watch::Receiver<bool>,
) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut drops = shared.drops.subscribe();
    let mut rule = Reconnect::new(shared.reconnect);
    // The device's own stream: its waits repeat with the seed, whatever the other players do.
    let stream = player.index() as u64 * 2 + u64::from(device == Device::Second);
    let mut rng = choices::stream(shared.seed, Purpose::Reconnect, stream);
    let mut first = Some(first);
    let mut sign_in = false;
    let mut signals = Signals {
        shutdown: &mut shutdown,
        leaving: &mut leaving,
        drops: &mut drops,
    };
    loop {
        if signals.stopped() {
            return;
        }
        if sign_in {
            // Boxed, as every call below: an idle connection's task keeps only what serving
            // needs, not room for the largest call it ever made (see `attempt`).
            if let Err(e) = Box::pin(player.sign_in()).await {
                tracing::debug!(player = player.index(), "signing in again failed: {e}");
                // A node that died after its 4003 would refuse every retry: try the next.
                player.next_node_of(Device::Primary);
                let wait = rule.after_failed_attempt(&mut rng);
                if signals.pause(wait).await {
                    return;
                }
                continue;
            }
            sign_in = false;
        }
        let wait = match attempt(
            &player,
            &shared,
            device,
            &mut rule,
            &mut first,
            &mut signals,
        )
        .await
        {
            Ended::Stop => return,
            Ended::Failed(status) => {
                report_first(&mut first, FirstAttempt::Failed(status));
                player.next_node_of(device);
                rule.after_failed_attempt(&mut rng)
            }
            Ended::NeedsSignIn(status) => {
                report_first(&mut first, FirstAttempt::Failed(status));
                sign_in = true;
                rule.after_failed_attempt(&mut rng)
            }
            Ended::Lost(reason) => {
                if reason.node_is_leaving() {
                    player.next_node_of(device);
                }
                match rule.after_break(&reason, &mut rng) {
                    Next::Wait(wait) => wait,
                    Next::SignIn => {
                        sign_in = true;
                        Duration::ZERO
                    }
                    Next::Stop => return,
                }
            }
        };
        if signals.pause(wait).await {
            return;
        }
    }
}

/// What can end a device's connection from outside.
struct Signals<'a> {
    shutdown: &'a mut watch::Receiver<bool>,
    leaving: &'a mut watch::Receiver<bool>,
    drops: &'a mut watch::Receiver<u64>,
}

impl Signals<'_> {
    fn stopped(&self) -> bool {
        *self.shutdown.borrow() || *self.leaving.borrow()
    }

    /// Sleeps `wait`; true when the fleet shut down or the device was told to leave meanwhile.
    async fn pause(&mut self, wait: Duration) -> bool {
        if wait.is_zero() {
            return self.stopped();
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = self.shutdown.changed() => {}
            _ = self.leaving.changed() => {}
        }
        self.stopped()
    }
}

fn report_first(first: &mut Option<oneshot::Sender<FirstAttempt>>, outcome: FirstAttempt) {
    if let Some(first) = first.take() {
        // The login may have stopped waiting.
        let _ = first.send(outcome);
    }
}

async fn attempt(
    player: &Arc<dyn Owner>,
    shared: &Shared,
    device: Device,
    rule: &mut Reconnect,
    first: &mut Option<oneshot::Sender<FirstAttempt>>,
    signals: &mut Signals<'_>,
) -> Ended {
    // The calls before the welcome are boxed: a task's future is as large as its largest
    // state, and the refresh call and the handshake are each larger than everything a
    // connected player holds while it waits for events.
    let token = match Box::pin(player.access_token()).await {
        Ok(token) => token,
        Err(e @ ClientError::NotSignedIn) => return Ended::NeedsSignIn(Status::of_error(&e)),
        Err(e) if Status::of_error(&e) == Status::Http(401) => {
            return Ended::NeedsSignIn(Status::of_error(&e))
        }
        Err(e) => return Ended::Failed(Status::of_error(&e)),
    };
    let node_index = player.node_of(device);
    let opened = Instant::now();
    let connecting = tokio::time::timeout(
        CONNECT_TIMEOUT,
        Box::pin(open(
            shared,
            player.index(),
            &shared.nodes[node_index],
            &token,
        )),
    );
    let result = tokio::select! {
        result = connecting => result,
        _ = signals.leaving.changed() => return Ended::Stop,
    };
    let status = match &result {
        Ok(Ok(_)) => Status::Http(101),
        Ok(Err(e)) => e.status(),
        Err(_) => Status::NoAnswer,
    };
    player.attempted(opened, status, node_index);
    let mut ws = match result {
        Ok(Ok(ws)) => ws,
        _ if status == Status::Http(401) => return Ended::NeedsSignIn(status),
        _ => return Ended::Failed(status),
    };
    let welcome = match tokio::time::timeout(WELCOME_TIMEOUT, welcome(&mut ws)).await {
        Ok(Ok(welcome)) => welcome,
        Ok(Err(Some(SIGNED_OUT))) => return Ended::NeedsSignIn(Status::NoAnswer),
        _ => return Ended::Failed(Status::NoAnswer),
    };
    let ping_interval_s = welcome.ping_interval_s();
    let silence = silence_limit(ping_interval_s);
    let node = welcome.node.unwrap_or_else(|| NodeId(String::new()));
    // A drop ordered while this device was away is not meant for this connection.
    signals.drops.borrow_and_update();
    rule.after_welcome();
    let conn = shared.next_conn();
    player.welcomed(
        device,
        Welcome {
            conn,
            node,
            node_index,
            opened,
            ping_interval_s,
        },
    );
    // The connection replays nothing that was missed: resync with the friends list, beside
    // reading events (a login waits for it; a reconnect does not).
    let resync = tokio::spawn({
        let player = player.clone();
        async move { player.resync(conn).await }
    });
    report_first(first, FirstAttempt::Welcomed { resync });
    let ended = serve(player.as_ref(), device, conn, &mut ws, silence, signals).await;
    let (code, cause) = match &ended {
        Ended::Lost(brk) => brk.as_close(),
        _ if *signals.shutdown.borrow() => (None, CloseCause::Shutdown),
        _ => (Some(1000), CloseCause::ClientClose),
    };
    player.closed(device, conn, code, cause);
    ended
}

/// Reads until the welcome; the welcome, or the close code (if any) of a connection that ended first.
pub(crate) async fn welcome(ws: &mut Socket) -> Result<ServerMessage, Option<u16>> {
    while let Some(message) = ws.next().await {
        match message {
            Ok(Message::Text(text)) => {
                if let Ok(message) = serde_json::from_str::<ServerMessage>(&text) {
                    if message.is_welcome() {
                        return Ok(message);
                    }
                }
            }
            Ok(Message::Close(frame)) => return Err(frame.map(|f| u16::from(f.code))),
            Ok(_) => {}
            Err(_) => return Err(None),
        }
    }
    Err(None)
}

/// Reads events until the connection breaks or falls silent, a drop is ordered, the device is
/// told to leave, or the fleet shuts down.
async fn serve(
    player: &dyn Owner,
    device: Device,
    conn: ConnId,
    ws: &mut Socket,
    silence: Duration,
    signals: &mut Signals<'_>,
) -> Ended {
    let mut narrowed = false;
    loop {
        tokio::select! {
            _ = signals.shutdown.changed() => {
                close(ws, "load run ended").await;
                return Ended::Stop;
            }
            _ = signals.leaving.changed() => {
                close(ws, "signed off").await;
                return Ended::Stop;
            }
            // Returning drops the socket: the TCP connection ends without a close frame.
            Ok(()) = signals.drops.changed() => return Ended::Lost(Break::Dropped),
            message = tokio::time::timeout(silence, ws.next()) => match message {
                // Heard nothing, not even a ping: the connection is dead to this client.
                Err(_) => return Ended::Lost(Break::Silent),
                Ok(Some(Ok(Message::Text(text)))) => {
                    player.on_message(conn, &text);
                    if device == Device::Primary && player.reads_slowly() {
                        if !narrowed {
                            // The kernel's buffer would hold the flood on the reader's behalf.
                            narrowed = tcp_of(ws.get_ref())
                                .is_some_and(|tcp| crate::api::net::narrow_for_slow_reading(tcp).is_ok());
                        }
                        player.read_one_slowly();
                        tokio::time::sleep(SLOW_READ_PAUSE).await;
                    }
                }
                Ok(Some(Ok(Message::Close(frame)))) => {
                    return Ended::Lost(Break::Closed(frame.map_or(NO_STATUS, |f| u16::from(f.code))))
                }
                // Pings count as life; tungstenite answers them.
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(_)) | None) => return Ended::Lost(Break::NoCloseFrame),
            },
        }
    }
}

/// Closes with 1000, bounded: the peer may be gone.
async fn close(ws: &mut Socket, reason: &'static str) {
    let bye = CloseFrame {
        code: CloseCode::Normal,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(Some(bye))).await;
}

#[derive(Debug)]
pub(crate) enum OpenError {
    Tcp,
    BadToken,
    Ws(tungstenite::Error),
}

impl OpenError {
    fn status(&self) -> Status {
        match self {
            OpenError::Ws(tungstenite::Error::Http(response)) => {
                Status::Http(response.status().as_u16())
            }
            OpenError::Tcp | OpenError::BadToken | OpenError::Ws(_) => Status::NoAnswer,
        }
    }
}

/// Opens the WebSocket from the player's source address, authenticated with the bearer header.
async fn open(
    shared: &Shared,
    player: usize,
    node: &Node,
    token: &str,
) -> Result<Socket, OpenError> {
    let tcp = shared
        .net
        .connect(player, node.addr)
        .await
        .map_err(|_| OpenError::Tcp)?;
    handshake(tcp, &node.ws_url, token).await
}

/// The WebSocket handshake on `tcp` to `url` (`ws://`, or `wss://` with the trust of every
/// client of the load), with the bearer header.
pub(crate) async fn handshake(tcp: TcpStream, url: &str, token: &str) -> Result<Socket, OpenError> {
    // Events are small and latency is what is measured.
    tcp.set_nodelay(true).map_err(|_| OpenError::Tcp)?;
    let mut request = url.into_client_request().map_err(OpenError::Ws)?;
    let bearer =
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| OpenError::BadToken)?;
    request.headers_mut().insert(AUTHORIZATION, bearer);
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
    let tls = Connector::Rustls(crate::api::tls::client_config());
    let (ws, _) =
        tokio_tungstenite::client_async_tls_with_config(request, tcp, Some(config), Some(tls))
            .await
            .map_err(OpenError::Ws)?;
    Ok(ws)
}

/// The TCP socket beneath an event connection.
fn tcp_of(stream: &MaybeTlsStream<TcpStream>) -> Option<&TcpStream> {
    match stream {
        MaybeTlsStream::Plain(tcp) => Some(tcp),
        MaybeTlsStream::Rustls(tls) => Some(tls.get_ref().0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_two_pings_and_five_seconds() {
        assert_eq!(silence_limit(20), Duration::from_secs(45));
        assert_eq!(silence_limit(1), Duration::from_secs(7));
    }

    /// Regression: a player logged out (4003) just as its node died kept signing in again at
    /// the dead node, doubling its pause, until the node came back.
    #[tokio::test]
    async fn signing_in_again_moves_on_from_a_dead_node() {
        use crate::measure::facts::Fact;
        use crate::players::fleet::Fleet;
        use crate::reconnect::ReconnectMode;
        use crate::settings::Mode;
        use crate::target::inprocess::InProcess;
        use crate::target::{NodeEndpoint, Target};

        let (cloud, live) = InProcess::start(&Mode::InProcess {
            default_limits: false,
        })
        .await
        .unwrap();
        // Nothing listens here once the listener is dropped.
        let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let target = Target {
            nodes: vec![
                NodeEndpoint {
                    api: format!("http://127.0.0.1:{dead_port}"),
                    ops: None,
                    pid: None,
                },
                live.nodes[0].clone(),
            ],
            codes: live.codes.clone(),
            control: None,
            pool: None,
        };
        let fleet = Fleet::new(&target, 0..1, ReconnectMode::Spec, 7, None, None)
            .await
            .unwrap();
        let mut facts = fleet.facts().unwrap();
        let player = fleet.players()[0].clone();
        player.move_to(1);
        assert_eq!(player.log_in(Instant::now()).await, Status::Done);
        // Its calls now go to the dead node; the live one logs it out and closes with 4003.
        player.move_to(0);
        let token = player.access_token().await.unwrap();
        let logout = reqwest::Client::new()
            .post(format!("{}/v1/auth/logout", live.nodes[0].api))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(logout.status(), 204);
        let mut welcomes = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while welcomes < 2 {
            let stamped = tokio::time::timeout_at(deadline, facts.recv())
                .await
                .expect("signed in again and welcomed within 20 s")
                .expect("the facts");
            if let Fact::Welcome { node_index, .. } = stamped.fact {
                assert_eq!(node_index, 1);
                welcomes += 1;
            }
        }
        fleet.shutdown().await;
        cloud.shutdown().await;
    }
}
