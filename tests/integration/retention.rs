//! Retention and TTL (S9).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dedup_tests::{client, commit_with, get_item, mark_table, scope, unique};
use lambda_dedup::{Claim, Clock, Commit, DedupKey, ManualClock, RedeliveryHorizon, Retention};
use lambda_dedup_dynamodb::DynamoStore;

/// S9: a mark whose TTL has passed but that DynamoDB has not deleted yet (on real AWS that can take
/// days) counts as absent: `get` does not return it, and a new claim or commit takes it over.
#[tokio::test]
async fn s9_a_mark_past_its_ttl_still_in_the_table_counts_as_absent() {
    let client = client();
    let marks = mark_table(&client).await;
    // The store's clock runs a day ahead of the real one, so the local DynamoDB's own TTL sweep
    // (which uses real time) does not delete the mark while the store already sees it expired.
    let clock = Arc::new(ManualClock::new(
        SystemTime::now() + Duration::from_secs(86_400),
    ));
    let retention = Retention::unchecked(Duration::from_secs(60)).expect("retention");
    let store =
        DynamoStore::new(client.clone(), marks.clone(), retention).with_clock(clock.clone());

    for via_commit in [false, true] {
        let key = DedupKey::new(&scope(), "t", &["ttl", &unique("evt")]);
        assert_eq!(
            store
                .commit(lambda_dedup::CommitRequest {
                    key: &key,
                    fingerprint: None,
                    result: Some("old"),
                    effects: &[]
                })
                .await
                .expect("commit"),
            Commit::Applied
        );
        clock.advance(Duration::from_secs(61));

        let raw = get_item(&client, &marks, "pk", key.as_str()).await;
        assert!(raw.is_some(), "the expired mark is still stored");
        assert!(
            store.get(&key).await.expect("get").is_none(),
            "but reads as absent"
        );

        if via_commit {
            assert_eq!(
                commit_with(&store, &key, None, &[], "commit").await,
                Commit::Applied
            );
        } else {
            assert!(matches!(
                store.claim(&key, None, None).await.expect("claim"),
                Claim::Claimed(_)
            ));
        }
        let mark = store.get(&key).await.expect("get").expect("new mark");
        assert!(mark.is_live(clock.now()));
        assert_eq!(mark.result, None, "the old mark was replaced");
    }
}

/// S9: every mark carries its TTL in epoch seconds, retention after it was written.
#[tokio::test]
async fn s9_marks_carry_a_ttl_of_the_retention() {
    let client = client();
    let marks = mark_table(&client).await;
    let retention = Retention::unchecked(Duration::from_secs(7 * 86_400)).expect("retention");
    let store = DynamoStore::new(client.clone(), marks.clone(), retention);
    let key = DedupKey::new(&scope(), "t", &["ttl", &unique("evt")]);
    let before = SystemTime::now();
    commit_with(&store, &key, None, &[], "commit").await;
    let raw = get_item(&client, &marks, "pk", key.as_str())
        .await
        .expect("mark");
    let ttl: u64 = raw["expires_at"]
        .as_n()
        .expect("TTL is a number")
        .parse()
        .expect("epoch seconds");
    let expected = before
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("epoch")
        .as_secs()
        + 7 * 86_400;
    assert!(
        (expected..=expected + 5).contains(&ttl),
        "ttl {ttl}, expected about {expected}"
    );
}

/// S9: a retention that does not exceed the redelivery horizon is refused.
#[test]
fn s9_retention_shorter_than_the_redelivery_horizon_is_refused() {
    let horizon = RedeliveryHorizon {
        queue_retention: Duration::from_secs(4 * 86_400),
        max_receive_count: 5,
        visibility_timeout: Duration::from_secs(300),
        dlq_retention: Duration::from_secs(86_400),
        replay_window: Duration::from_secs(86_400),
    };
    assert_eq!(horizon.total(), Duration::from_secs(6 * 86_400 + 3000));
    let err =
        Retention::covering(Duration::from_secs(6 * 86_400), &horizon).expect_err("too short");
    assert!(err.to_string().contains("redelivery horizon"), "{err}");
    assert!(
        Retention::covering(Duration::from_secs(6 * 86_400 + 3000), &horizon).is_err(),
        "equal is not enough"
    );
    assert!(Retention::covering(Duration::from_secs(7 * 86_400), &horizon).is_ok());
}

/// A credit consumer on the local DynamoDB whose store's clock the test moves, and CloudEvents
/// credits of 5 to one account, each sent at a time of the test's choosing.
struct Timed {
    client: dedup_tests::Client,
    balances: String,
    clock: Arc<ManualClock>,
    dedup: lambda_dedup_engine::Deduplicator,
    consumer: &'static str,
    account: String,
}

impl Timed {
    async fn new(consumer: &'static str) -> Self {
        let client = client();
        let balances = dedup_tests::effect_table(&client, "account").await;
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        let marks = mark_table(&client).await;
        let store = DynamoStore::new(client.clone(), marks, dedup_tests::retention())
            .with_clock(clock.clone());
        let dedup =
            lambda_dedup_engine::Deduplicator::new(dedup_tests::cloudevents_spec(consumer), store);
        let account = format!("{}-a", unique(consumer));
        Self {
            client,
            balances,
            clock,
            dedup,
            consumer,
            account,
        }
    }

    /// Event `id`, its CloudEvents `time` being `time`.
    fn event(&self, id: &str, time: SystemTime) -> lambda_dedup::Message {
        lambda_dedup::Message {
            message_id: unique("m"),
            body: serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
                "id": id, "tenantid": "acme",
                "time": chrono::DateTime::<chrono::Utc>::from(time)
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "data": {"account": self.account, "amount": 5}})
            .to_string()
            .into_bytes(),
            ..lambda_dedup::Message::default()
        }
    }

    async fn apply(&self, m: &lambda_dedup::Message) -> lambda_dedup_engine::Outcome {
        let plan = dedup_tests::credit_plan(&self.balances);
        self.dedup.transactional(m, &plan).await
    }

    /// Whether `outcome` is a rejection for `reason`.
    fn rejected(
        outcome: &lambda_dedup_engine::Outcome,
        reason: lambda_dedup_engine::Reason,
    ) -> bool {
        matches!(outcome, lambda_dedup_engine::Outcome::Rejected { code, .. } if *code == reason)
    }

    async fn balance(&self) -> Option<i64> {
        dedup_tests::balance(&self.client, &self.balances, &self.account).await
    }
}

/// S10: an event whose own time (CloudEvents `time`) is older than the retention window is not
/// applied — its mark may be gone (here: expired but still in the table), so the table cannot
/// say whether it was handled — and ends rejected as `late_event`, for reconciliation. A fresh
/// event at the same moment is applied as usual.
#[tokio::test]
async fn s10_an_event_older_than_the_retention_is_not_applied() {
    use lambda_dedup_engine::{Outcome, Reason};
    let t = Timed::new("late").await;
    let old = t.event("e-old", t.clock.now());
    assert_eq!(t.apply(&old).await, Outcome::Applied);

    t.clock.advance(Duration::from_secs(3601)); // past the one-hour retention: the mark expired
    let late = t.apply(&old).await;
    assert!(Timed::rejected(&late, Reason::LateEvent), "{late:?}");
    // The rejection carries the event's key: what reconciliation sends on, underived again.
    let Outcome::Rejected { key, .. } = &late else {
        unreachable!("matched above")
    };
    let derived = dedup_tests::cloudevents_spec(t.consumer)
        .derive(&old)
        .expect("a key")
        .key;
    assert_eq!(key.as_ref(), Some(&derived));
    let fresh = t.event("e-new", t.clock.now());
    assert_eq!(t.apply(&fresh).await, Outcome::Applied);
    assert_eq!(
        t.balance().await,
        Some(10),
        "the late redelivery moved nothing"
    );
}

/// S10 for every time a producer can send: an event whose `time` is implausibly far in the future
/// (beyond the allowed clock skew) is not applied but goes to reconciliation
/// (`implausible_time`). Otherwise it would never be late: a replay after its mark expired
/// would be applied a second time (checked below with the store's clock past the retention).
/// An event a little ahead (clocks disagree) is applied as usual.
#[tokio::test]
async fn s10_an_event_from_the_far_future_is_not_applied() {
    use lambda_dedup_engine::{Outcome, Reason};
    let t = Timed::new("future").await;
    let far = t.event(
        "e-far",
        t.clock.now() + Duration::from_secs(10 * 365 * 86_400),
    );
    for _ in 0..2 {
        let outcome = t.apply(&far).await;
        assert!(
            Timed::rejected(&outcome, Reason::ImplausibleTime),
            "{outcome:?}"
        );
        // Even after the retention has passed, a replay of it is not applied.
        t.clock.advance(Duration::from_secs(3601));
    }
    let skewed = t.event("e-skewed", t.clock.now() + Duration::from_secs(60));
    assert_eq!(t.apply(&skewed).await, Outcome::Applied);
    assert_eq!(
        t.balance().await,
        Some(5),
        "only the event within the clock skew moved the balance"
    );
}
