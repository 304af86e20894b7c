//! The local DynamoDB: Dynoxide (crate `dynoxide-rs`, MIT OR Apache-2.0, DynamoDB on SQLite)
//! served over HTTP on a loopback port, so any AWS SDK client can talk to it.
//!
//! [`LocalDynamoDb`] is one in-memory server on a thread of the test's process, started by
//! [`LocalDynamoDb::start`] and stopped when the value is dropped. [`serve`] runs a server on a
//! given listener until a shutdown signal, for a process of its own.
//!
//! Dynoxide's HTTP server does not expire TTL items by itself; both run its TTL sweep every
//! [`SWEEP_EVERY`], so expired items are deleted (and their deletions appear on the table's
//! stream with the service identity) while a test watches. DynamoDB itself deletes expired items
//! within a few days: code must never depend on the deletion happening.
//!
//! [`items`] reads items back through the AWS SDK; [`local_client!`](crate::local_client) makes
//! a client of any AWS SDK crate for a local endpoint.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

pub use dynoxide;
pub use dynoxide::Database;

use crate::Error;

pub mod items;

/// A client of the AWS SDK crate `$sdk` (`aws_sdk_dynamodb`, `aws_sdk_sqs`, …) for the local
/// endpoint `$endpoint`: Region us-east-1, placeholder credentials (the local servers take any).
///
/// ```
/// # #[cfg(feature = "dynamodb")] {
/// let client = lambda_dedup_testkit::local_client!(aws_sdk_dynamodb, "http://127.0.0.1:8000");
/// # let _ = client; }
/// ```
#[macro_export]
macro_rules! local_client {
    ($sdk:ident, $endpoint:expr) => {
        $sdk::Client::from_conf(
            $sdk::Config::builder()
                .behavior_version($sdk::config::BehaviorVersion::latest())
                .region($sdk::config::Region::new("us-east-1"))
                .credentials_provider($sdk::config::Credentials::new(
                    "local", "local", None, None, "local",
                ))
                .endpoint_url($endpoint)
                .build(),
        )
    };
}

/// How often expired TTL items are swept.
pub const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// Opens the database: in memory, or in the SQLite file at `path` (created if absent), so that a
/// restarted server finds its tables and items again.
pub fn open(path: Option<&Path>) -> Result<Database, Error> {
    let opened = match path {
        None => Database::memory(),
        Some(p) => {
            let s = p.to_str().ok_or_else(|| Error::NotUtf8(p.to_owned()))?;
            Database::new(s)
        }
    };
    opened.map_err(|e| Error::Database(e.to_string()))
}

/// Serves `db` on `listener` until `shutdown` resolves, sweeping expired TTL items every
/// [`SWEEP_EVERY`]. Must run inside a Tokio runtime.
pub async fn serve(
    listener: tokio::net::TcpListener,
    db: Database,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let sweeper = tokio::spawn(sweep_forever(db.clone()));
    let served = dynoxide::server::serve_with_shutdown(listener, db, shutdown).await;
    sweeper.abort();
    served.map_err(Error::Serve)
}

async fn sweep_forever(db: Database) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let db = db.clone();
        // The sweep takes the database lock page by page; keep it off the async workers.
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || db.sweep_ttl()).await {
            eprintln!("local DynamoDB: TTL sweep failed: {e}");
        }
    }
}

/// The local DynamoDB, in memory, on a thread of this process with its own runtime (so it
/// outlives any test's runtime), on a free loopback port; stopped, and its data gone, when
/// dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lambda_dedup_testkit::Error> {
/// use lambda_dedup_testkit::dynamodb::{LocalDynamoDb, items};
///
/// let dynamodb = LocalDynamoDb::start()?;
/// dynamodb.create_mark_table("marks").await?;
/// dynamodb.create_table("balances", "account").await?;
/// // The function under test gets `dynamodb.client()` (or `dynamodb.endpoint()` as
/// // `AWS_ENDPOINT_URL_DYNAMODB`); the test reads back what it wrote.
/// let balance = items::get(&dynamodb.client(), "balances", "account", "a-1").await;
/// assert!(balance.expect("read").is_none());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LocalDynamoDb {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LocalDynamoDb {
    /// Starts an in-memory server on a free loopback port.
    pub fn start() -> Result<Self, Error> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error::io("a loopback port", e))?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| Error::io("the listener's address", e))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("the listener", e))?;
        let db = open(None)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("local-dynamodb")
            .enable_all()
            .build()
            .map_err(|e| Error::io("the local DynamoDB's runtime", e))?;
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("local-dynamodb".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => return eprintln!("local DynamoDB: listener: {e}"),
                    };
                    // Stopped at once, not gracefully: a client's idle connections must not
                    // keep it up.
                    tokio::select! {
                        served = serve(listener, db, std::future::pending()) => {
                            if let Err(e) = served {
                                eprintln!("local DynamoDB: {e}");
                            }
                        }
                        _ = stop_rx => {}
                    }
                });
                // Bounded: the drop below waits for it.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(|e| Error::io("the local DynamoDB's thread", e))?;
        Ok(Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// An SDK client for this server ([`local_client!`](crate::local_client)).
    pub fn client(&self) -> aws_sdk_dynamodb::Client {
        crate::local_client!(aws_sdk_dynamodb, self.endpoint())
    }

    /// Creates an on-demand table `table` keyed by the string attribute `key`: a function's own
    /// table (balances, orders, an inbox).
    pub async fn create_table(&self, table: &str, key: &str) -> Result<(), Error> {
        lambda_dedup_dynamodb::provision::create_table(self.client(), table, key, false).await?;
        Ok(())
    }

    /// Creates the mark table `table` as the DynamoDB store expects it (its key, TTL on its
    /// expiry attribute): what `DEDUP_MARK_TABLE` names.
    pub async fn create_mark_table(&self, table: &str) -> Result<(), Error> {
        lambda_dedup_dynamodb::provision::create_mark_table(self.client(), table, false).await?;
        Ok(())
    }
}

impl Drop for LocalDynamoDb {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A started server answers at its endpoint; dropped, its port is closed at once (the
    /// client's connection kept alive does not hold it up).
    #[tokio::test]
    async fn a_dropped_server_stops_answering() {
        let dynamodb = LocalDynamoDb::start().expect("started");
        dynamodb.create_table("notes", "id").await.expect("created");
        let tables = dynamodb
            .client()
            .list_tables()
            .send()
            .await
            .expect("listed");
        assert_eq!(tables.table_names(), ["notes"]);
        let addr = dynamodb.addr;
        drop(dynamodb);
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "still listening"
        );
    }
}
