//! Kafka as a source (feature `kafka`): Amazon MSK and self-managed Apache Kafka. Each record
//! becomes a [`Message`], each partition keeps its order, the records that can never apply are
//! parked, and the partial batch response ([`KafkaEventResponse`], written here: the events
//! crate has none) names each partition's first record not done.
//!
//! - **Identity** (S1). By default the record's position: cluster, topic, partition and offset
//!   (the attribute [`POSITION_ATTRIBUTE`], `"<cluster>|<topic>|<partition>|<offset>"`), where
//!   the cluster is the event's `eventSourceArn` (MSK) or, without one (self-managed Kafka),
//!   the cluster id the function is given in [`CLUSTER_ID_VARIABLE`] — never the event's
//!   `bootstrapServers`, a list of brokers that changes when a broker is added or replaced (the
//!   same records would then have new identities) and that two clusters can share. A Kafka
//!   door keyed by position refuses to start without that variable (MSK events are named by
//!   their own ARN all the same). A Kafka log keeps a record at its offset, so every
//!   redelivery of it — a retry from a checkpoint, a rebalance, a replay from an older offset —
//!   has one identity; a producer that sends the same event twice (a retry without
//!   `enable.idempotence`) writes it at two offsets, and the position does not catch that. Chosen openly, like SQS's
//!   `messageId`: a producer's own identity is the builder's `identity(Identity::attribute("<header>"))` (a
//!   record header, each header a message attribute of its name: text when UTF-8, bytes
//!   otherwise; the first of repeated names counts) or `identity("/pointer")` into the value.
//! - **Value**: the record's `value`, base64 as Lambda delivers it, decoded into the body. A
//!   value that is not base64 is rejected (`body_not_base64`) and parked; a missing value (a
//!   tombstone) is an empty body.
//! - **Order** (S12): a batch holds records of several partitions (`records` is keyed by
//!   `"<topic>-<partition>"`); each partition is a group of `run_batch`, processed in order and
//!   stopped at its first record not done, partitions in parallel. The response names, per
//!   partition, the first record neither done nor parked ([`KafkaItemIdentifier`]: the
//!   partition key and the offset), so Lambda resumes that partition from there and the records
//!   after it come again (those applied are duplicates then, S8).
//! - **Poison** (S15): a record that can never apply (no identity, not base64, not JSON, a
//!   conflict, a refused effect, too large: a `rejected` or `conflict` outcome) is parked whole
//!   in the parking queue (`DEDUP_PARKING_QUEUE_URL`, required) — `{"function", "code",
//!   "cluster", "partition", "record"}`, the record as delivered, its value included, with the
//!   attributes `dedup-reason`, `dedup-kafka-partition`, `dedup-kafka-offset` and
//!   `dedup-parked-by` — and only then passed, so the partition never waits on it. A record too
//!   large to park whole is parked by reference: the record without `value`, and `value`:
//!   `{"bytes", "sha256", "head", "headBytes"}` of the decoded value (of the value as received
//!   when it is not base64); the bytes stay in the topic for its retention, at that offset. A
//!   record whose parking fails is its partition's resume point (nothing lost).
//! - A transient failure is never parked: it is the resume point, retried until the trigger's
//!   maximum record age.

mod response;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use aws_lambda_events::event::kafka::{KafkaEvent, KafkaRecord};
use lambda_dedup::{AttributeValue, Message};
use lambda_dedup_engine::BatchReport;

use crate::door::{self, Answered, Cut, Door, InOrder};
use crate::parking::Letter;
use crate::source::stream::{Parcel, StreamRecord, base64_record};

pub use response::{KafkaBatchItemFailure, KafkaEventResponse, KafkaItemIdentifier};

/// The message attribute carrying a record's position, `"<cluster>|<topic>|<partition>|<offset>"`:
/// the Kafka door's default identity.
pub(crate) const POSITION_ATTRIBUTE: &str = "dedup-kafka-position";

/// The variable naming a self-managed Kafka cluster: its records' positions are scoped by it
/// (MSK's by the event's `eventSourceArn`). Required by a Kafka door keyed by position: Kafka's
/// own `cluster.id` is a good value, or any name that stays with the cluster.
pub(crate) const CLUSTER_ID_VARIABLE: &str = "DEDUP_KAFKA_CLUSTER_ID";

/// One record of a Kafka invocation, with where it stands.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// The cluster: the event's `eventSourceArn`, else the configured cluster id
    /// ([`CLUSTER_ID_VARIABLE`]), else (an identity of the builder's own, no cluster id) the
    /// event's `bootstrapServers`, only to tell an operator where a parked record came from.
    pub cluster: String,
    /// The topic-partition key of the event's `records` map.
    pub partition: String,
    /// The record as delivered.
    pub record: KafkaRecord,
    /// The value decoded, or `None` when it is not base64.
    value: Option<Vec<u8>>,
}

/// The cluster an event's records belong to: `eventSourceArn` (MSK), else `cluster_id` (the
/// configured [`CLUSTER_ID_VARIABLE`]), else `bootstrapServers`.
fn cluster(event: &KafkaEvent, cluster_id: Option<&str>) -> String {
    event
        .event_source_arn
        .clone()
        .filter(|a| !a.trim().is_empty())
        .or_else(|| cluster_id.map(str::to_owned))
        .or_else(|| event.bootstrap_servers.clone())
        .unwrap_or_default()
}

/// The records of `event`: partitions in the order of their keys, each partition's records as
/// delivered (by offset); a self-managed cluster named `cluster_id` ([`CLUSTER_ID_VARIABLE`]).
pub(crate) fn records(event: &KafkaEvent, cluster_id: Option<&str>) -> Vec<Record> {
    use base64::Engine as _;
    let cluster = cluster(event, cluster_id);
    let partitions: BTreeMap<&String, &Vec<KafkaRecord>> = event.records.iter().collect();
    partitions
        .into_iter()
        .flat_map(|(partition, records)| {
            let cluster = cluster.clone();
            records.iter().map(move |r| Record {
                cluster: cluster.clone(),
                partition: partition.clone(),
                value: match &r.value {
                    None => Some(Vec::new()),
                    Some(v) => base64::engine::general_purpose::STANDARD.decode(v).ok(),
                },
                record: r.clone(),
            })
        })
        .collect()
}

impl Record {
    /// The id the record is reported by: `"<partition key>@<offset>"`.
    pub(crate) fn id(&self) -> String {
        format!("{}@{}", self.partition, self.record.offset)
    }

    /// Whether the value is base64 (or absent).
    pub(crate) fn decodes(&self) -> bool {
        self.value.is_some()
    }

    /// The record's position: cluster, topic, partition, offset.
    pub(crate) fn position(&self) -> String {
        let topic = self.record.topic.clone().unwrap_or_else(|| {
            let cut = self.partition.rsplit_once('-');
            cut.map_or(self.partition.clone(), |(t, _)| t.to_owned())
        });
        let r = &self.record;
        format!("{}|{topic}|{}|{}", self.cluster, r.partition, r.offset)
    }

    /// The bytes a parking by reference digests: the decoded value, or the value as received.
    fn value_bytes(&self) -> Vec<u8> {
        match &self.value {
            Some(v) => v.clone(),
            None => self.record.value.clone().unwrap_or_default().into_bytes(),
        }
    }

    /// What parking sends of the record: `{"function", "code", "cluster", "partition",
    /// "record"}`, the record as delivered, its value by reference when too large.
    fn parcel<'a>(&'a self, function: &'a str, code: &'a str) -> Parcel<'a> {
        Parcel {
            function,
            code,
            from: [("cluster", &self.cluster), ("partition", &self.partition)],
            delivered: (
                "record",
                serde_json::to_value(&self.record).unwrap_or_default(),
            ),
            data: ("value", self.value_bytes()),
            attributes: self.attributes(code),
        }
    }

    /// The headers as message attributes (the first of a repeated name counts).
    fn headers(&self) -> BTreeMap<String, AttributeValue> {
        let mut out = BTreeMap::new();
        for (name, bytes) in self.record.headers.iter().flatten() {
            let bytes: Vec<u8> = bytes.iter().map(|b| *b as u8).collect();
            let value = match String::from_utf8(bytes) {
                Ok(text) => AttributeValue::String(text),
                Err(e) => AttributeValue::Binary(e.into_bytes()),
            };
            out.entry(name.clone()).or_insert(value);
        }
        out
    }

    fn attributes(&self, code: &str) -> Vec<(String, String)> {
        vec![
            ("dedup-reason".to_owned(), code.to_owned()),
            ("dedup-kafka-partition".to_owned(), self.partition.clone()),
            (
                "dedup-kafka-offset".to_owned(),
                self.record.offset.to_string(),
            ),
        ]
    }
}

impl StreamRecord for Record {
    type Response = KafkaEventResponse;

    fn id(&self) -> String {
        Record::id(self)
    }

    fn message(&self) -> Message {
        let mut attributes = self.headers();
        attributes.insert(
            POSITION_ATTRIBUTE.to_owned(),
            AttributeValue::String(self.position()),
        );
        Message {
            message_id: self.id(),
            body: self.value.clone().unwrap_or_default(),
            attributes,
            group_id: Some(self.partition.clone()),
        }
    }

    fn parked(&self, function: &str, code: &str) -> Letter {
        self.parcel(function, code).whole()
    }

    fn parked_by_reference(&self, function: &str, code: &str, room: usize) -> Letter {
        self.parcel(function, code).by_reference(room)
    }

    fn respond(checkpoint: Option<String>) -> KafkaEventResponse {
        let mut response = KafkaEventResponse::default();
        if let Some((partition, offset)) = checkpoint.as_deref().and_then(split_id) {
            response.add_failure(partition, offset);
        }
        response
    }
}

/// The partition key and offset of a record id (`"<partition key>@<offset>"`).
fn split_id(id: &str) -> Option<(&str, i64)> {
    let (partition, offset) = id.rsplit_once('@')?;
    Some((partition, offset.parse().ok()?))
}

/// The Kafka door (Amazon MSK, self-managed; feature `kafka`), for
/// [`Dedup::door`](crate::service::Dedup::door), built from the builder as configured
/// ([`Kafka::on`]): records in order per partition (any flow but a batch-wide transaction,
/// which would not keep order), each under `"<topic>-<partition>@<offset>"`, each partition's
/// first record not done named in a [`KafkaEventResponse`], records that can never apply (a
/// value that is not base64…) parked in `DEDUP_PARKING_QUEUE_URL` (required) before the
/// response passes them (S15).
///
/// Unless the builder was given an identity (`.identity(Identity::attribute("<header>"))` for
/// a record header, `.identity("/pointer")` into the value, `.identity(Identity::cloudevents())`), a record's
/// identity is its position — cluster, topic, partition and offset: it catches every
/// redelivery of a record, not a producer that writes one event twice. Keyed by position, it
/// refuses to start without `DEDUP_KAFKA_CLUSTER_ID`, the name of a self-managed cluster (an
/// MSK event is named by its `eventSourceArn`). The envelope id is refused: a Kafka record has
/// none.
///
/// ```compile_fail
/// use lambda_dedup_runtime::{Dedup, Effect, Event, source::Kafka, flow::transact};
/// fn f(dedup: Dedup) -> Result<(), lambda_dedup_runtime::BuildError> {
///     let work = transact(|_: Event<serde_json::Value>| Vec::<Effect>::new());
///     let kafka = Kafka::on(&dedup)?;
///     let _ = dedup.door(kafka, work.one_transaction_per_batch());
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Kafka {
    /// The cluster id the function is given ([`CLUSTER_ID_VARIABLE`]).
    cluster_id: Option<Arc<str>>,
}

impl Kafka {
    /// The door for `dedup`, as configured (its identity chosen): keyed by position (its
    /// default identity), a self-managed cluster is named by the id it is given, never by its
    /// bootstrap string (issue 42), so there is no start without it.
    pub fn on<S>(dedup: &crate::service::Dedup<S>) -> Result<Self, crate::service::BuildError> {
        let by_position = dedup.keyed_by_attribute(POSITION_ATTRIBUTE, true);
        let cluster_id = match by_position {
            true => Some(dedup.env().required(CLUSTER_ID_VARIABLE)?.trim().into()),
            false => dedup
                .env()
                .get(CLUSTER_ID_VARIABLE)
                .map(|v| v.trim().into()),
        };
        Ok(Self { cluster_id })
    }
}

impl Door for Kafka {
    type Event = KafkaEvent;
    type Response = KafkaEventResponse;
    type Ordering = InOrder;
    const NAME: &'static str = "Kafka";
    const ENVELOPE_ID: bool = false;
    const PARKS: bool = true;
    const CUT: Cut = Cut::WholeBatch;

    const IDENTITY: Option<&'static str> = Some(POSITION_ATTRIBUTE);

    fn messages(&self, event: &KafkaEvent, _: &lambda_runtime::Context) -> Vec<door::Record> {
        let records = records(event, self.cluster_id.as_deref());
        records
            .iter()
            .map(|r| base64_record(r, r.decodes()))
            .collect()
    }

    /// Each partition's records parked as a stream's are, its checkpoint named.
    async fn answer(
        &self,
        event: &KafkaEvent,
        done: Answered<'_>,
    ) -> Result<KafkaEventResponse, lambda_runtime::Error> {
        let records = records(event, self.cluster_id.as_deref());
        let mut response = KafkaEventResponse::default();
        let mut partitions: Vec<&str> = records.iter().map(|r| r.partition.as_str()).collect();
        partitions.dedup();
        for partition in partitions {
            let own: Vec<Record> = records
                .iter()
                .filter(|r| r.partition == partition)
                .cloned()
                .collect();
            let ids: HashSet<String> = own.iter().map(Record::id).collect();
            let outcomes = done.report.outcomes().iter();
            let outcomes = outcomes.filter(|(id, _)| ids.contains(id));
            let sub = BatchReport::from_outcomes(outcomes.cloned().collect());
            let answered = Answered {
                report: &sub,
                ..done
            };
            let named = crate::source::stream::checkpoint(&answered, &own).await?;
            response
                .batch_item_failures
                .extend(named.batch_item_failures);
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests;
