//! Readiness probes: how the supervisor knows a started service answers, polled every 50 ms.

use std::net::SocketAddr;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::{sleep, timeout, Instant};

/// Time between two attempts.
const POLL: Duration = Duration::from_millis(50);
/// One attempt may take this long before it counts as failed (a hung connect must not stall us).
const ATTEMPT: Duration = Duration::from_secs(2);

/// How to tell that a service is ready.
#[derive(Debug, Clone)]
pub enum Probe {
    /// Ready once launched (helpers and test programs).
    Launched,
    /// A SQL round trip on the server, then the nodes' `database` (created when missing) answers.
    Postgres {
        /// Boxed: the options are large, the other probes small.
        server: Box<PgConnectOptions>,
        database: String,
    },
    /// A TCP connect to a NATS server that greets with its `INFO` line.
    Nats(SocketAddr),
    /// `GET url` answers 200 (a node's `/readyz`).
    Http(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Sql(#[from] sqlx::Error),
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("the server's first line is not a NATS INFO: {0:?}")]
    NotNats(String),
    #[error("no answer within {0:?}")]
    Slow(Duration),
    #[error("not tried yet")]
    NotTried,
}

/// Polls `probe` until it passes; after `limit`, fails with the last attempt's error.
pub(crate) async fn wait_ready(probe: &Probe, limit: Duration) -> Result<(), ProbeError> {
    let deadline = Instant::now() + limit;
    let http = reqwest::Client::builder().timeout(ATTEMPT).build()?;
    let mut last = ProbeError::NotTried;
    while Instant::now() < deadline {
        let attempt = ATTEMPT.min(deadline.saturating_duration_since(Instant::now()));
        match timeout(attempt, check(probe, &http)).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(error)) => last = error,
            Err(_) => last = ProbeError::Slow(attempt),
        }
        sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
    Err(last)
}

async fn check(probe: &Probe, http: &reqwest::Client) -> Result<(), ProbeError> {
    match probe {
        Probe::Launched => Ok(()),
        Probe::Postgres { server, database } => postgres(server, database).await,
        Probe::Nats(addr) => nats(*addr).await,
        Probe::Http(url) => {
            let status = http.get(url).send().await?.status();
            match status.as_u16() {
                200 => Ok(()),
                other => Err(ProbeError::Status(other)),
            }
        }
    }
}

async fn postgres(server: &PgConnectOptions, database: &str) -> Result<(), ProbeError> {
    let server = server.clone().disable_statement_logging();
    let mut conn = server.connect().await?;
    conn.execute("SELECT 1").await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(database)
            .fetch_one(&mut conn)
            .await?;
    if !exists {
        let quoted = database.replace('"', "\"\"");
        conn.execute(format!("CREATE DATABASE \"{quoted}\"").as_str())
            .await?;
    }
    conn.close().await?;
    let mut conn = server.database(database).connect().await?;
    conn.execute("SELECT 1").await?;
    conn.close().await?;
    Ok(())
}

async fn nats(addr: SocketAddr) -> Result<(), ProbeError> {
    let stream = TcpStream::connect(addr).await?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).await?;
    if line.starts_with("INFO ") {
        Ok(())
    } else {
        Err(ProbeError::NotNats(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    async fn greeter(greeting: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(greeting.as_bytes()).await;
            }
        });
        addr
    }

    /// Answers every request with `status`, after reading the request's head.
    async fn http(status: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let mut stream = BufReader::new(stream);
                let mut line = String::new();
                while stream.read_line(&mut line).await.is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let answer =
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                let _ = stream.get_mut().write_all(answer.as_bytes()).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn nats_needs_an_info_line() {
        let good = greeter("INFO {\"server_id\":\"x\"}\r\n").await;
        assert!(wait_ready(&Probe::Nats(good), Duration::from_secs(2))
            .await
            .is_ok());
        let bad = greeter("HTTP/1.1 400 Bad Request\r\n").await;
        let error = wait_ready(&Probe::Nats(bad), Duration::from_millis(300)).await;
        assert!(matches!(error, Err(ProbeError::NotNats(_))), "{error:?}");
    }

    #[tokio::test]
    async fn http_needs_200() {
        let unready = http("503 Service Unavailable").await;
        let error = wait_ready(
            &Probe::Http(format!("http://{unready}/readyz")),
            Duration::from_millis(300),
        )
        .await;
        assert!(matches!(error, Err(ProbeError::Status(503))), "{error:?}");
        let ready = http("200 OK").await;
        let probe = Probe::Http(format!("http://{ready}/readyz"));
        assert!(wait_ready(&probe, Duration::from_secs(2)).await.is_ok());
    }

    #[tokio::test]
    async fn gives_up_with_the_last_error() {
        // Bound then dropped: nothing listens there now.
        let addr = TcpListener::bind("127.0.0.1:0")
            .await
            .and_then(|l| l.local_addr())
            .expect("addr");
        let started = Instant::now();
        let error = wait_ready(&Probe::Nats(addr), Duration::from_millis(200)).await;
        assert!(matches!(error, Err(ProbeError::Io(_))), "{error:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
