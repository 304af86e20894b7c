//! Kinesis as a source (feature `kinesis`): records become [`Message`]s, a shard's order is kept,
//! the records that can never apply are parked, and the partial batch response names the first
//! record not done by its sequence number.
//!
//! - The event's identity comes from the payload, through the function's key spec; a record's
//!   sequence number is a transport id and is only used to report it (S1).
//! - A batch comes from one shard. Records of one partition key are processed in order and a
//!   key stops at its first record that is not done (`run_batch` groups by `group_id`); the
//!   response names the first such record of the batch, and Lambda retries from there, so every
//!   later record comes again — those already applied are duplicates then (S8, S12).
//! - A record that can never be done (no identity, malformed, a conflict, a refused effect, a
//!   late event: a `rejected` or `conflict` outcome) is **parked** by the function itself
//!   ([`Parking`](crate::Parking)): the whole record — its data as received (base64), partition key, sequence
//!   number, shard and stream — with the rejection code goes to the parking queue
//!   (`DEDUP_PARKING_QUEUE_URL`), is counted (EMF `Parked`) and logged without its data, and
//!   only then is it passed by the checkpoint (S15). A record whose parking fails is not passed:
//!   it is the checkpoint, and Lambda retries from it (nothing lost; `ParkingFailed` counts it).
//!   Only records before the checkpoint are parked, so a record is parked once per delivery that
//!   reaches it — at least once, as everything on a stream: the parking queue's reader
//!   deduplicates by shard and sequence number.
//! - A record too large to park whole (its data in base64 inside the JSON is over SQS's 1 MiB
//!   from about 750 KiB of data) is parked **by reference** ([`crate::parking`]): the record as
//!   delivered without `kinesis.data`, and `data`: `{"bytes", "sha256", "head", "headBytes"}`
//!   (the data's length, the SHA-256 of its bytes in hex, and its first `headBytes` bytes in
//!   base64, as many as fit), with the attribute `dedup-parked-by: reference`. The data itself
//!   stays in the stream for its retention: `GetShardIterator` on `shardId` at the
//!   `AT_SEQUENCE_NUMBER` `record.kinesis.sequenceNumber`, then `GetRecords` with `Limit` 1,
//!   and the data's SHA-256 compared with `data.sha256`. It is passed by the checkpoint all
//!   the same, so the shard never waits on it.
//! - A transient failure (`retry`: the store out, throttled, an event in progress elsewhere) is
//!   never parked: it stays the checkpoint and is retried until the record is older than the
//!   trigger's `MaximumRecordAgeInSeconds` (`MaximumRetryAttempts: -1`, infinite, which
//!   `cargo xtask check-infra` requires), so an outage, however many attempts it lasts, skips no
//!   good record. The trigger's on-failure destination then only sees records older than that.
//! - Without a parking queue a Kinesis function refuses to start (`Parking::from_settings`): a
//!   record that can never apply would otherwise hold its shard until its maximum age, then be
//!   handed on by sequence number only, its data lost once the stream's retention ends.

use aws_lambda_events::event::kinesis::{KinesisEvent, KinesisEventRecord};
use aws_lambda_events::event::streams::KinesisEventResponse;

use lambda_dedup::Message;

use crate::parking::Letter;
use crate::source::stream::{Records, StreamRecord};

/// A Kinesis event, read by the stream door ([`crate::source::stream::Stream`]).
impl Records for KinesisEvent {
    type Record = KinesisEventRecord;
    const NAME: &'static str = "Kinesis";
    const CLOUDEVENTS_DATA: bool = true;

    fn records(&self) -> &[KinesisEventRecord] {
        &self.records
    }
}

impl StreamRecord for KinesisEventRecord {
    type Response = KinesisEventResponse;

    fn id(&self) -> String {
        self.kinesis.sequence_number.clone()
    }

    fn message(&self) -> Message {
        Message {
            message_id: self.id(),
            body: self.kinesis.data.0.clone(),
            group_id: Some(self.kinesis.partition_key.clone()),
            ..Message::default()
        }
    }

    fn parked(&self, function: &str, code: &str) -> Letter {
        parked_message(function, code, self)
    }

    fn parked_by_reference(&self, function: &str, code: &str, room: usize) -> Letter {
        parked_by_reference(function, code, self, room)
    }

    fn respond(checkpoint: Option<String>) -> KinesisEventResponse {
        let mut resp = KinesisEventResponse::default();
        let failures = &mut resp.batch_item_failures;
        crate::source::stream::name_checkpoint(failures, checkpoint, |f| &mut f.item_identifier);
        resp
    }
}

/// The shard a record came from: its event id is `<shard id>:<sequence number>`.
fn shard_of(record: &KinesisEventRecord) -> String {
    record
        .event_id
        .as_deref()
        .and_then(|e| e.rsplit_once(':'))
        .map(|(shard, _)| shard.to_owned())
        .unwrap_or_default()
}

/// The parking message of `record` (see [`Parking`](crate::Parking)): its body and attributes.
fn parked_message(function: &str, code: &str, record: &KinesisEventRecord) -> Letter {
    let body = serde_json::json!({
        "function": function,
        "code": code,
        "shardId": shard_of(record),
        "streamArn": record.event_source_arn,
        "record": record,
    });
    Letter {
        body: body.to_string(),
        attributes: attributes(code, record),
    }
}

/// The parking message of `record` by reference, its body at most `room` bytes (see the module
/// docs): the record without its data, and the data's length, digest and as much of its head as
/// fits.
fn parked_by_reference(
    function: &str,
    code: &str,
    record: &KinesisEventRecord,
    room: usize,
) -> Letter {
    let data = &record.kinesis.data.0;
    let mut delivered = serde_json::to_value(record).unwrap_or_default();
    if let Some(kinesis) = delivered
        .get_mut("kinesis")
        .and_then(serde_json::Value::as_object_mut)
    {
        kinesis.remove("data");
    }
    let body = |head: &[u8]| {
        use base64::Engine as _;
        serde_json::json!({
            "function": function,
            "code": code,
            "shardId": shard_of(record),
            "streamArn": record.event_source_arn,
            "parkedBy": "reference",
            "record": delivered,
            "data": {
                "bytes": data.len(),
                "sha256": crate::parking::sha256_hex(data),
                "head": base64::engine::general_purpose::STANDARD.encode(head),
                "headBytes": head.len(),
            },
        })
        .to_string()
    };
    // The body without a head, then as much of the head as the rest of `room` holds.
    let bare = body(&[]).len();
    let head = crate::parking::head_room(room.saturating_sub(bare)).min(data.len());
    Letter {
        body: body(&data[..head]),
        attributes: attributes(code, record),
    }
}

/// The attributes of `record`'s parking message: reason, shard and sequence number.
fn attributes(code: &str, record: &KinesisEventRecord) -> Vec<(String, String)> {
    let shard = shard_of(record);
    vec![
        ("dedup-reason".to_owned(), code.to_owned()),
        ("dedup-shard-id".to_owned(), shard),
        (
            "dedup-sequence-number".to_owned(),
            record.kinesis.sequence_number.clone(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parking::Parking;
    use base64::Engine as _;
    use lambda_dedup::{Effect, Item, KeySpec, Retention, Scope, Value};
    use lambda_dedup_config::PARKING_QUEUE_VAR as PARKING_QUEUE_VARIABLE;
    use lambda_dedup_config::{Env, SettingsError};
    use lambda_dedup_engine::{Deduplicator, HandlerError, Plan};
    use lambda_dedup_memory::MemoryStore;
    use lambda_runtime::LambdaEvent;
    use serde_json::json;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn record(seq: u64, account: &str, event_id: &str, amount: i64) -> serde_json::Value {
        let body = json!({"specversion": "1.0", "type": "credit", "source": "/k", "id": event_id,
            "tenantid": "acme", "data": {"account": account, "amount": amount}});
        json!({"eventSource": "aws:kinesis", "eventID": format!("shardId-000:{seq}"),
               "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": account,
                           "sequenceNumber": format!("{seq:020}"),
                           "approximateArrivalTimestamp": 1_700_000_000.0,
                           "data": base64::engine::general_purpose::STANDARD.encode(body.to_string())}})
    }

    fn event(records: Vec<serde_json::Value>) -> LambdaEvent<KinesisEvent> {
        let e: KinesisEvent = serde_json::from_value(json!({ "Records": records })).expect("event");
        LambdaEvent::new(e, lambda_runtime::Context::default())
    }

    fn unreachable_parking() -> Parking {
        Parking::unreachable()
    }

    /// A store with a `balances` table, and a deduplicator of CloudEvents on it.
    fn balances() -> (MemoryStore, Deduplicator) {
        let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).expect("r"));
        store.create_table("balances", "account");
        let spec = KeySpec::cloudevents(Scope::new("t", "k").expect("scope"), "tenantid");
        let dedup = Deduplicator::new(spec, store.clone());
        (store, dedup)
    }

    /// One invocation of `records`, as the builder's Kinesis service runs it: each record's
    /// `plan` committed with its mark, in order per partition key, parking unreachable.
    async fn run<P>(
        records: Vec<serde_json::Value>,
        dedup: &Deduplicator,
        plan: &P,
    ) -> KinesisEventResponse
    where
        P: Fn(&lambda_dedup::Derived) -> Result<Plan, HandlerError> + Sync,
    {
        run_parking(records, dedup, plan, &unreachable_parking()).await
    }

    /// [`run`], parking in `parking`.
    async fn run_parking<P>(
        records: Vec<serde_json::Value>,
        dedup: &Deduplicator,
        plan: &P,
        parking: &Parking,
    ) -> KinesisEventResponse
    where
        P: Fn(&lambda_dedup::Derived) -> Result<Plan, HandlerError> + Sync,
    {
        let e = event(records);
        let work = |m: Message, _| async move { dedup.transactional(&m, plan).await };
        let door = crate::source::stream::Stream::<KinesisEvent>::new();
        (crate::service::Runner::for_tests("k", 10))
            .invoke(&door, Some(parking), &e, &work)
            .await
            .expect("handled")
    }

    use crate::testing::ledger::checkpoints as ids;

    /// S15: a Kinesis function without a parking queue refuses to start, naming the variable
    /// (unset or blank); with one, it starts, parking there.
    #[test]
    fn s15_a_kinesis_function_without_a_parking_queue_refuses_to_start() {
        let base = Env::from_pairs([("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", "marks")]);
        let service = |env: &Env| {
            let (dedup, _) = crate::testing::on_memory(crate::Dedup::read(env, "k").expect("env"));
            dedup.door(
                crate::source::Kinesis,
                |_: crate::Event<serde_json::Value>| Vec::<Effect>::new(),
            )
        };
        for env in [
            base.clone(),
            base.clone().with(PARKING_QUEUE_VARIABLE, "  "),
        ] {
            let Err(crate::BuildError::Settings(missing)) = service(&env) else {
                panic!("started without a parking queue");
            };
            assert_eq!(
                missing,
                SettingsError::Missing(PARKING_QUEUE_VARIABLE.into())
            );
        }
        let url = "https://sqs.eu-west-1.amazonaws.com/123456789012/parking";
        assert!(service(&base.clone().with(PARKING_QUEUE_VARIABLE, url)).is_ok());
        let settings = crate::Settings::read(&base.with(PARKING_QUEUE_VARIABLE, url), "k");
        let parking = Parking::from_settings(&settings.expect("settings")).expect("starts");
        assert_eq!(parking.queue.url(), url);
    }

    /// S15: a record that can never apply is passed by the checkpoint only once it is parked:
    /// when the parking queue cannot be reached, the response names it, so Lambda retries from
    /// it, and the record before it (another account's) is applied all the same.
    #[tokio::test]
    async fn s15_a_record_whose_parking_fails_is_the_checkpoint() {
        let (store, dedup) = balances();
        let plan = credit;
        let mut poison = record(2, "b", "e2", 0);
        let body = json!({"specversion": "1.0", "type": "credit", "source": "/k", "id": "e2",
            "tenantid": "acme", "data": {"account": "b", "amount": "two"}});
        poison["kinesis"]["data"] = base64::engine::general_purpose::STANDARD
            .encode(body.to_string())
            .into();
        let shard = vec![record(1, "a", "e1", 1), poison, record(3, "a", "e3", 5)];
        let resp = run(shard, &dedup, &plan).await;
        assert_eq!(
            ids(&resp),
            vec![format!("{:020}", 2)],
            "not parked, so not passed"
        );
        let balance = store
            .item("balances", &Item::new().with("account", "a"))
            .and_then(|i| i.0.get("balance").cloned());
        assert_eq!(balance, Some(Value::N("6".into())), "a's records went on");
    }

    /// The credit plan of the tests: `amount` added to the account's balance; a record whose
    /// data is not an event, or whose amount is not a number, is rejected.
    fn credit(e: &lambda_dedup::Derived) -> Result<Plan, HandlerError> {
        let data = HandlerError::data(e)?;
        let amount = data["amount"]
            .as_i64()
            .ok_or_else(|| HandlerError::invalid("amount is not a number"))?;
        let account = data["account"].as_str().unwrap_or_default().to_owned();
        Ok(Plan {
            effects: vec![
                Effect::update("balances", Item::new().with("account", account.as_str()))
                    .expression("ADD balance :a")
                    .value(":a", amount),
            ],
            result: None,
        })
    }

    /// S15, issue 36.4: a record of 1 MiB that can never apply (not JSON), between good ones,
    /// is too large to park whole (its base64 in JSON is over SQS's 1 MiB), so it is parked by
    /// reference — its metadata, size, SHA-256 and head — and the checkpoint passes it: the
    /// good records, the one behind it on its own partition key included, are applied within
    /// the deliveries Lambda makes from each checkpoint, and the shard never waits on it.
    #[tokio::test]
    async fn s15_a_record_too_large_to_park_whole_is_parked_by_reference_and_passed() {
        let (store, dedup) = balances();
        let (parking, taken) = Parking::refusing_over_sqs_maximum();
        // Kinesis's largest record: data and partition key together 1 MiB.
        let data: Vec<u8> = (0..1_048_576 - 1).map(|i| (i % 251) as u8 | 0x80).collect();
        let mut big = record(2, "b", "e2", 0);
        big["kinesis"]["data"] = base64::engine::general_purpose::STANDARD
            .encode(&data)
            .into();
        let shard = [
            record(1, "a", "e1", 1),
            big,
            record(3, "b", "e3", 5),
            record(4, "a", "e4", 2),
        ];
        // Lambda delivers from the checkpoint again, as often as the checkpoint names a record;
        // four deliveries, as the review measured.
        let mut from = 0;
        for _ in 0..4 {
            let resp = run_parking(shard[from..].to_vec(), &dedup, &credit, &parking).await;
            let Some(checkpoint) = ids(&resp).into_iter().next() else {
                from = shard.len();
                break;
            };
            from = shard
                .iter()
                .position(|r| r["kinesis"]["sequenceNumber"] == checkpoint.as_str())
                .expect("the checkpoint is a record of the shard");
        }
        assert_eq!(from, shard.len(), "the shard got past every record");
        let balance = |account: &str| {
            store
                .item("balances", &Item::new().with("account", account))
                .and_then(|i| i.0.get("balance").cloned())
        };
        assert_eq!(balance("a"), Some(Value::N("3".into())));
        assert_eq!(
            balance("b"),
            Some(Value::N("5".into())),
            "the good record behind the big one on its key was applied"
        );
        let taken = taken.lock().expect("taken").clone();
        assert_eq!(taken.len(), 1, "the big record parked once");
        let (body, attributes) = &taken[0];
        assert!(attributes.contains(&("dedup-parked-by".into(), "reference".into())));
        assert!(attributes.contains(&("dedup-sequence-number".into(), format!("{:020}", 2))));
        assert!(attributes.contains(&("dedup-shard-id".into(), "shardId-000".into())));
        let v: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["parkedBy"], "reference");
        assert_eq!(v["shardId"], "shardId-000");
        assert_eq!(v["record"]["kinesis"]["partitionKey"], "b");
        assert_eq!(
            v["record"]["kinesis"]["sequenceNumber"],
            format!("{:020}", 2)
        );
        assert!(
            v["record"]["kinesis"].get("data").is_none(),
            "no data whole"
        );
        assert_eq!(v["data"]["bytes"], data.len());
        assert_eq!(v["data"]["sha256"], crate::parking::sha256_hex(&data));
        let head = base64::engine::general_purpose::STANDARD
            .decode(v["data"]["head"].as_str().expect("head"))
            .expect("base64");
        assert_eq!(v["data"]["headBytes"], head.len());
        assert!(head.len() > 512 * 1024, "as much of the head as fits");
        assert_eq!(head, data[..head.len()], "the head is the data's");
    }

    /// The whole record when it fits the parking queue, by reference (under the queue's
    /// maximum) when it does not: the choice is made on the size SQS counts.
    #[test]
    fn a_parked_message_over_the_queues_maximum_is_made_by_reference_under_it() {
        let parking = unreachable_parking().with_max_message_bytes(4096);
        let letter = |record| {
            let e = event(vec![record]);
            let r = &e.payload.records[0];
            let letter = parking.letter(parked_message("k", "invalid_payload", r), |room| {
                parked_by_reference("k", "invalid_payload", r, room)
            });
            let by = letter
                .attributes
                .iter()
                .find(|(k, _)| k == "dedup-parked-by");
            (by.map(|(_, v)| v.clone()), letter)
        };
        let (by, whole) = letter(record(7, "acct-9", "e7", 3));
        assert_eq!(by.as_deref(), Some("whole"));
        assert!(whole.body.contains("\"data\""));
        let mut big = record(8, "acct-9", "e8", 3);
        big["kinesis"]["data"] = base64::engine::general_purpose::STANDARD
            .encode(vec![7u8; 10_000])
            .into();
        let (by, letter) = letter(big);
        assert_eq!(by.as_deref(), Some("reference"));
        assert!(letter.size() <= 4096, "{}", letter.size());
        let v: serde_json::Value = serde_json::from_str(&letter.body).expect("json");
        assert_eq!(v["data"]["bytes"], 10_000);
        assert!(v["data"]["headBytes"].as_u64().expect("head") > 2000);
    }

    /// S15: what is parked is the whole record as Lambda delivered it, data included, with the
    /// rejection code, shard and sequence number.
    #[test]
    fn s15_the_parked_message_is_the_whole_record() {
        let e = event(vec![record(7, "acct-9", "e7", 3)]);
        let r = &e.payload.records[0];
        let Letter { body, attributes } = parked_message("k", "invalid_payload", r);
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["code"], "invalid_payload");
        assert_eq!(v["shardId"], "shardId-000");
        assert_eq!(v["record"]["kinesis"]["partitionKey"], "acct-9");
        assert_eq!(
            v["record"]["kinesis"]["sequenceNumber"],
            format!("{:020}", 7)
        );
        let data = base64::engine::general_purpose::STANDARD
            .decode(v["record"]["kinesis"]["data"].as_str().expect("data"))
            .expect("base64");
        assert_eq!(data, r.kinesis.data.0, "the data as received");
        assert!(attributes.contains(&("dedup-reason".into(), "invalid_payload".into())));
        assert!(attributes.contains(&("dedup-sequence-number".into(), format!("{:020}", 7))));
    }

    /// A shard with duplicates and a failure mid-shard: the first record not done is reported,
    /// its partition key stops there, and after Lambda retries from it each event is applied
    /// once.
    #[tokio::test]
    async fn a_shard_keeps_its_order_and_applies_each_event_once_across_a_retry() {
        let (store, dedup) = balances();
        let down = AtomicBool::new(true);
        let plan = |e: &lambda_dedup::Derived| {
            let data = HandlerError::data(e)?;
            let account = data["account"].as_str().unwrap_or_default().to_owned();
            // The effect's dependency is down while `down` holds, for account b only.
            if account == "b" && down.load(Ordering::Relaxed) {
                return Err(HandlerError::transient("dependency down"));
            }
            let effect = Effect::update("balances", Item::new().with("account", account.as_str()))
                .expression("ADD balance :a")
                .value(":a", data["amount"].as_i64().unwrap_or(0));
            Ok(Plan {
                effects: vec![effect],
                result: None,
            })
        };
        let shard = vec![
            record(1, "a", "e1", 1),
            record(2, "b", "e2", 10),
            record(3, "a", "e1", 1), // a duplicate (a producer retry)
            record(4, "b", "e4", 20),
            record(5, "a", "e5", 2),
        ];
        let first = run(shard.clone(), &dedup, &plan).await;
        let failed = ids(&first);
        assert_eq!(
            failed,
            vec![format!("{:020}", 2)],
            "the checkpoint is record 2"
        );
        let balance = |account: &str| {
            store
                .item("balances", &Item::new().with("account", account))
                .and_then(|i| i.0.get("balance").cloned())
        };
        assert_eq!(
            balance("a"),
            Some(Value::N("3".into())),
            "a's records went on"
        );
        assert_eq!(
            balance("b"),
            None,
            "b stopped at its first failure, 4 not before 2"
        );
        // Lambda retries from the checkpoint: records 2.. again, the dependency back.
        down.store(false, Ordering::Relaxed);
        let second = run(shard[1..].to_vec(), &dedup, &plan).await;
        assert!(second.batch_item_failures.is_empty(), "{second:?}");
        assert_eq!(balance("a"), Some(Value::N("3".into())), "no second effect");
        assert_eq!(balance("b"), Some(Value::N("30".into())));
    }
}
