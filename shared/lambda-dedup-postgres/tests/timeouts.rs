//! Every call of the store is bounded (issue 36.2): a claim waiting on a row lock another
//! session holds, or on a server that has stopped answering, answers within its limit with a
//! transient error, and a connection whose call was cut off mid-statement is never handed to
//! the next call. The server is the local PostgreSQL that `cargo xtask test` starts and names
//! in `DEDUP_POSTGRES_URL`; without it the tests are skipped, saying so.

use std::time::{Duration, Instant};

use lambda_dedup::{Claim, Commit, CommitRequest, DedupKey, MarkStore, Retention, StoreError};
use lambda_dedup_conformance::gate::Gate;
use lambda_dedup_postgres::{PgStore, SqlEffect, Timeouts, Tls};

const URL: &str = "DEDUP_POSTGRES_URL";
const HOW: &str = "`cargo xtask test -p lambda-dedup-postgres` starts PostgreSQL and sets it";

/// How long a test waits for a call before calling it hung: well past every bound below, so
/// that a call with no limit fails the test instead of hanging it.
const HUNG: Duration = Duration::from_secs(15);

fn retention() -> Retention {
    Retention::unchecked(Duration::from_secs(3600)).expect("retention")
}

/// Short limits, so the tests are quick: the lock's under the call's.
fn short() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(1),
        lock: Duration::from_millis(300),
        statement: Duration::from_secs(2),
        call: Duration::from_secs(3),
    }
}

/// A plain session of its own on the server, outside the store.
async fn session(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("a session of the test's own");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A store on a fresh marks table, created.
async fn store_on(config: tokio_postgres::Config, timeouts: Timeouts) -> (PgStore, String) {
    let table = lambda_dedup_conformance::unique("marks_t");
    let store = PgStore::new(config, Tls::Disabled, retention())
        .with_table(&table)
        .expect("table")
        .with_timeouts(timeouts);
    tokio::time::timeout(HUNG, store.create_table())
        .await
        .expect("not hung")
        .expect("marks table");
    (store, table)
}

/// Waits for `call`, failing the test if it hangs: how long it took, and its answer.
async fn timed<T>(call: impl std::future::Future<Output = T>) -> (Duration, T) {
    let start = Instant::now();
    let out = tokio::time::timeout(HUNG, call)
        .await
        .expect("the call answered (it had no time limit)");
    (start.elapsed(), out)
}

fn transient<T: std::fmt::Debug>(out: Result<T, StoreError>) {
    match out {
        Err(e) if e.is_retryable() => {}
        other => panic!("a transient error, not {other:?}"),
    }
}

/// `session` begins a transaction and takes `key`'s row lock in the mark table `marks`, which it
/// keeps until it rolls back.
async fn lock_row(session: &tokio_postgres::Client, marks: &str, key: &DedupKey) {
    session.batch_execute("BEGIN").await.expect("begin");
    session
        .query(
            &format!("SELECT key FROM \"{marks}\" WHERE key = $1 FOR UPDATE"),
            &[&key.as_str()],
        )
        .await
        .expect("row lock");
}

#[tokio::test]
async fn a_claim_on_a_row_locked_by_another_session_answers_within_the_bound_and_applies_once() {
    let Some(url) = lambda_dedup_conformance::server(URL, "postgres time limits", HOW) else {
        return;
    };
    let (store, marks) = store_on(url.parse().expect("url"), short()).await;
    let effects = lambda_dedup_conformance::unique("effects_t");
    let other = session(&url).await;
    other
        .batch_execute(&format!(
            "CREATE TABLE \"{effects}\" (id serial PRIMARY KEY, k text)"
        ))
        .await
        .expect("effects table");
    let key = DedupKey::from_stored(lambda_dedup_conformance::unique("k"));
    let effect =
        [SqlEffect::new(format!("INSERT INTO \"{effects}\" (k) VALUES ($1)")).bind(key.as_str())];
    let request = CommitRequest {
        key: &key,
        fingerprint: None,
        result: None,
        effects: &effect,
    };
    assert_eq!(
        store.commit(request).await.expect("first commit"),
        Commit::Applied
    );

    // Another session holds the mark's row lock, and keeps it.
    lock_row(&other, &marks, &key).await;

    let bound = short().call;
    let (took, claim) = timed(store.claim(&key, None, None)).await;
    assert!(
        took < bound,
        "the claim answered in {took:?}, over {bound:?}"
    );
    transient(claim);
    let (took, again) = timed(store.commit(request)).await;
    assert!(
        took < bound,
        "the commit answered in {took:?}, over {bound:?}"
    );
    transient(again);

    // The lock released, the redelivery finds the mark: applied once.
    other.batch_execute("ROLLBACK").await.expect("rollback");
    let (_, retry) = timed(store.commit(request)).await;
    assert!(matches!(retry, Ok(Commit::Seen(_))), "{retry:?}");
    let rows = other
        .query_one(&format!("SELECT count(*) FROM \"{effects}\""), &[])
        .await
        .expect("count");
    assert_eq!(rows.get::<_, i64>(0), 1, "nothing applied twice");
}

#[tokio::test]
async fn a_call_cancelled_mid_statement_never_returns_its_connection_to_the_pool() {
    let Some(url) = lambda_dedup_conformance::server(URL, "postgres time limits", HOW) else {
        return;
    };
    // Limits long enough that only the caller's cancellation cuts the claim off.
    let long = Timeouts {
        lock: Duration::from_secs(30),
        statement: Duration::from_secs(30),
        call: Duration::from_secs(60),
        ..short()
    };
    let (store, marks) = store_on(url.parse().expect("url"), long).await;
    let key = DedupKey::from_stored(lambda_dedup_conformance::unique("k"));
    let Claim::Claimed(lease) = store.claim(&key, None, None).await.expect("claim") else {
        panic!("a fresh key is claimed");
    };
    store.complete(&lease, None).await.expect("complete");
    let other = session(&url).await;
    lock_row(&other, &marks, &key).await;

    // The caller gives up on a claim waiting for the lock (as the runtime's deadline cut does).
    let cut = tokio::time::timeout(Duration::from_millis(300), store.claim(&key, None, None));
    assert!(cut.await.is_err(), "the claim was waiting on the lock");

    // The next call must not get the connection whose claim is still waiting on the server.
    let free = DedupKey::from_stored(lambda_dedup_conformance::unique("free"));
    let next = tokio::time::timeout(Duration::from_secs(2), store.get(&free)).await;
    assert!(
        matches!(next, Ok(Ok(None))),
        "the next call answered at once on a connection of its own: {next:?}"
    );
    other.batch_execute("ROLLBACK").await.expect("rollback");
}

#[tokio::test]
async fn a_frozen_server_is_answered_within_the_bound_and_the_pool_is_healthy_after_it_thaws() {
    let Some(url) = lambda_dedup_conformance::server(URL, "postgres time limits", HOW) else {
        return;
    };
    let direct: tokio_postgres::Config = url.parse().expect("url");
    let host = match direct.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        other => panic!("a TCP host in {URL}, not {other:?}"),
    };
    let port = direct.get_ports().first().copied().unwrap_or(5432);
    let gate = Gate::start(format!("{host}:{port}")).await.expect("gate");
    // The same server, user and database, through the gate (`host` and `port` add to a
    // configuration's lists, so a fresh one).
    let mut through = tokio_postgres::Config::new();
    through.host("127.0.0.1").port(gate.addr().port());
    if let Some(user) = direct.get_user() {
        through.user(user);
    }
    if let Some(password) = direct.get_password() {
        through.password(password);
    }
    if let Some(db) = direct.get_dbname() {
        through.dbname(db);
    }
    // The marks table made through the gate: a connection opened and kept in the pool.
    let (store, _) = store_on(through, short()).await;
    let key = DedupKey::from_stored(lambda_dedup_conformance::unique("k"));

    gate.freeze(true);
    let bound = short().call;
    // On the pooled connection: the statement is sent and never answered.
    let (took, frozen) = timed(store.claim(&key, None, None)).await;
    assert!(took < bound + Duration::from_millis(500), "{took:?}");
    transient(frozen);
    // On a new connection (the cut-off one was discarded): its startup is never answered.
    let (took, frozen) = timed(store.get(&key)).await;
    assert!(took < bound + Duration::from_millis(500), "{took:?}");
    transient(frozen);

    gate.freeze(false);
    let (_, claim) = timed(store.claim(&key, None, None)).await;
    let Ok(Claim::Claimed(lease)) = claim else {
        panic!("after the thaw the store answers: {claim:?}");
    };
    let (_, done) = timed(store.complete(&lease, None)).await;
    done.expect("complete");
    let (_, mark) = timed(store.get(&key)).await;
    assert!(mark.expect("get").is_some(), "the mark is there");
}
