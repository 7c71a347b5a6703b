//! One player's event connection: connect from its source address, wait for the welcome, fetch
//! the friends list, read events, and reconnect by the rule when the connection breaks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{header::AUTHORIZATION, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use crate::choices::{self, Purpose};
use crate::client::ClientError;
use crate::fleet::{Node, Shared};
use crate::player::Player;
use crate::reconnect::{Break, Next, Reconnect, SIGNED_OUT};
use crate::stats::{Op, Status};
use crate::wire::ServerEvent;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);
/// Server events are small; the default 128 KiB read buffer per socket would cost gigabytes
/// across thousands of players.
const READ_BUFFER: usize = 4 * 1024;

type Socket = WebSocketStream<TcpStream>;

/// The outcome of a player's first connection attempt, for its login.
pub(crate) enum FirstAttempt {
    /// A welcome; `resync` is the `GET /v1/friends` that follows it.
    Welcomed {
        resync: JoinHandle<()>,
    },
    Failed(Status),
    /// The player's connection was already running.
    AlreadyConnected,
}

/// How one connection attempt ended.
enum Ended {
    /// The fleet shuts down.
    Shutdown,
    /// No welcome: the attempt failed with this status.
    Failed(Status),
    /// The tokens are gone or refused: sign in again.
    NeedsSignIn(Status),
    /// The connection had its welcome, then broke.
    Lost(Break),
}

/// The connection task of `player`; `first` gets the first attempt's outcome.
pub(crate) async fn run(player: Arc<Player>, first: oneshot::Sender<FirstAttempt>) {
    let shared = player.shared().clone();
    let mut shutdown = shared.shutdown.subscribe();
    let mut drops = shared.drops.subscribe();
    let mut rule = Reconnect::new(shared.reconnect);
    // The player's own stream: its waits repeat with the seed, whatever the other players do.
    let mut rng = choices::stream(shared.seed, Purpose::Reconnect, player.index as u64);
    let mut first = Some(first);
    let mut sign_in = false;
    loop {
        if *shutdown.borrow() {
            return;
        }
        if sign_in {
            if let Err(e) = player.sign_in().await {
                tracing::debug!(player = player.index, "signing in again failed: {e}");
                let wait = rule.after_failed_attempt(&mut rng);
                if pause(wait, &mut shutdown).await {
                    return;
                }
                continue;
            }
            sign_in = false;
        }
        let wait = match attempt(&player, &mut rule, &mut first, &mut drops, &mut shutdown).await {
            Ended::Shutdown => return,
            Ended::Failed(status) => {
                report_first(&mut first, FirstAttempt::Failed(status));
                player.next_node();
                rule.after_failed_attempt(&mut rng)
            }
            Ended::NeedsSignIn(status) => {
                report_first(&mut first, FirstAttempt::Failed(status));
                sign_in = true;
                rule.after_failed_attempt(&mut rng)
            }
            Ended::Lost(reason) => {
                if reason.node_is_leaving() {
                    player.next_node();
                }
                let next = rule.after_break(&reason, &mut rng);
                player.lost(reason);
                match next {
                    Next::Wait(wait) => wait,
                    Next::SignIn => {
                        sign_in = true;
                        Duration::ZERO
                    }
                    Next::Stop => return,
                }
            }
        };
        if pause(wait, &mut shutdown).await {
            return;
        }
    }
}

fn report_first(first: &mut Option<oneshot::Sender<FirstAttempt>>, outcome: FirstAttempt) {
    if let Some(first) = first.take() {
        // The login may have stopped waiting.
        let _ = first.send(outcome);
    }
}

/// Sleeps `wait`; true when the fleet shut down meanwhile.
async fn pause(wait: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    if wait.is_zero() {
        return *shutdown.borrow();
    }
    tokio::select! {
        _ = tokio::time::sleep(wait) => *shutdown.borrow(),
        _ = shutdown.changed() => true,
    }
}

async fn attempt(
    player: &Arc<Player>,
    rule: &mut Reconnect,
    first: &mut Option<oneshot::Sender<FirstAttempt>>,
    drops: &mut watch::Receiver<u64>,
    shutdown: &mut watch::Receiver<bool>,
) -> Ended {
    let shared = player.shared();
    let token = match player.access_token().await {
        Ok(token) => token,
        Err(e @ ClientError::NotSignedIn) => return Ended::NeedsSignIn(e.status()),
        Err(e) if e.status() == Status::Http(401) => return Ended::NeedsSignIn(e.status()),
        Err(e) => return Ended::Failed(e.status()),
    };
    let node_index = player.node();
    let started = Instant::now();
    let opened = tokio::time::timeout(
        CONNECT_TIMEOUT,
        open(shared, player.index, &shared.nodes[node_index], &token),
    )
    .await;
    let status = match &opened {
        Ok(Ok(_)) => Status::Http(101),
        Ok(Err(e)) => e.status(),
        Err(_) => Status::NoAnswer,
    };
    shared.record(player.index, Op::WsConnect, started, status);
    let mut ws = match opened {
        Ok(Ok(ws)) => ws,
        _ if status == Status::Http(401) => return Ended::NeedsSignIn(status),
        _ => return Ended::Failed(status),
    };
    let node = match tokio::time::timeout(WELCOME_TIMEOUT, welcome(&mut ws)).await {
        Ok(Ok(node)) => node,
        Ok(Err(Some(SIGNED_OUT))) => return Ended::NeedsSignIn(Status::NoAnswer),
        _ => return Ended::Failed(Status::NoAnswer),
    };
    // A drop ordered while this player was away is not meant for this connection.
    drops.borrow_and_update();
    rule.after_welcome();
    player.welcomed(node, node_index);
    // The connection replays nothing that was missed: resync with the friends list, beside
    // reading events (a login waits for it; a reconnect does not).
    let resync = tokio::spawn({
        let player = player.clone();
        async move {
            // Recorded as friends_list.
            let _ = player.list_friends(Instant::now()).await;
        }
    });
    report_first(first, FirstAttempt::Welcomed { resync });
    serve(player, &mut ws, drops, shutdown).await
}

/// Reads until the welcome; the node id, or the close code (if any) of a connection that ended first.
async fn welcome(ws: &mut Socket) -> Result<String, Option<u16>> {
    while let Some(message) = ws.next().await {
        match message {
            Ok(Message::Text(text)) => {
                if let Ok(ServerEvent::Welcome { node, .. }) = serde_json::from_str(&text) {
                    return Ok(node);
                }
            }
            Ok(Message::Close(frame)) => return Err(frame.map(|f| u16::from(f.code))),
            Ok(_) => {}
            Err(_) => return Err(None),
        }
    }
    Err(None)
}

/// Reads events until the connection breaks, a drop is ordered, or the fleet shuts down.
async fn serve(
    player: &Player,
    ws: &mut Socket,
    drops: &mut watch::Receiver<u64>,
    shutdown: &mut watch::Receiver<bool>,
) -> Ended {
    loop {
        tokio::select! {
            _ = shutdown.changed() => {
                let bye = CloseFrame { code: CloseCode::Normal, reason: "load run ended".into() };
                let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(Some(bye))).await;
                return Ended::Shutdown;
            }
            // Returning drops the socket: the TCP connection ends without a close frame.
            Ok(()) = drops.changed() => return Ended::Lost(Break::Dropped),
            message = ws.next() => match message {
                Some(Ok(Message::Text(text))) => player.on_event(&text),
                // A close frame without a code is the protocol's 1005 "no status".
                Some(Ok(Message::Close(frame))) => {
                    return Ended::Lost(Break::Closed(frame.map_or(1005, |f| u16::from(f.code))))
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Ended::Lost(Break::NoCloseFrame),
            },
        }
    }
}

#[derive(Debug)]
enum OpenError {
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
    // Events are small and latency is what is measured.
    tcp.set_nodelay(true).map_err(|_| OpenError::Tcp)?;
    let mut request = node
        .ws_url
        .as_str()
        .into_client_request()
        .map_err(OpenError::Ws)?;
    let bearer =
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| OpenError::BadToken)?;
    request.headers_mut().insert(AUTHORIZATION, bearer);
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, tcp, Some(config))
        .await
        .map_err(OpenError::Ws)?;
    Ok(ws)
}
