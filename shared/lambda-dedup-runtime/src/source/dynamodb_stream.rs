//! DynamoDB Streams as a source (feature `dynamodb-streams`): stream records become
//! [`Message`]s, each item's order is kept, the records that can never apply are parked
//! ([`Parking`](crate::parking::Parking), S15), and the partial batch response names the first record neither done nor
//! parked by its sequence number — the same rules as [`crate::kinesis`]. A parked record is
//! `{"function", "code", "streamArn", "record"}` with the record as Lambda delivered it, and the
//! attributes `dedup-reason` and `dedup-sequence-number`.
//!
//! A record whose parked form exceeds the parking queue's maximum (a `NEW_AND_OLD_IMAGES`
//! stream of items near DynamoDB's 400 KB, binary attributes in base64, can reach it) is parked
//! by reference ([`crate::parking`]): the record without its `NewImage` and `OldImage` (its
//! `Keys`, `SequenceNumber`, `eventName`, `eventID`… kept), and `images`: `{"bytes", "sha256"}`,
//! the length and SHA-256 of the whole record's JSON, compact, every object's keys sorted (the
//! images are maps, in no fixed order otherwise). The record
//! stays in the stream for its retention (24 hours): `DescribeStream` names the shard whose
//! sequence number range holds `SequenceNumber`, and `GetShardIterator` at that sequence number
//! reads it; after that, the item itself, by its keys, is what is left.
//!
//! A record's body is plain JSON read from the stream's DynamoDB JSON with `serde_dynamo`:
//! `{"eventName", "keys", "newImage", "oldImage"}`, so a key spec takes the event's identity from
//! the item (`IdentitySource::JsonPointer("/newImage/order_id")`, say), never from the record's
//! sequence number or event id, which are transport ids (S1). Records of one item (same keys)
//! are one group, processed in order.

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_dedup::Message;
use serde_json::{Value, json};

use crate::parking::Letter;
use crate::source::stream::{Records, StreamRecord};

/// A DynamoDB Streams event, read by the stream door ([`crate::source::stream::Stream`]): the payload
/// is the whole change, whatever the identity.
impl Records for Event {
    type Record = EventRecord;
    const NAME: &'static str = "DynamoDB Streams";
    const CLOUDEVENTS_DATA: bool = false;

    fn records(&self) -> &[EventRecord] {
        &self.records
    }
}

/// One stream record's change as the builder's work sees it ([`DynamoDbStream`](crate::source::DynamoDbStream)):
/// the item's keys and images read into the user's type `T` (an image the record does not carry
/// is `None`: a `REMOVE` has no new image, a `NEW_IMAGE` stream no old one).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Change<T> {
    /// `INSERT`, `MODIFY` or `REMOVE`.
    pub event_name: String,
    /// The item's key attributes, as plain JSON.
    pub keys: Value,
    /// The item after the change.
    #[serde(default = "none")]
    pub new_image: Option<T>,
    /// The item before the change.
    #[serde(default = "none")]
    pub old_image: Option<T>,
}

fn none<T>() -> Option<T> {
    None
}

fn plain(item: &serde_dynamo::Item) -> Value {
    if item.is_empty() {
        return Value::Null;
    }
    serde_dynamo::from_item(item.clone()).unwrap_or(Value::Null)
}

/// A stream record, run like a Kinesis one ([`crate::source::stream`]).
impl StreamRecord for EventRecord {
    type Response = DynamoDbEventResponse;

    /// Its sequence number (or, without one, its event id).
    fn id(&self) -> String {
        let seq = self.change.sequence_number.as_ref();
        seq.cloned().unwrap_or_else(|| self.event_id.clone())
    }

    /// The body is the item's keys and images as plain JSON; the group, its keys.
    fn message(&self) -> Message {
        let keys = plain(&self.change.keys);
        let body = json!({"eventName": self.event_name, "keys": keys,
                          "newImage": plain(&self.change.new_image),
                          "oldImage": plain(&self.change.old_image)});
        Message {
            message_id: self.id(),
            body: body.to_string().into_bytes(),
            group_id: Some(keys.to_string()),
            ..Message::default()
        }
    }

    /// The record whole, with its stream and the sequence number as an attribute.
    fn parked(&self, function: &str, code: &str) -> Letter {
        let body = json!({"function": function, "code": code,
                          "streamArn": self.event_source_arn, "record": self});
        Letter {
            body: body.to_string(),
            attributes: attributes(self, code),
        }
    }

    /// The record without its images, and their length and digest (see the module docs). The
    /// keys are at most DynamoDB's 2 KB partition and 1 KB sort key, so it fits any `room` SQS
    /// allows.
    fn parked_by_reference(&self, function: &str, code: &str, _room: usize) -> Letter {
        let whole = canonical(self);
        let mut delivered = serde_json::to_value(self).unwrap_or_default();
        if let Some(change) = delivered.get_mut("dynamodb").and_then(Value::as_object_mut) {
            change.remove("NewImage");
            change.remove("OldImage");
        }
        let body = json!({"function": function, "code": code,
                          "streamArn": self.event_source_arn, "parkedBy": "reference",
                          "record": delivered,
                          "images": {"bytes": whole.len(),
                                     "sha256": crate::parking::sha256_hex(&whole)}});
        Letter {
            body: body.to_string(),
            attributes: attributes(self, code),
        }
    }

    fn respond(checkpoint: Option<String>) -> DynamoDbEventResponse {
        let mut resp = DynamoDbEventResponse::default();
        let failures = &mut resp.batch_item_failures;
        crate::source::stream::name_checkpoint(failures, checkpoint, |f| &mut f.item_identifier);
        resp
    }
}

/// `record` as compact JSON with every object's keys sorted: the images are maps, serialized in
/// no fixed order, so this is the one form whose length and digest name the record, and which
/// an operator can compute again from the record read back from the stream.
fn canonical(record: &EventRecord) -> Vec<u8> {
    fn sorted(v: Value) -> Value {
        match v {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.into_iter().collect();
                entries.sort_by(|(a, _), (b, _)| a.cmp(b));
                Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
            other => other,
        }
    }
    let value = serde_json::to_value(record).unwrap_or_default();
    serde_json::to_vec(&sorted(value)).unwrap_or_default()
}

/// The attributes of `record`'s parking message: reason and sequence number.
fn attributes(record: &EventRecord, code: &str) -> Vec<(String, String)> {
    vec![
        ("dedup-reason".to_owned(), code.to_owned()),
        ("dedup-sequence-number".to_owned(), record.id()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parking::Parking;
    use crate::testing::on_memory;
    use crate::{Dedup, Env, Event as Typed, HandlerError, SettingsError};
    use aws_lambda_events::event::dynamodb::Event;
    use lambda_dedup::{Effect, Item, Value as V};
    use lambda_dedup_memory::MemoryStore;

    fn record(seq: u64, order: &str, total: serde_json::Value) -> serde_json::Value {
        let key = json!({"order_id": {"S": order}});
        let image = json!({"order_id": {"S": order}, "customer": {"S": "c-1"}, "total": total});
        crate::testing::events::insert_record(seq, key, image)
    }

    fn n(total: i64) -> serde_json::Value {
        json!({ "N": total.to_string() })
    }

    #[derive(Debug, serde::Deserialize)]
    struct Order {
        customer: String,
        #[serde(deserialize_with = "number")]
        total: i64,
    }

    /// A stream image's number arrives as a JSON number or a string, as `serde_dynamo` reads it.
    fn number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        match serde_json::Value::deserialize(d)? {
            Value::Number(n) => n
                .as_i64()
                .ok_or_else(|| serde::de::Error::custom("not an integer")),
            Value::String(s) => s.parse().map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom("not a number")),
        }
    }
    use serde::Deserialize as _;

    fn env() -> Env {
        Env::from_pairs([
            ("DEDUP_NAMESPACE", "t"),
            ("DEDUP_MARK_TABLE", "marks"),
            (
                "DEDUP_PARKING_QUEUE_URL",
                "http://127.0.0.1:1/000000000000/parking",
            ),
        ])
    }

    /// The customer's running total: each new order's total added once.
    fn credit(e: Typed<Change<Order>>) -> Result<Effect, HandlerError> {
        let order = e
            .payload
            .new_image
            .ok_or_else(|| HandlerError::invalid("no new image"))?;
        Ok(Effect::add(
            "totals",
            ("customer", order.customer),
            "total",
            order.total,
        ))
    }

    fn stream(records: Vec<serde_json::Value>) -> Event {
        serde_json::from_value(json!({ "Records": records })).expect("stream event")
    }

    /// The builder's DynamoDB Streams service of `credit`, the identity from the new image, on
    /// a memory store with a `totals` table; parked in `parking` if given (else the env's).
    fn orders(
        parking: Option<Parking>,
    ) -> (crate::Service<Event, DynamoDbEventResponse>, MemoryStore) {
        let (dedup, store) = on_memory(Dedup::read(&env(), "orders").expect("settings"));
        store.create_table("totals", "customer");
        let dedup = dedup.identity("/newImage/order_id");
        let dedup = match parking {
            Some(parking) => dedup.parking(parking),
            None => dedup,
        };
        (
            dedup
                .door(crate::source::DynamoDbStream, credit)
                .expect("service"),
            store,
        )
    }

    /// Customer c-1's running total.
    fn total(store: &MemoryStore) -> Option<V> {
        store
            .item("totals", &Item::new().with("customer", "c-1"))
            .and_then(|i| i.0.get("total").cloned())
    }

    /// The builder's DynamoDB Streams service: the identity comes from the item, so the same
    /// order seen twice (a replayed record, a re-inserted item) is one event; the sequence
    /// number only reports the record.
    #[tokio::test]
    async fn stream_records_are_deduplicated_by_the_item_not_the_record() {
        let (service, store) = orders(None);
        let records = vec![
            record(1, "o-1", n(5)),
            record(2, "o-2", n(7)),
            record(3, "o-1", n(5)),
        ];
        let resp = service.call_with(stream(records)).await.expect("handled");
        assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
        assert_eq!(total(&store), Some(V::N("12".into())), "o-1 counted once");
    }

    /// S15 on DynamoDB Streams: a record that can never apply (its total is not a number) is
    /// parked before the checkpoint passes it; while its parking fails it is the checkpoint
    /// (nothing lost), and the other items' records still went on.
    #[tokio::test]
    async fn s15_a_record_that_cannot_apply_is_not_passed_unparked() {
        let (service, store) = orders(Some(Parking::unreachable()));
        let records = vec![
            record(1, "o-1", n(5)),
            record(2, "o-2", json!({"S": "five"})),
            record(3, "o-3", n(7)),
        ];
        let resp = service.call_with(stream(records)).await.expect("handled");
        let named: Vec<_> = resp
            .batch_item_failures
            .iter()
            .filter_map(|f| f.item_identifier.clone())
            .collect();
        assert_eq!(named, [format!("{:021}", 2)], "not parked, so not passed");
        assert_eq!(
            total(&store),
            Some(V::N("12".into())),
            "the other orders went on"
        );
    }

    /// S15, issue 36.4, on DynamoDB Streams: a `NEW_AND_OLD_IMAGES` record of two items near
    /// DynamoDB's 400 KB (binary, so base64 in the record) parks over SQS's 1 MiB whole; one
    /// that can never apply is parked by reference — its keys, sequence number, the images'
    /// size and SHA-256 — and passed, so the records after it go on.
    #[tokio::test]
    async fn s15_a_record_too_large_to_park_whole_is_parked_by_reference_and_passed() {
        use base64::Engine as _;
        let (parking, taken) = Parking::refusing_over_sqs_maximum();
        let (service, store) = orders(Some(parking));
        let blob = base64::engine::general_purpose::STANDARD.encode(vec![0x5a_u8; 399_000]);
        let image = json!({"order_id": {"S": "o-2"}, "customer": {"S": "c-1"},
                           "total": {"S": "five"}, "scan": {"B": blob}});
        let mut big =
            crate::testing::events::insert_record(2, json!({"order_id": {"S": "o-2"}}), image);
        big["eventName"] = "MODIFY".into();
        big["dynamodb"]["OldImage"] = big["dynamodb"]["NewImage"].clone();
        big["dynamodb"]["StreamViewType"] = "NEW_AND_OLD_IMAGES".into();
        let records = vec![record(1, "o-1", n(5)), big, record(3, "o-3", n(7))];
        let whole: EventRecord = serde_json::from_value(records[1].clone()).expect("record");
        let whole = canonical(&whole);
        assert!(whole.len() > 1_048_576, "too large to park whole");
        let resp = service.call_with(stream(records)).await.expect("handled");
        assert!(resp.batch_item_failures.is_empty(), "passed: {resp:?}");
        assert_eq!(total(&store), Some(V::N("12".into())), "the others went on");
        let taken = taken.lock().expect("taken").clone();
        assert_eq!(taken.len(), 1);
        let (body, attributes) = &taken[0];
        assert!(attributes.contains(&("dedup-parked-by".into(), "reference".into())));
        let v: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(v["record"]["dynamodb"]["Keys"]["order_id"]["S"], "o-2");
        assert_eq!(
            v["record"]["dynamodb"]["SequenceNumber"],
            format!("{:021}", 2)
        );
        assert!(v["record"]["dynamodb"].get("NewImage").is_none());
        assert_eq!(v["images"]["bytes"], whole.len());
        assert_eq!(v["images"]["sha256"], crate::parking::sha256_hex(&whole));
    }

    /// Without a parking queue the service is refused, naming the variable.
    #[test]
    fn a_stream_service_without_parking_is_refused() {
        let env = Env::from_pairs([("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", "marks")]);
        let (dedup, _) = on_memory(Dedup::read(&env, "orders").expect("settings"));
        let Err(e) = dedup
            .identity("/newImage/order_id")
            .door(crate::source::DynamoDbStream, credit)
        else {
            panic!("built without parking");
        };
        assert!(
            matches!(&e, crate::BuildError::Settings(SettingsError::Missing(v)) if v == "DEDUP_PARKING_QUEUE_URL"),
            "{e}"
        );
    }
}
