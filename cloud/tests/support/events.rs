//! A client's event connection: the next event, the way it ended, silence.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::SOON;

/// A client's event connection.
pub struct Events {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

/// How a connection ended, seen from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    Close(u16),
    NoCloseFrame,
}

impl Events {
    /// The next event (text frame as JSON); panics on close or after `SOON`.
    pub async fn next(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(SOON, self.ws.next())
                .await
                .expect("an event within the time limit")
                .expect("the connection is open")
                .expect("a frame");
            match msg {
                Message::Text(t) => return serde_json::from_str(t.as_str()).expect("JSON event"),
                Message::Close(f) => panic!("connection closed: {f:?}"),
                _ => continue,
            }
        }
    }

    /// The next event of this type, skipping (and returning) others.
    pub async fn next_of(&mut self, kind: &str) -> Value {
        loop {
            let e = self.next().await;
            if e["type"] == kind {
                return e;
            }
        }
    }

    /// Waits for the end of the connection and says how it ended.
    pub async fn closed(&mut self) -> End {
        loop {
            match tokio::time::timeout(SOON, self.ws.next())
                .await
                .expect("the connection ends in time")
            {
                Some(Ok(Message::Close(Some(f)))) => return End::Close(u16::from(f.code)),
                Some(Ok(Message::Close(None))) | None | Some(Err(_)) => return End::NoCloseFrame,
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Sends a text frame.
    pub async fn send_text(&mut self, text: String) {
        self.ws
            .send(Message::Text(text.into()))
            .await
            .expect("send");
    }

    /// Nothing arrives within `wait` (pings aside).
    pub async fn quiet_for(&mut self, wait: Duration) -> Option<Value> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(until, self.ws.next()).await {
                Err(_) => return None,
                Ok(Some(Ok(Message::Text(t)))) => {
                    return Some(serde_json::from_str(t.as_str()).unwrap_or(Value::Null))
                }
                Ok(Some(Ok(Message::Close(f)))) => {
                    return Some(json!({"closed": f.map(|f| u16::from(f.code))}))
                }
                Ok(Some(Ok(_))) => continue,
                Ok(_) => return Some(json!({"closed": null})),
            }
        }
    }
}
