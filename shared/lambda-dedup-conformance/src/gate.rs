//! A TCP proxy in front of a store's server that can be frozen: frozen, it accepts connections
//! and reads what they send but forwards nothing until thawed, when what it held goes on (so a
//! write may apply after its caller gave up). What a test needs to make a server that stopped
//! answering, or a half-open socket, without touching the server's process.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The proxy, serving on a loopback port until dropped.
#[derive(Debug)]
pub struct Gate {
    addr: std::net::SocketAddr,
    frozen: tokio::sync::watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Gate {
    /// Starts a proxy to `upstream` (`host:port`), thawed.
    pub async fn start(upstream: String) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (frozen, watch) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (mut watch, upstream) = (watch.clone(), upstream.clone());
                tokio::spawn(async move {
                    let Ok(up) = tokio::net::TcpStream::connect(upstream.as_str()).await else {
                        return;
                    };
                    let (mut from_client, mut to_client) = client.into_split();
                    let (mut from_up, mut to_up) = up.into_split();
                    let back = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut from_up, &mut to_client).await;
                    });
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = from_client.read(&mut buf).await {
                        if n == 0 || watch.wait_for(|frozen| !frozen).await.is_err() {
                            break;
                        }
                        if to_up.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    back.abort();
                });
            }
        });
        Ok(Self {
            addr,
            frozen,
            server,
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// `http://` and the proxy's address: an endpoint for a client of an HTTP server behind it.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Freezes (`true`) or thaws (`false`) the proxy.
    pub fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }
}
