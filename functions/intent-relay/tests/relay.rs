//! `intent-relay` as `main` builds it (`intent_relay::service` on the builder), its intents in
//! the memory store and its calls to the in-process fake collection API: the relay never
//! stalls its shard.
//!
//! Stream batches are built as Lambda hands them over (INSERT records with the new image); the
//! intents table and the provider's effect counters are read directly, not through the relay.
//! The same relay on the local DynamoDB is in the integration tests (`tests/integration/relay.rs`).

use std::time::{Duration, Instant, SystemTime};

use intent_relay::{Collections, Handled, RelayService};
use lambda_dedup::{Item, Retention};
use lambda_dedup_fake_provider::{Fault, Provider};
use lambda_dedup_http::IdempotentClient;
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::Env;
use lambda_dedup_runtime::aws_lambda_events::event::dynamodb::Event;
use lambda_dedup_runtime::{BuildError, Dedup, store::Items};
use serde_json::json;

struct World {
    store: MemoryStore,
    provider: Provider,
    url: String,
}

impl World {
    async fn new() -> Self {
        let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(3_600)).expect("r"));
        store.create_table("intents", "intent_id");
        let provider = Provider::new();
        let (url, _server) = provider.serve().await.expect("fake provider");
        Self {
            store,
            provider,
            url,
        }
    }

    fn env(&self) -> Env {
        Env::from_pairs([
            ("DEDUP_NAMESPACE", "test".to_owned()),
            ("COLLECTIONS_API_URL", self.url.clone()),
            ("INTENTS_TABLE", "intents".to_owned()),
        ])
    }

    /// The relay as `main` builds it (`intent_relay::service` on the builder of `env`), on this
    /// world's memory store.
    fn service(&self, env: &Env) -> Result<RelayService<Collections>, lambda_runtime::Error> {
        let dedup = Dedup::read(env, intent_relay::FUNCTION)?;
        intent_relay::service(dedup.on(Items::new(self.store.clone())))
    }

    /// The relay as `main` builds it, with these two settings: each call given up after
    /// `provider_timeout`, a record started only with `budget` left.
    fn relay(&self, provider_timeout: Duration, budget: Duration) -> RelayService<Collections> {
        let env = self
            .env()
            .with(
                "PROVIDER_TIMEOUT_MS",
                provider_timeout.as_millis().to_string(),
            )
            .with("RELAY_RECORD_BUDGET_MS", budget.as_millis().to_string());
        self.service(&env).expect("relay")
    }

    /// Writes intent `id` with `status`, as `fine-notices` would (with `PENDING`).
    fn put_intent(&self, id: &str, status: &str) {
        self.store
            .put_item("intents", intent(id, status))
            .expect("put intent");
    }

    /// `n` intents `{prefix}-{i}` written `PENDING`, and their INSERT records in order.
    fn pending(&self, prefix: &str, n: usize) -> (Vec<String>, Vec<serde_json::Value>) {
        let ids = ids(prefix, n);
        for id in &ids {
            self.put_intent(id, "PENDING");
        }
        let records = ids
            .iter()
            .enumerate()
            .map(|(i, id)| insert(i, id, "PENDING"))
            .collect();
        (ids, records)
    }

    /// As [`World::pending`], with the intent at `at` a poison: its key taken by another payload
    /// ([`World::take_key`]); the poison's id too.
    async fn pending_with_poison(
        &self,
        prefix: &str,
        n: usize,
        at: usize,
    ) -> (Vec<String>, Vec<serde_json::Value>, String) {
        let (ids, records) = self.pending(prefix, n);
        let poison = ids[at].clone();
        self.take_key(&poison).await;
        (ids, records, poison)
    }

    /// Someone used intent `id`'s key with another payload: the provider answers it 422.
    async fn take_key(&self, id: &str) {
        IdempotentClient::new(&self.url, Duration::from_secs(5))
            .expect("client")
            .call("/v1/collections", id, &json!({"other": "payload"}))
            .await
            .expect("the intent's key, taken by another payload");
    }

    /// Every intent of `ids` is `CONFIRMED`, its effect applied once.
    fn confirmed_once<'a>(&self, ids: impl IntoIterator<Item = &'a String>) {
        for id in ids {
            assert_eq!(self.state(id).0, "CONFIRMED", "{id}");
            assert_eq!(self.effects(id), 1, "{id} applied once");
        }
    }

    /// `status` and `failure_reason` of intent `id`.
    fn state(&self, id: &str) -> (String, Option<String>) {
        let item = self
            .store
            .item("intents", &Item::new().with("intent_id", id))
            .expect("intent exists");
        let s = |name: &str| lambda_dedup::items::text(&item, name).map(str::to_owned);
        (s("status").expect("status"), s("failure_reason"))
    }

    fn effects(&self, id: &str) -> u64 {
        self.provider.effects().get(id).copied().unwrap_or(0)
    }
}

/// Intent `id` with `status`, as `fine-notices` writes it (with `PENDING`).
fn intent(id: &str, status: &str) -> Item {
    Item::new()
        .with("intent_id", id)
        .with("kind", "collection_task")
        .with("fine_id", format!("fine-{id}"))
        .with("amount_cents", 10_000)
        .with("status", status)
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
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
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
    let (ids, records, poison) = w.pending_with_poison("poison", 6, 2).await;
    let poison = &poison;
    let relay = w.relay(Duration::from_secs(2), Duration::from_millis(2_500));

    let handled = relay.handle(&event(&records), in_30s()).await;

    assert_eq!(
        failures(&handled),
        Vec::<Option<String>>::new(),
        "nothing to retry"
    );
    assert_eq!(
        (handled.tally.settled, handled.tally.parked),
        (5, 1),
        "{:?}",
        handled.tally
    );
    assert!(handled.tally.closes(), "{:?}", handled.tally);
    w.confirmed_once(ids.iter().filter(|id| *id != poison));
    assert_eq!(
        w.state(poison),
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
    let (ids, records) = w.pending("slow", 10);
    w.provider
        .inject(Fault::slow(100, Duration::from_millis(300)));
    let relay = w.relay(Duration::from_millis(500), Duration::from_millis(700));

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
        let done = handled.tally.settled as usize;
        assert!(done >= 1, "each invocation gets somewhere");
        let next = from + done;
        if next < records.len() {
            // The first record not reached is the one reported, and it was not posted.
            assert_eq!(failures(&handled), vec![Some(seq_number(next))]);
            assert_eq!(handled.tally.deferred as usize, records.len() - next);
            assert_eq!(w.effects(&ids[next]), 0);
            assert_eq!(w.state(&ids[next]).0, "PENDING");
        } else {
            assert!(failures(&handled).is_empty());
        }
        from = next;
    }
    assert!(invocations > 1, "the deadline stopped the first invocation");
    w.confirmed_once(&ids);
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
    w.put_intent(confirmed, "CONFIRMED");
    w.put_intent(settled_image, "CONFIRMED");
    w.put_intent(parked, "FAILED");
    w.put_intent(pending, "PENDING");
    let records = [
        insert(0, confirmed, "PENDING"), // its INSERT, replayed after the confirmation
        insert(1, settled_image, "CONFIRMED"),
        insert(2, parked, "PENDING"),
        insert(3, pending, "PENDING"),
    ];
    let relay = w.relay(Duration::from_secs(2), Duration::from_millis(2_500));

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
        (handled.tally.already_settled, handled.tally.settled),
        (3, 1),
        "{:?}",
        handled.tally
    );
    assert_eq!(w.state(confirmed).0, "CONFIRMED");
    assert_eq!(w.state(parked).0, "FAILED");
    assert_eq!(w.state(pending).0, "CONFIRMED");
    assert_eq!(w.effects(pending), 1);
}

/// S12, S15: a transient answer (503) stays a failure: the stream retries from that record, the
/// records behind it are not attempted, and the retry confirms them all once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_a_transient_answer_retries_from_that_record_in_order() {
    let w = World::new().await;
    let (ids, records) = w.pending("transient", 3);
    let relay = w.relay(Duration::from_secs(2), Duration::from_millis(2_500));
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
    assert_eq!(w.state(&ids[1]).0, "PENDING");
    assert_eq!(w.effects(&ids[2]), 0, "not attempted behind the failure");

    let retried = relay.handle(&event(&records[1..]), in_30s()).await;
    assert!(failures(&retried).is_empty());
    w.confirmed_once(&ids);
}

/// Writes intent `id`, `PENDING`, created `age` ago (or with no `created_at`).
fn put_aged(w: &World, id: &str, age: Option<Duration>) {
    let mut item = intent(id, "PENDING");
    if let Some(age) = age {
        item = item.with(
            "created_at",
            lambda_dedup::clock::epoch_millis(SystemTime::now() - age),
        );
    }
    w.store.put_item("intents", item).expect("put intent");
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
    put_aged(&w, old, Some(Duration::from_secs(2 * 3600)));
    put_aged(&w, older, Some(Duration::from_secs(5 * 3600)));
    put_aged(&w, unknown, None);
    put_aged(&w, recent, Some(Duration::from_secs(60)));
    let settled = format!("{old}-settled");
    w.put_intent(&settled, "CONFIRMED");

    let relay = w.relay(Duration::from_secs(5), Duration::from_secs(6));
    let swept = relay.sweep(SystemTime::now()).await.expect("sweep");
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
    assert_eq!(handled.tally.settled, 3);
    for id in [old, older, unknown] {
        assert_eq!(w.state(id).0, "CONFIRMED");
        assert_eq!(w.effects(id), 1);
    }
    assert_eq!(w.state(recent).0, "PENDING", "left to its stream record");
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
    let (ids, records, poison) = w.pending_with_poison("stall", 25, 7).await;
    let poison = &poison;
    w.provider
        .inject(Fault::slow(100, Duration::from_millis(1500)));
    // The production settings: PROVIDER_TIMEOUT_MS 5000, RELAY_RECORD_BUDGET_MS 7000.
    let relay = w.relay(Duration::from_secs(5), Duration::from_secs(7));
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
        let done = (handled.tally.settled + handled.tally.parked) as usize;
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
    let (status, reason) = w.state(poison);
    assert_eq!(status, "FAILED");
    assert_eq!(reason.as_deref(), Some("provider_rejected_422"));
    w.confirmed_once(ids.iter().filter(|id| *id != poison));
}

/// The relay's own variables, as `main` reads them: the API and the table are required, the
/// record budget (one call and the writes around it) and the sweep's age have their defaults
/// and are read, the deadline margin is the function's one `DEDUP_DEADLINE_MARGIN_MS`; a budget
/// not longer than the call's timeout refuses the start, and so does the budget's former name,
/// `RELAY_DEADLINE_MARGIN_MS`, naming the new one.
#[tokio::test]
async fn the_relays_settings_are_read_as_main_reads_them() {
    let w = World::new().await;
    for missing in ["COLLECTIONS_API_URL", "INTENTS_TABLE"] {
        let env = w.env();
        let env = Env::from_pairs(
            ["DEDUP_NAMESPACE", "COLLECTIONS_API_URL", "INTENTS_TABLE"]
                .into_iter()
                .filter(|k| *k != missing)
                .filter_map(|k| env.get(k).map(|v| (k, v))),
        );
        let Err(err) = w.service(&env) else {
            panic!("started without {missing}");
        };
        assert!(err.to_string().contains(missing), "{missing}: {err}");
    }
    let defaults = w.service(&w.env()).expect("relay");
    assert_eq!(defaults.per_record(), Duration::from_millis(7_000));
    assert_eq!(defaults.redrive_after(), Duration::from_secs(3_600));
    assert_eq!(defaults.deadline_margin(), Duration::from_millis(1_500));
    let set = w
        .env()
        .with("PROVIDER_TIMEOUT_MS", "700")
        .with("RELAY_RECORD_BUDGET_MS", "1000")
        .with("RELAY_REDRIVE_AFTER_SECONDS", "60")
        .with("DEDUP_DEADLINE_MARGIN_MS", "300");
    let relay = w.service(&set).expect("relay");
    assert_eq!(relay.per_record(), Duration::from_millis(1_000));
    assert_eq!(relay.redrive_after(), Duration::from_secs(60));
    assert_eq!(relay.deadline_margin(), Duration::from_millis(300));
    // Refused as settings, naming both variables: a budget that one call could use up whole,
    // and the former name of the budget (never silently ignored).
    for (variable, value) in [
        ("PROVIDER_TIMEOUT_MS", "7000"),
        ("RELAY_DEADLINE_MARGIN_MS", "2000"),
    ] {
        let err = w
            .service(&w.env().with(variable, value))
            .expect_err(variable);
        let why = err.to_string();
        assert!(
            why.contains(variable) && why.contains("RELAY_RECORD_BUDGET_MS"),
            "{why}"
        );
        let settings = matches!(err.downcast_ref(), Some(BuildError::Settings(_)));
        assert!(settings, "{err:?}");
    }
}

/// `DEDUP_DEADLINE_MARGIN_MS` through `main`'s wiring: a call that hangs is abandoned the
/// function's margin before the invocation's deadline (the record retried, the intent still
/// `PENDING`), not when the provider's own timeout ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_call_is_abandoned_the_deadline_margin_before_the_deadline() {
    let w = World::new().await;
    let (ids, records) = w.pending("hung", 1);
    w.provider.inject(Fault::slow(1, Duration::from_secs(30)));
    let env = w
        .env()
        .with("PROVIDER_TIMEOUT_MS", "4000")
        .with("RELAY_RECORD_BUDGET_MS", "4400")
        .with("DEDUP_DEADLINE_MARGIN_MS", "1000");
    let relay = w.service(&env).expect("relay");
    let left = Duration::from_millis(4_500);
    let started = Instant::now();
    let handled = relay
        .handle(&event(&records), Some(SystemTime::now() + left))
        .await;
    let took = started.elapsed();
    // 1 s before the deadline (3.5 s in), before the provider's timeout (4 s) would end it.
    assert!(
        took >= Duration::from_millis(3_300) && took < Duration::from_millis(3_900),
        "answered after {took:?}"
    );
    assert_eq!(failures(&handled), vec![Some(seq_number(0))]);
    assert_eq!(handled.tally.transient, 1, "{:?}", handled.tally);
    assert_eq!(w.state(&ids[0]).0, "PENDING");
}

/// The service `main` runs takes both triggers: a stream event (with `Records`) is applied,
/// within the deadline the invocation's context carries, and answered with the partial batch
/// response; the schedule's event runs the sweep and is answered with what it found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_service_takes_the_stream_and_the_schedule() {
    use lambda_runtime::tower::ServiceExt;
    let w = World::new().await;
    w.put_intent("svc-0", "PENDING");
    put_aged(&w, "svc-old", Some(Duration::from_secs(2 * 3600)));
    let relay = w.relay(Duration::from_secs(2), Duration::from_millis(2_500));
    // Called as Lambda calls it, the invocation's deadline `left` from now in its context.
    let invoke = |payload: serde_json::Value, left: Duration| {
        let relay = relay.clone();
        let mut context = lambda_runtime::Context::default();
        context.deadline = lambda_dedup::clock::epoch_millis(SystemTime::now() + left);
        async move {
            relay
                .oneshot(lambda_runtime::LambdaEvent::new(payload, context))
                .await
                .expect("answer")
        }
    };
    let stream = json!({ "Records": [insert(0, "svc-0", "PENDING")] });
    let answer = invoke(stream, Duration::from_secs(30)).await;
    assert_eq!(answer, json!({"batchItemFailures": []}));
    assert_eq!(w.state("svc-0").0, "CONFIRMED");
    assert_eq!(w.effects("svc-0"), 1);

    // A deadline already too close for one record: nothing is posted, the record is reported.
    w.put_intent("svc-1", "PENDING");
    let stream = json!({ "Records": [insert(1, "svc-1", "PENDING")] });
    let answer = invoke(stream, Duration::from_secs(1)).await;
    assert_eq!(
        answer,
        json!({"batchItemFailures": [{"itemIdentifier": seq_number(1)}]})
    );
    assert_eq!(w.effects("svc-1"), 0);

    let schedule = json!({"source": "aws.events", "detail-type": "Scheduled Event"});
    let swept = invoke(schedule, Duration::from_secs(30)).await;
    assert_eq!(swept["pending"], 2, "{swept}");
    // The old one, and the one with no `created_at` (of unknown age, so counted as old).
    assert_eq!(swept["redriven"], 2, "{swept}");
    assert!(
        swept["oldest_pending_seconds"].as_u64() >= Some(7_000),
        "{swept}"
    );
}
