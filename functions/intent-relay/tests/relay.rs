//! `intent-relay` against the local DynamoDB (the one `cargo xtask test` started, or one in this
//! test binary) and the in-process fake collection API: the relay never stalls its shard.
//!
//! Stream batches are built as Lambda hands them over (INSERT records with the new image); the
//! intents table and the provider's effect counters are read directly, not through the relay.

use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::dynamodb::Event;
use fake_provider::{Fault, Provider};
use intent_relay::{Handled, Relay};
use lambda_dedup::{Effect, Item};
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_runtime::settings::Env;
use serde_json::json;

struct World {
    client: lambda_dedup_dynamodb::Client,
    /// The same connection as the SDK's client, for the test's own reads.
    sdk: dedup_tests::Client,
    intents: String,
    provider: Provider,
    url: String,
}

impl World {
    async fn new() -> Self {
        let sdk = dedup_tests::client();
        let client = lambda_dedup_dynamodb::Client::from(&sdk);
        let intents = dedup_tests::unique("intents");
        lambda_dedup_dynamodb::provision::create_table(&client, &intents, "intent_id", false)
            .await
            .expect("create intents table");
        let provider = Provider::new();
        let (addr, _server) = fake_provider::spawn(provider.clone(), ([127, 0, 0, 1], 0).into())
            .await
            .expect("fake provider");
        Self {
            client,
            sdk,
            intents,
            provider,
            url: format!("http://{addr}"),
        }
    }

    /// The relay as `main` builds it (`Relay::read`), with these two settings.
    fn relay(&self, provider_timeout: Duration, margin: Duration) -> Relay {
        let env = Env::from_pairs([
            ("COLLECTIONS_API_URL", self.url.clone()),
            ("INTENTS_TABLE", self.intents.clone()),
            (
                "PROVIDER_TIMEOUT_MS",
                provider_timeout.as_millis().to_string(),
            ),
            ("RELAY_DEADLINE_MARGIN_MS", margin.as_millis().to_string()),
        ]);
        Relay::read(&env, self.client.clone()).expect("relay")
    }

    /// Writes intent `id` with `status`, as `fine-notices` would (with `PENDING`).
    async fn put_intent(&self, id: &str, status: &str) {
        let item = Item::new()
            .with("intent_id", id)
            .with("kind", "collection_task")
            .with("fine_id", format!("fine-{id}"))
            .with("amount_cents", 10_000)
            .with("status", status);
        let written =
            lambda_dedup_dynamodb::write_effects(&self.client, &[Effect::put(&self.intents, item)])
                .await
                .expect("put intent");
        assert!(written);
    }

    /// `status` and `failure_reason` of intent `id`, read strongly consistently.
    async fn state(&self, id: &str) -> (String, Option<String>) {
        let item = dedup_tests::get_item(&self.sdk, &self.intents, "intent_id", id)
            .await
            .expect("intent exists");
        let s = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        (s("status").expect("status"), s("failure_reason"))
    }

    fn effects(&self, id: &str) -> u64 {
        self.provider.effects().get(id).copied().unwrap_or(0)
    }
}

/// The INSERT record of intent `id` as it was written (`PENDING`), at sequence number `seq`.
fn insert(seq: usize, id: &str, status: &str) -> serde_json::Value {
    json!({
        "awsRegion": "us-east-1", "eventID": format!("ev-{seq}"), "eventName": "INSERT",
        "eventSource": "aws:dynamodb", "eventVersion": "1.1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1_700_000_000, "Keys": {"intent_id": {"S": id}},
            "NewImage": {"intent_id": {"S": id}, "kind": {"S": "collection_task"},
                         "fine_id": {"S": format!("fine-{id}")}, "amount_cents": {"N": "10000"},
                         "status": {"S": status}},
            "SequenceNumber": seq_number(seq), "SizeBytes": 100, "StreamViewType": "NEW_AND_OLD_IMAGES"
        }
    })
}

fn seq_number(seq: usize) -> String {
    format!("{:021}", 1000 + seq)
}

fn event(records: &[serde_json::Value]) -> Event {
    serde_json::from_value(json!({ "Records": records })).expect("stream event")
}

fn failures(handled: &Handled) -> Vec<Option<String>> {
    handled
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    let run = dedup_tests::unique(prefix);
    (0..n).map(|i| format!("{run}-{i}")).collect()
}

fn in_30s() -> Option<SystemTime> {
    Some(SystemTime::now() + Duration::from_secs(30))
}

/// S15, S12: one intent of the batch gets a permanent answer (422: the provider holds its key
/// for another payload). It is parked as `FAILED` with a reason code and counted; every other
/// intent is confirmed, applied once; nothing is left for the stream to retry. A replay of the
/// whole batch posts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s15_a_permanent_refusal_is_parked_and_the_shard_moves_on() {
    let w = World::new().await;
    let ids = ids("poison", 6);
    let poison = &ids[2];
    for id in &ids {
        w.put_intent(id, "PENDING").await;
    }
    // Someone used the poison intent's key with another payload: the provider answers 422.
    IdempotentClient::new(&w.url, Duration::from_secs(5))
        .expect("client")
        .post("/v1/collections", poison, &json!({"other": "payload"}))
        .await
        .expect("first use of the key");
    let records: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| insert(i, id, "PENDING"))
        .collect();
    let relay = w.relay(Duration::from_secs(2), Duration::from_millis(500));

    let handled = relay.handle(&event(&records), in_30s()).await;

    assert_eq!(
        failures(&handled),
        Vec::<Option<String>>::new(),
        "nothing to retry"
    );
    assert_eq!(
        (handled.tally.confirmed, handled.tally.parked),
        (5, 1),
        "{:?}",
        handled.tally
    );
    assert!(handled.tally.closes(), "{:?}", handled.tally);
    for id in ids.iter().filter(|id| *id != poison) {
        assert_eq!(w.state(id).await.0, "CONFIRMED", "{id}");
        assert_eq!(w.effects(id), 1, "{id} applied once");
    }
    assert_eq!(
        w.state(poison).await,
        (
            "FAILED".to_owned(),
            Some("provider_rejected_422".to_owned())
        )
    );
    assert_eq!(w.effects(poison), 1, "only the other payload's effect");

    // The stream replays the batch: every intent is settled, nothing is posted again.
    let requests = w.provider.requests();
    let again = relay.handle(&event(&records), in_30s()).await;
    assert!(failures(&again).is_empty());
    assert_eq!(again.tally.already_settled, 6, "{:?}", again.tally);
    assert_eq!(w.provider.requests(), requests, "no post on replay");
}

/// A provider slower than the invocation's time allows: 10 records, 300 ms per call, 1.5 s left,
/// 700 ms kept per record. The relay stops before the deadline and reports the first record it
/// did not reach; invoked again from there (as the stream does), it finishes the rest, and every
/// intent is posted and confirmed exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_provider_makes_the_relay_stop_before_its_deadline_and_resume() {
    let w = World::new().await;
    let ids = ids("slow", 10);
    for id in &ids {
        w.put_intent(id, "PENDING").await;
    }
    w.provider
        .inject(Fault::slow(100, Duration::from_millis(300)));
    let records: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| insert(i, id, "PENDING"))
        .collect();
    let relay = w.relay(Duration::from_millis(500), Duration::from_millis(200));

    let mut from = 0;
    let mut invocations = 0;
    while from < records.len() {
        invocations += 1;
        assert!(invocations <= records.len(), "no progress");
        let budget = Duration::from_millis(1500);
        let started = Instant::now();
        let handled = relay
            .handle(&event(&records[from..]), Some(SystemTime::now() + budget))
            .await;
        let took = started.elapsed();
        assert!(
            took < budget,
            "the invocation ran {took:?}, past its deadline"
        );
        assert!(handled.tally.closes(), "{:?}", handled.tally);
        let done = handled.tally.confirmed as usize;
        assert!(done >= 1, "each invocation gets somewhere");
        let next = from + done;
        if next < records.len() {
            // The first record not reached is the one reported, and it was not posted.
            assert_eq!(failures(&handled), vec![Some(seq_number(next))]);
            assert_eq!(handled.tally.deferred as usize, records.len() - next);
            assert_eq!(w.effects(&ids[next]), 0);
            assert_eq!(w.state(&ids[next]).await.0, "PENDING");
        } else {
            assert!(failures(&handled).is_empty());
        }
        from = next;
    }
    assert!(invocations > 1, "the deadline stopped the first invocation");
    for id in &ids {
        assert_eq!(w.state(id).await.0, "CONFIRMED", "{id}");
        assert_eq!(w.effects(id), 1, "{id} applied once");
    }
    assert_eq!(w.provider.requests(), 10, "each intent posted once");
}

/// S7 on a replayed stream: a record whose image says `PENDING` while the intent is already
/// `CONFIRMED` (or parked) is not posted again, nor is one whose image is already settled;
/// they are counted, and the stored outcome is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_an_intent_already_confirmed_is_not_posted_again() {
    let w = World::new().await;
    let ids = ids("settled", 4);
    let (confirmed, settled_image, parked, pending) = (&ids[0], &ids[1], &ids[2], &ids[3]);
    w.put_intent(confirmed, "CONFIRMED").await;
    w.put_intent(settled_image, "CONFIRMED").await;
    w.put_intent(parked, "FAILED").await;
    w.put_intent(pending, "PENDING").await;
    let records = [
        insert(0, confirmed, "PENDING"), // its INSERT, replayed after the confirmation
        insert(1, settled_image, "CONFIRMED"),
        insert(2, parked, "PENDING"),
        insert(3, pending, "PENDING"),
    ];
    let relay = w.relay(Duration::from_secs(2), Duration::from_millis(500));

    let handled = relay.handle(&event(&records), in_30s()).await;

    for id in [confirmed, settled_image, parked] {
        assert_eq!(w.effects(id), 0, "{id} was not posted");
    }
    assert_eq!(
        w.provider.requests(),
        1,
        "only the pending intent was posted"
    );
    assert!(failures(&handled).is_empty());
    assert_eq!(
        (handled.tally.already_settled, handled.tally.confirmed),
        (3, 1),
        "{:?}",
        handled.tally
    );
    assert_eq!(w.state(confirmed).await.0, "CONFIRMED");
    assert_eq!(w.state(parked).await.0, "FAILED");
    assert_eq!(w.state(pending).await.0, "CONFIRMED");
    assert_eq!(w.effects(pending), 1);
}

/// S12, S15: a transient answer (503) stays a failure: the stream retries from that record, the
/// records behind it are not attempted, and the retry confirms them all once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_a_transient_answer_retries_from_that_record_in_order() {
    let w = World::new().await;
    let ids = ids("transient", 3);
    for id in &ids {
        w.put_intent(id, "PENDING").await;
    }
    let records: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| insert(i, id, "PENDING"))
        .collect();
    let relay = w.relay(Duration::from_secs(2), Duration::from_millis(500));
    let first = relay.handle(&event(&records[..1]), in_30s()).await;
    assert!(failures(&first).is_empty());
    w.provider.inject(Fault::error_5xx(1));

    let handled = relay.handle(&event(&records[1..]), in_30s()).await;
    assert_eq!(failures(&handled), vec![Some(seq_number(1))]);
    assert_eq!(
        (
            handled.tally.transient,
            handled.tally.deferred,
            handled.tally.parked
        ),
        (1, 1, 0)
    );
    assert_eq!(w.state(&ids[1]).await.0, "PENDING");
    assert_eq!(w.effects(&ids[2]), 0, "not attempted behind the failure");

    let retried = relay.handle(&event(&records[1..]), in_30s()).await;
    assert!(failures(&retried).is_empty());
    for id in &ids {
        assert_eq!(w.state(id).await.0, "CONFIRMED", "{id}");
        assert_eq!(w.effects(id), 1, "{id} applied once");
    }
}

/// Writes intent `id`, `PENDING`, created `age` ago (or with no `created_at`).
async fn put_aged(w: &World, id: &str, age: Option<Duration>) {
    let mut item = Item::new()
        .with("intent_id", id)
        .with("kind", "collection_task")
        .with("fine_id", format!("fine-{id}"))
        .with("amount_cents", 10_000)
        .with("status", "PENDING");
    if let Some(age) = age {
        let created = (SystemTime::now() - age)
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("epoch")
            .as_millis() as u64;
        item = item.with("created_at", created);
    }
    assert!(
        lambda_dedup_dynamodb::write_effects(&w.client, &[Effect::put(&w.intents, item)])
            .await
            .expect("put intent")
    );
}

/// The MODIFY record of a sweep's re-drive of `id` (as the stream carries it: the stamp is new).
fn redrive(seq: usize, id: &str) -> serde_json::Value {
    let mut r = insert(seq, id, "PENDING");
    r["eventName"] = json!("MODIFY");
    r["dynamodb"]["OldImage"] = r["dynamodb"]["NewImage"].clone();
    r["dynamodb"]["NewImage"]["redrive_requested_at"] = json!({"N": "1796000000000"});
    r
}

/// S7, S15: nothing stays PENDING silently. When the stream has given an intent's records up,
/// the sweep re-drives every intent pending longer than the bound (and reports the oldest's
/// age), the re-drive comes back as a modification and is applied once; a recent intent is left
/// to its stream record, a settled one is not touched, and other modifications stay ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_the_sweep_redrives_intents_left_pending() {
    let w = World::new().await;
    let ids = ids("stuck", 4);
    let (old, older, unknown, recent) = (&ids[0], &ids[1], &ids[2], &ids[3]);
    put_aged(&w, old, Some(Duration::from_secs(2 * 3600))).await;
    put_aged(&w, older, Some(Duration::from_secs(5 * 3600))).await;
    put_aged(&w, unknown, None).await;
    put_aged(&w, recent, Some(Duration::from_secs(60))).await;
    let settled = format!("{old}-settled");
    w.put_intent(&settled, "CONFIRMED").await;

    let relay = w.relay(Duration::from_secs(5), Duration::from_secs(1));
    let swept = relay
        .sweep(SystemTime::now(), Duration::from_secs(3600))
        .await
        .expect("sweep");
    assert_eq!(swept.pending, 4);
    assert_eq!(
        swept.redriven, 3,
        "the two old ones and the one of unknown age"
    );
    assert!(
        swept.oldest_pending >= Duration::from_secs(5 * 3600),
        "{swept:?}"
    );

    let handled = relay
        .handle(
            &event(&[redrive(1, old), redrive(2, older), redrive(3, unknown)]),
            in_30s(),
        )
        .await;
    assert!(failures(&handled).is_empty());
    assert_eq!(handled.tally.confirmed, 3);
    for id in [old, older, unknown] {
        assert_eq!(w.state(id).await.0, "CONFIRMED");
        assert_eq!(w.effects(id), 1);
    }
    assert_eq!(
        w.state(recent).await.0,
        "PENDING",
        "left to its stream record"
    );
    assert_eq!(w.effects(&settled), 0);

    // A modification that is not a re-drive (the relay's own confirmation) is ignored.
    let mut confirmation = insert(4, recent, "CONFIRMED");
    confirmation["eventName"] = json!("MODIFY");
    let handled = relay.handle(&event(&[confirmation]), in_30s()).await;
    assert_eq!(handled.tally.ignored, 1);
    assert_eq!(w.effects(recent), 0);
}

/// The failure-isolation issue's scenario at full scale: a 25-record stream batch, under a 30 s
/// invocation timeout, where the collection API refuses one intent for good (422) and takes
/// 1.5 s per call for the rest (36 s in all: more than one invocation can hold). Every
/// invocation ends before its deadline and reports where to resume; every other intent is
/// confirmed exactly once; the poison is `FAILED` and counted, never retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_s15_a_refusing_and_slow_provider_never_stalls_the_shard() {
    let w = World::new().await;
    let ids = ids("stall", 25);
    let poison = &ids[7];
    for id in &ids {
        w.put_intent(id, "PENDING").await;
    }
    IdempotentClient::new(&w.url, Duration::from_secs(5))
        .expect("client")
        .post("/v1/collections", poison, &json!({"other": "payload"}))
        .await
        .expect("the poison's key, taken by another payload");
    w.provider
        .inject(Fault::slow(100, Duration::from_millis(1500)));
    let records: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| insert(i, id, "PENDING"))
        .collect();
    // The production settings: PROVIDER_TIMEOUT_MS 5000, RELAY_DEADLINE_MARGIN_MS 2000.
    let relay = w.relay(Duration::from_secs(5), Duration::from_secs(2));
    let (mut from, mut invocations, mut parked) = (0, 0, 0);
    while from < records.len() {
        invocations += 1;
        assert!(invocations <= 5, "no progress");
        let timeout = Duration::from_secs(30);
        let started = Instant::now();
        let handled = relay
            .handle(&event(&records[from..]), Some(SystemTime::now() + timeout))
            .await;
        assert!(started.elapsed() < timeout, "past the invocation's timeout");
        assert!(handled.tally.closes(), "{:?}", handled.tally);
        parked += handled.tally.parked;
        let done = (handled.tally.confirmed + handled.tally.parked) as usize;
        from += done;
        match failures(&handled).as_slice() {
            [] => assert_eq!(from, records.len()),
            [Some(seq)] => assert_eq!(seq, &seq_number(from), "resume where it stopped"),
            other => panic!("one resume point at most: {other:?}"),
        }
    }
    assert!(
        invocations >= 2,
        "36 s of calls do not fit one 30 s invocation"
    );
    assert_eq!(parked, 1, "the poison is counted once");
    let (status, reason) = w.state(poison).await;
    assert_eq!(status, "FAILED");
    assert_eq!(reason.as_deref(), Some("provider_rejected_422"));
    for id in ids.iter().filter(|id| *id != poison) {
        assert_eq!(w.state(id).await.0, "CONFIRMED", "{id}");
        assert_eq!(w.effects(id), 1, "{id} applied once");
    }
}

/// The relay's own variables, as `main` reads them: the API and the table are required, the
/// timeout and margin make the time one record needs, and the sweep's age has its default.
#[tokio::test]
async fn the_relays_settings_are_read_as_main_reads_them() {
    let w = World::new().await;
    let full = [
        ("COLLECTIONS_API_URL", w.url.clone()),
        ("INTENTS_TABLE", w.intents.clone()),
    ];
    for missing in ["COLLECTIONS_API_URL", "INTENTS_TABLE"] {
        let env = Env::from_pairs(full.clone().into_iter().filter(|(k, _)| *k != missing));
        let Err(err) = Relay::read(&env, w.client.clone()) else {
            panic!("started without {missing}");
        };
        assert!(err.to_string().contains(missing), "{missing}: {err}");
    }
    let defaults = Relay::read(&Env::from_pairs(full.clone()), w.client.clone()).expect("relay");
    assert_eq!(defaults.per_record(), Duration::from_millis(5_000 + 2_000));
    let set = Env::from_pairs(full)
        .with("PROVIDER_TIMEOUT_MS", "700")
        .with("RELAY_DEADLINE_MARGIN_MS", "300");
    let relay = Relay::read(&set, w.client.clone()).expect("relay");
    assert_eq!(relay.per_record(), Duration::from_millis(1_000));
    assert_eq!(
        Relay::redrive_after(&set).expect("default"),
        Duration::from_secs(3_600)
    );
    assert_eq!(
        Relay::redrive_after(&set.with("RELAY_REDRIVE_AFTER_SECONDS", "60")).expect("set"),
        Duration::from_secs(60)
    );
}
