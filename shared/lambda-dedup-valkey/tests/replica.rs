//! Replication waits with a replica that answers: a replica of this test's own (the binary
//! `cargo xtask test` names in `DEDUP_VALKEY_BIN`) following the server named in
//! `DEDUP_VALKEY_URL`. `tests/server.rs` shows a write short of its replicas is a transient
//! error; here a write every wanted replica acknowledged is the write's own answer, not an
//! error (the count compared is "fewer than wanted", not "at most wanted"). Without either
//! variable the test is skipped, saying so.

use std::time::{Duration, Instant};

use lambda_dedup::{Claim, MarkStore, Retention, Scope};
use lambda_dedup_valkey::ValkeyStore;

mod support;
use support::Server;

const HOW: &str = "`cargo xtask test -p lambda-dedup-valkey` starts Valkey and sets it";

/// A replica of `primary` (`host:port`) on a free port, once it says its link is up.
async fn replica(bin: &str, primary: &str) -> Server {
    let (host, primary_port) = primary.rsplit_once(':').expect("host:port");
    let replica = Server::start(bin, "valkey_replica", |c, _| {
        c.args(["--replicaof", host, primary_port]);
    });
    let client = redis::Client::open(replica.url()).expect("url");
    let start = Instant::now();
    loop {
        let info: Option<String> = match client.get_multiplexed_async_connection().await {
            Ok(mut conn) => redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut conn)
                .await
                .ok(),
            Err(_) => None,
        };
        if info
            .as_deref()
            .is_some_and(|i| i.contains("master_link_status:up"))
        {
            return replica;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the replica did not follow: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_write_every_wanted_replica_acknowledged_is_its_own_answer() {
    let Some(url) = lambda_dedup_conformance::server("DEDUP_VALKEY_URL", "valkey replica", HOW)
    else {
        return;
    };
    let Some(bin) = lambda_dedup_conformance::server("DEDUP_VALKEY_BIN", "valkey replica", HOW)
    else {
        return;
    };
    let primary = url
        .strip_prefix("redis://")
        .expect("a redis:// URL")
        .trim_end_matches('/');
    let _replica = replica(&bin, primary).await;
    let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
    let store = ValkeyStore::from_url(&url, retention)
        .expect("url")
        .with_prefix(&format!("{}:", lambda_dedup_conformance::unique("replica")))
        .expect("prefix")
        .with_replicas(1, Duration::from_secs(2));
    let key =
        lambda_dedup_conformance::unique_key(&Scope::new("valkey", "replica").expect("scope"));
    let claimed = store.claim(&key, None, None).await;
    assert!(
        matches!(claimed, Ok(Claim::Claimed(_))),
        "acknowledged by its one replica: {claimed:?}"
    );
    assert!(store.get(&key).await.expect("get").is_some());
}
