//! A PostgreSQL mark store for lambda-dedup: `MarkStore<SqlEffect>`.
//!
//! Marks live in one table whose primary key is the dedup key (see [`PgStore::schema`]); a
//! claim is one `INSERT … ON CONFLICT (key) DO UPDATE … WHERE <the claim could be taken>`, so
//! of any number of concurrent claims one wins (S4) and the row lock decides it. The
//! transactional flow commits the completed mark and your own SQL effects ([`SqlEffect`]:
//! parameterised statements, values never in the text) in **one transaction** (S5); a batch
//! commits in one transaction too, each event under its own `SAVEPOINT`, so one event's
//! refusal or failed condition is rolled back to its savepoint and costs no other (S12).
//!
//! The semantics are the DynamoDB store's, and it passes the same conformance suite
//! (`lambda-dedup-conformance`): leases with owner fencing (S6), fingerprints (S11), expiry
//! counted at read by the store's clock (S9: an expired mark is absent whether or not it has
//! been swept), the first attempt's time kept on a takeover (S16), nothing decided after the
//! effect (a commit whose answer is lost is a retryable error; the retry finds the mark).
//! Sequence and create-once modes are DynamoDB item modes: this store does not implement
//! their traits, [`SequenceStore`](lambda_dedup::SequenceStore) and
//! [`CreateOnceStore`](lambda_dedup::CreateOnceStore), so a flow of either mode cannot be given
//! it — asking for one does not compile:
//!
//! ```compile_fail,E0277
//! fn create_once(store: &lambda_dedup_postgres::PgStore) -> &dyn lambda_dedup::CreateOnceStore {
//!     store
//! }
//! ```
//!
//! ```compile_fail,E0277
//! fn in_sequence(store: &lambda_dedup_postgres::PgStore) -> &dyn lambda_dedup::SequenceStore {
//!     store
//! }
//! ```
//!
//! Nor latest-wins mode (the S3 door), whose high-water is a DynamoDB item too:
//!
//! ```compile_fail,E0277
//! fn latest(store: &lambda_dedup_postgres::PgStore) -> &dyn lambda_dedup::LatestStore {
//!     store
//! }
//! ```
//!
//! while the same code compiles for a store that has both (the memory store):
//!
//! ```
//! use lambda_dedup::{CreateOnceStore, LatestStore, SequenceStore};
//! use lambda_dedup_memory::MemoryStore;
//! fn latest(store: &MemoryStore) -> &dyn LatestStore {
//!     store
//! }
//! fn create_once(store: &MemoryStore) -> &dyn CreateOnceStore {
//!     store
//! }
//! fn in_sequence(store: &MemoryStore) -> &dyn SequenceStore {
//!     store
//! }
//! ```
//!
//! # Errors
//! An effect refused as it is — a permanent SQL error (SQLSTATE classes 22 data exception, 23
//! integrity constraint violation, 42 syntax error or access rule, …) or a value of the wrong
//! type for its parameter — is [`StoreError::Refused`] for that event, with the SQLSTATE as its
//! code and the effect's position (S15); nothing of the event is written. A broken connection,
//! a serialization failure or deadlock (`40001`, `40P01`), a cancelled statement, too many
//! connections (class 53) or a server shutting down are transient [`StoreError::Store`]s (S13).
//! Server messages are not kept (they may quote values, S3); SQLSTATEs are.
//!
//! # Isolation level
//! `READ COMMITTED`, PostgreSQL's default, on purpose. The one decision the store makes — is
//! this key free? — is a single conditional upsert on the mark's row: PostgreSQL takes the
//! row lock and re-evaluates the `WHERE` against the newest committed row, so two
//! transactions can never both take one key, at any isolation level. `SERIALIZABLE` would add
//! serialization failures (retries) for no gain to the mark. Your effects run at the same
//! level: write their conditions into the statements that write (`UPDATE … WHERE balance >=
//! $2`, `INSERT … ON CONFLICT DO NOTHING`, each atomic on its row) rather than reading first and
//! writing later.
//!
//! # Sweeping expired marks
//! PostgreSQL has no TTL: expired marks stay until deleted, and count as absent meanwhile. Run
//! [`PgStore::sweep`] (or [`PgStore::sweep_sql`] from a scheduled job, `pg_cron` or a
//! scheduled Lambda) now and then; it deletes up to a bound of marks whose `expires_at` (epoch
//! seconds) has passed, using the index on `expires_at`:
//!
//! ```sql
//! DELETE FROM dedup_marks WHERE key IN (
//!   SELECT key FROM dedup_marks WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)
//! ```
//!
//! `$1` is now in epoch seconds and `$2` the batch size; run it until it deletes fewer than the
//! batch. A mark being claimed at that moment is skipped, not waited for.
//!
//! # Connections
//! A [`PgStore`] keeps its connections open across invocations (build it once in `main`, as
//! with the DynamoDB client) and reopens a connection that broke; a transaction holds one
//! connection for its duration, and at most [`PgStore::with_max_connections`] are open at once
//! (default 4: a Lambda instance serves one invocation at a time). Statements are plain
//! parameterised queries; no session state is set after connecting (no `SET`, no temporary
//! tables, no advisory locks); the server's time limits travel in the startup packet (below).
//!
//! # Time limits
//! Every call is bounded, so a claim stuck on a row lock or a half-open socket answers with a
//! transient error rather than waiting until Lambda ends the invocation ([`Timeouts`],
//! [`PgStore::with_timeouts`]):
//!
//! - **connect** (default 5 s): opening a connection, TCP, TLS and PostgreSQL's startup
//!   together; past it, a transient `FaultKind::Timeout`.
//! - **lock** and **statement** (defaults 2 s and 5 s): the server's `lock_timeout` and
//!   `statement_timeout`, sent as the connection's startup `options` (`-c lock_timeout=… -c
//!   statement_timeout=…`, after any the URL gives, so these win), so they hold for every
//!   statement, inside a transaction or not. The server ends a statement waiting longer for a
//!   lock with `55P03` (transient, a `TransactionConflict`) and one running longer with `57014`
//!   (transient, a `Timeout`); the connection is sound and goes on being used. Behind a proxy
//!   that does not pass startup options on, set them on the proxy's connections instead (RDS
//!   Proxy's `InitQuery`); the call's limit below holds either way.
//! - **call** (default 10 s): the whole call on the client, from waiting for a free connection
//!   to the last statement's answer: what bounds a call when the server, or the network to it,
//!   answers nothing at all. Keep it above `lock` and `statement`, so that the server's answer
//!   normally comes first. Past it, a transient `FaultKind::Timeout`.
//!
//! They are settings, not derived from the invocation: the runtime already cuts each
//! invocation's work `DEDUP_DEADLINE_MARGIN_MS` before its deadline, dropping the store's call.
//! A call cut off by its limit or dropped by its caller with a statement in flight never
//! returns its connection to the pool: the connection is discarded (its socket closed) and the
//! server is sent a cancel request for the statement, so its locks go at once; the next call
//! gets a connection of its own. All of these are transient: the message is redelivered and
//! its mark decides (a commit cut off may have applied; the retry finds its mark, S13).
//!
//! # RDS Proxy
//! Behind RDS Proxy the store works as it is: every decision is inside one transaction, and a
//! proxy keeps a transaction on one database connection, so the claim's row lock and the
//! commit's atomicity are the database's. What changes: connections are borrowed per
//! transaction, so many Lambda instances share few database connections (the reason to use
//! it); a failover of the database drops connections in flight, which the store reports as
//! transient (the message is redelivered and the mark decides). Keep TLS on (the proxy can
//! require it) and give the proxy's endpoint as the host.
//!
//! # TLS
//! [`Tls::Rustls`] with a rustls client configuration; [`Tls::with_pem_roots`] builds one from
//! a PEM bundle of certificate authorities (for RDS, Amazon's RDS bundle). Configured, TLS is
//! **required** (`sslmode=require`, whatever the URL says): a server that answers "no TLS" — or
//! anyone on the path answering for it — is refused, never spoken to in plain text, and the
//! server's certificate is verified against the roots and the host's name. Such a failure is a
//! transient [`StoreError::Store`] (the message is redelivered) whose message names it ("TLS is
//! required and the server offered no TLS", "the TLS handshake failed (…)"). Plain text only
//! by the explicit [`Tls::Disabled`], for a server on loopback or a local socket (tests, a
//! local stack).

#![warn(missing_docs)]

mod effect;
mod pool;

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use lambda_dedup::clock::{epoch_millis, epoch_secs, from_epoch_millis};
use lambda_dedup::store::{MarkStoreImpl, StoreOptions};
use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, FaultKind, Fingerprint, Lease, Mark, MarkStatus,
    OwnerToken, Retention, StoreError,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

pub use effect::{SqlEffect, SqlValue};
use pool::{Conn, Pool};
pub use pool::{Timeouts, Tls};

/// The default name of the marks table.
pub const DEFAULT_TABLE: &str = "dedup_marks";

/// `table` quoted for a statement's text, if it is a plain identifier: letters, digits and `_`,
/// not starting with a digit, at most 63 bytes, optionally `schema.table`. Nothing else is
/// accepted, since it goes into SQL as it is (your own tables' names in a [`SqlEffect`], as the
/// marks table's).
pub fn identifier(table: &str) -> Result<String, StoreError> {
    let parts: Vec<&str> = table.split('.').collect();
    let ok = parts.len() <= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 63
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !p.as_bytes()[0].is_ascii_digit()
        });
    if !ok {
        return Err(StoreError::Invalid(format!(
            "table name {table:?}: letters, digits and _ only, optionally schema.table"
        )));
    }
    Ok(parts
        .iter()
        .map(|p| quoted(p))
        .collect::<Vec<_>>()
        .join("."))
}

/// The PostgreSQL mark store. Cheap to clone (the clones share connections).
#[derive(Clone)]
pub struct PgStore {
    pool: Arc<Pool>,
    table: String,
    options: StoreOptions,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("table", &self.table)
            .field("retention", &self.options.retention)
            .field("lease", &self.options.lease)
            .finish_non_exhaustive()
    }
}

/// The columns, in the order every query selects them.
const COLUMNS: &str = "key, status, owner, lease_expires_at, expires_at, fingerprint, result, \
                       first_seen_at, completed_at";

impl PgStore {
    /// A store on the server `config` names, keeping marks for `retention` in
    /// [`DEFAULT_TABLE`]. Connects lazily, on the first call.
    pub fn new(config: tokio_postgres::Config, tls: Tls, retention: Retention) -> Self {
        Self {
            pool: Arc::new(Pool::new(config, tls, 4, Timeouts::default())),
            table: quoted(DEFAULT_TABLE),
            options: StoreOptions::new(retention),
        }
    }

    /// A store on the server of `url` (`postgresql://user:password@host:port/db`, or the
    /// `key=value` form).
    pub fn from_url(url: &str, tls: Tls, retention: Retention) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|_| StoreError::Invalid("the PostgreSQL URL does not parse".into()))?;
        Ok(Self::new(config, tls, retention))
    }

    /// Keeps marks in `table` (a plain identifier: letters, digits, `_`, at most 63 bytes;
    /// optionally `schema.table`).
    pub fn with_table(mut self, table: &str) -> Result<Self, StoreError> {
        self.table = identifier(table)?;
        Ok(self)
    }

    lambda_dedup::store_options_builders!(options);

    /// At most `max` connections open at once (default 4).
    pub fn with_max_connections(mut self, max: usize) -> Self {
        let pool = Pool::new(
            self.pool.given().clone(),
            self.pool.tls().clone(),
            max.max(1),
            self.pool.timeouts(),
        );
        self.pool = Arc::new(pool);
        self
    }

    /// The store's time limits (default [`Timeouts::default`]; see the crate documentation,
    /// "Time limits"). The server's are sent in whole milliseconds, at least 1 (0 would mean
    /// none).
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        let pool = Pool::new(
            self.pool.given().clone(),
            self.pool.tls().clone(),
            self.pool.max(),
            timeouts,
        );
        self.pool = Arc::new(pool);
        self
    }

    /// The marks table's DDL: the key as primary key, times as epoch milliseconds (leases,
    /// first and completed times) and epoch seconds (`expires_at`, as DynamoDB's TTL), and an
    /// index on `expires_at` for the sweep.
    pub fn schema(&self) -> String {
        let t = &self.table;
        let index = quoted(&format!(
            "{}_expires_at",
            self.table.replace('"', "").replace('.', "_")
        ));
        format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n\
             \x20 key text PRIMARY KEY,\n\
             \x20 status text NOT NULL CHECK (status IN ('IN_PROGRESS', 'COMPLETED')),\n\
             \x20 owner text,\n\
             \x20 lease_expires_at bigint,\n\
             \x20 expires_at bigint NOT NULL,\n\
             \x20 fingerprint text,\n\
             \x20 result text,\n\
             \x20 first_seen_at bigint NOT NULL,\n\
             \x20 completed_at bigint\n\
             );\n\
             CREATE INDEX IF NOT EXISTS {index} ON {t} (expires_at);"
        )
    }

    /// Creates the marks table and its index if they do not exist ([`schema`](Self::schema)).
    pub async fn create_table(&self) -> Result<(), StoreError> {
        self.bounded(async {
            let mut conn = self.pool.get().await?;
            conn.simple(&self.schema()).await
        })
        .await
    }

    /// The sweep's statement (see the crate documentation): `$1` now in epoch seconds, `$2`
    /// the most marks to delete.
    pub fn sweep_sql(&self) -> String {
        let t = &self.table;
        format!(
            "DELETE FROM {t} WHERE key IN (SELECT key FROM {t} WHERE expires_at <= $1 \
             LIMIT $2 FOR UPDATE SKIP LOCKED)"
        )
    }

    /// Deletes up to `limit` expired marks; how many it deleted. Expired marks already count as
    /// absent: sweeping only reclaims space.
    pub async fn sweep(&self, limit: i64) -> Result<u64, StoreError> {
        let now = secs(self.options.now());
        self.bounded(async {
            let mut conn = self.pool.get().await?;
            conn.execute(&self.sweep_sql(), &[&now, &limit]).await
        })
        .await
    }

    /// `call` within [`Timeouts::call`]: cut off after it, a transient timeout (the connection
    /// it held, mid-statement, is discarded as the call's future is dropped; see [`Conn`]).
    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let limit = self.pool.timeouts().call;
        tokio::time::timeout(limit, call)
            .await
            .unwrap_or_else(|_| Err(timed_out(limit)))
    }

    fn ttl(&self, now: SystemTime) -> i64 {
        secs(self.options.expires_at(now))
    }

    /// The condition under which a mark may be (re)written by a claim or a commit: it expired
    /// (S9), or its lease is over and the fingerprints allow a takeover. `$now_s`/`$now_ms`
    /// are parameter numbers; `EXCLUDED` is the offered row.
    fn takeover(now_s: usize, now_ms: usize) -> String {
        format!(
            "m.expires_at <= ${now_s} OR (m.status = 'IN_PROGRESS' AND m.lease_expires_at <= \
             ${now_ms} AND (EXCLUDED.fingerprint IS NULL OR m.fingerprint IS NULL OR \
             m.fingerprint = EXCLUDED.fingerprint))"
        )
    }

    async fn read_mark(
        &self,
        conn: &mut Conn<'_>,
        key: &DedupKey,
    ) -> Result<Option<Mark>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM {} WHERE key = $1", self.table);
        let rows = conn.query(&sql, &[&key.as_str()]).await?;
        rows.first().map(decode).transpose()
    }

    /// What stood in the way of a write of `key` (the mark as it stands now).
    async fn explain(
        &self,
        conn: &mut Conn<'_>,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        now: SystemTime,
    ) -> Result<lambda_dedup::Seen, StoreError> {
        self.read_mark(conn, key)
            .await?
            .and_then(|m| m.classify(fp, now))
            .ok_or_else(|| StoreError::Contended(key.clone()))
    }

    async fn claim_on(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        let now = self.options.now();
        let lease_end = self.options.lease_end(now, deadline)?;
        let owner = OwnerToken::random();
        let held = millis(self.options.lease_held_until(lease_end));
        let (now_ms, lease_ms) = (millis(now), millis(lease_end));
        let sql = format!(
            "INSERT INTO {t} AS m ({COLUMNS}) \
             VALUES ($1, 'IN_PROGRESS', $2, $3, $4, $5, NULL, $6, NULL) \
             ON CONFLICT (key) DO UPDATE SET status = 'IN_PROGRESS', owner = EXCLUDED.owner, \
             lease_expires_at = EXCLUDED.lease_expires_at, expires_at = EXCLUDED.expires_at, \
             fingerprint = EXCLUDED.fingerprint, result = NULL, completed_at = NULL, \
             first_seen_at = CASE WHEN m.expires_at <= $7 THEN EXCLUDED.first_seen_at \
             ELSE m.first_seen_at END \
             WHERE {cond} RETURNING first_seen_at",
            t = self.table,
            cond = Self::takeover(7, 6),
        );
        let fp_s = fp.map(Fingerprint::as_str);
        let mut conn = self.pool.get().await?;
        let rows = conn
            .query(
                &sql,
                &[
                    &key.as_str(),
                    &owner.as_str(),
                    &held,
                    &self.ttl(now),
                    &fp_s,
                    &now_ms,
                    &secs(now),
                ],
            )
            .await?;
        match rows.first() {
            Some(row) => {
                let first: i64 = row.get(0);
                Ok(Claim::Claimed(Lease {
                    key: key.clone(),
                    owner,
                    expires_at: from_millis(lease_ms),
                    fingerprint: fp.cloned(),
                    first_attempt_at: from_millis(first),
                }))
            }
            None => self.explain(&mut conn, key, fp, now).await.map(Claim::Seen),
        }
    }

    /// One event's commit on `conn`, inside a transaction the caller opened: the mark, then
    /// each effect. `Ok(Err(outcome))` when the event must be rolled back with that outcome.
    async fn commit_in(
        &self,
        conn: &mut Conn<'_>,
        now: SystemTime,
        r: &CommitRequest<'_, SqlEffect>,
    ) -> Result<Result<(), Result<Commit, StoreError>>, StoreError> {
        let sql = format!(
            "INSERT INTO {t} AS m ({COLUMNS}) \
             VALUES ($1, 'COMPLETED', NULL, NULL, $2, $3, $4, $5, $5) \
             ON CONFLICT (key) DO UPDATE SET status = 'COMPLETED', owner = NULL, \
             lease_expires_at = NULL, expires_at = EXCLUDED.expires_at, \
             fingerprint = EXCLUDED.fingerprint, result = EXCLUDED.result, \
             first_seen_at = EXCLUDED.first_seen_at, completed_at = EXCLUDED.completed_at \
             WHERE {cond} RETURNING 1",
            t = self.table,
            cond = Self::takeover(6, 5),
        );
        let fp_s = r.fingerprint.map(Fingerprint::as_str);
        let rows = conn
            .query(
                &sql,
                &[
                    &r.key.as_str(),
                    &self.ttl(now),
                    &fp_s,
                    &r.result,
                    &millis(now),
                    &secs(now),
                ],
            )
            .await?;
        if rows.is_empty() {
            let seen = self.explain(conn, r.key, r.fingerprint, now).await;
            return Ok(Err(seen.map(Commit::Seen)));
        }
        for (index, effect) in r.effects.iter().enumerate() {
            let params = effect.bound();
            let out = conn.execute_raw(effect.sql(), &params).await?;
            match out {
                Ok(0) if effect.is_required() => {
                    return Ok(Err(Ok(Commit::EffectRejected { index })));
                }
                Ok(_) => {}
                Err(e) => match conn.classify(&e) {
                    pool::Fault::Permanent(code) => {
                        return Ok(Err(Err(StoreError::Refused {
                            key: r.key.clone(),
                            code,
                            position: Some(index + 1),
                        })));
                    }
                    pool::Fault::Transient(kind) => {
                        return Err(StoreError::store(
                            kind,
                            format!("postgres: an effect failed ({kind})"),
                        ));
                    }
                },
            }
        }
        Ok(Ok(()))
    }

    async fn commit_one(&self, r: CommitRequest<'_, SqlEffect>) -> Result<Commit, StoreError> {
        self.options.check_result(r.result)?;
        let now = self.options.now();
        let mut conn = self.pool.get().await?;
        conn.begin().await?;
        match self.commit_in(&mut conn, now, &r).await {
            Ok(Ok(())) => {
                conn.commit().await?;
                Ok(Commit::Applied)
            }
            Ok(Err(outcome)) => {
                conn.rollback().await?;
                outcome
            }
            Err(e) => {
                // The transaction is lost with the fault; the connection is not reused.
                conn.discard();
                Err(e)
            }
        }
    }

    async fn commit_many(
        &self,
        requests: &[CommitRequest<'_, SqlEffect>],
    ) -> Vec<Result<Commit, StoreError>> {
        let now = self.options.now();
        let mut results: Vec<Option<Result<Commit, StoreError>>> = requests
            .iter()
            .map(|r| self.options.check_result(r.result).err().map(Err))
            .collect();
        let all = |e: &StoreError| -> Vec<Result<Commit, StoreError>> {
            requests.iter().map(|_| Err(copy_fault(e))).collect()
        };
        let mut conn = match self.pool.get().await {
            Ok(c) => c,
            Err(e) => return all(&e),
        };
        if let Err(e) = conn.begin().await {
            return all(&e);
        }
        for (i, r) in requests.iter().enumerate() {
            if results[i].is_some() {
                continue;
            }
            let step = async {
                conn.simple(&format!("SAVEPOINT e{i}")).await?;
                let out = self.commit_in(&mut conn, now, r).await?;
                match &out {
                    Ok(()) => conn.simple(&format!("RELEASE SAVEPOINT e{i}")).await?,
                    Err(_) => conn.simple(&format!("ROLLBACK TO SAVEPOINT e{i}")).await?,
                }
                Ok::<_, StoreError>(out)
            };
            match step.await {
                Ok(Ok(())) => results[i] = Some(Ok(Commit::Applied)),
                Ok(Err(outcome)) => results[i] = Some(outcome),
                Err(e) => {
                    conn.discard();
                    return all(&e);
                }
            }
        }
        if let Err(e) = conn.commit().await {
            return all(&e);
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or(Ok(Commit::Applied)))
            .collect()
    }

    async fn complete_on(&self, lease: &Lease, result: Option<&str>) -> Result<(), StoreError> {
        self.options.check_result(result)?;
        let now = millis(self.options.now());
        let sql = format!(
            "UPDATE {} SET status = 'COMPLETED', completed_at = $3, lease_expires_at = NULL, \
             result = COALESCE($4, result) \
             WHERE key = $1 AND owner = $2 AND status = 'IN_PROGRESS'",
            self.table
        );
        let params: [&(dyn ToSql + Sync); 4] =
            [&lease.key.as_str(), &lease.owner.as_str(), &now, &result];
        let Some(mut conn) = self.fenced(&sql, &params).await? else {
            return Ok(());
        };
        let current = self.read_mark(&mut conn, &lease.key).await?;
        match current {
            // Our own earlier completion (a retry after a lost answer).
            Some(m)
                if m.status == MarkStatus::Completed && m.owner.as_ref() == Some(&lease.owner) =>
            {
                Ok(())
            }
            current => Err(StoreError::Fenced {
                key: lease.key.clone(),
                current: current.map(Box::new),
            }),
        }
    }

    async fn release_on(&self, lease: &Lease) -> Result<(), StoreError> {
        let released = format!("released-{}", lease.owner.as_str());
        let sql = format!(
            "UPDATE {} SET lease_expires_at = 0, owner = $3 \
             WHERE key = $1 AND status = 'IN_PROGRESS' AND (owner = $2 OR owner = $3)",
            self.table
        );
        let params: [&(dyn ToSql + Sync); 3] =
            [&lease.key.as_str(), &lease.owner.as_str(), &released];
        let Some(mut conn) = self.fenced(&sql, &params).await? else {
            return Ok(());
        };
        match self.read_mark(&mut conn, &lease.key).await? {
            None => Ok(()),
            Some(m) => Err(StoreError::Fenced {
                key: lease.key.clone(),
                current: Some(Box::new(m)),
            }),
        }
    }

    /// Runs an update fenced on the owner token: `None` when it changed the one row; else the
    /// connection, to read what stands instead.
    async fn fenced(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Conn<'_>>, StoreError> {
        let mut conn = self.pool.get().await?;
        let changed = conn.execute(sql, params).await?;
        Ok((changed != 1).then_some(conn))
    }

    async fn get_on(&self, key: &DedupKey) -> Result<Option<Mark>, StoreError> {
        let now = self.options.now();
        let mut conn = self.pool.get().await?;
        let mark = self.read_mark(&mut conn, key).await?;
        Ok(mark.filter(|m| m.is_live(now)))
    }

    async fn get_many_on(&self, keys: &[&DedupKey]) -> Result<Vec<Option<Mark>>, StoreError> {
        let now = self.options.now();
        let wanted: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
        let sql = format!("SELECT {COLUMNS} FROM {} WHERE key = ANY($1)", self.table);
        let mut conn = self.pool.get().await?;
        let rows = conn.query(&sql, &[&wanted]).await?;
        let mut found = std::collections::HashMap::new();
        for row in &rows {
            let m = decode(row)?;
            if m.is_live(now) {
                found.insert(m.key.as_str().to_owned(), m);
            }
        }
        Ok(keys
            .iter()
            .map(|k| found.get(k.as_str()).cloned())
            .collect())
    }
}

impl MarkStoreImpl<SqlEffect> for PgStore {
    async fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        self.bounded(self.claim_on(key, fp, deadline)).await
    }

    async fn commit(&self, request: CommitRequest<'_, SqlEffect>) -> Result<Commit, StoreError> {
        self.bounded(self.commit_one(request)).await
    }

    async fn commit_batch<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a, SqlEffect>],
    ) -> Vec<Result<Commit, StoreError>> {
        let limit = self.pool.timeouts().call;
        match tokio::time::timeout(limit, self.commit_many(requests)).await {
            Ok(results) => results,
            Err(_) => requests.iter().map(|_| Err(timed_out(limit))).collect(),
        }
    }

    async fn get_many<'a>(
        &'a self,
        keys: &'a [&'a DedupKey],
    ) -> Result<Vec<Option<Mark>>, StoreError> {
        self.bounded(self.get_many_on(keys)).await
    }

    async fn complete(&self, lease: &Lease, result: Option<&str>) -> Result<(), StoreError> {
        self.bounded(self.complete_on(lease, result)).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.bounded(self.release_on(lease)).await
    }

    async fn get(&self, key: &DedupKey) -> Result<Option<Mark>, StoreError> {
        self.bounded(self.get_on(key)).await
    }

    fn options(&self) -> &StoreOptions {
        &self.options
    }
}

/// `"name"`, with any `"` doubled (identifiers are checked before they get here).
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn millis(t: SystemTime) -> i64 {
    i64::try_from(epoch_millis(t)).unwrap_or(i64::MAX)
}

fn secs(t: SystemTime) -> i64 {
    i64::try_from(epoch_secs(t)).unwrap_or(i64::MAX)
}

fn from_millis(ms: i64) -> SystemTime {
    from_epoch_millis(u64::try_from(ms).unwrap_or(0))
}

fn corrupt(key: &str, reason: &str) -> StoreError {
    StoreError::Corrupt {
        key: key.to_owned(),
        reason: reason.to_owned(),
    }
}

/// A row of [`COLUMNS`] as a mark.
fn decode(row: &Row) -> Result<Mark, StoreError> {
    let key: String = row.try_get(0).map_err(|_| corrupt("?", "no key"))?;
    let bad = |what: &str| corrupt(&key, what);
    let status: String = row.try_get(1).map_err(|_| bad("status"))?;
    let status = MarkStatus::parse(&status).ok_or_else(|| bad("status"))?;
    let owner: Option<String> = row.try_get(2).map_err(|_| bad("owner"))?;
    let lease: Option<i64> = row.try_get(3).map_err(|_| bad("lease_expires_at"))?;
    let expires: i64 = row.try_get(4).map_err(|_| bad("expires_at"))?;
    let fingerprint: Option<String> = row.try_get(5).map_err(|_| bad("fingerprint"))?;
    let result: Option<String> = row.try_get(6).map_err(|_| bad("result"))?;
    let first: i64 = row.try_get(7).map_err(|_| bad("first_seen_at"))?;
    let completed: Option<i64> = row.try_get(8).map_err(|_| bad("completed_at"))?;
    Ok(Mark {
        key: DedupKey::from_stored(key.clone()),
        status,
        owner: owner.map(OwnerToken::from_stored),
        lease_expires_at: lease.map(from_millis),
        expires_at: lambda_dedup::clock::from_epoch_secs(u64::try_from(expires).unwrap_or(0)),
        fingerprint: fingerprint.map(Fingerprint::from_stored),
        result,
        first_seen_at: from_millis(first),
        completed_at: completed.map(from_millis),
    })
}

/// A call cut off by [`Timeouts::call`]: transient, the message is redelivered and its mark
/// decides (a commit cut off may have applied; the retry finds its mark).
fn timed_out(limit: std::time::Duration) -> StoreError {
    StoreError::store(
        FaultKind::Timeout,
        format!(
            "postgres: the call did not answer within {} ms (Timeouts::call)",
            pool::whole_ms(limit)
        ),
    )
}

/// The same fault for every request of a batch that failed as a whole.
fn copy_fault(e: &StoreError) -> StoreError {
    match e {
        StoreError::Store { kind, message } => StoreError::store(*kind, message.clone()),
        StoreError::Contended(k) => StoreError::Contended(k.clone()),
        other => StoreError::store(FaultKind::ServerError, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn store() -> PgStore {
        let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
        PgStore::from_url("postgresql://u@127.0.0.1:1/db", Tls::Disabled, retention).expect("url")
    }

    #[test]
    fn table_names_are_identifiers_never_sql() {
        for bad in [
            "marks; DROP TABLE x",
            "a\"b",
            "",
            "1marks",
            "a.b.c",
            "a b",
            "a-b",
        ] {
            assert!(
                matches!(store().with_table(bad), Err(StoreError::Invalid(_))),
                "{bad:?}"
            );
        }
        let s = store()
            .with_table("dedup.marks_2")
            .expect("a schema and a table");
        assert!(
            s.schema()
                .contains("CREATE TABLE IF NOT EXISTS \"dedup\".\"marks_2\"")
        );
        assert!(
            s.sweep_sql()
                .starts_with("DELETE FROM \"dedup\".\"marks_2\"")
        );
    }
}
