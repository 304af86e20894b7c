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

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dedup_tests::{cloudevents_spec, credit_data};
use lambda_dedup::{Derived, Retention};
use lambda_dedup_batch::{Deduplicator, HandlerError, Plan};
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

    let plan = |e: &Derived| -> Result<Plan<ValkeyEffect>, HandlerError> {
        let (account, amount) = credit_data(e)?;
        Ok(Plan::from(vec![ValkeyEffect::hincr_by(
            "balances", account, amount,
        )]))
    };
    let run = crate::chaos_kill::credits_through_a_kill(&instances, plan, &mut server).await;
    let (total, expected, settled_at_kill) = (run.total, &run.expected, run.settled_at_kill);

    let mut conn = server.conn().await;
    let balances: BTreeMap<String, i64> = conn.hgetall("balances").await.expect("balances");
    assert_eq!(
        &balances, expected,
        "each balance is the sum of its distinct events: 0 double effects, 0 lost"
    );
    let marks: Vec<String> = conn
        .keys(format!("{}*", lambda_dedup_valkey::DEFAULT_PREFIX))
        .await
        .expect("marks");
    assert_eq!(marks.len(), crate::chaos_kill::EVENTS, "one mark per event");
    assert!(
        run.applied <= crate::chaos_kill::EVENTS,
        "no acknowledged mark was lost by the kill: no event applied twice"
    );
    lambda_dedup_conformance::report(&format!(
        "valkey chaos: {total} deliveries of {} events, killed at {settled_at_kill} settled, \
         {} redeliveries, {} applied (the rest duplicates; an applied commit whose answer the kill \
         lost is a duplicate on redelivery); redelivered for: {:?}",
        crate::chaos_kill::EVENTS,
        run.retried,
        run.applied,
        run.reasons
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

impl crate::chaos_kill::Restartable for Server {
    fn kill(&mut self) {
        Server::kill(self)
    }
    async fn start(&mut self) {
        Server::start(self).await
    }
}
