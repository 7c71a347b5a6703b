//! One event connection: the welcome, then events from the mailbox with their
//! `seq`, pings, and the close. Generic over the socket's `Sink`/`Stream` so the
//! loop can be driven by channels in a test.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::time::{interval_at, Instant, MissedTickBehavior};

use super::hub::{CloseCode, Closing, Mailbox};
#[cfg(feature = "seeded-defects")]
use crate::defects::SeededDefect;

/// Largest client message the server reads: the transport refuses a bigger one as it passes
/// this, in one frame or in fragments, and the connection closes with 1009.
pub const MAX_CLIENT_MESSAGE: usize = 4 * 1024;

/// How long the server waits for the client's reply to its close frame (the
/// closing handshake of RFC 6455) before it drops the connection.
const CLOSE_REPLY_WAIT: Duration = Duration::from_secs(2);

/// The same wait for a slow consumer's reply (1013). Its close frame goes behind what the
/// sockets between hold for it, seconds at the pace it reads, and it answers only once it read
/// that far. Meanwhile it answers pings read late: a socket closed before then would answer a
/// late pong with a reset, and the reset throws away the close frame still on its way.
const SLOW_CLOSE_REPLY_WAIT: Duration = Duration::from_secs(15);

/// How a connection ended, as far as presence is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The server closed it with this code.
    Closed(CloseCode),
    /// The client stopped reading: a write did not finish within the write
    /// timeout, so the socket was dropped without a close frame.
    Stalled,
    /// The client left, the socket broke, or pings went unanswered.
    Gone,
}

/// Why a write did not go out.
enum WriteFailed {
    Broken,
    Stalled,
}

/// Runs the connection until it ends. `welcome` is the first text frame; every
/// write must finish within `write_timeout`, or the client counts as stalled.
pub async fn run<S, E>(
    socket: S,
    welcome: String,
    mut mailbox: Mailbox,
    ping_interval: Duration,
    write_timeout: Duration,
) -> (Ended, u64)
where
    S: Sink<Message, Error = E> + Stream<Item = Result<Message, E>> + Unpin,
    E: std::error::Error + 'static,
{
    let (mut tx, mut rx) = socket.split();
    if let Err(failed) = write(&mut tx, Message::Text(welcome.into()), write_timeout).await {
        let ended = match failed {
            WriteFailed::Broken => Ended::Gone,
            WriteFailed::Stalled => stalled(&mut tx, &mut rx, &mailbox, write_timeout).await,
        };
        return (ended, 0);
    }
    let mut seq = 0u64;
    let mut pings = interval_at(Instant::now() + ping_interval, ping_interval);
    pings.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut unanswered = 0u32;

    let result = loop {
        tokio::select! {
            biased;
            // A close request wins over queued events: a replaced connection must
            // not get events after its successor's welcome.
            changed = mailbox.close.changed() => {
                let code = if changed.is_ok() { *mailbox.close.borrow() } else { None };
                match code {
                    Some(Closing::Sever) => break Ended::Gone,
                    Some(Closing::With(code)) => break close(&mut tx, &mut rx, code, write_timeout).await,
                    None => break Ended::Gone,
                }
            }
            payload = mailbox.queue.recv() => {
                let Some(payload) = payload else { break Ended::Gone };
                seq += 1;
                #[cfg(feature = "seeded-defects")]
                if crate::defects::every(SeededDefect::SkipSeq, 50) {
                    seq += 1;
                }
                #[cfg(feature = "seeded-defects")]
                if crate::defects::every(SeededDefect::UnreplacedClose, 150) {
                    let _ = write(&mut tx, close_frame(CloseCode::Replaced), write_timeout).await;
                    break Ended::Closed(CloseCode::Replaced);
                }
                #[cfg(feature = "seeded-defects")]
                if crate::defects::every(SeededDefect::DropHealthyConnections, 150) {
                    return (Ended::Gone, seq);
                }
                if let Err(failed) = write(&mut tx, Message::Text(payload.with_seq(seq).into()), write_timeout).await {
                    break match failed {
                        WriteFailed::Broken => Ended::Gone,
                        WriteFailed::Stalled => stalled(&mut tx, &mut rx, &mailbox, write_timeout).await,
                    };
                }
            }
            _ = pings.tick() => {
                if unanswered >= 2 {
                    break Ended::Gone;
                }
                unanswered += 1;
                if let Err(failed) = write(&mut tx, Message::Ping(Default::default()), write_timeout).await {
                    break match failed {
                        WriteFailed::Broken => Ended::Gone,
                        WriteFailed::Stalled => stalled(&mut tx, &mut rx, &mailbox, write_timeout).await,
                    };
                }
            }
            incoming = rx.next() => {
                let code = match incoming {
                    Some(Ok(Message::Pong(_))) => {
                        unanswered = 0;
                        continue;
                    }
                    // Client messages carry nothing in this protocol; pings are answered by the library.
                    Some(Ok(Message::Text(_) | Message::Binary(_) | Message::Ping(_))) => continue,
                    Some(Ok(Message::Close(_))) | None => break Ended::Gone,
                    Some(Err(e)) => match read_error_close(&e) {
                        Some(code) => code,
                        None => break Ended::Gone,
                    },
                };
                break match write(&mut tx, close_frame(code), write_timeout).await {
                    Err(WriteFailed::Stalled) => Ended::Stalled,
                    _ => Ended::Closed(code),
                };
            }
        }
    };
    if result != Ended::Stalled {
        let _ = tokio::time::timeout(write_timeout, tx.close()).await;
    }
    (result, seq)
}

/// Sends a close frame with `code` and waits a while for the client's reply.
async fn close<T, R, E>(tx: &mut T, rx: &mut R, code: CloseCode, limit: Duration) -> Ended
where
    T: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    match write(tx, close_frame(code), limit).await {
        Ok(()) => {
            let wait = match code {
                CloseCode::SlowConsumer => SLOW_CLOSE_REPLY_WAIT,
                _ => CLOSE_REPLY_WAIT,
            };
            await_close_reply(rx, wait).await;
            Ended::Closed(code)
        }
        Err(WriteFailed::Stalled) => Ended::Stalled,
        Err(WriteFailed::Broken) => Ended::Closed(code),
    }
}

/// Ends a connection whose write waited `limit` on a full socket. A client that still reads,
/// only slower than its events come, is a slow consumer: it gets the close asked of it
/// meanwhile, or 1013, behind the rest of the stalled frame, if its socket takes that within
/// another `limit`. Only a client that stopped reading is dropped without a close frame.
async fn stalled<T, R, E>(tx: &mut T, rx: &mut R, mailbox: &Mailbox, limit: Duration) -> Ended
where
    T: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    // The seeded defect keeps slow consumers: it never tells them 1013.
    #[cfg(feature = "seeded-defects")]
    if crate::defects::active(SeededDefect::SlowConsumersKept) {
        return Ended::Stalled;
    }
    let code = match *mailbox.close.borrow() {
        Some(Closing::Sever) => return Ended::Gone,
        Some(Closing::With(code)) => code,
        None => CloseCode::SlowConsumer,
    };
    close(tx, rx, code, limit).await
}

/// Writes one message within `limit`. A client that stops reading would
/// otherwise park the loop in a write for good: no close, no ping timeout, no drain.
async fn write<T: Sink<Message> + Unpin>(
    tx: &mut T,
    msg: Message,
    limit: Duration,
) -> Result<(), WriteFailed> {
    match tokio::time::timeout(limit, tx.send(msg)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(WriteFailed::Broken),
        Err(_) => Err(WriteFailed::Stalled),
    }
}

/// The close code a read error calls for: a message over [`MAX_CLIENT_MESSAGE`] is
/// "too big" (1009), text that is not UTF-8 is "invalid data" (1007). Other
/// errors leave nobody to tell.
fn read_error_close(error: &(dyn std::error::Error + 'static)) -> Option<CloseCode> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        match e.downcast_ref::<tungstenite::Error>() {
            Some(tungstenite::Error::Capacity(_)) => return Some(CloseCode::TooBig),
            Some(tungstenite::Error::Utf8(_)) => return Some(CloseCode::InvalidData),
            Some(_) => return None,
            None => cause = e.source(),
        }
    }
    None
}

/// Reads until the client's close frame or the end of the stream, for a while.
async fn await_close_reply<R, E>(rx: &mut R, wait: Duration)
where
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    let _ = tokio::time::timeout(wait, client_closed(rx)).await;
}

/// Resolves once the client is gone: its stream ended, failed, or brought a close frame.
/// Whatever else it sends meanwhile carries nothing.
pub async fn client_closed<R, E>(rx: &mut R)
where
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    while let Some(Ok(msg)) = rx.next().await {
        if matches!(msg, Message::Close(_)) {
            return;
        }
    }
}

fn close_frame(code: CloseCode) -> Message {
    Message::Close(Some(CloseFrame {
        code: code.code(),
        reason: Utf8Bytes::from_static(code.reason()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{hub::Hub, Event, Payload};
    use crate::metrics::Metrics;
    use futures_channel::mpsc;
    use std::sync::Arc;

    /// A socket made of two channels: what the server sends, what the client sends; with a
    /// [`Room`], a socket that takes only as many messages as the client made room for.
    struct FakeSocket {
        out: mpsc::UnboundedSender<Message>,
        inc: mpsc::UnboundedReceiver<Result<Message, mpsc::SendError>>,
        room: Option<Arc<Room>>,
    }

    /// Messages a socket still takes before it is full (`None`: any number), and the writer
    /// waiting for room.
    struct Room(std::sync::Mutex<(Option<usize>, Option<std::task::Waker>)>);

    impl Room {
        fn of(messages: usize) -> Arc<Room> {
            Arc::new(Room(std::sync::Mutex::new((Some(messages), None))))
        }

        /// The client reads on from now: the socket takes whatever comes.
        fn open(&self) {
            let mut room = self.0.lock().unwrap();
            room.0 = None;
            if let Some(waker) = room.1.take() {
                waker.wake();
            }
        }
    }

    impl Sink<Message> for FakeSocket {
        type Error = mpsc::SendError;
        fn poll_ready(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            let this = self.get_mut();
            if let Some(room) = &this.room {
                let mut room = room.0.lock().unwrap();
                if room.0 == Some(0) {
                    room.1 = Some(cx.waker().clone());
                    return std::task::Poll::Pending;
                }
            }
            std::pin::Pin::new(&mut this.out).poll_ready(cx)
        }
        fn start_send(self: std::pin::Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
            let this = self.get_mut();
            if let Some(room) = &this.room {
                if let Some(left) = room.0.lock().unwrap().0.as_mut() {
                    *left -= 1;
                }
            }
            std::pin::Pin::new(&mut this.out).start_send(item)
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::pin::Pin::new(&mut self.get_mut().out).poll_flush(cx)
        }
        fn poll_close(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::pin::Pin::new(&mut self.get_mut().out).poll_close(cx)
        }
    }

    impl Stream for FakeSocket {
        type Item = Result<Message, mpsc::SendError>;
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            std::pin::Pin::new(&mut self.get_mut().inc).poll_next(cx)
        }
    }

    fn text(m: &Message) -> serde_json::Value {
        match m {
            Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
            other => panic!("expected text, got {other:?}"),
        }
    }

    /// Account 1's connection on a hub of `queue` events, run over a fake socket that takes
    /// what `room` lets it (`None`: anything), pinging every minute.
    struct Served {
        hub: Hub,
        sent: mpsc::UnboundedReceiver<Message>,
        client: mpsc::UnboundedSender<Result<Message, mpsc::SendError>>,
        task: tokio::task::JoinHandle<(Ended, u64)>,
    }

    fn serve(queue: usize, room: Option<Arc<Room>>, write_timeout: Duration) -> Served {
        let hub = Hub::new(queue, Arc::new(Metrics::default()));
        let mailbox = hub.register(1, "a".into(), 0);
        let (out, sent) = mpsc::unbounded();
        let (client, inc) = mpsc::unbounded();
        let task = tokio::spawn(run(
            FakeSocket { out, inc, room },
            "{\"type\":\"welcome\"}".into(),
            mailbox,
            Duration::from_secs(60),
            write_timeout,
        ));
        Served {
            hub,
            sent,
            client,
            task,
        }
    }

    fn friend_removed(account_id: i64) -> Payload {
        Payload::new(&Event::FriendRemoved { account_id })
    }

    #[tokio::test]
    async fn events_get_seq_and_replacement_closes_4001() {
        let mut c = serve(8, None, Duration::from_secs(5));
        c.hub.deliver(1, &friend_removed(2));
        c.hub.deliver(1, &friend_removed(3));
        assert_eq!(text(&c.sent.next().await.unwrap())["type"], "welcome");
        assert_eq!(text(&c.sent.next().await.unwrap())["seq"], 1);
        assert_eq!(text(&c.sent.next().await.unwrap())["seq"], 2);
        let _second = c.hub.register(1, "b".into(), 0);
        match c.sent.next().await.unwrap() {
            Message::Close(Some(f)) => assert_eq!(f.code, 4001),
            other => panic!("expected close, got {other:?}"),
        }
        assert_eq!(
            c.task.await.unwrap(),
            (Ended::Closed(CloseCode::Replaced), 2)
        );
    }

    #[tokio::test]
    async fn a_reader_slower_than_a_write_may_wait_is_closed_1013_not_dropped() {
        // Full after the welcome, until the client reads again: later than a write may wait.
        let room = Room::of(1);
        let write_timeout = Duration::from_millis(500);
        let mut c = serve(4, Some(room.clone()), write_timeout);
        c.hub.deliver(1, &friend_removed(2));
        tokio::time::sleep(write_timeout * 2).await;
        room.open();
        let _welcome = c.sent.next().await.unwrap();
        assert_eq!(
            text(&c.sent.next().await.unwrap())["seq"],
            1,
            "the stalled event"
        );
        match c.sent.next().await.unwrap() {
            Message::Close(Some(f)) => assert_eq!(f.code, 1013),
            other => panic!("expected close, got {other:?}"),
        }
        c.client.unbounded_send(Ok(Message::Close(None))).unwrap();
        assert_eq!(
            c.task.await.unwrap().0,
            Ended::Closed(CloseCode::SlowConsumer)
        );
    }

    #[tokio::test]
    async fn a_client_that_stopped_reading_is_dropped_without_a_close_frame() {
        let mut c = serve(4, Some(Room::of(1)), Duration::from_millis(200));
        c.hub.deliver(1, &friend_removed(2));
        assert_eq!(c.task.await.unwrap().0, Ended::Stalled);
        let _welcome = c.sent.next().await.unwrap();
        assert!(c.sent.next().await.is_none(), "nothing after the welcome");
    }

    #[tokio::test]
    async fn a_slow_consumer_is_heard_out_past_the_usual_close_wait() {
        let mut c = serve(1, None, Duration::from_secs(5));
        let _welcome = c.sent.next().await.unwrap();
        // The queue (one event) overflows: 1013.
        for n in 0..3 {
            c.hub.deliver(1, &friend_removed(n));
        }
        loop {
            if let Message::Close(Some(f)) = c.sent.next().await.unwrap() {
                assert_eq!(f.code, 1013);
                break;
            }
        }
        // The client reads its close frame late, behind its backlog, answering a ping first:
        // the socket is still there to take both.
        tokio::time::sleep(CLOSE_REPLY_WAIT + Duration::from_secs(1)).await;
        c.client
            .unbounded_send(Ok(Message::Pong(Default::default())))
            .unwrap();
        c.client.unbounded_send(Ok(Message::Close(None))).unwrap();
        assert_eq!(
            c.task.await.unwrap().0,
            Ended::Closed(CloseCode::SlowConsumer)
        );
    }
}
