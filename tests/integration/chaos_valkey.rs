//! A chaos run on the Valkey store (issue 23): the server is killed (SIGKILL) and restarted on
//! the same port and data directory while concurrent deliveries commit through the
//! transactional flow; what failed is redelivered, as SQS would. The server runs with the
//! settings the store's documentation asks for (`appendonly yes`, `appendfsync always`,
//! `maxmemory-policy noeviction`), so what it acknowledged before the kill is there after the
//! restart. (Run with `appendonly no`, both tests fail: balances short of their events, a held
//! claim gone. A SIGKILL shows the AOF is needed; what `appendfsync always` adds over
//! `everysec`, surviving the loss of power, a process kill cannot show.) The run uses a server of its own, from the binary `cargo xtask test` names in
//! `DEDUP_VALKEY_BIN`, so killing it disturbs no other test. Without it (plain `cargo test`)
//! it is skipped with a message.

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
use lambda_dedup_valkey::{ValkeyEffect, ValkeyStore};
use redis::AsyncCommands;

const BIN: &str = "DEDUP_VALKEY_BIN";

/// A Valkey server this test owns: started, killed and started again on the same port and
/// data directory; killed and removed when dropped.
struct Server {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Server {
    fn init() -> Result<Self, String> {
        let bin = PathBuf::from(std::env::var(BIN).map_err(|_| {
            format!("{BIN} is not set; `cargo xtask test -p dedup-tests -- valkey` sets it")
        })?);
        let data = std::env::temp_dir().join(format!(
            "lambda-dedup-valkey-chaos-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&data).expect("data directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Ok(Self {
            bin,
            data,
            port,
            child: None,
        })
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server and waits until it answers (its append-only file loaded).
    async fn start(&mut self) {
        let started = Instant::now();
        loop {
            let child = Command::new(&self.bin)
                .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
                .arg("--dir")
                .arg(&self.data)
                .args([
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                ])
                .args(["--maxmemory-policy", "noeviction"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("valkey-server");
            self.child = Some(child);
            while started.elapsed() < Duration::from_secs(60) {
                if let Ok(client) = redis::Client::open(self.url())
                    && let Ok(mut conn) = client.get_multiplexed_async_connection().await
                    && redis::cmd("PING")
                        .query_async::<String>(&mut conn)
                        .await
                        .is_ok()
                {
                    return;
                }
                if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                    break; // it exited (e.g. the port not yet free): start it again
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "Valkey did not come back within 60 s"
            );
        }
    }

    /// SIGKILL: no shutdown, no final write of anything.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect")
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
/// transactional flow, the credit an `HINCRBY` in the mark's script) while the server is
/// killed and restarted; every failed delivery is redelivered until none is left. Each balance
/// is then the sum of its distinct events (no credit twice, none lost), there is one mark per
/// event, and no event was applied twice: a mark acknowledged before the kill was still there
/// after it (were it lost, its event would be applied again on redelivery, counted here).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn valkey_chaos_server_killed_and_restarted_mid_run_applies_each_event_once() {
    let mut server = match Server::init() {
        Ok(s) => s,
        Err(why) => {
            lambda_dedup_conformance::report(&format!("valkey chaos skipped: {why}"));
            return;
        }
    };
    server.start().await;
    let url = server.url();
    let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
    let instances: Vec<Arc<Deduplicator<ValkeyEffect>>> = (0..6)
        .map(|_| {
            let store = ValkeyStore::from_url(&url, retention).expect("url");
            Arc::new(Deduplicator::new(cloudevents_spec("valkey-chaos"), store))
        })
        .collect();

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
    let plan = |e: &Derived| -> Result<Plan<ValkeyEffect>, HandlerError> {
        let (account, amount) = credit_data(e)?;
        Ok(Plan::from(vec![ValkeyEffect::hincr_by(
            "balances", account, amount,
        )]))
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

    let mut conn = server.conn().await;
    let balances: BTreeMap<String, i64> = conn.hgetall("balances").await.expect("balances");
    assert_eq!(
        balances, expected,
        "each balance is the sum of its distinct events: 0 double effects, 0 lost"
    );
    let marks: Vec<String> = conn
        .keys(format!("{}*", lambda_dedup_valkey::DEFAULT_PREFIX))
        .await
        .expect("marks");
    assert_eq!(marks.len(), EVENTS, "one mark per event");
    assert!(
        applied.load(Ordering::SeqCst) <= EVENTS,
        "no acknowledged mark was lost by the kill: no event applied twice"
    );
    lambda_dedup_conformance::report(&format!(
        "valkey chaos: {total} deliveries of {EVENTS} events, killed at {settled_at_kill} settled, \
         {} redeliveries, {} applied (the rest duplicates; an applied commit whose answer the kill \
         lost is a duplicate on redelivery); redelivered for: {:?}",
        retried.load(Ordering::SeqCst),
        applied.load(Ordering::SeqCst),
        reasons.lock().expect("reasons")
    ));
}

/// Issue 23, S6, S13: the leased flow's claims across a kill and restart. A claim held across
/// the restart still holds (fsynced before it was acknowledged); its owner completes it once
/// the connection is back, and a second instance then sees a duplicate. A claim whose lease
/// ran out while the server was down is taken over by the second instance; the first owner's
/// late completion is fenced and changes nothing.
#[tokio::test]
async fn valkey_chaos_claims_held_across_a_restart_are_fenced() {
    use lambda_dedup::{Claim, DedupKey, ManualClock, MarkStore, Scope, Seen, StoreError};
    let mut server = match Server::init() {
        Ok(s) => s,
        Err(why) => {
            lambda_dedup_conformance::report(&format!("valkey chaos skipped: {why}"));
            return;
        }
    };
    server.start().await;
    let url = server.url();
    let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
    let clock = Arc::new(ManualClock::new(std::time::SystemTime::now()));
    let instance = || {
        ValkeyStore::from_url(&url, retention)
            .expect("url")
            .with_lease(Duration::from_secs(30))
            .with_clock(clock.clone())
    };
    let (a, b) = (instance(), instance());
    let scope = Scope::new("valkey", "chaos-leased").expect("scope");
    let (held, lapsed) = (
        DedupKey::new(&scope, "acme", &["held"]),
        DedupKey::new(&scope, "acme", &["lapsed"]),
    );
    let claim = |store: &ValkeyStore, k: &DedupKey| {
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
    let down = claim(&b, &held).await;
    assert!(
        matches!(&down, Err(e) if e.is_retryable()),
        "with the server down a claim is a transient fault, never a decision: {down:?}"
    );
    server.start().await;

    // The held claim survived the restart: b sees it in progress (its connection may need a
    // try to come back: a transient fault, as with the server down).
    let mut seen = claim(&b, &held).await;
    for _ in 0..20 {
        if seen.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = claim(&b, &held).await;
    }
    assert!(
        matches!(seen, Ok(Claim::Seen(Seen::InProgress { .. }))),
        "a claim held across the restart still holds: {seen:?}"
    );
    let mut completed = a.complete(&held_lease, Some("sent")).await;
    for _ in 0..20 {
        if completed.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        completed = a.complete(&held_lease, Some("sent")).await;
    }
    completed.expect("the owner completes after the restart");
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
