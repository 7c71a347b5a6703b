//! Clients that misbehave on purpose, over a bare TCP socket: partial HTTP
//! requests, and a WebSocket whose frames are written by hand (masked, as a
//! client's must be) — text that is not UTF-8, or a client that stops reading.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::{TestNode, SOON};

/// `host:port` of the node's public listener.
pub fn public_addr(node: &TestNode) -> std::net::SocketAddr {
    node.api
        .trim_start_matches("http://")
        .parse()
        .expect("a socket address")
}

/// A TCP connection to the node's public listener.
pub async fn connect(node: &TestNode) -> TcpStream {
    TcpStream::connect(public_addr(node))
        .await
        .expect("tcp connect")
}

/// Whether the server ends the connection within `within`: it is closed (EOF
/// or reset) rather than silent. Whatever the server sends first is read past.
pub async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// Sends one request and reads the status line of its answer.
pub async fn status_line(stream: &mut TcpStream, request: &str) -> String {
    let head = head(stream, request).await;
    head.lines().next().unwrap_or_default().to_string()
}

/// Sends one request and reads the head of its answer (status line and headers).
pub async fn head(stream: &mut TcpStream, request: &str) -> String {
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write a request");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(SOON, stream.read(&mut buf))
            .await
            .expect("an answer in time")
            .expect("read");
        assert!(n > 0, "connection closed before an answer");
        got.extend_from_slice(&buf[..n]);
    }
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(got.len());
    String::from_utf8_lossy(&got[..end]).into_owned()
}

/// A WebSocket client that speaks frames by hand.
pub struct RawSocket {
    pub stream: TcpStream,
    /// Bytes read but not yet taken as frames.
    pending: Vec<u8>,
}

/// A frame from the server: opcode and payload.
pub struct Frame {
    pub opcode: u8,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The code of a close frame.
    pub fn close_code(&self) -> Option<u16> {
        (self.opcode == 0x8 && self.payload.len() >= 2)
            .then(|| u16::from_be_bytes([self.payload[0], self.payload[1]]))
    }
}

impl RawSocket {
    /// Opens `/v1/events` with `token`; `receive_buffer` shrinks the socket's
    /// receive buffer first (a client that will stop reading).
    pub async fn open(node: &TestNode, token: &str, receive_buffer: Option<u32>) -> RawSocket {
        let socket = TcpSocket::new_v4().expect("a socket");
        if let Some(size) = receive_buffer {
            socket.set_recv_buffer_size(size).expect("SO_RCVBUF");
        }
        let addr = public_addr(node);
        let mut stream = socket.connect(addr).await.expect("tcp connect");
        let request = format!(
            "GET /v1/events HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .expect("handshake");
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        let end = loop {
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = tokio::time::timeout(SOON, stream.read(&mut buf))
                .await
                .expect("a handshake answer in time")
                .expect("read");
            assert!(n > 0, "closed during the handshake");
            got.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&got[..end]).to_string();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        RawSocket {
            stream,
            pending: got[end..].to_vec(),
        }
    }

    async fn fill(&mut self, want: usize) -> bool {
        let mut buf = [0u8; 4096];
        while self.pending.len() < want {
            match tokio::time::timeout(SOON, self.stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => self.pending.extend_from_slice(&buf[..n]),
                _ => return false,
            }
        }
        true
    }

    /// The next frame, or None when the connection ends (or nothing comes in time).
    pub async fn frame(&mut self) -> Option<Frame> {
        if !self.fill(2).await {
            return None;
        }
        let opcode = self.pending[0] & 0x0f;
        let (len, header) = match self.pending[1] & 0x7f {
            126 => {
                if !self.fill(4).await {
                    return None;
                }
                (
                    u16::from_be_bytes([self.pending[2], self.pending[3]]) as usize,
                    4,
                )
            }
            127 => {
                if !self.fill(10).await {
                    return None;
                }
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.pending[2..10]);
                (u64::from_be_bytes(b) as usize, 10)
            }
            n => (n as usize, 2),
        };
        if !self.fill(header + len).await {
            return None;
        }
        let payload = self.pending[header..header + len].to_vec();
        self.pending.drain(..header + len);
        Some(Frame { opcode, payload })
    }

    /// Sends one final frame with this opcode and payload, masked.
    pub async fn send(&mut self, opcode: u8, payload: &[u8]) {
        self.send_frame(opcode, payload, true).await;
    }

    /// Sends one frame, masked: the last of its message when `fin`, else a fragment with more
    /// to come (`opcode` 0 continues a message).
    pub async fn send_frame(&mut self, opcode: u8, payload: &[u8], fin: bool) {
        let frame = masked_frame(opcode, payload, fin);
        self.stream.write_all(&frame).await.expect("send a frame");
    }

    /// Reads frames until a close frame, and returns its code (None: no close frame).
    pub async fn close_code(&mut self) -> Option<u16> {
        while let Some(frame) = self.frame().await {
            if frame.opcode == 0x8 {
                return frame.close_code();
            }
        }
        None
    }
}

/// One short frame as a client writes it (masked): the last of its message when `fin`.
pub fn masked_frame(opcode: u8, payload: &[u8], fin: bool) -> Vec<u8> {
    assert!(payload.len() < 126, "short frames only");
    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let fin = if fin { 0x80 } else { 0 };
    let mut frame = vec![fin | opcode, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}
