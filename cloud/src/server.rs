//! A running node: its two listeners, its background upkeep, and its drain.
//!
//! `Node::start` binds and serves; `Node::drain` (or SIGTERM in the binary, or
//! `POST /v1/admin/drain`) turns readiness off, answers new calls `503 draining`,
//! closes every event connection with 1001, lets in-flight calls finish and then
//! stops, within the drain timeout.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::bus::{Bus, BusAddress};
use crate::config::Config;
use crate::drain::Drain;
use crate::error::ApiError;
use crate::events::{CloseCode, Hub};
use crate::extract::ClientIp;
use crate::mail::{MailSink, MemoryMail};
use crate::metrics::{ConnectionMetrics, Metrics, RouteLabels, RouteOnly};
use crate::ratelimit::{RateLimiter, Refusals, CALL_WINDOW};
use crate::state::{AppState, Shared};
use crate::store::{Store, StoreOptions};
use crate::{http, presence, retention, routes};

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot open the store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Mail(#[from] crate::mail::MailError),
    #[error(transparent)]
    Bus(#[from] crate::bus::BusError),
    #[error("listener failed: {0}")]
    Serve(std::io::Error),
    #[error("cannot serve TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

/// A node serving in this process.
pub struct Node {
    state: AppState,
    public_addr: SocketAddr,
    ops_addr: SocketAddr,
    task: JoinHandle<Result<(), NodeError>>,
}

impl Node {
    /// Opens the store, binds both listeners and starts serving. Boxed, like every entry point
    /// that binaries and tests await: the node's future tree is then compiled once, in this
    /// crate, instead of again in each crate that polls it (results/ci).
    pub fn start(config: Config) -> BoxFuture<'static, Result<Node, NodeError>> {
        Box::pin(async move {
            #[cfg(feature = "seeded-defects")]
            crate::defects::install(config.seeded_defect);
            let metrics = Arc::new(Metrics::default());
            let store = Store::open(
                &StoreOptions {
                    url: config.database_url.clone(),
                    connections: config.db_connections,
                    acquire_timeout: Duration::from_secs(10),
                    timeouts: config.db_timeouts,
                },
                metrics.pool.clone(),
            )
            .await?;
            let tls = config.tls.as_ref().map(|f| f.acceptor()).transpose()?;
            let mail = MailSink::open(&config.mail)?;
            let limiter = config.rate_limits.enabled.then(|| {
                RateLimiter::for_store(
                    store.backend(),
                    config.rate_limits.calls_per_minute,
                    CALL_WINDOW,
                )
            });
            let hub = Arc::new(Hub::new(config.outbound_queue, metrics.clone()));
            let address = config.nats_url.as_deref().map(|url| BusAddress {
                url,
                cluster: &config.cluster_id,
                creds: config.nats_creds.as_deref(),
            });
            let bus = Bus::connect(
                address,
                config.bus_queue,
                &config.node_id,
                hub.clone(),
                store.clone(),
                &metrics,
            )
            .await?;
            let public = bind(config.listen)?;
            let ops = bind(config.ops_listen)?;
            let state = AppState::new(Shared {
                hub,
                bus,
                config,
                store,
                mail,
                limiter,
                sign_in_refusals: Refusals::default(),
                metrics,
                drain: Drain::default(),
            });
            let public_addr = public.local_addr().map_err(NodeError::Serve)?;
            let ops_addr = ops.local_addr().map_err(NodeError::Serve)?;
            presence::clear_own_records(&state).await?;
            let task = tokio::spawn(serve(state.clone(), public, ops, tls));
            tracing::info!(node = %state.config.node_id, %public_addr, %ops_addr, "node ready");
            Ok(Node {
                state,
                public_addr,
                ops_addr,
                task,
            })
        })
    }

    pub fn public_addr(&self) -> SocketAddr {
        self.public_addr
    }

    pub fn ops_addr(&self) -> SocketAddr {
        self.ops_addr
    }

    /// The in-process mail sink, when the node was configured with one.
    pub fn memory_mail(&self) -> Option<MemoryMail> {
        match &self.state.mail {
            MailSink::Memory(m) => Some(m.clone()),
            MailSink::Log(_) => None,
        }
    }

    /// Store connections in use right now (the harness samples it).
    pub fn pool_busy(&self) -> u32 {
        self.state.store.busy()
    }

    /// Starts the graceful drain (as SIGTERM does).
    pub fn drain(&self) {
        self.state.drain.start();
    }

    /// A handle that can start the drain after the node was moved into `wait`.
    pub fn drainer(&self) -> Drain {
        self.state.drain.clone()
    }

    /// Resolves when the node has stopped (after a drain).
    pub async fn wait(self) -> Result<(), NodeError> {
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(NodeError::Serve(std::io::Error::other(e))),
        }
    }

    /// Stops the node at once, as a crash would look to its clients: event
    /// sockets break without a close frame, the listeners close, nothing is
    /// cleaned up (its connection records expire like a dead node's).
    pub fn abort(self) {
        self.state.hub.sever_all();
        self.task.abort();
    }
}

/// Runs a node until SIGTERM or SIGINT, then drains it: what the `anyplay-cloud`
/// binary does (and `anyplay-chaos`, which runs its nodes as its own processes). Boxed, as
/// `Node::start`.
pub fn serve_until_signalled(config: Config) -> BoxFuture<'static, Result<(), NodeError>> {
    Box::pin(async move {
        use tokio::signal::unix::{signal, SignalKind};
        if let Err(e) = crate::raise_fd_limit() {
            tracing::warn!(error = %e, "could not raise the open-file limit");
        }
        let mut term = signal(SignalKind::terminate()).map_err(NodeError::Serve)?;
        let mut int = signal(SignalKind::interrupt()).map_err(NodeError::Serve)?;
        let node = Node::start(config).await?;
        let drain = node.drainer();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            drain.start();
        });
        node.wait().await
    })
}

fn bind(addr: SocketAddr) -> Result<TcpListener, NodeError> {
    crate::listen(addr).map_err(|source| NodeError::Bind { addr, source })
}

/// A task that ends with its owner, so aborting a node's serve task takes its
/// listeners and upkeep with it.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Calls being handled on the public listener, so the drain can wait for them.
#[derive(Default)]
struct InFlight(AtomicUsize);

/// One call in flight. A handler is dropped half-way when its client goes
/// away; the count must drop with it, or every later drain waits its timeout.
struct Counted(Arc<InFlight>);

impl Counted {
    fn new(in_flight: Arc<InFlight>) -> Counted {
        in_flight.0.fetch_add(1, Ordering::AcqRel);
        Counted(in_flight)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn serve(
    state: AppState,
    public: TcpListener,
    ops: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> Result<(), NodeError> {
    let in_flight = Arc::new(InFlight::default());
    let public_app = routes::public(state.clone())
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(middleware::from_fn_with_state(
            in_flight.clone(),
            count_in_flight,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            record_metrics,
        ));
    let ops_app = routes::ops(state.clone());

    let upkeep = AbortOnDrop(tokio::spawn(presence::upkeep(state.clone())));
    let purge = AbortOnDrop(tokio::spawn(retention::purge(state.clone())));
    let stop = tokio::sync::watch::channel(false);
    let limits = state.config.http;
    let mut public_task = AbortOnDrop(tokio::spawn(http::serve(
        public,
        public_app,
        limits,
        state.config.proxy_protocol_from.as_slice().into(),
        tls,
        state.metrics.http_connections.clone(),
        stop.0.subscribe(),
    )));
    let mut ops_task = AbortOnDrop(tokio::spawn(http::serve(
        ops,
        ops_app,
        limits,
        // Operators reach it directly, on their own network.
        Arc::from([]),
        None,
        // Operators' connections are few; they are not the public's figures.
        ConnectionMetrics::default(),
        stop.0.subscribe(),
    )));

    state.drain.started().await;
    let deadline = Instant::now() + state.config.drain_timeout;
    tracing::info!(node = %state.config.node_id, sockets = state.drain.open_sockets(), "draining");
    state.metrics.draining.set(1);
    state.hub.close_all(CloseCode::GoingAway);
    let settled = async {
        loop {
            state.drain.sockets_closed().await;
            while in_flight.0.load(Ordering::Acquire) > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // An upgrade answered meanwhile counted its socket before its call ended.
            if state.drain.open_sockets() == 0 {
                break;
            }
        }
    };
    if tokio::time::timeout_at(deadline.into(), settled)
        .await
        .is_err()
    {
        tracing::warn!("drain timeout: stopping with calls or sockets still open");
    }
    // The records of our connections go now rather than at lease expiry, so
    // friends see the players leave at once; a store that hangs has until the
    // deadline, after which the leases expire them instead.
    let clear_wait = deadline.saturating_duration_since(Instant::now()) + STORE_GRACE;
    match tokio::time::timeout(clear_wait, presence::clear_own_records(&state)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "could not clear this node's connection records"),
        Err(_) => tracing::warn!(
            "drain: the store did not answer; the leases will expire this node's records"
        ),
    }
    // Those offline events, and the ones of the sockets closed above, may still
    // wait in the bus's queue: they go out before the store closes.
    let flush_wait =
        deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(500);
    if tokio::time::timeout(flush_wait, state.bus.flush())
        .await
        .is_err()
    {
        tracing::warn!("drain: events to other nodes not flushed in time");
    }
    let _ = stop.0.send(true);
    let remaining = deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(500);
    let _ = tokio::time::timeout(remaining, async {
        let _ = (&mut public_task.0).await;
        let _ = (&mut ops_task.0).await;
    })
    .await;
    drop(upkeep);
    drop(purge);
    // Closing waits for the pool's connections: a hung store must not hold the exit.
    if tokio::time::timeout(STORE_GRACE, state.store.close())
        .await
        .is_err()
    {
        tracing::warn!("drain: the store's connections did not close in time");
    }
    tracing::info!(node = %state.config.node_id, "drained");
    Ok(())
}

/// How long a drain gives the store past its deadline, for each step that needs it.
const STORE_GRACE: Duration = Duration::from_millis(500);

/// Refuses new calls while draining, and applies the per-IP limit.
async fn guard(State(state): State<AppState>, ip: ClientIp, req: Request, next: Next) -> Response {
    if state.drain.is_draining() {
        return closing(ApiError::Draining.into_response());
    }
    if let Some(limiter) = &state.limiter {
        // The sign-in email has its own limit, counted in the store.
        if req.uri().path() != "/v1/auth/email" {
            match limiter.check(&state.store, ip.0).await {
                Ok(Ok(())) => {}
                #[cfg(feature = "seeded-defects")]
                Ok(Err(_))
                    if crate::defects::every(crate::defects::SeededDefect::LenientLimits, 2) => {}
                Ok(Err(retry)) => {
                    return ApiError::RateLimited {
                        retry_after_s: retry.as_secs_f64().ceil() as u64,
                    }
                    .into_response()
                }
                Err(e) => return ApiError::from(e).into_response(),
            }
        }
    }
    let response = next.run(req).await;
    if state.drain.is_draining() {
        closing(response)
    } else {
        response
    }
}

/// An answer after which its connection closes (hyper honours the header): once a drain has
/// begun, a client that reused the connection could not tell whether its next call was applied.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

async fn count_in_flight(
    State(in_flight): State<Arc<InFlight>>,
    req: Request,
    next: Next,
) -> Response {
    let _counted = Counted::new(in_flight);
    next.run(req).await
}

async fn record_metrics(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let started = Instant::now();
    let response = next.run(req).await;
    let m = &state.metrics;
    m.http_seconds
        .get_or_create(&RouteOnly {
            route: route.clone(),
        })
        .observe(started.elapsed().as_secs_f64());
    m.http_requests
        .get_or_create(&RouteLabels {
            route,
            status: response.status().as_u16(),
        })
        .inc();
    response
}
