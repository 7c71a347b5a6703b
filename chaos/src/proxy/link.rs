//! One direction of a proxied connection (toxiproxy's link): chunks read from one side are written
//! to the other through the faults. A reader and a writer joined by a queue, so a delayed chunk
//! does not stop the next ones from being read and timed from their own arrival.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::counters::Counters;
use super::fault::Faults;

/// Largest chunk read at once.
const CHUNK: usize = 16 * 1024;
/// Chunks read but not yet written (held by latency); then the reader waits, and TCP pushes back.
const IN_FLIGHT: usize = 64;

/// Which way data flows through a proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the upstream.
    Upstream,
    /// From the upstream back to the client.
    Downstream,
}

/// Forwards `from` to `to` until `from` ends (then `to` is shut down for writing) or either fails.
pub(crate) async fn run<R, W>(
    direction: Direction,
    mut from: R,
    mut to: W,
    faults: &Faults,
    counters: &Counters,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (chunks, mut queued) = mpsc::channel::<(Instant, Vec<u8>)>(IN_FLIGHT);
    let reader = async move {
        loop {
            // While cut, leave the data in the socket, where TCP holds it.
            faults.cut.wait_clear().await;
            let mut chunk = vec![0; CHUNK];
            let read = from.read(&mut chunk).await?;
            if read == 0 {
                // Dropping `chunks` lets the writer finish what is queued, then end.
                return Ok::<_, io::Error>(());
            }
            chunk.truncate(read);
            if chunks.send((Instant::now(), chunk)).await.is_err() {
                return Ok(());
            }
        }
    };
    let writer = async move {
        while let Some((arrived, chunk)) = queued.recv().await {
            faults.latency(direction).hold(arrived).await;
            faults.cut.wait_clear().await;
            to.write_all(&chunk).await?;
            counters.forwarded(direction, chunk.len());
        }
        to.shutdown().await
    };
    tokio::try_join!(reader, writer).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::Latency;
    use std::time::Duration;
    use tokio::io::duplex;
    use tokio::time::timeout;

    #[tokio::test]
    async fn forwards_in_order_and_passes_the_end_on() {
        let faults = Faults::new();
        faults.latency(Direction::Upstream).set(Some(Latency::new(
            Duration::from_millis(20),
            Duration::from_millis(15),
        )));
        let counters = Counters::default();
        let (mut client, from) = duplex(64);
        let (to, mut server) = duplex(64);
        let feeding = async move {
            for i in 0..20u8 {
                client.write_all(&[i; 10]).await.expect("write");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // Dropping `client` ends the stream.
        };
        let mut received = Vec::new();
        let (linked, (), read) = tokio::join!(
            run(Direction::Upstream, from, to, &faults, &counters),
            feeding,
            server.read_to_end(&mut received),
        );
        linked.expect("link");
        read.expect("read to the end");
        let expected: Vec<u8> = (0..20u8).flat_map(|i| [i; 10]).collect();
        assert_eq!(received, expected);
        assert_eq!(counters.stats().bytes_upstream, 200);
    }

    #[tokio::test]
    async fn a_cut_holds_data_and_its_removal_delivers_it() {
        let faults = Faults::new();
        let counters = Counters::default();
        let (mut client, from) = duplex(64);
        let (to, mut server) = duplex(64);
        faults.cut.set(true);
        let test = async {
            client.write_all(b"held").await.expect("write");
            let mut buf = [0u8; 4];
            assert!(
                timeout(Duration::from_millis(100), server.read_exact(&mut buf))
                    .await
                    .is_err()
            );
            faults.cut.set(false);
            timeout(Duration::from_secs(2), server.read_exact(&mut buf))
                .await
                .expect("delivered after the cut")
                .expect("read");
            assert_eq!(&buf, b"held");
        };
        tokio::select! {
            result = run(Direction::Upstream, from, to, &faults, &counters) => {
                panic!("the link ended first: {result:?}")
            }
            () = test => {}
        }
    }
}
