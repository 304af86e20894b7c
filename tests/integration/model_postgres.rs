//! What the model-based schedules (`model.rs`, `model_leased/`) need to run on the PostgreSQL
//! store: the server `cargo xtask test` starts and names in `DEDUP_POSTGRES_URL` (without it the
//! PostgreSQL schedules are skipped with a message), a fresh marks table per schedule, a store
//! that is down, and reads of marks and effect rows with plain SQL on a connection of its own,
//! not through the store under test.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::{DedupKey, ManualClock, Retention};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};

use crate::model_server::ServerWorld;

/// The variable that names the server.
const URL: &str = "DEDUP_POSTGRES_URL";

/// The server's URL, or `None` after reporting that `what` is skipped.
pub(crate) fn url(what: &str) -> Option<String> {
    let how = "`cargo xtask test -p dedup-tests -- model` starts PostgreSQL and sets it";
    lambda_dedup_conformance::server(URL, what, how)
}

/// A table name no other schedule uses (letters, digits and `_`).
pub(crate) fn table_name(prefix: &str) -> String {
    dedup_tests::unique(prefix).replace('-', "_")
}

/// One schedule's marks table on the server, every store built here reading `clock`.
#[derive(Debug)]
pub(crate) struct PgWorld {
    url: String,
    marks: String,
    retention: Retention,
    clock: Arc<ManualClock>,
    /// A connection of the test's own, for seeding and reading back.
    pub(crate) client: tokio_postgres::Client,
}

impl PgWorld {
    /// Creates table `name` with `columns` (SQL column definitions).
    pub(crate) async fn create(&self, name: &str, columns: &str) {
        self.client
            .batch_execute(&format!("CREATE TABLE \"{name}\" ({columns})"))
            .await
            .expect("create table");
    }
}

impl ServerWorld for PgWorld {
    type Effect = SqlEffect;
    type Store = PgStore;

    /// A fresh marks table on the server of `url`.
    async fn new(url: &str, retention: Retention, clock: Arc<ManualClock>) -> Self {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect to PostgreSQL");
        tokio::spawn(connection);
        let this = Self {
            url: url.to_owned(),
            marks: table_name("marks"),
            retention,
            clock,
            client,
        };
        this.store(Duration::from_secs(30))
            .create_table()
            .await
            .expect("the marks table");
        this
    }

    fn clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }

    fn store(&self, lease: Duration) -> PgStore {
        PgStore::from_url(&self.url, Tls::Disabled, self.retention)
            .expect("the URL")
            .with_table(&self.marks)
            .expect("a table name")
            .with_lease(lease)
            .with_clock(self.clock.clone())
    }

    fn unreachable(&self) -> PgStore {
        let port = dedup_tests::free_port();
        PgStore::from_url(
            &format!("postgresql://postgres@127.0.0.1:{port}/postgres"),
            Tls::Disabled,
            self.retention,
        )
        .expect("the URL")
        .with_table(&self.marks)
        .expect("a table name")
        .with_clock(self.clock.clone())
    }

    /// Whether a row of `key` is in the marks table at all, live or past its expiry.
    async fn stored_mark(&self, key: &DedupKey) -> bool {
        let rows = self
            .client
            .query(
                &format!("SELECT 1 FROM \"{}\" WHERE key = $1", self.marks),
                &[&key.as_str()],
            )
            .await
            .expect("read the marks table");
        !rows.is_empty()
    }
}
