//! A chaos run on the PostgreSQL store (issue 23): the server is killed (SIGKILL, the whole
//! process group: postmaster and backends) and restarted on the same port and data directory
//! while concurrent deliveries commit through the transactional flow; what failed is
//! redelivered, as SQS would. The run uses a server of its own, from the binaries `cargo xtask
//! test` names in `DEDUP_POSTGRES_BIN` (run as the `uid:gid` in `DEDUP_POSTGRES_RUN_AS` under
//! root, as PostgreSQL refuses root), so killing it disturbs no other test. Without them (plain
//! `cargo test`) it is skipped with a message.

use std::collections::{BTreeMap, VecDeque};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dedup_tests::{cloudevents_spec, credit, credit_data};
use lambda_dedup::{Derived, Message, Retention};
use lambda_dedup_batch::{Deduplicator, HandlerError, Outcome, Plan};
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

/// A small deterministic shuffle (no seed to chase).
fn shuffle<T>(items: &mut [T]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..items.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        items.swap(i, (x % (i as u64 + 1)) as usize);
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

    const EVENTS: usize = 60;
    const COPIES: usize = 3;
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let mut deliveries: Vec<Message> = Vec::new();
    for e in 0..EVENTS {
        let account = format!("acct-{}", e % 6);
        let amount = (e % 7 + 1) as i64;
        *expected.entry(account.clone()).or_default() += amount;
        for c in 0..COPIES {
            deliveries.push(credit(
                &format!("m{e}-{c}"),
                &format!("evt-{e}"),
                &account,
                amount,
            ));
        }
    }
    shuffle(&mut deliveries);
    let total = deliveries.len();
    let queue = Arc::new(Mutex::new(VecDeque::from(deliveries)));
    let (done, applied, retried) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
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
    let reasons = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut workers = Vec::new();
    for dedup in &instances {
        let (dedup, queue) = (dedup.clone(), queue.clone());
        let (done, applied, retried) = (done.clone(), applied.clone(), retried.clone());
        let reasons = reasons.clone();
        workers.push(tokio::spawn(async move {
            while done.load(Ordering::SeqCst) < total {
                assert!(
                    Instant::now() < deadline,
                    "deliveries still failing after 90 s: {} of {total} settled",
                    done.load(Ordering::SeqCst)
                );
                let batch: Vec<Message> = {
                    let mut q = queue.lock().expect("queue");
                    let n = q.len().min(5);
                    q.drain(..n).collect()
                };
                if batch.is_empty() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                let outcomes = dedup.transactional_batch(&batch, 5, plan).await;
                let mut again = Vec::new();
                for (msg, outcome) in batch.into_iter().zip(outcomes) {
                    match outcome {
                        Outcome::Applied => {
                            applied.fetch_add(1, Ordering::SeqCst);
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                        Outcome::Duplicate { .. } => {
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                        Outcome::Retry { reason } => {
                            reasons.lock().expect("reasons").insert(reason);
                            again.push(msg);
                        }
                        other => panic!("a delivery was not retried nor settled: {other:?}"),
                    }
                }
                if !again.is_empty() {
                    retried.fetch_add(again.len(), Ordering::SeqCst);
                    queue.lock().expect("queue").extend(again);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        }));
    }

    // Mid-run: a third settled, then SIGKILL, a pause with the server down, a restart.
    while done.load(Ordering::SeqCst) < total / 3 {
        assert!(
            Instant::now() < deadline,
            "a third of the deliveries did not settle within 90 s, before any kill"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill();
    let settled_at_kill = done.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.start().await;
    for w in workers {
        // A worker stuck in a statement (a lock never released) fails the run, not hangs it.
        tokio::time::timeout_at((deadline + Duration::from_secs(10)).into(), w)
            .await
            .expect("deliveries still hanging after 100 s")
            .expect("a worker");
    }
    assert!(
        settled_at_kill < total,
        "the kill came mid-run ({settled_at_kill} of {total} settled)"
    );
    assert!(
        retried.load(Ordering::SeqCst) > 0,
        "the kill failed some deliveries, which were redelivered"
    );

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
        balances, expected,
        "each balance is the sum of its distinct events: 0 double effects, 0 lost"
    );
    let rows = client
        .query("SELECT count(*) FROM dedup_marks", &[])
        .await
        .expect("marks");
    assert_eq!(
        rows[0].get::<_, i64>(0),
        EVENTS as i64,
        "one mark per event"
    );
    assert!(applied.load(Ordering::SeqCst) <= EVENTS);
    lambda_dedup_conformance::report(&format!(
        "postgres chaos: {total} deliveries of {EVENTS} events, killed at {settled_at_kill} settled, \
         {} redeliveries, {} applied (the rest duplicates; an applied commit whose answer the kill \
         lost is a duplicate on redelivery); redelivered for: {:?}",
        retried.load(Ordering::SeqCst),
        applied.load(Ordering::SeqCst),
        reasons.lock().expect("reasons")
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
