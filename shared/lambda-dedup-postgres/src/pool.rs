//! Connections kept open across calls (and Lambda invocations), reopened when broken, at most
//! a bound open at once, each opened within a time limit and discarded when a call on it was
//! cut off; and how an error of the server or the connection is classified.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_dedup::{FaultKind, StoreError};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::config::SslMode;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Error, NoTls, Row};

/// How long the store's calls may take (see the crate documentation, "Time limits").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening a connection: TCP, TLS and PostgreSQL's startup and authentication together
    /// (default 5 s).
    pub connect: Duration,
    /// The server's `lock_timeout`: how long one statement waits for a lock, a row lock held by
    /// another session say, before the server ends it with SQLSTATE `55P03`, transient
    /// (default 2 s).
    pub lock: Duration,
    /// The server's `statement_timeout`: how long one statement runs before the server cancels
    /// it with SQLSTATE `57014`, transient (default 5 s).
    pub statement: Duration,
    /// One store call as a whole, on the client: waiting for a free connection, connecting,
    /// every statement of it (default 10 s). A call cut off by it is a transient
    /// `FaultKind::Timeout`, its connection discarded; it is what bounds a call when the
    /// server, or the network to it, answers nothing at all.
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            lock: Duration::from_secs(2),
            statement: Duration::from_secs(5),
            call: Duration::from_secs(10),
        }
    }
}

/// A connection: its client, and its connection task, aborted (closing the socket) when the
/// connection is discarded, so a discarded connection holds nothing open.
struct Pooled {
    client: Client,
    task: tokio::task::AbortHandle,
}

impl Pooled {
    /// A connection just opened: `client`, and its `connection` driven by a task of its own.
    fn driven(
        client: Client,
        connection: impl Future<Output = Result<(), Error>> + Send + 'static,
    ) -> Self {
        let task = tokio::spawn(async move {
            let _ = connection.await;
        });
        Self {
            client,
            task: task.abort_handle(),
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How connections are secured.
///
/// With TLS configured, TLS is required: a server that answers the client's request for TLS
/// with "no" (as one without TLS does, or anyone on the path who rewrites the answer) is refused
/// rather than spoken to in plain text, whatever `sslmode` the URL gives. Plain text is only ever
/// chosen explicitly, with [`Tls::Disabled`].
#[derive(Clone)]
pub enum Tls {
    /// Plain TCP, credentials and marks readable on the wire: for a server on loopback or a
    /// local socket only (tests, a local stack), never across a network.
    Disabled,
    /// TLS with rustls, required, with this client configuration: its roots decide which
    /// servers are trusted, and the server's certificate is verified against them and the
    /// host's name.
    Rustls(Arc<rustls::ClientConfig>),
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tls::Disabled => "Tls::Disabled",
            Tls::Rustls(_) => "Tls::Rustls",
        })
    }
}

impl Tls {
    /// TLS trusting the certificate authorities of the PEM bundle `pem` (for RDS and Aurora,
    /// Amazon's RDS certificate bundle), verifying the server's name.
    pub fn with_pem_roots(pem: &[u8]) -> Result<Self, StoreError> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert =
                cert.map_err(|_| StoreError::Invalid("the PEM bundle does not parse".into()))?;
            roots.add(cert).map_err(|_| {
                StoreError::Invalid("a certificate of the bundle is invalid".into())
            })?;
        }
        if roots.is_empty() {
            return Err(StoreError::Invalid(
                "the PEM bundle holds no certificate".into(),
            ));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|_| StoreError::Invalid("rustls: no protocol version".into()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls::Rustls(Arc::new(config)))
    }
}

pub(crate) struct Pool {
    /// The configuration as given (what a rebuilt pool starts from).
    given: Config,
    /// As connected with: TLS required if configured, the time limits added.
    config: Config,
    tls: Tls,
    timeouts: Timeouts,
    max: usize,
    idle: Mutex<Vec<Pooled>>,
    slots: Semaphore,
}

impl Pool {
    pub(crate) fn new(given: Config, tls: Tls, max: usize, timeouts: Timeouts) -> Self {
        let mut config = given.clone();
        // tokio-postgres defaults to `prefer`, which falls back to plain text when the server
        // answers "no TLS": a configured TLS would then protect nothing against anyone able to
        // answer for the server. `require` makes that answer a failed connection; the URL's own
        // `sslmode` (`disable`, `prefer`) is overridden for the same reason.
        if let Tls::Rustls(_) = tls {
            config.ssl_mode(SslMode::Require);
        }
        config.connect_timeout(timeouts.connect);
        // The server's own limits, in the startup packet rather than a `SET`: every statement
        // of the session has them, outside a transaction too, for no round trip and no session
        // state changed after connecting. Appended, so they win over the URL's `options`.
        let limits = format!(
            "-c lock_timeout={} -c statement_timeout={}",
            whole_ms(timeouts.lock),
            whole_ms(timeouts.statement)
        );
        let options = match config.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} {limits}"),
            _ => limits,
        };
        config.options(&options);
        Self {
            given,
            config,
            tls,
            timeouts,
            max,
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(max),
        }
    }

    /// The configuration as given.
    pub(crate) fn given(&self) -> &Config {
        &self.given
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    pub(crate) fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    pub(crate) fn tls(&self) -> &Tls {
        &self.tls
    }

    /// A connection: an idle one that is still open, or a new one.
    pub(crate) async fn get(&self) -> Result<Conn<'_>, StoreError> {
        let permit = self
            .slots
            .acquire()
            .await
            .map_err(|_| StoreError::store(FaultKind::ServerError, "postgres: pool closed"))?;
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|c| !c.client.is_closed());
            idle.pop()
        };
        let pooled = match reused {
            Some(c) => c,
            None => self.connect().await?,
        };
        Ok(Conn {
            pool: self,
            pooled: Some(pooled),
            clean: true,
            in_flight: false,
            _permit: permit,
        })
    }

    /// A new connection, within [`Timeouts::connect`]: tokio-postgres's own `connect_timeout`
    /// bounds the TCP connection only, not TLS or the startup, which a server that accepts and
    /// then answers nothing would hold forever.
    async fn connect(&self) -> Result<Pooled, StoreError> {
        let limit = self.timeouts.connect;
        match tokio::time::timeout(limit, self.open()).await {
            Ok(opened) => opened,
            Err(_) => Err(StoreError::store(
                FaultKind::Timeout,
                format!(
                    "postgres: could not connect within {} ms (Timeouts::connect)",
                    whole_ms(limit)
                ),
            )),
        }
    }

    async fn open(&self) -> Result<Pooled, StoreError> {
        let lost = |e: Error| match tls_failure(&e) {
            Some(why) => StoreError::store(
                FaultKind::Network,
                format!("postgres: could not connect: {why}"),
            ),
            None => StoreError::store(fault_kind(&e), "postgres: could not connect"),
        };
        match &self.tls {
            Tls::Disabled => {
                let (client, connection) = self.config.connect(NoTls).await.map_err(lost)?;
                Ok(Pooled::driven(client, connection))
            }
            Tls::Rustls(config) => {
                let tls = tokio_postgres_rustls::MakeRustlsConnect::new((**config).clone());
                let (client, connection) = self.config.connect(tls).await.map_err(lost)?;
                Ok(Pooled::driven(client, connection))
            }
        }
    }
}

/// One connection, borrowed from the pool; back to it when dropped, unless it broke, was left
/// inside a transaction, or was dropped with a statement in flight (its call cut off by the
/// call's time limit or cancelled by its caller): the answer to that statement would still
/// come, and the next call on the connection would wait behind it or read it.
pub(crate) struct Conn<'a> {
    pool: &'a Pool,
    pooled: Option<Pooled>,
    clean: bool,
    in_flight: bool,
    _permit: SemaphorePermit<'a>,
}

impl Conn<'_> {
    fn client(&self) -> Result<&Client, StoreError> {
        self.pooled
            .as_ref()
            .map(|p| &p.client)
            .ok_or_else(|| StoreError::store(FaultKind::Network, "postgres: connection dropped"))
    }

    /// Runs `call` on the connection, in flight until its answer comes: a call cut off before
    /// leaves the connection in flight, so it is never given back to the pool.
    async fn in_flight<T>(
        &mut self,
        call: impl AsyncFnOnce(&Client) -> Result<T, Error>,
    ) -> Result<Result<T, Error>, StoreError> {
        self.in_flight = true;
        let out = call(self.client()?).await;
        self.in_flight = false;
        Ok(out)
    }

    /// Runs a statement without parameters (transaction control, DDL).
    pub(crate) async fn simple(&mut self, sql: &str) -> Result<(), StoreError> {
        let out = self.in_flight(async |c| c.batch_execute(sql).await).await?;
        out.map_err(|e| self.fault(&e))
    }

    /// Runs a query of the store's own; an error is the store's ([`fault`](Self::fault)).
    pub(crate) async fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let out = self.in_flight(async |c| c.query(sql, params).await).await?;
        out.map_err(|e| self.fault(&e))
    }

    /// Runs a statement, its error as the server or the client gave it (an effect's error is
    /// classified by the caller, [`classify`](Self::classify)).
    pub(crate) async fn execute_raw(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Result<u64, Error>, StoreError> {
        self.in_flight(async |c| c.execute(sql, params).await).await
    }

    /// Runs a statement of the store's own: the rows it changed.
    pub(crate) async fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let out = self.execute_raw(sql, params).await?;
        out.map_err(|e| self.fault(&e))
    }

    pub(crate) async fn begin(&mut self) -> Result<(), StoreError> {
        self.clean = false;
        self.simple("BEGIN ISOLATION LEVEL READ COMMITTED").await
    }

    pub(crate) async fn commit(&mut self) -> Result<(), StoreError> {
        // A failed COMMIT leaves the outcome unknown to us (the retry finds the mark, or not).
        self.simple("COMMIT").await?;
        self.clean = true;
        Ok(())
    }

    pub(crate) async fn rollback(&mut self) -> Result<(), StoreError> {
        self.simple("ROLLBACK").await?;
        self.clean = true;
        Ok(())
    }

    /// Drops the connection instead of returning it (its transaction is in an unknown state),
    /// closing its socket.
    pub(crate) fn discard(&mut self) {
        self.pooled = None;
    }

    /// The store error for `e`, a failure of the store's own statements: transient, or a
    /// permanent refusal of the request (a missing table, a bad configuration).
    pub(crate) fn fault(&mut self, e: &Error) -> StoreError {
        if e.is_closed() {
            self.discard();
        }
        match classify(e) {
            Fault::Transient(kind) => {
                StoreError::store(kind, format!("postgres: {}", describe(e, kind)))
            }
            Fault::Permanent(code) => StoreError::store(
                FaultKind::Refused,
                format!("postgres: the store's statement was refused (SQLSTATE {code})"),
            ),
        }
    }

    /// How `e`, a failure of a user's effect, counts.
    pub(crate) fn classify(&mut self, e: &Error) -> Fault {
        if e.is_closed() {
            self.discard();
        }
        classify(e)
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let Some(pooled) = self.pooled.take() else {
            return;
        };
        if self.in_flight {
            // Cut off mid-statement: ask the server to cancel it, so the locks it waits for or
            // holds go now rather than at its `statement_timeout`; the connection is dropped
            // (its socket closed) whatever the server answers.
            self.pool.cancel(&pooled.client);
            return;
        }
        if self.clean && !pooled.client.is_closed() {
            let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.push(pooled);
        }
    }
}

impl Pool {
    /// Sends the server a cancel request for `client`'s statement in flight, on a connection of
    /// its own, in the background and within [`Timeouts::connect`] (a frozen server answers
    /// nothing; the request is then simply lost). Nothing is sent outside a Tokio runtime.
    fn cancel(&self, client: &Client) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let token = client.cancel_token();
        let limit = self.timeouts.connect;
        match &self.tls {
            Tls::Disabled => {
                runtime.spawn(async move {
                    let _ = tokio::time::timeout(limit, token.cancel_query(NoTls)).await;
                });
            }
            Tls::Rustls(config) => {
                let tls = tokio_postgres_rustls::MakeRustlsConnect::new((**config).clone());
                runtime.spawn(async move {
                    let _ = tokio::time::timeout(limit, token.cancel_query(tls)).await;
                });
            }
        }
    }
}

/// `d` in whole milliseconds, at least 1 (PostgreSQL reads 0 as "no limit").
pub(crate) fn whole_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// How an error counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// May succeed later (S13).
    Transient(FaultKind),
    /// Refused as it is (S15): the SQLSTATE, or what the client refused.
    Permanent(String),
}

/// By SQLSTATE for the server's errors; a broken connection is transient; a value the client
/// could not send as its parameter's type (or a wrong number of them) is permanent.
pub(crate) fn classify(e: &Error) -> Fault {
    if let Some(db) = e.as_db_error() {
        return by_sqlstate(db.code().code());
    }
    if e.is_closed() {
        return Fault::Transient(FaultKind::Network);
    }
    // The client's own refusals of the request as it is (tokio-postgres names the kind only in
    // its Debug form): a parameter of the wrong type, a wrong number of parameters.
    let debug = format!("{e:?}");
    if debug.contains("kind: ToSql") {
        return Fault::Permanent("parameter_type".into());
    }
    if debug.contains("kind: Parameters") {
        return Fault::Permanent("parameter_count".into());
    }
    Fault::Transient(fault_kind(e))
}

fn by_sqlstate(code: &str) -> Fault {
    let transient = match code {
        "40001" | "40P01" | "55P03" => Some(FaultKind::TransactionConflict),
        "57014" => Some(FaultKind::Timeout),
        "57P01" | "57P02" | "57P03" => Some(FaultKind::Network),
        c if c.starts_with("08") => Some(FaultKind::Network),
        c if c.starts_with("53") => Some(FaultKind::Throttled),
        c if c.starts_with("58") || c.starts_with("XX") => Some(FaultKind::ServerError),
        _ => None,
    };
    match transient {
        Some(kind) => Fault::Transient(kind),
        None => Fault::Permanent(code.to_owned()),
    }
}

/// The kind of a failure that is not the server's answer.
fn fault_kind(e: &Error) -> FaultKind {
    if let Some(db) = e.as_db_error() {
        return match by_sqlstate(db.code().code()) {
            Fault::Transient(kind) => kind,
            Fault::Permanent(_) => FaultKind::Refused,
        };
    }
    if format!("{e:?}").contains("kind: Timeout") {
        FaultKind::Timeout
    } else {
        FaultKind::Network
    }
}

/// Why a connection failed in its TLS negotiation, if it did: the server offered no TLS, or the
/// handshake failed (a certificate not trusted by the configured roots, or not for the host).
/// Still a transient fault for the message (the configuration is wrong, not the event), but
/// named, so an operator reading the log sees the cause.
fn tls_failure(e: &Error) -> Option<String> {
    // tokio-postgres names the kind only in its Debug form.
    if !format!("{e:?}").contains("kind: Tls") {
        return None;
    }
    // The handshake's own error, as rustls gives it.
    if let Some(r) = std::error::Error::source(e).and_then(rustls_cause) {
        return Some(format!("the TLS handshake failed ({r})"));
    }
    Some(
        "TLS is required and the server offered no TLS (plain text only with Tls::Disabled, \
         for a server on loopback)"
            .into(),
    )
}

/// The rustls error among `e` and its causes. An I/O error carries one as its inner error,
/// which its `source` skips (and may be wrapped in another I/O error), so the inner error of
/// each is searched too.
fn rustls_cause<'e>(e: &'e (dyn std::error::Error + 'static)) -> Option<&'e rustls::Error> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(inner) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            return rustls_cause(inner);
        }
        cause = c.source();
    }
    None
}

/// A description without the server's message (it may quote values, S3).
fn describe(e: &Error, kind: FaultKind) -> String {
    match e.as_db_error() {
        Some(db) => format!("{kind} (SQLSTATE {})", db.code().code()),
        None => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_split_into_transient_and_permanent() {
        for (code, kind) in [
            ("40001", FaultKind::TransactionConflict),
            ("40P01", FaultKind::TransactionConflict),
            ("57014", FaultKind::Timeout),
            ("08006", FaultKind::Network),
            ("57P01", FaultKind::Network),
            ("53300", FaultKind::Throttled),
            ("XX000", FaultKind::ServerError),
        ] {
            assert_eq!(by_sqlstate(code), Fault::Transient(kind), "{code}");
        }
        for code in [
            "23505", "23514", "22P02", "22003", "42601", "42P01", "42501",
        ] {
            assert_eq!(by_sqlstate(code), Fault::Permanent(code.into()), "{code}");
        }
    }
}
