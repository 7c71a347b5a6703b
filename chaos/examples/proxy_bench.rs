//! The fault proxy's cost with no fault set: throughput of one and of four streams, and the
//! time a 32-byte ping-pong gains, each measured through the proxy and directly on loopback,
//! side by side in one process. Prints a table, and the figures as JSON with `--json FILE`.
//!
//! `cargo run --release -p anyplay-chaos --example proxy_bench [-- --json FILE]`

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyplay_chaos::proxy::{Endpoint, LinkName, Proxy};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes each throughput stream sends.
const STREAM_BYTES: u64 = 4 << 30;
const WRITE: usize = 256 * 1024;
const ROUNDS: usize = 20_000;
const WARM_UP: usize = 2_000;

/// A server that reads everything and discards it; answers the byte count when its peer ends.
async fn sink() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0; WRITE];
                let mut total = 0u64;
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
                let _ = stream.write_all(&total.to_le_bytes()).await;
            });
        }
    });
    at
}

/// A server that sends back whatever it reads.
async fn echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                let (mut r, mut w) = stream.into_split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    at
}

async fn proxy_to(upstream: SocketAddr) -> Proxy {
    Proxy::start(
        LinkName::new(Endpoint::Players, Endpoint::Node(1)),
        "127.0.0.1:0".parse().unwrap(),
        upstream,
    )
    .await
    .unwrap()
}

/// MB/s (10^6 bytes) of `streams` streams sending [`STREAM_BYTES`] each to `at`, counted until
/// the sink has read the last byte.
async fn throughput(at: SocketAddr, streams: usize) -> f64 {
    let started = Instant::now();
    let sent: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(at).await.unwrap();
                let buf = vec![7u8; WRITE];
                let mut left = STREAM_BYTES;
                while left > 0 {
                    let n = left.min(WRITE as u64) as usize;
                    stream.write_all(&buf[..n]).await.unwrap();
                    left -= n as u64;
                }
                stream.shutdown().await.unwrap();
                let mut count = [0u8; 8];
                stream.read_exact(&mut count).await.unwrap();
                assert_eq!(u64::from_le_bytes(count), STREAM_BYTES);
            })
        })
        .collect();
    for stream in sent {
        stream.await.unwrap();
    }
    (STREAM_BYTES * streams as u64) as f64 / started.elapsed().as_secs_f64() / 1e6
}

/// Round trips of 32 bytes to `at`: (p50, p99) in microseconds.
async fn ping_pong(at: SocketAddr) -> (f64, f64) {
    let mut stream = TcpStream::connect(at).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let out = [1u8; 32];
    let mut back = [0u8; 32];
    let mut times = Vec::with_capacity(ROUNDS);
    for round in 0..WARM_UP + ROUNDS {
        let started = Instant::now();
        stream.write_all(&out).await.unwrap();
        stream.read_exact(&mut back).await.unwrap();
        if round >= WARM_UP {
            times.push(started.elapsed());
        }
    }
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(at(0.50)), us(at(0.99)))
}

#[tokio::main]
async fn main() {
    let json_path = std::env::args()
        .skip_while(|a| a != "--json")
        .nth(1)
        .map(std::path::PathBuf::from);
    let sink = sink().await;
    let echo = echo().await;
    let through_sink = proxy_to(sink).await;
    let through_echo = proxy_to(echo).await;

    let mut rows = Vec::new();
    for streams in [1, 4] {
        let direct = throughput(sink, streams).await;
        let proxied = throughput(through_sink.listen_addr(), streams).await;
        rows.push(
            json!({"measure": format!("throughput, {streams} stream(s), MB/s"),
            "direct": direct, "proxy": proxied}),
        );
    }
    let (direct_p50, direct_p99) = ping_pong(echo).await;
    let (proxy_p50, proxy_p99) = ping_pong(through_echo.listen_addr()).await;
    rows.push(
        json!({"measure": "32-byte ping-pong p50, µs", "direct": direct_p50,
        "proxy": proxy_p50, "added": proxy_p50 - direct_p50}),
    );
    rows.push(
        json!({"measure": "32-byte ping-pong p99, µs", "direct": direct_p99,
        "proxy": proxy_p99, "added": proxy_p99 - direct_p99}),
    );

    println!("| measure | direct | through the proxy | added |");
    println!("|---|---:|---:|---:|");
    for row in &rows {
        let added = row["added"]
            .as_f64()
            .map_or(String::new(), |a| format!("{a:.1}"));
        println!(
            "| {} | {:.1} | {:.1} | {added} |",
            row["measure"].as_str().unwrap_or_default(),
            row["direct"].as_f64().unwrap_or_default(),
            row["proxy"].as_f64().unwrap_or_default(),
        );
    }
    if let Some(path) = json_path {
        let report = json!({
            "stream_bytes": STREAM_BYTES,
            "write_bytes": WRITE,
            "rounds": ROUNDS,
            "rows": rows,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    }
}
