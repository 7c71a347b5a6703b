//! The lasting faults over real loopback sockets, where what a peer sees is an RST, a FIN or
//! nothing: drop-cuts, limit_data, timeout and toxicity.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyplay_chaos::proxy::{
    Endpoint, LinkFault, LinkFaultKind, LinkName, PartitionMode, Proxy, Toxicity, Ways,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::timeout;

use crate::support::loopback::{echo, eventually};

/// A server that reads each connection to its end and reports what it got.
async fn sink() -> (
    SocketAddr,
    mpsc::UnboundedReceiver<std::io::Result<Vec<u8>>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (report, reports) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let report = report.clone();
            tokio::spawn(async move {
                let mut received = Vec::new();
                let result = stream.read_to_end(&mut received).await;
                let _ = report.send(result.map(|_| received));
            });
        }
    });
    (addr, reports)
}

async fn proxy_to(upstream: SocketAddr) -> Proxy {
    let name = LinkName::new(Endpoint::Players, Endpoint::Node(1));
    Proxy::start(name, ([127, 0, 0, 1], 0).into(), upstream)
        .await
        .expect("proxy")
}

async fn connect(proxy: &Proxy) -> TcpStream {
    TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect")
}

async fn round_trip(stream: &mut TcpStream, message: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(message).await?;
    let mut answer = vec![0; message.len()];
    timeout(Duration::from_secs(10), stream.read_exact(&mut answer))
        .await
        .expect("an answer in time")?;
    Ok(answer)
}

/// What the next read on `stream` says: Ok(0) is a FIN.
async fn next_read(stream: &mut TcpStream) -> std::io::Result<usize> {
    let mut buf = [0u8; 64];
    timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("in time")
}

#[tokio::test]
async fn a_drop_cut_loses_bytes_and_resets_only_the_connections_that_lost_some() {
    let (upstream, _) = echo().await;
    let proxy = proxy_to(upstream).await;
    let mut lossy = connect(&proxy).await;
    let mut quiet = connect(&proxy).await;
    assert_eq!(round_trip(&mut lossy, b"a").await.expect("echo"), b"a");
    assert_eq!(round_trip(&mut quiet, b"b").await.expect("echo"), b"b");

    proxy.set(LinkFault::Partition(PartitionMode::Drop), Ways::Both, None);
    lossy.write_all(b"lost").await.expect("write");
    eventually("the bytes are dropped", || proxy.stats().bytes_dropped == 4).await;
    let mut buf = [0u8; 4];
    assert!(
        timeout(Duration::from_millis(300), lossy.read(&mut buf))
            .await
            .is_err(),
        "nothing comes back while the cut lasts"
    );

    proxy.clear(LinkFaultKind::Partition, Ways::Both);
    let error = next_read(&mut lossy).await.expect_err("a reset");
    assert_eq!(error.kind(), ErrorKind::ConnectionReset);
    assert_eq!(round_trip(&mut quiet, b"on").await.expect("echo"), b"on");
    let stats = proxy.stats();
    assert_eq!(stats.bytes_dropped, 4);
    assert_eq!(stats.connections_faulted, 1);
}

#[tokio::test]
async fn a_drop_cut_refuses_new_connections_without_dialling_upstream() {
    let (upstream, accepted) = echo().await;
    let proxy = proxy_to(upstream).await;
    proxy.set(LinkFault::Partition(PartitionMode::Drop), Ways::Up, None);
    let mut refused = connect(&proxy).await;
    let error = next_read(&mut refused).await.expect_err("a reset");
    assert_eq!(error.kind(), ErrorKind::ConnectionReset);
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "never dialled");
    assert_eq!(proxy.stats().connections_refused, 1);

    proxy.heal();
    let mut later = connect(&proxy).await;
    assert_eq!(round_trip(&mut later, b"ok").await.expect("echo"), b"ok");
}

#[tokio::test]
async fn limit_data_closes_both_sides_right_after_exactly_the_limit() {
    let (upstream, mut reports) = sink().await;
    let proxy = proxy_to(upstream).await;
    proxy.set(LinkFault::LimitData { bytes: 1_000 }, Ways::Up, None);
    let mut client = connect(&proxy).await;
    let sent: Vec<u8> = (0..3_000).map(|i| (i % 251) as u8).collect();
    client.write_all(&sent).await.expect("write");

    let received = timeout(Duration::from_secs(5), reports.recv())
        .await
        .expect("in time")
        .expect("a report")
        .expect("a clean end (FIN) upstream");
    assert_eq!(received, sent[..1_000]);
    assert_eq!(next_read(&mut client).await.expect("a clean end (FIN)"), 0);
    assert_eq!(proxy.stats().connections_faulted, 1);
}

#[tokio::test]
async fn a_timeout_closes_the_connection_after_its_time() {
    let (read, elapsed, proxy) = timed_out(false, Ways::Both).await;
    assert_eq!(read.expect("a clean end (FIN)"), 0);
    assert!(elapsed >= TIMEOUT, "closed after {elapsed:?}");
    assert_eq!(proxy.stats().connections_faulted, 1);
}

#[tokio::test]
async fn a_resetting_timeout_ends_the_connection_with_a_reset_after_its_time() {
    // Toxiproxy's reset_peer, as the control API sets it.
    let (read, elapsed, proxy) = timed_out(true, Ways::Down).await;
    let error = read.expect_err("a reset, not a FIN");
    assert_eq!(error.kind(), ErrorKind::ConnectionReset);
    assert!(elapsed >= TIMEOUT, "reset after {elapsed:?}");
    assert_eq!(proxy.stats().connections_faulted, 1);
}

const TIMEOUT: Duration = Duration::from_millis(300);

/// A connection that has echoed once, then a timeout of [`TIMEOUT`] set on `ways` (ending by
/// reset when `reset`): the client's next read, how long after the fault it came, the proxy.
async fn timed_out(reset: bool, ways: Ways) -> (std::io::Result<usize>, Duration, Proxy) {
    let (upstream, _) = echo().await;
    let proxy = proxy_to(upstream).await;
    let mut client = connect(&proxy).await;
    assert_eq!(round_trip(&mut client, b"hi").await.expect("echo"), b"hi");
    let set = Instant::now();
    proxy.set(
        LinkFault::Timeout {
            after: Some(TIMEOUT),
            reset,
        },
        ways,
        None,
    );
    let read = next_read(&mut client).await;
    (read, set.elapsed(), proxy)
}

/// Opens `count` connections one after another and returns the serials a drop-cut refused.
async fn refused_serials(proxy: &Proxy, count: u64) -> Vec<u64> {
    let mut refused = Vec::new();
    for serial in 0..count {
        let mut client = connect(proxy).await;
        match round_trip(&mut client, b"?").await {
            Ok(answer) => assert_eq!(answer, b"?"),
            Err(error) => {
                // The reset may meet the write or the read.
                let kinds = [ErrorKind::ConnectionReset, ErrorKind::BrokenPipe];
                assert!(kinds.contains(&error.kind()), "{error}");
                refused.push(serial);
            }
        }
    }
    refused
}

#[tokio::test]
async fn toxicity_hits_the_same_share_of_connections_for_the_same_seed() {
    let toxicity = Toxicity {
        share: 0.3,
        seed: 2024,
    };
    let mut hits = Vec::new();
    for _ in 0..2 {
        let (upstream, _) = echo().await;
        let proxy = proxy_to(upstream).await;
        proxy.set(
            LinkFault::Partition(PartitionMode::Drop),
            Ways::Both,
            Some(toxicity),
        );
        hits.push(refused_serials(&proxy, 200).await);
    }
    let expected: Vec<u64> = (0..200)
        .filter(|&serial| toxicity.hits(LinkFaultKind::Partition, serial))
        .collect();
    assert_eq!(hits[0], expected);
    assert_eq!(hits[1], expected, "the same seed hits the same serials");
    // 60 expected, standard deviation about 6.5.
    assert!((35..=85).contains(&expected.len()), "{}", expected.len());
}
