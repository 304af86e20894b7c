//! Leases for external effects, and fencing (S6).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dedup_tests::{client, scope, unique};
use lambda_dedup::{Claim, Clock, DedupKey, ManualClock, MarkStatus, Seen};
use lambda_dedup_dynamodb::{DynamoStore, Error};

async fn stores() -> (DynamoStore, Arc<ManualClock>) {
    let client = client();
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let store = dedup_tests::fresh_store(&client)
        .await
        .with_lease(Duration::from_secs(30))
        .with_clock(clock.clone());
    (store, clock)
}

fn claimed(c: Claim) -> lambda_dedup::Lease {
    match c {
        Claim::Claimed(l) => l,
        other => panic!("expected a claim, got {other:?}"),
    }
}

/// S6: worker A claims and crashes before completing. While its lease is live, B sees the event
/// in progress. Once it expires, B reclaims with a new owner token; A's late complete and release
/// are then fenced off and change nothing; B completes.
#[tokio::test]
async fn s6_an_expired_lease_is_taken_over_and_the_old_owner_is_fenced() {
    let (store, clock) = stores().await;
    let key = DedupKey::new(&scope(), "t", &["pay", &unique("evt")]);

    let a = claimed(store.claim(&key, None, None).await.expect("A claims"));
    // A "crashes" here: no complete, no release.
    assert!(matches!(
        store.claim(&key, None, None).await.expect("B tries"),
        Claim::Seen(Seen::InProgress { .. })
    ));

    clock.advance(Duration::from_secs(31));
    let b = claimed(store.claim(&key, None, None).await.expect("B reclaims"));
    assert_ne!(a.owner, b.owner, "a new owner token");
    assert_eq!(
        a.idempotency_key(),
        b.idempotency_key(),
        "both call the external API with the same idempotency key"
    );

    match store.complete(&a, Some("A's late result")).await {
        Err(Error::Fenced { current, .. }) => {
            let current = current.expect("B's mark");
            assert_eq!(current.owner.as_ref(), Some(&b.owner));
            assert_eq!(current.status, MarkStatus::InProgress);
        }
        other => panic!("A's complete must be fenced, got {other:?}"),
    }
    assert!(
        matches!(store.release(&a).await, Err(Error::Fenced { .. })),
        "A's release is fenced"
    );

    let mark = store.get(&key).await.expect("get").expect("mark");
    assert_eq!(mark.owner.as_ref(), Some(&b.owner), "A changed nothing");
    assert_eq!(mark.status, MarkStatus::InProgress);
    assert_eq!(mark.result, None);

    store
        .complete(&b, Some("B's result"))
        .await
        .expect("B completes");
    let mark = store.get(&key).await.expect("get").expect("mark");
    assert_eq!(mark.status, MarkStatus::Completed);
    assert_eq!(mark.result.as_deref(), Some("B's result"));
    assert!(matches!(store.release(&a).await, Err(Error::Fenced { .. })));
}

/// S6: a handler error releases the claim, so the redelivery can claim at once; releasing again
/// is harmless; a released lease can no longer complete.
#[tokio::test]
async fn s6_release_frees_the_event_for_the_next_delivery() {
    let (store, _clock) = stores().await;
    let key = DedupKey::new(&scope(), "t", &["pay", &unique("evt")]);
    let a = claimed(store.claim(&key, None, None).await.expect("claim"));
    store.release(&a).await.expect("release");
    store.release(&a).await.expect("release again is harmless");
    // The lease has ended; the mark stays, with the first attempt's time (S16).
    let mark = store
        .get(&key)
        .await
        .expect("get")
        .expect("the mark is kept");
    assert_eq!(mark.status, MarkStatus::InProgress);
    assert!(
        mark.lease_expires_at
            .is_some_and(|l| l <= SystemTime::now())
    );
    assert!(matches!(
        store.complete(&a, None).await,
        Err(Error::Fenced { .. })
    ));
    let b = claimed(store.claim(&key, None, None).await.expect("reclaim"));
    assert_eq!(b.first_attempt_at, a.first_attempt_at, "the chain goes on");
    assert!(matches!(
        store.complete(&a, None).await,
        Err(Error::Fenced { .. })
    ));
    store.complete(&b, None).await.expect("complete");
}

/// S6: completing twice with the same lease (a retry after a lost response) succeeds and keeps
/// the first result.
#[tokio::test]
async fn s6_complete_is_idempotent_for_its_owner() {
    let (store, _clock) = stores().await;
    let key = DedupKey::new(&scope(), "t", &["pay", &unique("evt")]);
    let a = claimed(store.claim(&key, None, None).await.expect("claim"));
    store.complete(&a, Some("r1")).await.expect("complete");
    store
        .complete(&a, Some("r1"))
        .await
        .expect("complete again");
    let mark = store.get(&key).await.expect("get").expect("mark");
    assert_eq!(mark.result.as_deref(), Some("r1"));
}

/// S6: a lease never outlives the invocation: it is cut to the deadline given, and a claim with
/// no time left is refused.
#[tokio::test]
async fn s6_the_lease_ends_no_later_than_the_deadline() {
    let (store, clock) = stores().await;
    let key = DedupKey::new(&scope(), "t", &["pay", &unique("evt")]);
    let deadline = clock.now() + Duration::from_secs(5);
    let a = claimed(
        store
            .claim(&key, None, Some(deadline))
            .await
            .expect("claim"),
    );
    assert!(a.expires_at <= deadline);

    clock.advance(Duration::from_secs(6));
    // The deadline passed: the event is free again for the next delivery.
    let b = claimed(store.claim(&key, None, None).await.expect("reclaim"));
    assert_ne!(a.owner, b.owner);

    let other = DedupKey::new(&scope(), "t", &["pay", &unique("evt")]);
    let past = clock.now() - Duration::from_secs(1);
    let err = store
        .claim(&other, None, Some(past))
        .await
        .expect_err("no time left");
    assert!(matches!(err, Error::Invalid(_)));
    assert!(store.get(&other).await.expect("get").is_none());
}

/// S6: the idempotency key depends on the event only: same across processes, leases and
/// retries, different for different events.
#[test]
fn s6_idempotency_key_is_deterministic() {
    let k1 = DedupKey::new(&scope(), "t", &["pay", "evt-1"]);
    let k1_again = DedupKey::new(&scope(), "t", &["pay", "evt-1"]);
    let k2 = DedupKey::new(&scope(), "t", &["pay", "evt-2"]);
    assert_eq!(k1.idempotency_key(), k1_again.idempotency_key());
    assert_ne!(k1.idempotency_key(), k2.idempotency_key());
    assert!(k1.idempotency_key().len() <= 64);
}

/// S9, S16: a takeover remembers when the event was first attempted, across takeovers; a first
/// claim starts now.
#[tokio::test]
async fn s6_a_takeover_inherits_the_first_attempt_time() {
    let (store, clock) = stores().await;
    let key = DedupKey::new(&scope(), "t", &["pay", &unique("evt")]);
    let first = claimed(store.claim(&key, None, None).await.expect("A claims"));
    let millis = lambda_dedup::clock::epoch_millis;
    assert_eq!(millis(first.first_attempt_at), millis(clock.now()));
    for _ in 0..2 {
        clock.advance(Duration::from_secs(31)); // A (then B) crashed; the lease expired
        let next = claimed(store.claim(&key, None, None).await.expect("take over"));
        assert_eq!(
            next.first_attempt_at, first.first_attempt_at,
            "the first attempt's time survives every takeover"
        );
    }
}

/// The leased flow over a provider that forgets idempotency keys after `retention`.
async fn provider_forgets_after(
    retention: Duration,
) -> (lambda_dedup_engine::LeasedDeduplicator, Arc<ManualClock>) {
    let (store, clock) = stores().await;
    let spec = dedup_tests::cloudevents_spec("payments");
    let dedup =
        lambda_dedup_engine::Deduplicator::new(spec, store).with_provider_key_retention(retention);
    (dedup, clock)
}

/// S9, S16: providers forget idempotency keys (Stripe after 24 h). A takeover of an event first
/// attempted longer ago than that never calls the provider blindly: it is rejected as
/// `provider_key_expired`, for reconciliation, every time. A takeover within the retention
/// calls the provider with the same key as before.
#[tokio::test]
async fn s16_a_takeover_past_the_provider_key_retention_does_not_call_the_provider() {
    use lambda_dedup_engine::Outcome;
    use std::sync::atomic::{AtomicUsize, Ordering};

    // The provider forgets keys after 10 minutes; marks are kept an hour.
    let (dedup, clock) = provider_forgets_after(Duration::from_secs(600)).await;
    let calls = AtomicUsize::new(0);
    let msg = dedup_tests::credit(&unique("m"), &unique("evt"), "acct", 1);
    // The process dies while the call is out (the future is dropped): a call that never
    // answers, counted, and the flow given 200 ms.
    let dies_during_the_call = || async {
        let call = dedup.leased(&msg, None, |_e, _l| async {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<Option<String>, lambda_dedup_engine::HandlerError>>()
                .await
        });
        assert!(
            tokio::time::timeout(Duration::from_millis(200), call)
                .await
                .is_err()
        );
    };
    // First attempt.
    dies_during_the_call().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Within the key retention, a takeover calls again (same key: the provider replays).
    clock.advance(Duration::from_secs(31));
    dies_during_the_call().await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // Past it: no call, for reconciliation; and the same on the next takeover.
    for _ in 0..2 {
        clock.advance(Duration::from_secs(601));
        let outcome = dedup
            .leased(&msg, None, |_e, _l| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(Some("applied again".to_owned()))
            })
            .await;
        assert!(
            matches!(
                &outcome,
                Outcome::Rejected {
                    code: lambda_dedup_engine::Reason::ProviderKeyExpired,
                    ..
                }
            ),
            "{outcome:?}"
        );
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "never called past the key retention"
    );
}

/// S16: nothing is decided after the effect. A provider answer over the store's result bound is
/// stored as its digest, so the completion cannot be refused once the provider has applied the
/// call; a redelivery is a duplicate, not a second call.
#[tokio::test]
async fn s16_an_oversized_provider_answer_is_stored_as_a_digest() {
    use lambda_dedup_engine::Outcome;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let (store, _clock) = stores().await;
    let store = store.with_max_result_bytes(1024);
    let dedup = lambda_dedup_engine::Deduplicator::new(dedup_tests::cloudevents_spec("big"), store)
        .with_provider_key_retention(std::time::Duration::from_secs(86_400));
    let calls = AtomicUsize::new(0);
    let msg = dedup_tests::credit(&unique("m"), &unique("evt"), "acct", 1);
    let call = |_e, _l| async {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(Some("x".repeat(100 * 1024)))
    };
    assert_eq!(dedup.leased(&msg, None, call).await, Outcome::Applied);
    let again = dedup.leased(&msg, None, call).await;
    assert!(matches!(again, Outcome::Duplicate { .. }), "{again:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one call to the provider");
    let key = dedup_tests::cloudevents_spec("big")
        .derive(&msg)
        .expect("key")
        .key;
    let mark = dedup.store().get(&key).await.expect("get").expect("mark");
    let stored: serde_json::Value =
        serde_json::from_str(mark.result.as_deref().expect("result")).expect("json");
    assert_eq!(stored["bytes"], 100 * 1024);
    assert!(
        stored["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:"))
    );
}
