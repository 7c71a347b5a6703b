//! One proxied connection: held while the proxy is cut, then joined to the upstream by two links,
//! and closed on both sides with an RST when the proxy resets.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use super::counters::Counters;
use super::fault::cut::Cut;
use super::fault::reset::abort;
use super::fault::Faults;
use super::link::{self, Direction};

pub(crate) async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    faults: Arc<Faults>,
    counters: Arc<Counters>,
) {
    let _open = counters.opened();
    let mut reset = faults.reset.subscribe();
    let connected = tokio::select! {
        connected = connect(upstream, &faults.cut) => connected,
        () = reset.fired() => return abort(client),
    };
    let mut server = match connected {
        Ok(server) => server,
        Err(error) => {
            // The client sees what it would see without the proxy: a refused (reset) connection.
            tracing::debug!(%error, %upstream, "proxy: upstream unreachable");
            return abort(client);
        }
    };
    let mut client = client;
    // Chunks go out as they come; Nagle would add delays no fault asked for.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);

    let finished = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let both = async {
            tokio::try_join!(
                link::run(
                    Direction::Upstream,
                    client_read,
                    server_write,
                    &faults,
                    &counters
                ),
                link::run(
                    Direction::Downstream,
                    server_read,
                    client_write,
                    &faults,
                    &counters
                ),
            )
        };
        tokio::select! {
            result = both => Some(result),
            () = reset.fired() => None,
        }
    };
    match finished {
        None => {
            abort(client);
            abort(server);
        }
        Some(Err(error)) => tracing::debug!(%error, %upstream, "proxy: connection ended"),
        Some(Ok(_)) => {}
    }
}

/// Connects only once the proxy is not cut: a partitioned upstream must not see new connections.
async fn connect(upstream: SocketAddr, cut: &Cut) -> std::io::Result<TcpStream> {
    cut.wait_clear().await;
    TcpStream::connect(upstream).await
}
