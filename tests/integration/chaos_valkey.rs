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
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use dedup_tests::{cloudevents_spec, credit_data};
use lambda_dedup::{Derived, ManualClock, Retention, Scope};
use lambda_dedup_engine::{Deduplicator, HandlerError, Plan};
use lambda_dedup_valkey::{ValkeyEffect, ValkeyStore};
use redis::AsyncCommands;

use crate::chaos_kill::{Process, Restartable};

/// A Valkey server this test owns: started, killed and started again on the same port and
/// data directory.
struct Server {
    bin: std::path::PathBuf,
    process: Process,
}

impl Server {
    fn init() -> Result<Self, String> {
        Ok(Self {
            bin: crate::chaos_kill::bin("DEDUP_VALKEY_BIN", "valkey")?,
            process: Process::new("valkey"),
        })
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.process.port)
    }

    async fn conn(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        redis::Client::open(self.url())?
            .get_multiplexed_async_connection()
            .await
    }
}

impl Restartable for Server {
    const NAME: &str = "Valkey";
    fn process(&mut self) -> &mut Process {
        &mut self.process
    }
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args([
            "--bind",
            "127.0.0.1",
            "--port",
            &self.process.port.to_string(),
        ])
        .arg("--dir")
        .arg(&self.process.data)
        .args(["--appendonly", "yes", "--appendfsync", "always"])
        .args(["--save", "", "--maxmemory-policy", "noeviction"]);
        cmd
    }
    /// It answers a `PING` (its append-only file loaded).
    async fn ready(&self) -> bool {
        match self.conn().await {
            Ok(mut conn) => redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .is_ok(),
            Err(_) => false,
        }
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
    let Some(mut server) = crate::chaos_kill::started(Server::init(), "valkey chaos").await else {
        return;
    };
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

    let mut conn = server.conn().await.expect("connect");
    let balances: BTreeMap<String, i64> = conn.hgetall("balances").await.expect("balances");
    let marks: Vec<String> = conn
        .keys(format!("{}*", lambda_dedup_valkey::DEFAULT_PREFIX))
        .await
        .expect("marks");
    crate::chaos_kill::check("valkey", &run, &balances, marks.len());
}

/// Issue 23, S6, S13: the leased flow's claims across a kill and restart. A claim held across
/// the restart still holds (fsynced before it was acknowledged); its owner completes it once
/// the connection is back, and a second instance then sees a duplicate. A claim whose lease
/// ran out while the server was down is taken over by the second instance; the first owner's
/// late completion is fenced and changes nothing.
#[tokio::test]
async fn valkey_chaos_claims_held_across_a_restart_are_fenced() {
    let Some(mut server) = crate::chaos_kill::started(Server::init(), "valkey chaos").await else {
        return;
    };
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
    // Its connection may need a few tries to come back: transient faults, as with it down.
    crate::chaos_kill::claims_across_a_restart((&a, &b), &clock, &mut server, &scope, 20).await;
}
