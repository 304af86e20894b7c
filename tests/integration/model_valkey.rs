//! What the model-based schedules (`model.rs`, `model_leased/`) need to run on the Valkey
//! store: the server `cargo xtask test` starts and names in `DEDUP_VALKEY_URL` (without it the
//! Valkey schedules are skipped with a message), a fresh mark prefix per schedule (the server is
//! shared: every key a schedule writes is under a prefix of its own), a store that is down, and
//! reads of marks and balances with plain commands on a connection of its own, not through the
//! store under test.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::{DedupKey, ManualClock, Retention};
use lambda_dedup_valkey::{ValkeyEffect, ValkeyStore};
use redis::AsyncCommands;

use crate::model_server::ServerWorld;

/// The variable that names the server.
const URL: &str = "DEDUP_VALKEY_URL";

/// The server's URL, or `None` after reporting that `what` is skipped.
pub(crate) fn url(what: &str) -> Option<String> {
    let how = "`cargo xtask test -p dedup-tests -- model` starts Valkey and sets it";
    lambda_dedup_conformance::server(URL, what, how)
}

/// One schedule's keys on the server, every store built here reading `clock`.
pub(crate) struct ValkeyWorld {
    url: String,
    /// The schedule's own prefix: marks under `<prefix>mark:`, anything else the test writes
    /// under [`key`](Self::key).
    prefix: String,
    retention: Retention,
    clock: Arc<ManualClock>,
    /// A connection of the test's own, for seeding and reading back.
    pub(crate) conn: redis::aio::MultiplexedConnection,
}

impl ValkeyWorld {
    /// A key of the schedule's own, outside the marks: `<prefix><name>`.
    pub(crate) fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn on(&self, url: &str) -> ValkeyStore {
        ValkeyStore::from_url(url, self.retention)
            .expect("the URL")
            .with_prefix(&self.key("mark:"))
            .expect("a prefix")
            .with_clock(self.clock.clone())
    }
}

impl ServerWorld for ValkeyWorld {
    type Effect = ValkeyEffect;
    type Store = ValkeyStore;

    /// A fresh prefix on the server of `url`.
    async fn new(url: &str, retention: Retention, clock: Arc<ManualClock>) -> Self {
        let conn = redis::Client::open(url)
            .expect("the URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to Valkey");
        Self {
            url: url.to_owned(),
            prefix: format!("{}:", dedup_tests::unique("model")),
            retention,
            clock,
            conn,
        }
    }

    fn clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }

    fn store(&self, lease: Duration) -> ValkeyStore {
        self.on(&self.url).with_lease(lease)
    }

    fn unreachable(&self) -> ValkeyStore {
        let port = dedup_tests::free_port();
        self.on(&format!("redis://127.0.0.1:{port}"))
    }

    /// Whether a mark of `key` is on the server at all, live or past its expiry by the store's
    /// clock (the server's own expiry runs on real time, the retention beyond any run).
    async fn stored_mark(&self, key: &DedupKey) -> bool {
        let mut conn = self.conn.clone();
        let at = self.store(Duration::from_secs(1)).mark_key(key);
        conn.exists(at).await.expect("read the mark's key")
    }
}
