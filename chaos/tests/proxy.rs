//! The fault proxy over real loopback sockets: forwarding, latency, cut and reset.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyplay_chaos::proxy::{
    Admit, Endpoint, Forward, Latency, LinkFault, LinkFaultKind, LinkName, PartitionMode, Proxy,
    Ways,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

use crate::support::loopback::{echo, eventually};

async fn proxied_echo() -> (Proxy, Arc<AtomicUsize>) {
    let (upstream, accepted) = echo().await;
    let name = LinkName::new(Endpoint::Players, Endpoint::Node(1));
    let listen: SocketAddr = ([127, 0, 0, 1], 0).into();
    let proxy = Proxy::start(name, listen, upstream).await.expect("proxy");
    (proxy, accepted)
}

async fn round_trip(stream: &mut TcpStream, message: &[u8]) -> Vec<u8> {
    stream.write_all(message).await.expect("write");
    let mut answer = vec![0; message.len()];
    timeout(Duration::from_secs(10), stream.read_exact(&mut answer))
        .await
        .expect("an answer in time")
        .expect("read");
    answer
}

#[tokio::test]
async fn forwards_both_ways_and_counts() {
    let (proxy, accepted) = proxied_echo().await;
    let mut client = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    assert_eq!(round_trip(&mut client, b"hello").await, b"hello");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    let stats = proxy.stats();
    assert_eq!(stats.connections_now, 1);
    assert_eq!(stats.connections_total, 1);
    assert_eq!(stats.bytes_upstream, 5);
    assert_eq!(stats.bytes_downstream, 5);

    drop(client);
    eventually("the closed connection is no longer counted", || {
        proxy.stats().connections_now == 0
    })
    .await;
}

#[tokio::test]
async fn latency_adds_at_least_the_delay() {
    let (proxy, _) = proxied_echo().await;
    let mut client = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    round_trip(&mut client, b"warm").await;

    let delay = Duration::from_millis(150);
    proxy.set(
        LinkFault::Latency(Latency::new(delay, Duration::from_millis(20))),
        Ways::Both,
        None,
    );
    let sent = Instant::now();
    round_trip(&mut client, b"slow").await;
    let took = sent.elapsed();
    // Each way gets at least delay - jitter.
    assert!(
        took >= 2 * Duration::from_millis(130),
        "round trip {took:?}"
    );

    proxy.clear(LinkFaultKind::Latency, Ways::Both);
    proxy.set(
        LinkFault::Latency(Latency::new(delay, Duration::ZERO)),
        Ways::Down,
        None,
    );
    let sent = Instant::now();
    round_trip(&mut client, b"half").await;
    assert!(sent.elapsed() >= delay, "round trip {:?}", sent.elapsed());

    proxy.clear(LinkFaultKind::Latency, Ways::Both);
    let sent = Instant::now();
    round_trip(&mut client, b"fast").await;
    assert!(sent.elapsed() < delay, "round trip {:?}", sent.elapsed());
}

#[tokio::test]
async fn latency_keeps_order() {
    let (proxy, _) = proxied_echo().await;
    proxy.set(
        LinkFault::Latency(Latency::new(
            Duration::from_millis(20),
            Duration::from_millis(19),
        )),
        Ways::Both,
        None,
    );
    let mut client = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    let mut expected = Vec::new();
    for i in 0..50u8 {
        client.write_all(&[i; 3]).await.expect("write");
        expected.extend([i; 3]);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut answer = vec![0; expected.len()];
    timeout(Duration::from_secs(10), client.read_exact(&mut answer))
        .await
        .expect("in time")
        .expect("read");
    assert_eq!(answer, expected);
}

#[tokio::test]
async fn a_cut_holds_everything_and_its_removal_delivers_it() {
    let (proxy, accepted) = proxied_echo().await;
    let mut old = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    round_trip(&mut old, b"before").await;

    proxy.set(LinkFault::Partition(PartitionMode::Hold), Ways::Both, None);
    old.write_all(b"during").await.expect("write while cut");
    let mut answer = [0u8; 6];
    assert!(
        timeout(Duration::from_millis(400), old.read_exact(&mut answer))
            .await
            .is_err(),
        "nothing flows while cut"
    );
    // New connections are accepted but held: the upstream does not see them.
    let mut new = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect while cut");
    new.write_all(b"newbie").await.expect("write");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "held, not connected upstream"
    );

    proxy.clear(LinkFaultKind::Partition, Ways::Both);
    let mut answer = [0u8; 6];
    timeout(Duration::from_secs(5), old.read_exact(&mut answer))
        .await
        .expect("delivered after the cut")
        .expect("read");
    assert_eq!(&answer, b"during");
    timeout(Duration::from_secs(5), new.read_exact(&mut answer))
        .await
        .expect("the held connection goes through")
        .expect("read");
    assert_eq!(&answer, b"newbie");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn reset_all_resets_every_open_connection() {
    let (proxy, _) = proxied_echo().await;
    let mut first = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    let mut second = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    round_trip(&mut first, b"a").await;
    round_trip(&mut second, b"b").await;

    proxy.reset_all();
    for client in [&mut first, &mut second] {
        let mut buf = [0u8; 1];
        let read = timeout(Duration::from_secs(5), client.read(&mut buf))
            .await
            .expect("the reset comes in time");
        let error = read.expect_err("a reset, not a clean close");
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset);
    }

    // Connections made after the reset pass.
    let mut later = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    assert_eq!(round_trip(&mut later, b"again").await, b"again");
    eventually("only the new connection is open", || {
        proxy.stats().connections_now == 1
    })
    .await;
}

#[tokio::test]
async fn a_reset_also_frees_connections_held_by_a_cut() {
    let (proxy, accepted) = proxied_echo().await;
    proxy.set(LinkFault::Partition(PartitionMode::Hold), Ways::Both, None);
    let mut held = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    eventually("the proxy holds it", || proxy.stats().connections_now == 1).await;
    proxy.reset_all();
    let mut buf = [0u8; 1];
    let read = timeout(Duration::from_secs(5), held.read(&mut buf))
        .await
        .expect("in time");
    assert_eq!(
        read.expect_err("reset").kind(),
        std::io::ErrorKind::ConnectionReset
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_unreachable_upstream_resets_the_client() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .and_then(|listener| listener.local_addr())
        .expect("a port nobody listens on");
    let name = LinkName::new(Endpoint::Node(1), Endpoint::Nats);
    let proxy = Proxy::start(name, ([127, 0, 0, 1], 0).into(), closed)
        .await
        .expect("proxy");
    let mut client = TcpStream::connect(proxy.listen_addr())
        .await
        .expect("connect");
    let mut buf = [0u8; 1];
    let read = timeout(Duration::from_secs(5), client.read(&mut buf))
        .await
        .expect("in time");
    assert_eq!(
        read.expect_err("reset").kind(),
        std::io::ErrorKind::ConnectionReset
    );
}

/// A player on a loopback address of its own reaches the node from that address, so that the
/// node's per-address limits count it alone (`rate_limits`); one on 127.0.0.1 as before.
#[tokio::test]
async fn a_client_on_its_own_loopback_address_reaches_upstream_from_it() {
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let name = LinkName::new(Endpoint::Players, Endpoint::Node(1));
    let listen: SocketAddr = ([127, 0, 0, 1], 0).into();
    let proxy = Proxy::start(name, listen, upstream.local_addr().expect("address"))
        .await
        .expect("proxy");
    for own in [[127, 64, 0, 9], [127, 0, 0, 1]] {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind((own, 0).into()).expect("bind");
        let _client = socket.connect(proxy.listen_addr()).await.expect("connect");
        let (_, from) = timeout(Duration::from_secs(10), upstream.accept())
            .await
            .expect("accepted in time")
            .expect("accept");
        assert_eq!(from.ip(), std::net::IpAddr::from(own));
    }
}

/// A node's proxy serves that node alone: a client from another address is closed before
/// anything reaches upstream; the node's own address passes.
#[tokio::test]
async fn a_proxy_for_one_peer_closes_everyone_else() {
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let name = LinkName::new(Endpoint::Node(1), Endpoint::Postgres);
    let node = std::net::IpAddr::from([127, 64, 0, 1]);
    let proxy = Proxy::serving(
        name,
        ([127, 0, 0, 1], 0).into(),
        upstream.local_addr().expect("address"),
        Admit::Only(node),
        Forward::Source,
    )
    .await
    .expect("proxy");
    let from = |own: [u8; 4]| {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind((own, 0).into()).expect("bind");
        socket.connect(proxy.listen_addr())
    };

    let mut stranger = from([127, 0, 0, 1]).await.expect("the listener accepts");
    let mut byte = [0u8; 1];
    let read = timeout(Duration::from_secs(10), stranger.read(&mut byte))
        .await
        .expect("closed in time");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "a stranger's connection stayed open"
    );
    assert!(
        timeout(Duration::from_millis(300), upstream.accept())
            .await
            .is_err(),
        "a stranger reached upstream"
    );

    let _node = from([127, 64, 0, 1]).await.expect("connect");
    let (_, seen) = timeout(Duration::from_secs(10), upstream.accept())
        .await
        .expect("accepted in time")
        .expect("accept");
    assert_eq!(seen.ip(), node);
}

/// A proxy whose upstream cannot see the client's address (a node behind a netns bridge)
/// names the client in a PROXY v1 line ahead of its bytes, and connects from its own.
#[tokio::test]
async fn a_proxy_header_names_the_client_ahead_of_its_bytes() {
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let upstream_addr = upstream.local_addr().expect("address");
    let name = LinkName::new(Endpoint::Players, Endpoint::Node(1));
    let proxy = Proxy::serving(
        name,
        ([127, 0, 0, 1], 0).into(),
        upstream_addr,
        Admit::Anyone,
        Forward::ProxyHeader,
    )
    .await
    .expect("proxy");
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(([127, 0, 7, 7], 0).into()).expect("bind");
    let mut client = socket.connect(proxy.listen_addr()).await.expect("connect");
    let client_addr = client.local_addr().expect("address");
    client.write_all(b"hello").await.expect("write");

    let (mut seen, from) = timeout(Duration::from_secs(10), upstream.accept())
        .await
        .expect("accepted in time")
        .expect("accept");
    assert_eq!(from.ip(), std::net::IpAddr::from([127, 0, 0, 1]));
    let expected = format!(
        "PROXY TCP4 127.0.7.7 127.0.0.1 {} {}\r\nhello",
        client_addr.port(),
        upstream_addr.port()
    );
    let mut got = vec![0; expected.len()];
    timeout(Duration::from_secs(10), seen.read_exact(&mut got))
        .await
        .expect("in time")
        .expect("read");
    assert_eq!(String::from_utf8_lossy(&got), expected);
}
