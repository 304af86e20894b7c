//! What the doors that park do the same way: the two stream doors — Kinesis
//! ([`crate::kinesis`]) and DynamoDB Streams ([`crate::dynamodb_stream`]) — are one door
//! ([`Stream`]): the records before the checkpoint that can never apply parked, and the first
//! record neither done nor parked named in the response; Kafka ([`crate::source::kafka`]) and Amazon
//! MQ ([`crate::source::mq`]) share the records, their base64 and their parking. Each source says only
//! what one of its records is ([`StreamRecord`]): its id and message, what parking it sends,
//! and the source's response.

use std::collections::HashMap;

use lambda_dedup::Message;
use lambda_dedup_engine::BatchReport;

use crate::door::Answered;
#[cfg(feature = "broker")]
use crate::door::{Record, Refused};
use crate::parking::{Letter, Parked, Parking};

/// A record of a stream source: what the sources do differently.
pub(crate) trait StreamRecord: Sync {
    /// The source's partial batch response.
    type Response;

    /// The id the record is reported by (its sequence number).
    fn id(&self) -> String;

    /// The record as a library message.
    fn message(&self) -> Message;

    /// What parking the record with `code` sends: the whole record (see [`Parking`]).
    fn parked(&self, function: &str, code: &str) -> Letter;

    /// What parking sends instead when the whole record is too large for the parking queue:
    /// a body of at most `room` bytes naming the record and digesting its bytes (its attributes
    /// are the whole letter's, set by [`Parking::letter`]).
    fn parked_by_reference(&self, function: &str, code: &str, room: usize) -> Letter;

    /// The response naming `checkpoint`, or no record.
    #[cfg_attr(not(feature = "checkpoint"), allow(dead_code))]
    fn respond(checkpoint: Option<String>) -> Self::Response;
}

/// The records as library messages, in the batch's order.
#[cfg(feature = "shards")]
pub(crate) fn messages<R: StreamRecord>(records: &[R]) -> Vec<Message> {
    records.iter().map(R::message).collect()
}

/// Names `checkpoint`, if any, in a response's `failures`: one failure `F` whose identifier
/// (reached by `identifier`) is the checkpoint. Both sources' responses have this shape.
#[cfg_attr(not(feature = "shards"), allow(dead_code))]
pub(crate) fn name_checkpoint<F: Default>(
    failures: &mut Vec<F>,
    checkpoint: Option<String>,
    identifier: impl FnOnce(&mut F) -> &mut Option<String>,
) {
    if let Some(id) = checkpoint {
        let mut failure = F::default();
        *identifier(&mut failure) = Some(id);
        failures.push(failure);
    }
}

impl Parking {
    /// [`Parking::park_each`] over an invocation's `records`: those before the checkpoint that
    /// can never apply parked as their source parks them, whole, or by reference when whole
    /// they would not fit the queue.
    pub(crate) async fn park_records<R: StreamRecord>(
        &self,
        function: &str,
        records: &[R],
        report: &BatchReport,
    ) -> Parked {
        let by_id: HashMap<String, &R> = records.iter().map(|r| (r.id(), r)).collect();
        self.park_each(function, report, |id, code| {
            let r = by_id.get(id)?;
            let whole = r.parked(function, code);
            Some(self.letter(whole, |room| r.parked_by_reference(function, code, room)))
        })
        .await
    }
}

#[cfg(feature = "shards")]
pub(crate) use shards::{Records, Stream};

/// The stream door, of Kinesis and DynamoDB Streams alike.
#[cfg(feature = "shards")]
mod shards {
    use std::marker::PhantomData;

    use super::{StreamRecord, checkpoint, messages};
    use crate::door::{Answered, Cut, Door, InOrder, Record};

    /// The records of a stream's event (Kinesis, DynamoDB Streams): what its door reads.
    pub(crate) trait Records: Send + Sync + 'static {
        /// One record.
        type Record: StreamRecord;
        /// The stream's name, in the builder's errors.
        const NAME: &'static str;
        /// Whether a CloudEvents identity reads the payload in `data` ([`Door::CLOUDEVENTS_DATA`]).
        const CLOUDEVENTS_DATA: bool;

        /// The event's records, in order.
        fn records(&self) -> &[Self::Record];
    }

    /// The door of a stream whose event is `E`: its records in order per group, the batch cut whole
    /// at the deadline, those before the checkpoint that can never apply parked, and the first
    /// record neither done nor parked named in the response ([`checkpoint`]).
    pub(crate) struct Stream<E>(PhantomData<fn() -> E>);

    impl<E> Stream<E> {
        pub(crate) fn new() -> Self {
            Self(PhantomData)
        }
    }

    impl<E: Records> Door for Stream<E>
    where
        <E::Record as StreamRecord>::Response: Send + 'static,
    {
        type Event = E;
        type Response = <E::Record as StreamRecord>::Response;
        type Ordering = InOrder;
        const NAME: &'static str = E::NAME;
        const ENVELOPE_ID: bool = false;
        const CLOUDEVENTS_DATA: bool = E::CLOUDEVENTS_DATA;
        const PARKS: bool = true;
        const CUT: Cut = Cut::WholeBatch;

        fn messages(&self, event: &E, _: &lambda_runtime::Context) -> Vec<Record> {
            messages(event.records()).into_iter().map(Ok).collect()
        }

        async fn answer(
            &self,
            event: &E,
            done: Answered<'_>,
        ) -> Result<Self::Response, lambda_runtime::Error> {
            checkpoint(&done, event.records()).await
        }
    }
}

#[cfg_attr(not(feature = "checkpoint"), allow(dead_code))]
/// Parks the `records` before the checkpoint that can never apply and answers with the first
/// record neither done nor parked. Parked records stay `rejected` or `conflict` in the account
/// (S14).
pub(crate) async fn checkpoint<R: StreamRecord>(
    done: &Answered<'_>,
    records: &[R],
) -> Result<R::Response, lambda_runtime::Error> {
    let parked = done.parking()?;
    let parked = parked
        .park_records(done.function, records, done.report)
        .await;
    Ok(R::respond(parked.checkpoint))
}

/// A parking door run without its parking: a bug, failed closed (the batch comes again).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("a door that parks ran without its parking queue")]
pub(crate) struct NoParking;

impl<'a> Answered<'a> {
    /// The parking of a door that parks ([`Door::PARKS`]).
    #[cfg_attr(not(feature = "checkpoint"), allow(dead_code))]
    pub(crate) fn parking(&self) -> Result<&'a Parking, NoParking> {
        self.parking.ok_or(NoParking)
    }
}

/// What parking sends of a record whose data travels in base64 (Kafka, Amazon MQ): the record as
/// delivered, where it came from, and its data, whole or by reference.
#[cfg(feature = "broker")]
pub(crate) struct Parcel<'a> {
    pub(crate) function: &'a str,
    pub(crate) code: &'a str,
    /// Where the record came from, in order (`cluster`, `partition`; `broker`, `queue`).
    pub(crate) from: [(&'static str, &'a str); 2],
    /// The record as delivered, under its name (`record`, `message`).
    pub(crate) delivered: (&'static str, serde_json::Value),
    /// The name of its data in `delivered` (`value`, `data`) and the data, decoded when it
    /// decodes.
    pub(crate) data: (&'static str, Vec<u8>),
    pub(crate) attributes: Vec<(String, String)>,
}

#[cfg(feature = "broker")]
impl Parcel<'_> {
    /// `{"function", "code", <from>…, <delivered>}`: the record whole.
    pub(crate) fn whole(self) -> Letter {
        let mut body = self.head();
        body.insert(self.delivered.0.into(), self.delivered.1);
        Letter {
            body: serde_json::Value::Object(body).to_string(),
            attributes: self.attributes,
        }
    }

    /// The record too large to park whole, in at most `room` bytes: `"parkedBy": "reference"`,
    /// the record as delivered without its data, and its data's `{"bytes", "sha256", "head",
    /// "headBytes"}` with as much of its head as fits.
    pub(crate) fn by_reference(self, room: usize) -> Letter {
        use base64::Engine as _;
        let (name, data) = (self.data.0, &self.data.1);
        let mut delivered = self.delivered.1.clone();
        if let Some(r) = delivered.as_object_mut() {
            r.remove(name);
        }
        let body = |head: &[u8]| {
            let mut body = self.head();
            body.insert("parkedBy".into(), "reference".into());
            body.insert(self.delivered.0.into(), delivered.clone());
            let data = serde_json::json!({
                "bytes": data.len(),
                "sha256": crate::parking::sha256_hex(data),
                "head": base64::engine::general_purpose::STANDARD.encode(head),
                "headBytes": head.len(),
            });
            body.insert(name.into(), data);
            serde_json::Value::Object(body).to_string()
        };
        let bare = body(&[]).len();
        let head = crate::parking::head_room(room.saturating_sub(bare)).min(data.len());
        Letter {
            body: body(&data[..head]),
            attributes: self.attributes.clone(),
        }
    }

    fn head(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut body = serde_json::Map::new();
        body.insert("function".into(), self.function.into());
        body.insert("code".into(), self.code.into());
        for (name, value) in self.from {
            body.insert(name.into(), value.into());
        }
        body
    }
}

/// The outcome of a record whose body travels in base64 and is not base64: rejected, no key
/// derived (S2).
#[cfg(feature = "broker")]
pub(crate) fn not_base64() -> lambda_dedup_engine::Outcome {
    lambda_dedup_engine::Outcome::Rejected {
        code: lambda_dedup::Reason::BodyNotBase64,
        reason: "the record's data is not base64".into(),
        key: None,
        invalid: None,
    }
}

/// A record's message, refused [`not_base64`] when its data `decodes` not.
#[cfg(feature = "broker")]
pub(crate) fn base64_record<R: StreamRecord>(record: &R, decodes: bool) -> Record {
    let m = record.message();
    match decodes {
        true => Ok(m),
        false => Err(Refused::of(&m, not_base64())),
    }
}
