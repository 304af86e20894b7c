//! The PostgreSQL store beyond the conformance suite (which runs in the store's own crate,
//! `tests/conformance.rs`): many stores at once, the engine's flows on it, what is the server's
//! own. On a real server: the one `cargo xtask test` starts (PostgreSQL 16 from the `pgserver` wheel) and
//! names in `DEDUP_POSTGRES_URL`; without it (plain `cargo test`) every case is skipped with a message.

use std::sync::Arc;
use std::time::Duration;

use lambda_dedup::{ManualClock, MarkStore, Retention};
use lambda_dedup_conformance::{Effects, unique};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};

/// The variable that names the server, and how to have one.
const URL: &str = "DEDUP_POSTGRES_URL";
const HOW: &str = "`cargo xtask test -p dedup-tests -- conformance` starts PostgreSQL and sets it";

#[path = "../../shared/lambda-dedup-postgres/tests/effects/mod.rs"]
mod effects;
use effects::{Sql, t};

// The conformance suite itself runs in the store's own crate (`tests/conformance.rs`), where
// `cargo xtask mutants postgres` judges each mutant by it; here, what goes beyond it.

/// Beyond the suite: many processes at once. Each store here has its own connections, as
/// separate Lambda instances would.
mod concurrency {
    use super::*;
    use lambda_dedup::{DedupKey, Scope};

    pub(super) async fn stores(n: usize) -> Option<(Vec<PgStore>, tokio_postgres::Client, String)> {
        let url = lambda_dedup_conformance::server(URL, "postgres concurrency", HOW)?;
        let table = unique("marks");
        let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
        let stores: Vec<PgStore> = (0..n)
            .map(|_| {
                PgStore::from_url(&url, Tls::Disabled, retention)
                    .expect("url")
                    .with_table(&table)
                    .expect("table")
                    .with_max_connections(4)
            })
            .collect();
        stores[0].create_table().await.expect("marks table");
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        let balances = unique("balances");
        client
            .batch_execute(&format!(
                "CREATE TABLE {} (account text PRIMARY KEY, doc jsonb NOT NULL)",
                t(&balances)
            ))
            .await
            .expect("balances");
        Some((stores, client, balances))
    }

    fn key() -> DedupKey {
        lambda_dedup_conformance::unique_key(&Scope::new("postgres", "concurrency").expect("scope"))
    }

    /// S4, S5: 8 instances × 8 concurrent commits of one event crediting one account: exactly
    /// one applies, the balance moves once, every other sees the event (or is told to retry).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_concurrent_commits_of_one_key_apply_once() {
        let Some((stores, client, balances)) = stores(8).await else {
            return;
        };
        let effects = [Sql::credit(&balances, "acct-1", 7)];
        let applied = lambda_dedup_conformance::commits_at_once(&stores, &key(), &effects, 8)
            .await
            .won;
        assert_eq!(applied, 1, "exactly one commit applies");
        let rows = client
            .query(
                &format!(
                    "SELECT (doc->>'balance')::bigint FROM {} WHERE account = 'acct-1'",
                    t(&balances)
                ),
                &[],
            )
            .await
            .expect("read");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get::<_, i64>(0), 7, "credited once");
    }

    /// S4: 8 instances × 8 concurrent claims of one key: one wins, the rest see it in progress.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_concurrent_claims_of_one_key_have_one_winner() {
        let Some((stores, _client, _)) = stores(8).await else {
            return;
        };
        let won = lambda_dedup_conformance::claims_at_once(&stores, &key(), 8)
            .await
            .won;
        assert_eq!(won, 1, "exactly one claim wins");
    }
}

/// The flows are store-agnostic: the transactional batch flow of `lambda-dedup-engine` on the
/// PostgreSQL store, with SQL effects, as a function would run it.
mod flows {
    use super::*;
    use dedup_tests::{cloudevents_spec, credit_data};
    use lambda_dedup::Derived;
    use lambda_dedup_engine::{Deduplicator, HandlerError, Plan};

    /// S5, S12, S15: one batch, one transaction: the goods apply, a duplicate within the batch
    /// is a duplicate, the event whose effect PostgreSQL refuses (a text balance) is rejected
    /// alone, and a second delivery of the whole batch changes nothing.
    #[tokio::test]
    async fn postgres_transactional_batch_flow_judges_each_event_alone() {
        let Some((stores, client, balances)) = super::concurrency::stores(1).await else {
            return;
        };
        client
            .execute(
                &format!("INSERT INTO {} (account, doc) VALUES ('poisoned', '{{\"balance\": \"text\"}}')", t(&balances)),
                &[],
            )
            .await
            .expect("seed");
        let dedup = Deduplicator::new(cloudevents_spec("postgres"), stores[0].clone());
        let plan = |e: &Derived| -> Result<Plan<SqlEffect>, HandlerError> {
            let (account, amount) = credit_data(e)?;
            Ok(Plan::from(vec![Sql::credit(&balances, account, amount)]))
        };
        dedup_tests::poisoned_batch_judged_alone(&dedup, plan).await;
        let balance = |account: &'static str| {
            let client = &client;
            let sql = format!(
                "SELECT (doc->>'balance')::bigint FROM {} WHERE account = $1",
                t(&balances)
            );
            async move {
                let rows = client.query(&sql, &[&account]).await.expect("read");
                rows.first().map(|r| r.get::<_, i64>(0))
            }
        };
        assert_eq!(balance("a1").await, Some(5));
        assert_eq!(balance("a2").await, Some(2));
    }
}

/// The sweep ([`PgStore::sweep`]) on the real server: PostgreSQL has no TTL, so the sweep is
/// what DynamoDB's TTL deletion is for the DynamoDB store (S9).
mod sweep {
    use super::*;
    use lambda_dedup::{Claim, Commit, CommitRequest, DedupKey, Scope};
    use std::time::SystemTime;

    fn key(name: &str) -> DedupKey {
        DedupKey::new(
            &Scope::new("postgres", "sweep").expect("scope"),
            "acme",
            &[&unique(name)],
        )
    }

    /// S9: marks past their retention are deleted, whether completed or claims abandoned in
    /// progress; marks within it stay, completed or in progress; the bound is kept; and an
    /// event whose mark was swept is applied again, as after DynamoDB's TTL deletion.
    #[tokio::test]
    async fn postgres_sweep_deletes_expired_marks_only_and_a_swept_event_applies_again() {
        let Some((stores, client, balances)) = super::concurrency::stores(1).await else {
            return;
        };
        let url = std::env::var(URL).expect("checked by stores");
        let retention = Retention::unchecked(Duration::from_secs(3600)).expect("retention");
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        let marks = unique("marks");
        let store = PgStore::from_url(&url, Tls::Disabled, retention)
            .expect("url")
            .with_table(&marks)
            .expect("table")
            .with_lease(Duration::from_secs(30))
            .with_clock(clock.clone());
        store.create_table().await.expect("marks table");
        drop(stores);
        let credit = [Sql::credit(&balances, "acct", 5)];
        let commit = |k: &DedupKey| {
            let (store, effects, k) = (&store, &credit, k.clone());
            async move {
                store
                    .commit(CommitRequest {
                        key: &k,
                        fingerprint: None,
                        result: Some("done"),
                        effects,
                    })
                    .await
                    .expect("commit")
            }
        };
        let (old_done, old_claim) = (key("old-done"), key("old-claim"));
        assert_eq!(commit(&old_done).await, Commit::Applied);
        assert!(matches!(
            store.claim(&old_claim, None, None).await.expect("claim"),
            Claim::Claimed(_)
        ));
        // Past the retention of the first two (the claim's lease long over: abandoned).
        clock.advance(Duration::from_secs(3600 + 2));
        let (new_done, new_claim) = (key("new-done"), key("new-claim"));
        assert_eq!(commit(&new_done).await, Commit::Applied);
        assert!(matches!(
            store.claim(&new_claim, None, None).await.expect("claim"),
            Claim::Claimed(_)
        ));
        let keys = || {
            let (client, sql) = (
                &client,
                format!("SELECT key FROM {} ORDER BY key", t(&marks)),
            );
            async move {
                let rows = client.query(&sql, &[]).await.expect("read marks");
                rows.iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<Vec<_>>()
            }
        };
        let sorted = |ks: &[&DedupKey]| {
            let mut v: Vec<String> = ks.iter().map(|k| k.as_str().to_owned()).collect();
            v.sort();
            v
        };
        assert_eq!(
            keys().await,
            sorted(&[&old_done, &old_claim, &new_done, &new_claim])
        );
        assert_eq!(store.sweep(1).await.expect("sweep"), 1, "the bound is kept");
        assert_eq!(
            store.sweep(100).await.expect("sweep"),
            1,
            "the other expired mark"
        );
        assert_eq!(
            store.sweep(100).await.expect("sweep"),
            0,
            "nothing more is expired"
        );
        assert_eq!(
            keys().await,
            sorted(&[&new_done, &new_claim]),
            "the live marks are kept"
        );
        // A swept event is new again (S9): its effect applies a second time, by design.
        assert_eq!(commit(&old_done).await, Commit::Applied);
        assert!(matches!(
            store.claim(&old_claim, None, None).await.expect("claim"),
            Claim::Claimed(_)
        ));
        // The live ones are still judged: a duplicate, and a claim in progress.
        assert!(matches!(commit(&new_done).await, Commit::Seen(_)));
        assert!(matches!(
            store.claim(&new_claim, None, None).await.expect("claim"),
            Claim::Seen(_)
        ));
        let rows = client
            .query(
                &format!(
                    "SELECT (doc->>'balance')::bigint FROM {} WHERE account = 'acct'",
                    t(&balances)
                ),
                &[],
            )
            .await
            .expect("balance");
        assert_eq!(
            rows[0].get::<_, i64>(0),
            15,
            "old-done twice, new-done once"
        );
    }
}
