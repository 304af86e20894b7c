//! A TCP proxy on loopback that gives a store's server the latency model of the DynamoDB rows:
//! every chunk the client writes (a request, or a pipeline of requests sent together) is held
//! for one draw of `PutItem`'s calibrated distribution (`local_dynamodb::latency`, p50 7.55 ms,
//! p99 16.2 ms, seeded) from the moment it arrives, then forwarded, in order; answers come back
//! at once. So each request/response exchange costs one draw, as each DynamoDB request does
//! behind the metering proxy, and requests a client pipelines overlap as they would on a real
//! network. The proxy counts the chunks (the store's requests).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use local_dynamodb::latency::Delays;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::Result;
use crate::error::BenchError;

/// The proxy, serving until dropped.
pub(crate) struct DelayProxy {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// A proxy on a free loopback port in front of `upstream`, drawing from `delays`.
    pub(crate) async fn start(upstream: SocketAddr, delays: Delays) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| BenchError::step("proxy", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| BenchError::step("proxy", e))?;
        let requests = Arc::new(AtomicU64::new(0));
        let (delays, count) = (Arc::new(delays), requests.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(pipe(client, upstream, delays.clone(), count.clone()));
            }
        });
        Ok(Self {
            addr,
            requests,
            task,
        })
    }

    /// The port clients connect to.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The client chunks forwarded so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One connection: client chunks held and forwarded in order, answers copied straight back.
async fn pipe(client: TcpStream, upstream: SocketAddr, delays: Arc<Delays>, count: Arc<AtomicU64>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let (held_tx, mut held_rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(k) = client_rx.read(&mut buf).await {
            if k == 0 {
                break;
            }
            count.fetch_add(1, Ordering::Relaxed);
            let due = Instant::now() + delays.next("PutItem", 1);
            if held_tx.send((due, buf[..k].to_vec())).is_err() {
                break;
            }
        }
    };
    let forward = async move {
        while let Some((due, bytes)) = held_rx.recv().await {
            tokio::time::sleep_until(due).await;
            if server_tx.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = server_tx.shutdown().await;
    };
    let down = async move {
        let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
        let _ = client_tx.shutdown().await;
    };
    tokio::join!(up, forward, down);
}

#[cfg(test)]
mod tests {
    use super::*;
    use local_dynamodb::latency::Latency;
    use std::time::Duration;

    #[tokio::test]
    async fn each_request_is_held_for_its_delay_and_counted() {
        let echo = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let upstream = echo.local_addr().expect("addr");
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.expect("accept");
            let mut buf = [0u8; 16];
            while let Ok(k) = s.read(&mut buf).await {
                if k == 0 || s.write_all(&buf[..k]).await.is_err() {
                    break;
                }
            }
        });
        let delay = Duration::from_millis(60);
        let proxy = DelayProxy::start(upstream, Delays::new(Latency::Flat(delay)))
            .await
            .expect("proxy");
        let mut c = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("connect");
        for round in 1..=2u64 {
            let began = std::time::Instant::now();
            c.write_all(b"ping").await.expect("write");
            let mut back = [0u8; 4];
            c.read_exact(&mut back).await.expect("read");
            assert_eq!(&back, b"ping");
            assert!(
                began.elapsed() >= delay,
                "answered in {:?}",
                began.elapsed()
            );
            assert_eq!(proxy.requests(), round);
        }
    }
}
