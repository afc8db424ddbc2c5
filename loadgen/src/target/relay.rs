//! A TCP relay between the broker and its database, so the load generator can break the link
//! between them (`partition_postgres`, `latency_postgres`): one listener on a loopback port per
//! database server, each accepted connection piped to that server byte for byte.
//!
//! The relays of a run share one `Link` setting: `Pass` pipes bytes as they come; `Delay(d)`
//! delivers every chunk `d` after it was read, each direction on its own (a one-way latency of
//! `d`: order kept, throughput not throttled); `Cut` closes every connection piped at that
//! moment and closes each new one as soon as it is accepted, so the broker sees its database
//! go away and come back when the setting returns to `Pass`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What the relays do with the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Pass,
    Delay(Duration),
    Cut,
}

/// The relays of a run, one per database server, and the setting they share.
pub struct Relays {
    link: watch::Sender<Link>,
    relays: Vec<Relay>,
    cut: Arc<AtomicU64>,
}

struct Relay {
    listen: SocketAddr,
    accept: JoinHandle<()>,
}

impl Relays {
    /// A relay on a free loopback port in front of each of `upstreams`, passing traffic.
    pub async fn start(upstreams: &[SocketAddr]) -> Result<Relays, String> {
        let (link, _) = watch::channel(Link::Pass);
        let cut = Arc::new(AtomicU64::new(0));
        let mut relays = Vec::new();
        for &upstream in upstreams {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("relay: cannot listen on 127.0.0.1: {e}"))?;
            let listen = listener.local_addr().map_err(|e| e.to_string())?;
            let accept = tokio::spawn(accept_loop(
                listener,
                upstream,
                link.subscribe(),
                cut.clone(),
            ));
            relays.push(Relay { listen, accept });
        }
        Ok(Relays { link, relays, cut })
    }

    /// Where the relays listen, in the order of the upstreams given to `start`.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.relays.iter().map(|r| r.listen).collect()
    }

    /// Sets what every relay does from now on.
    pub fn set(&self, link: Link) {
        self.link.send_replace(link);
    }

    /// How many connections the relays have closed because of a `Cut` so far.
    pub fn cut_connections(&self) -> u64 {
        self.cut.load(Ordering::Relaxed)
    }
}

impl Drop for Relays {
    fn drop(&mut self) {
        self.set(Link::Cut);
        for r in &self.relays {
            r.accept.abort();
        }
    }
}

/// Accepts connections and pipes each to `upstream` on a task of its own.
async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    link: watch::Receiver<Link>,
    cut: Arc<AtomicU64>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(e) => {
                eprintln!("ackbench: relay {upstream}: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if *link.borrow() == Link::Cut {
            cut.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        tokio::spawn(pipe_connection(client, upstream, link.clone(), cut.clone()));
    }
}

/// Pipes one connection both ways until either side closes or the link is cut (then both
/// sockets are dropped, which closes them).
async fn pipe_connection(
    client: TcpStream,
    upstream: SocketAddr,
    mut link: watch::Receiver<Link>,
    cut: Arc<AtomicU64>,
) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pipe(client_read, server_write, link.clone());
    let down = pipe(server_read, client_write, link.clone());
    let cut_now = async {
        while link.changed().await.is_ok() {
            if *link.borrow() == Link::Cut {
                return;
            }
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = cut_now => { cut.fetch_add(1, Ordering::Relaxed); }
    }
}

/// One direction: a reader stamps each chunk with when it is due (now, or now plus the delay),
/// a writer delivers chunks in order once due. Ends when either side closes.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, link: watch::Receiver<Link>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let due = match *link.borrow() {
                Link::Delay(d) => Instant::now() + d,
                _ => Instant::now(),
            };
            if tx.send((due, buf[..n].to_vec())).is_err() {
                return;
            }
        }
    };
    let write = async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that echoes every byte back, counting the connections it accepted.
    async fn echo_server() -> (SocketAddr, Arc<AtomicU64>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        (addr, accepted)
    }

    /// Sends `msg` and reads as many bytes back; `None` when the connection closed first.
    async fn round_trip(s: &mut TcpStream, msg: &[u8]) -> Option<Vec<u8>> {
        s.write_all(msg).await.ok()?;
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back).await.ok()?;
        Some(back)
    }

    #[tokio::test]
    async fn passes_bytes_both_ways_unchanged() {
        let (echo, _) = echo_server().await;
        let relays = Relays::start(&[echo]).await.unwrap();
        let mut s = TcpStream::connect(relays.addresses()[0]).await.unwrap();
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(round_trip(&mut s, &big).await.unwrap(), big);
        assert_eq!(round_trip(&mut s, b"ping").await.unwrap(), b"ping");
    }

    #[tokio::test]
    async fn a_delay_holds_each_direction_and_keeps_order() {
        let (echo, _) = echo_server().await;
        let relays = Relays::start(&[echo]).await.unwrap();
        let mut s = TcpStream::connect(relays.addresses()[0]).await.unwrap();
        let started = Instant::now();
        round_trip(&mut s, b"warm").await.unwrap();
        let plain = started.elapsed();
        relays.set(Link::Delay(Duration::from_millis(150)));
        let started = Instant::now();
        for i in 0..3u8 {
            s.write_all(&[i; 10]).await.unwrap();
        }
        let mut back = vec![0u8; 30];
        s.read_exact(&mut back).await.unwrap();
        let delayed = started.elapsed();
        assert!(delayed >= Duration::from_millis(300), "{delayed:?}");
        assert!(
            delayed < Duration::from_millis(1500),
            "pipelined: {delayed:?}"
        );
        assert_eq!(back, [[0u8; 10], [1; 10], [2; 10]].concat());
        relays.set(Link::Pass);
        let started = Instant::now();
        round_trip(&mut s, b"fast").await.unwrap();
        assert!(started.elapsed() < plain + Duration::from_millis(100));
    }

    #[tokio::test]
    async fn a_cut_closes_open_connections_and_refuses_new_ones_until_passed_again() {
        let (echo, accepted) = echo_server().await;
        let relays = Relays::start(&[echo]).await.unwrap();
        let mut open = TcpStream::connect(relays.addresses()[0]).await.unwrap();
        round_trip(&mut open, b"before").await.unwrap();
        relays.set(Link::Cut);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(round_trip(&mut open, b"during").await, None);
        let mut fresh = TcpStream::connect(relays.addresses()[0]).await.unwrap();
        assert_eq!(round_trip(&mut fresh, b"during").await, None);
        assert_eq!(
            accepted.load(Ordering::Relaxed),
            1,
            "nothing reached upstream"
        );
        assert_eq!(relays.cut_connections(), 2);
        relays.set(Link::Pass);
        let mut after = TcpStream::connect(relays.addresses()[0]).await.unwrap();
        assert_eq!(round_trip(&mut after, b"after").await.unwrap(), b"after");
    }

    #[tokio::test]
    async fn an_unreachable_upstream_closes_the_client() {
        let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = gone.local_addr().unwrap();
        drop(gone);
        let relays = Relays::start(&[addr]).await.unwrap();
        let mut s = TcpStream::connect(relays.addresses()[0]).await.unwrap();
        assert_eq!(round_trip(&mut s, b"x").await, None);
    }
}
