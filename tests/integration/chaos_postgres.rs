//! A chaos run on the PostgreSQL store (issue 23): the server is killed (SIGKILL, the whole
//! process group: postmaster and backends) and restarted on the same port and data directory
//! while concurrent deliveries commit through the transactional flow; what failed is
//! redelivered, as SQS would. The run uses a server of its own, from the binaries `cargo xtask
//! test` names in `DEDUP_POSTGRES_BIN` (run as the `uid:gid` in `DEDUP_POSTGRES_RUN_AS` under
//! root, as PostgreSQL refuses root), so killing it disturbs no other test. Without them (plain
//! `cargo test`) it is skipped with a message.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dedup_tests::{cloudevents_spec, credit_data};
use lambda_dedup::{Derived, Retention};
use lambda_dedup_batch::{Deduplicator, HandlerError, Plan};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};

const BIN: &str = "DEDUP_POSTGRES_BIN";
const RUN_AS: &str = "DEDUP_POSTGRES_RUN_AS";

/// A PostgreSQL server this test owns: initialised once, started, killed and started again
/// on the same port and data directory; killed and removed when dropped.
struct Server {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    run_as: Option<(u32, u32)>,
    child: Option<Child>,
}

impl Server {
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut cmd = match self.run_as {
            Some((uid, gid)) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .args(["--clear-groups", "--"])
                    .arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.env("LC_ALL", "C");
        cmd
    }

    fn init() -> Result<Self, String> {
        let bin = PathBuf::from(std::env::var(BIN).map_err(|_| {
            format!("{BIN} is not set; `cargo xtask test -p dedup-tests -- postgres` sets it")
        })?);
        let run_as = match std::env::var(RUN_AS) {
            Ok(ids) => {
                let (uid, gid) = ids.split_once(':').expect("uid:gid");
                Some((uid.parse().expect("uid"), gid.parse().expect("gid")))
            }
            Err(_) => None,
        };
        let data = std::env::temp_dir().join(format!(
            "lambda-dedup-pg-chaos-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&data).expect("data directory");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&data, Some(uid), Some(gid)).expect("chown");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let this = Self {
            bin,
            data,
            port,
            run_as,
            child: None,
        };
        let out = this
            .command("initdb")
            .arg("-D")
            .arg(&this.data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .arg("--no-instructions")
            .output()
            .expect("initdb");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(this)
    }

    fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server and waits until it answers a query (crash recovery done).
    async fn start(&mut self) {
        let started = Instant::now();
        loop {
            let child = self
                .command("postgres")
                .arg("-D")
                .arg(&self.data)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-k", ""])
                .args(["-c", "fsync=off", "-c", "max_connections=100"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("postgres");
            self.child = Some(child);
            while started.elapsed() < Duration::from_secs(60) {
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&self.url(), tokio_postgres::NoTls).await
                {
                    tokio::spawn(conn);
                    if client.simple_query("SELECT 1").await.is_ok() {
                        return;
                    }
                }
                if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                    break; // it exited (e.g. the port not yet free): start it again
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "PostgreSQL did not come back within 60 s"
            );
        }
    }

    /// SIGKILL to the server's process group: the postmaster and every backend at once.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// Issue 23, S5, S13: 6 instances commit 3 deliveries each of 60 credit events (batches of 5,
/// transactional flow, the credit a SQL statement in the mark's transaction) while the server
/// is killed and restarted; every failed delivery is redelivered until none is left. Each
/// balance is then the sum of its distinct events: no credit twice, none lost, and the pools
/// reconnected by themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_chaos_server_killed_and_restarted_mid_run_applies_each_event_once() {
    let mut server = match Server::init() {
        Ok(s) => s,
        Err(why) => {
            lambda_dedup_conformance::report(&format!("postgres chaos skipped: {why}"));
            return;
        }
    };
    server.start().await;
    let url = server.url();
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let conn = tokio::spawn(conn);
    client
        .batch_execute("CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL)")
        .await
        .expect("balances");
    drop(client);
    let _ = conn.await;

    let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
    let instances: Vec<Arc<Deduplicator<SqlEffect>>> = (0..6)
        .map(|_| {
            let store = PgStore::from_url(&url, Tls::Disabled, retention)
                .expect("url")
                .with_max_connections(2);
            Arc::new(Deduplicator::new(cloudevents_spec("pg-chaos"), store))
        })
        .collect();
    let marks = PgStore::from_url(&url, Tls::Disabled, retention).expect("url");
    marks.create_table().await.expect("marks table");

    let plan = |e: &Derived| -> Result<Plan<SqlEffect>, HandlerError> {
        let (account, amount) = credit_data(e)?;
        Ok(Plan::from(vec![
            SqlEffect::new(
                "INSERT INTO balances (account, balance) VALUES ($1, $2) ON CONFLICT (account) \
                 DO UPDATE SET balance = balances.balance + EXCLUDED.balance",
            )
            .bind(account)
            .bind(amount),
        ]))
    };
    let run = crate::chaos_kill::credits_through_a_kill(&instances, plan, &mut server).await;
    let (total, expected, settled_at_kill) = (run.total, &run.expected, run.settled_at_kill);

    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT account, balance FROM balances ORDER BY account",
            &[],
        )
        .await
        .expect("balances");
    let balances: BTreeMap<String, i64> = rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
        .collect();
    assert_eq!(
        &balances, expected,
        "each balance is the sum of its distinct events: 0 double effects, 0 lost"
    );
    let rows = client
        .query("SELECT count(*) FROM dedup_marks", &[])
        .await
        .expect("marks");
    assert_eq!(
        rows[0].get::<_, i64>(0),
        crate::chaos_kill::EVENTS as i64,
        "one mark per event"
    );
    assert!(run.applied <= crate::chaos_kill::EVENTS);
    lambda_dedup_conformance::report(&format!(
        "postgres chaos: {total} deliveries of {} events, killed at {settled_at_kill} settled, \
         {} redeliveries, {} applied (the rest duplicates; an applied commit whose answer the kill \
         lost is a duplicate on redelivery); redelivered for: {:?}",
        crate::chaos_kill::EVENTS,
        run.retried,
        run.applied,
        run.reasons
    ));
}

/// Issue 23, S6, S13: the leased flow's claims across a kill and restart. A claim held across
/// the restart still holds (the mark was committed before the kill); its owner completes it
/// once the pool reconnected, and a second instance then sees a duplicate. A claim whose
/// lease ran out while the server was down is taken over by the second instance; the first
/// owner's late completion is fenced and changes nothing.
#[tokio::test]
async fn postgres_chaos_claims_held_across_a_restart_are_fenced() {
    use lambda_dedup::{Claim, DedupKey, ManualClock, MarkStore, Scope, Seen, StoreError};
    let mut server = match Server::init() {
        Ok(s) => s,
        Err(why) => {
            lambda_dedup_conformance::report(&format!("postgres chaos skipped: {why}"));
            return;
        }
    };
    server.start().await;
    let url = server.url();
    let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
    let clock = Arc::new(ManualClock::new(std::time::SystemTime::now()));
    let instance = || {
        PgStore::from_url(&url, Tls::Disabled, retention)
            .expect("url")
            .with_lease(Duration::from_secs(30))
            .with_clock(clock.clone())
    };
    let (a, b) = (instance(), instance());
    a.create_table().await.expect("marks table");
    let scope = Scope::new("postgres", "chaos-leased").expect("scope");
    let (held, lapsed) = (
        DedupKey::new(&scope, "acme", &["held"]),
        DedupKey::new(&scope, "acme", &["lapsed"]),
    );
    let claim = |store: &PgStore, k: &DedupKey| {
        let (store, k) = (store.clone(), k.clone());
        async move { store.claim(&k, None, None).await }
    };
    let Claim::Claimed(held_lease) = claim(&a, &held).await.expect("claim") else {
        panic!("a first claim wins");
    };
    let Claim::Claimed(lapsed_lease) = claim(&a, &lapsed).await.expect("claim") else {
        panic!("a first claim wins");
    };

    server.kill();
    assert!(
        claim(&b, &held).await.is_err(),
        "with the server down a claim is a transient fault, never a decision"
    );
    server.start().await;

    // The held claim survived the restart: b sees it in progress.
    assert!(
        matches!(
            claim(&b, &held).await.expect("claim after restart"),
            Claim::Seen(Seen::InProgress { .. })
        ),
        "a claim held across the restart still holds"
    );
    // a's pool reconnects; its completion lands; b then sees a duplicate.
    a.complete(&held_lease, Some("sent"))
        .await
        .expect("the owner completes after the restart");
    assert!(matches!(
        claim(&b, &held).await.expect("claim"),
        Claim::Seen(Seen::Duplicate(_))
    ));

    // The other lease ran out (past 30 s): b takes over; a's late completion is fenced.
    clock.advance(Duration::from_secs(31));
    let Claim::Claimed(takeover) = claim(&b, &lapsed).await.expect("claim") else {
        panic!("a lapsed lease is taken over");
    };
    assert!(
        matches!(
            a.complete(&lapsed_lease, Some("late")).await,
            Err(StoreError::Fenced { .. })
        ),
        "the first owner's late completion is fenced"
    );
    b.complete(&takeover, Some("sent"))
        .await
        .expect("the new owner completes");
    let mark = b.get(&lapsed).await.expect("get").expect("a mark");
    assert_eq!(
        mark.result.as_deref(),
        Some("sent"),
        "the new owner's result stands"
    );
}

impl crate::chaos_kill::Restartable for Server {
    fn kill(&mut self) {
        Server::kill(self)
    }
    async fn start(&mut self) {
        Server::start(self).await
    }
}
