//! Retention and TTL (S9).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dedup_tests::{client, get_item, mark_table, scope, unique};
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
                store
                    .commit(lambda_dedup::CommitRequest {
                        key: &key,
                        fingerprint: None,
                        result: None,
                        effects: &[]
                    })
                    .await
                    .expect("commit"),
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
    store
        .commit(lambda_dedup::CommitRequest {
            key: &key,
            fingerprint: None,
            result: None,
            effects: &[],
        })
        .await
        .expect("commit");
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

/// S10: an event whose own time (CloudEvents `time`) is older than the retention window is not
/// applied — its mark may be gone (here: expired but still in the table), so the table cannot
/// say whether it was handled — and ends rejected as `late_event`, for reconciliation. A fresh
/// event at the same moment is applied as usual.
#[tokio::test]
async fn s10_an_event_older_than_the_retention_is_not_applied() {
    use dedup_tests::{balance, cloudevents_spec, credit_plan, effect_table, retention};
    use lambda_dedup::Message;
    use lambda_dedup_batch::{Deduplicator, Outcome};

    let client = client();
    let balances = effect_table(&client, "account").await;
    let start = SystemTime::now();
    let clock = Arc::new(ManualClock::new(start));
    let store = DynamoStore::new(client.clone(), mark_table(&client).await, retention())
        .with_clock(clock.clone());
    let dedup = Deduplicator::new(cloudevents_spec("late"), store);
    let run = unique("late");
    let event = |id: &str, time: SystemTime| Message {
        message_id: unique("m"),
        body: serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
            "id": id, "tenantid": "acme",
            "time": chrono::DateTime::<chrono::Utc>::from(time)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": {"account": format!("{run}-a"), "amount": 5}})
        .to_string()
        .into_bytes(),
        ..Message::default()
    };
    let plan = credit_plan(&balances);
    let old = event("e-old", start);
    assert_eq!(dedup.transactional(&old, &plan).await, Outcome::Applied);

    clock.advance(Duration::from_secs(3601)); // past the one-hour retention: the mark expired
    let late = dedup.transactional(&old, &plan).await;
    assert!(
        matches!(
            &late,
            Outcome::Rejected {
                code: lambda_dedup_batch::Reason::LateEvent,
                ..
            }
        ),
        "{late:?}"
    );
    // The rejection carries the event's key: what reconciliation sends on, underived again.
    let Outcome::Rejected { key, .. } = &late else {
        unreachable!("matched above")
    };
    let derived = cloudevents_spec("late").derive(&old).expect("a key").key;
    assert_eq!(key.as_ref(), Some(&derived));
    let fresh = event("e-new", clock.now());
    assert_eq!(dedup.transactional(&fresh, &plan).await, Outcome::Applied);
    assert_eq!(
        balance(&client, &balances, &format!("{run}-a")).await,
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
    use dedup_tests::{balance, cloudevents_spec, credit_plan, effect_table, retention};
    use lambda_dedup::Message;
    use lambda_dedup_batch::{Deduplicator, Outcome};

    let client = client();
    let balances = effect_table(&client, "account").await;
    let start = SystemTime::now();
    let clock = Arc::new(ManualClock::new(start));
    let store = DynamoStore::new(client.clone(), mark_table(&client).await, retention())
        .with_clock(clock.clone());
    let dedup = Deduplicator::new(cloudevents_spec("future"), store);
    let run = unique("future");
    let event = |id: &str, time: SystemTime| Message {
        message_id: unique("m"),
        body: serde_json::json!({"specversion": "1.0", "type": "credit", "source": "/bank",
            "id": id, "tenantid": "acme",
            "time": chrono::DateTime::<chrono::Utc>::from(time)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "data": {"account": format!("{run}-a"), "amount": 5}})
        .to_string()
        .into_bytes(),
        ..Message::default()
    };
    let plan = credit_plan(&balances);
    let far = event("e-far", start + Duration::from_secs(10 * 365 * 86_400));
    for _ in 0..2 {
        let outcome = dedup.transactional(&far, &plan).await;
        assert!(
            matches!(
                &outcome,
                Outcome::Rejected {
                    code: lambda_dedup_batch::Reason::ImplausibleTime,
                    ..
                }
            ),
            "{outcome:?}"
        );
        // Even after the retention has passed, a replay of it is not applied.
        clock.advance(Duration::from_secs(3601));
    }
    let skewed = event("e-skewed", clock.now() + Duration::from_secs(60));
    assert_eq!(dedup.transactional(&skewed, &plan).await, Outcome::Applied);
    assert_eq!(
        balance(&client, &balances, &format!("{run}-a")).await,
        Some(5),
        "only the event within the clock skew moved the balance"
    );
}
