//! A chaos run on the PostgreSQL store (issue 23): the server is killed (SIGKILL, the whole
//! process group: postmaster and backends) and restarted on the same port and data directory
//! while concurrent deliveries commit through the transactional flow; what failed is
//! redelivered, as SQS would. The run uses a server of its own, from the binaries `cargo xtask
//! test` names in `DEDUP_POSTGRES_BIN` (run as the `uid:gid` in `DEDUP_POSTGRES_RUN_AS` under
//! root, as PostgreSQL refuses root), so killing it disturbs no other test. Without them (plain
//! `cargo test`) it is skipped with a message.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use dedup_tests::{cloudevents_spec, credit_data};
use lambda_dedup::{Derived, ManualClock, Retention, Scope};
use lambda_dedup_engine::{Deduplicator, HandlerError, Plan};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};

use crate::chaos_kill::{Process, Restartable};

const RUN_AS: &str = "DEDUP_POSTGRES_RUN_AS";

/// A PostgreSQL server this test owns: initialised once, started, killed (the whole process
/// group: postmaster and backends) and started again on the same port and data directory.
struct Server {
    bin: std::path::PathBuf,
    run_as: Option<(u32, u32)>,
    process: Process,
}

impl Server {
    fn run(&self, program: &str) -> Command {
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
        let bin = crate::chaos_kill::bin("DEDUP_POSTGRES_BIN", "postgres")?;
        let run_as = match std::env::var(RUN_AS) {
            Ok(ids) => {
                let (uid, gid) = ids.split_once(':').expect("uid:gid");
                Some((uid.parse().expect("uid"), gid.parse().expect("gid")))
            }
            Err(_) => None,
        };
        let process = Process::new("pg");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&process.data, Some(uid), Some(gid)).expect("chown");
        }
        let this = Self {
            bin,
            run_as,
            process,
        };
        let out = this
            .run("initdb")
            .arg("-D")
            .arg(&this.process.data)
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
        format!(
            "postgresql://postgres@127.0.0.1:{}/postgres",
            self.process.port
        )
    }
}

impl Restartable for Server {
    const NAME: &str = "PostgreSQL";
    fn process(&mut self) -> &mut Process {
        &mut self.process
    }
    fn command(&self) -> Command {
        let mut cmd = self.run("postgres");
        cmd.arg("-D")
            .arg(&self.process.data)
            .args(["-h", "127.0.0.1", "-p", &self.process.port.to_string()])
            .args(["-k", "", "-c", "fsync=off", "-c", "max_connections=100"]);
        cmd
    }
    /// It answers a query (crash recovery done).
    async fn ready(&self) -> bool {
        match tokio_postgres::connect(&self.url(), tokio_postgres::NoTls).await {
            Ok((client, conn)) => {
                tokio::spawn(conn);
                client.simple_query("SELECT 1").await.is_ok()
            }
            Err(_) => false,
        }
    }
}

/// Issue 23, S5, S13: 6 instances commit 3 deliveries each of 60 credit events (batches of 5,
/// transactional flow, the credit a SQL statement in the mark's transaction) while the server
/// is killed and restarted; every failed delivery is redelivered until none is left. Each
/// balance is then the sum of its distinct events: no credit twice, none lost, and the pools
/// reconnected by themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_chaos_server_killed_and_restarted_mid_run_applies_each_event_once() {
    let Some(mut server) = crate::chaos_kill::started(Server::init(), "postgres chaos").await
    else {
        return;
    };
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
    let rows = client
        .query("SELECT count(*) FROM dedup_marks", &[])
        .await
        .expect("marks");
    let marks = usize::try_from(rows[0].get::<_, i64>(0)).expect("a count");
    crate::chaos_kill::check("postgres", &run, &balances, marks);
}

/// Issue 23, S6, S13: the leased flow's claims across a kill and restart. A claim held across
/// the restart still holds (the mark was committed before the kill); its owner completes it
/// once the pool reconnected, and a second instance then sees a duplicate. A claim whose
/// lease ran out while the server was down is taken over by the second instance; the first
/// owner's late completion is fenced and changes nothing.
#[tokio::test]
async fn postgres_chaos_claims_held_across_a_restart_are_fenced() {
    let Some(mut server) = crate::chaos_kill::started(Server::init(), "postgres chaos").await
    else {
        return;
    };
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
    // The pool reconnects by itself: the first call after the restart answers.
    crate::chaos_kill::claims_across_a_restart((&a, &b), &clock, &mut server, &scope, 0).await;
}
