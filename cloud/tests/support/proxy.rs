//! A TCP proxy on loopback that a test can pause: while paused it forwards nothing
//! either way but keeps every socket open, as a link that went silent does (a
//! partition, not a reset). Data already read is forwarded once it resumes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub struct TcpProxy {
    pub addr: SocketAddr,
    running: watch::Sender<bool>,
    /// The local address of each upstream socket: how the server names the proxied clients.
    upstream_ports: Arc<Mutex<Vec<u16>>>,
    _tasks: JoinSet<()>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy port");
        let addr = listener.local_addr().expect("proxy address");
        let (running, _) = watch::channel(true);
        let upstream_ports = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = JoinSet::new();
        let (gate, ports) = (running.clone(), upstream_ports.clone());
        tasks.spawn(async move {
            // The links live in this set: dropping the proxy aborts the accept loop, and with it them.
            let mut links = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                if let Ok(local) = server.local_addr() {
                    ports.lock().unwrap().push(local.port());
                }
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                links.spawn(pump(client_read, server_write, gate.subscribe()));
                links.spawn(pump(server_read, client_write, gate.subscribe()));
            }
        });
        TcpProxy {
            addr,
            running,
            upstream_ports,
            _tasks: tasks,
        }
    }

    /// Stops forwarding; sockets stay open.
    pub fn pause(&self) {
        self.running.send_replace(false);
    }

    pub fn resume(&self) {
        self.running.send_replace(true);
    }

    /// The ports the proxy's upstream sockets use: `client_port` in `pg_stat_activity`.
    pub fn upstream_ports(&self) -> Vec<u16> {
        self.upstream_ports.lock().unwrap().clone()
    }
}

/// Copies one direction, waiting at the gate before each read and each write.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut gate: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if gate.wait_for(|open| *open).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if gate.wait_for(|open| *open).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// `url` (postgres://user@host:port/db...) with its host and port replaced by `addr`.
pub fn via(url: &str, addr: SocketAddr) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let host_start = rest.find('@').map_or(start, |i| start + i + 1);
    let host_end = url[host_start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| host_start + i);
    format!("{}{addr}{}", &url[..host_start], &url[host_end..])
}

/// The host and port of a postgres:// URL, as an address.
pub fn address_of(url: &str) -> SocketAddr {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let host = rest.find('@').map_or(rest, |i| &rest[i + 1..]);
    let host = &host[..host.find(['/', '?']).unwrap_or(host.len())];
    host.parse()
        .expect("a numeric host:port in the test database URL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redirected_to_the_proxy() {
        let proxy: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(
            via(
                "postgres://anyplay@127.0.0.1:5432/t_1?sslmode=disable",
                proxy
            ),
            "postgres://anyplay@127.0.0.1:4000/t_1?sslmode=disable"
        );
        assert_eq!(
            via("postgres://127.0.0.1:5432/t", proxy),
            "postgres://127.0.0.1:4000/t"
        );
        assert_eq!(
            address_of("postgres://anyplay@127.0.0.1:5432/t"),
            "127.0.0.1:5432".parse().unwrap()
        );
    }
}
