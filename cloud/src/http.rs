//! Serving a listener's TCP connections with the limits `axum::serve` lacks: a
//! cap on open connections, in all and per source address (one over it is closed
//! at once), a deadline for each
//! request head (slowloris, silent or idle keep-alive clients), and an idle
//! timeout while a request or its response makes no progress. HTTP/1.1 only.
//!
//! hyper's own answer to a head it cannot parse (400, 414, 431, an empty body) is rewritten on
//! its way out with the contract's JSON error ([`crate::head_errors`]).
//!
//! With a certificate (`--tls-cert`) a connection is TLS from its first byte, its handshake
//! under the head's deadline ([`crate::tls`]).
//!
//! A forwarder the node trusts (`--proxy-protocol-from`) may begin a connection with a PROXY
//! protocol v1 header (HAProxy's): the client it names is then the source for every
//! per-address limit. Anyone else's header is just a bad request.
//!
//! A connection's place under the cap travels with its socket, so an event
//! WebSocket upgraded from it keeps the place until it closes. A handler may
//! bound the socket's kernel send buffer ([`SendBuffer`]): the event route does,
//! so that a reader that falls behind fills the outbound queue, not megabytes of
//! kernel buffer the queue's bound knows nothing of.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tower::ServiceExt;

use crate::config::HttpLimits;
use crate::metrics::{ConnectionMetrics, Held};
use crate::tls::Stream;

/// Serves `app` on `listener` until `stop` turns true, then stops accepting,
/// lets each connection finish its current call and waits for them.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    forwarders: Arc<[IpAddr]>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    metrics: ConnectionMetrics,
    mut stop: watch::Receiver<bool>,
) {
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let sources = Sources::default();
    // Each connection task holds a receiver; all dropped means all done.
    let (done_tx, done_rx) = watch::channel(());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut stop) => break,
        };
        let (stream, remote) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors, most likely: give it a moment.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            metrics.refused.inc();
            // Dropped at once: the client sees its connection closed.
            continue;
        };
        let (app, metrics, sources, tls) =
            (app.clone(), metrics.clone(), sources.clone(), tls.clone());
        let (mut stop, done) = (stop.clone(), done_rx.clone());
        let forwarded = forwarders.contains(&remote.ip());
        tokio::spawn(async move {
            let mut stream = stream;
            // A forwarder's header is read in the connection's own task: a slow one holds
            // no one else up, and gets the head's deadline; a drain closes it at once, as
            // it does a connection with no request under way.
            let remote = match forwarded {
                false => remote,
                true => tokio::select! {
                    client = client_of(&mut stream, remote, limits.header_timeout) => match client {
                        Some(client) => client,
                        None => return,
                    },
                    _ = stopped(&mut stop) => return,
                },
            };
            let Some(source) = sources.take(remote.ip(), limits.max_connections_per_ip) else {
                metrics.refused_per_ip.inc();
                return;
            };
            let _ = stream.set_nodelay(true);
            let stream = match tls {
                None => Stream::Plain(stream),
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(limits.header_timeout, acceptor.accept(stream));
                    match tokio::select! {
                        handshake = handshake => handshake,
                        _ = stopped(&mut stop) => return,
                    } {
                        Ok(Ok(tls)) => Stream::Tls(Box::new(tls)),
                        Ok(Err(e)) => {
                            tracing::debug!(%remote, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    }
                }
            };
            let io = Tracked::new(stream, place, source, Held::new(&metrics.open));
            connection(io, remote, app, limits, stop, done).await;
        });
    }
    drop(done_rx);
    drop(listener);
    done_tx.closed().await;
}

/// The longest PROXY v1 header: `PROXY TCP6`, two full IPv6 addresses, two ports, CRLF.
const PROXY_HEADER_MAX: usize = 107;

/// The client a forwarder's PROXY v1 header names, the header consumed; the forwarder itself
/// when it sent none (or `UNKNOWN`). `None`: a malformed or late header, and the connection
/// is closed.
async fn client_of(
    stream: &mut TcpStream,
    forwarder: SocketAddr,
    deadline: std::time::Duration,
) -> Option<SocketAddr> {
    const SIGNATURE: &[u8] = b"PROXY ";
    let read = async {
        let mut head = [0u8; PROXY_HEADER_MAX];
        loop {
            let seen = stream.peek(&mut head).await.ok()?;
            let head = &head[..seen];
            let prefix = seen.min(SIGNATURE.len());
            if seen == 0 || head[..prefix] != SIGNATURE[..prefix] {
                // Closed, or plain HTTP from the forwarder itself.
                return (seen > 0).then_some(forwarder);
            }
            if let Some(end) = head.windows(2).position(|w| w == b"\r\n") {
                let line = std::str::from_utf8(&head[..end + 2]).ok()?;
                let addresses: ppp::v1::Addresses = line.parse().ok()?;
                let mut consumed = [0u8; PROXY_HEADER_MAX];
                tokio::io::AsyncReadExt::read_exact(stream, &mut consumed[..end + 2])
                    .await
                    .ok()?;
                return Some(match addresses {
                    ppp::v1::Addresses::Tcp4(a) => (a.source_address, a.source_port).into(),
                    ppp::v1::Addresses::Tcp6(a) => (a.source_address, a.source_port).into(),
                    ppp::v1::Addresses::Unknown => forwarder,
                });
            }
            if seen == PROXY_HEADER_MAX {
                return None;
            }
            // Part of a header: peek returns at once while bytes wait, so wait a little.
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(deadline, read).await.ok().flatten()
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn connection(
    io: Tracked,
    remote: SocketAddr,
    app: Router,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
    _done: watch::Receiver<()>,
) {
    let activity = io.activity.clone();
    let send_buffer = SendBuffer(io.send_buffer.clone());
    let service = app.map_request(move |mut req: axum::http::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(remote));
        req.extensions_mut().insert(send_buffer.clone());
        req
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut conn = pin!(builder
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(service))
        .with_upgrades());
    let mut stopping = false;
    loop {
        let idle_until = activity.last() + limits.idle_timeout;
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%remote, error = %e, "connection ended");
                }
                return;
            }
            _ = tokio::time::sleep_until(idle_until) => {
                if activity.last() + limits.idle_timeout <= Instant::now() {
                    tracing::debug!(%remote, "idle connection closed");
                    return;
                }
            }
            _ = stopped(&mut stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// When a connection last moved a byte.
struct Activity {
    base: Instant,
    last_ns: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        self.last_ns
            .store(self.base.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.base + std::time::Duration::from_nanos(self.last_ns.load(Ordering::Relaxed))
    }
}

/// The connections open per source address (an IPv6 /64), for the per-address cap.
#[derive(Clone, Default)]
struct Sources(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One connection's count under its source address, given back when it closes.
struct SourcePlace {
    sources: Sources,
    source: IpAddr,
}

impl Sources {
    /// A place for one more connection from `ip`, unless its source holds `max` already.
    fn take(&self, ip: IpAddr, max: Option<usize>) -> Option<SourcePlace> {
        let source = crate::ratelimit::source_of(ip);
        let mut open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(source).or_default();
        if max.is_some_and(|max| *count >= max) {
            return None;
        }
        *count += 1;
        Some(SourcePlace {
            sources: self.clone(),
            source,
        })
    }
}

impl Drop for SourcePlace {
    fn drop(&mut self) {
        let mut open = self
            .sources
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.source) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.source);
            }
        }
    }
}

/// A request's handle on its connection's kernel send buffer (a request extension).
#[derive(Clone)]
pub struct SendBuffer(Arc<AtomicUsize>);

impl SendBuffer {
    /// Bounds the connection's send buffer to `bytes` (the kernel doubles it) from its next
    /// write on, which for an upgrade is the `101` itself.
    pub fn limit(&self, bytes: usize) {
        self.0.store(bytes, Ordering::Relaxed);
    }
}

/// A connection's socket, with its place under the cap and its open count,
/// both given back when it closes (after an upgrade, when the WebSocket does).
struct Tracked {
    stream: Stream,
    /// What is still to be written of an answer rewritten by [`crate::head_errors`].
    rewritten: Vec<u8>,
    activity: Arc<Activity>,
    /// A send buffer size a handler asked for, not applied yet (0: none).
    send_buffer: Arc<AtomicUsize>,
    _place: OwnedSemaphorePermit,
    _source: SourcePlace,
    _open: Held,
}

impl Tracked {
    fn new(
        stream: Stream,
        place: OwnedSemaphorePermit,
        source: SourcePlace,
        open: Held,
    ) -> Tracked {
        Tracked {
            stream,
            rewritten: Vec::new(),
            activity: Arc::new(Activity {
                base: Instant::now(),
                last_ns: AtomicU64::new(0),
            }),
            send_buffer: Arc::default(),
            _place: place,
            _source: source,
            _open: open,
        }
    }

    fn moved<T>(
        &self,
        poll: Poll<io::Result<T>>,
        moved: impl Fn(&T) -> bool,
    ) -> Poll<io::Result<T>> {
        if let Poll::Ready(Ok(n)) = &poll {
            if moved(n) {
                self.activity.touch();
            }
        }
        poll
    }

    /// Applies a send buffer size a handler asked for. Best effort: a socket that refuses
    /// keeps the kernel's autotuned buffer.
    fn bound_send_buffer(&self) {
        let bytes = self.send_buffer.swap(0, Ordering::Relaxed);
        if bytes > 0 {
            if let Err(e) = nix::sys::socket::setsockopt(
                self.stream.tcp(),
                nix::sys::socket::sockopt::SndBuf,
                &bytes,
            ) {
                tracing::debug!(error = %e, "could not bound a socket's send buffer");
            }
        }
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.stream).poll_read(cx, buf);
        let after = buf.filled().len();
        this.moved(poll, |_| after > before)
    }
}

impl Tracked {
    /// Writes what is left of a rewritten answer; ready once it is all out.
    fn poll_rewritten(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.rewritten.is_empty() {
            let n = std::task::ready!(Pin::new(&mut self.stream).poll_write(cx, &self.rewritten))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.activity.touch();
            self.rewritten.drain(..n);
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `written` as written when it is hyper's own answer to a head it could not parse,
    /// and the contract's answer is to go out instead.
    fn rewrite(&mut self, written: &[u8]) -> Option<usize> {
        let answer = crate::head_errors::rewrite(written)?;
        self.rewritten = answer;
        Some(written.len())
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_rewritten(cx))?;
        if let Some(taken) = this.rewrite(buf) {
            return Poll::Ready(Ok(taken));
        }
        this.bound_send_buffer();
        let poll = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.moved(poll, |n| *n > 0)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_rewritten(cx))?;
        if let [only] = bufs {
            if let Some(taken) = this.rewrite(only) {
                return Poll::Ready(Ok(taken));
            }
        }
        this.bound_send_buffer();
        let poll = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.moved(poll, |n| *n > 0)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_rewritten(cx))?;
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_rewritten(cx))?;
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}
