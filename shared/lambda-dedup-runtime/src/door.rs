//! A door: where events come in, as a trait. A door says what its event is ([`Door::Event`]),
//! how it splits into records — each a [`Message`] with an id of the door's own, never one a
//! producer chose, so that two records of one batch are never confused ([`Door::messages`]) —
//! where identity, tenant and caller come from and who vouched for them
//! ([`Door::IDENTITY`], [`Door::TENANT`], [`Door::SENDER_VOUCHED`]; the builder derives each event's
//! [`Provenance`](crate::Provenance) from them), which flows its ordering allows
//! ([`Door::Ordering`]) and what acknowledges the invocation ([`Door::answer`]: a partial batch
//! response, a stream checkpoint, an invocation's result, an HTTP answer, a direct invoke's
//! response).
//!
//! One runner takes every door through an invocation the same way: one cutoff from
//! `DEDUP_DEADLINE_MARGIN_MS`, a span per record, the records through the flow, the report by
//! record, late events to the reconciliation queue, the account and its EMF line, then the
//! door's answer, all before the deadline. A door that answers one request (HTTP, a webhook, a
//! direct invoke) is the same: its request is the invocation's one record, and it may count its
//! answer in its own EMF line ([`Door::metrics`]). The builder's doors (`Dedup::sqs`,
//! `source::Kafka`, `Dedup::http`, `Dedup::invoke`, …) are implementations; a function's own
//! door is one more, given to [`Dedup::door`](crate::Dedup::door):
//!
//! ```
//! use lambda_dedup_runtime::door::{AnyOrder, Door, Record, sqs_messages};
//! use lambda_dedup_runtime::events::{SqsBatchResponse, SqsEvent};
//! use lambda_dedup_runtime::lambda_runtime;
//!
//! /// SQS bodies as they come, answered with a partial batch response (the provided
//! /// [`answer`](Door::answer) of a door that answers `SqsBatchResponse`).
//! struct Plain;
//!
//! impl Door for Plain {
//!     type Event = SqsEvent;
//!     type Response = SqsBatchResponse;
//!     type Ordering = AnyOrder;
//!     const NAME: &'static str = "plain SQS";
//!
//!     fn messages(&self, event: &SqsEvent, _: &lambda_runtime::Context) -> Vec<Record> {
//!         sqs_messages(event).into_iter().map(Ok).collect()
//!     }
//! }
//! ```

use std::any::Any;
use std::borrow::Cow;
use std::future::Future;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_dedup::Reason;
use lambda_dedup_engine::{BatchReport, Outcome};

pub(crate) mod sqs;

/// What a door makes of each record: a delivery in the library's terms, and its attributes.
pub use lambda_dedup::{AttributeValue, Message};
/// An SQS event's messages as the SQS door reads them, and its partial batch response from a
/// report: for a door of your own in SQS bodies.
pub use sqs::{messages as sqs_messages, response as sqs_response};

/// One record of an invocation: its message, or its refusal (a record that is not what the door
/// takes), counted and answered like any other record.
pub type Record = Result<Message, Refused>;

/// A record the door refuses before any work: its id and its outcome.
#[derive(Debug, Clone)]
pub struct Refused {
    pub(crate) id: String,
    /// Its group, which a refusal stops as any refusal does (S12).
    pub(crate) group: Option<String>,
    pub(crate) outcome: Box<Outcome>,
}

impl Refused {
    /// Message `m` rejected for `code`; `reason` names fields, never values (S3).
    pub fn rejected(m: &Message, code: Reason, reason: impl Into<String>) -> Self {
        let outcome = Outcome::Rejected {
            code,
            reason: reason.into(),
            key: None,
            invalid: None,
        };
        Self::of(m, outcome)
    }

    /// Message `m` answered `outcome`, in its group.
    pub(crate) fn of(m: &Message, outcome: Outcome) -> Self {
        Self {
            id: m.message_id.clone(),
            group: m.group_id.clone(),
            outcome: Box::new(outcome),
        }
    }
}

/// The order a door keeps, and so the flows it takes: [`InOrder`] or [`AnyOrder`] (the flows
/// admit those two only).
pub trait Ordering {}

/// A door whose records go in order per group (a stream, Kafka, a broker, an async invocation):
/// any flow but a batch-wide transaction.
#[derive(Debug)]
pub enum InOrder {}

/// A door that keeps no order between groups beyond its messages' own (SQS): every flow,
/// a batch-wide transaction too.
#[derive(Debug)]
pub enum AnyOrder {}

impl Ordering for InOrder {}
impl Ordering for AnyOrder {}

/// Where the invocation's deadline cuts the work off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Each record on its own: what was done by the cutoff keeps its outcome, the rest is
    /// retried (a door that acknowledges record by record).
    EachRecord,
    /// The batch whole: not done by the cutoff, every record is retried (a door that answers
    /// with one checkpoint, or all or nothing).
    WholeBatch,
}

/// What a door answers from: the invocation's report, one outcome per record, accounted.
#[derive(Debug)]
// The function and the parking are read by the doors that park, when their features are on.
#[allow(dead_code)]
pub struct Answered<'a> {
    pub(crate) report: &'a BatchReport,
    pub(crate) function: &'a str,
    pub(crate) parking: Option<&'a Parking>,
}

impl Answered<'_> {
    /// The report: each record's outcome by its id, and the account.
    pub fn report(&self) -> &BatchReport {
        self.report
    }
}

/// Where the doors that park send what can never apply.
#[cfg(feature = "parking")]
pub(crate) use crate::parking::Parking;

/// No door parks without one of the features of the doors that park.
#[cfg(not(feature = "parking"))]
#[derive(Debug)]
pub(crate) enum Parking {}

/// `attributes` without the verified sender ([`lambda_dedup::VERIFIED_SENDER_ATTRIBUTE`]): only
/// the inbox forwarder writes it, and only to an SQS queue whose policy names who may send. A
/// producer's header, property or SNS attribute of that name, on any other door, vouches for
/// nothing, so it is not read as one (the event's provenance stays the payload's).
pub(crate) fn unvouched(
    mut attributes: std::collections::BTreeMap<String, lambda_dedup::AttributeValue>,
) -> std::collections::BTreeMap<String, lambda_dedup::AttributeValue> {
    attributes.remove(lambda_dedup::VERIFIED_SENDER_ATTRIBUTE);
    attributes
}

/// A door: an event source, as the runner takes it. See the [module](self).
pub trait Door: Send + Sync + 'static {
    /// The event Lambda invokes the function with.
    type Event: Send + Sync + 'static;
    /// What the invocation answers.
    type Response: Send + 'static;
    /// The order the door keeps, and so which flows it takes.
    type Ordering: Ordering;

    /// The door's name, in the builder's errors.
    const NAME: &'static str;
    /// Whether its records carry an envelope id (`Identity::envelope_id`); if not, that
    /// identity is refused at build.
    const ENVELOPE_ID: bool = true;
    /// Whether a CloudEvents identity reads the payload in the event's `data` (else in the
    /// whole record, as a stream's change is).
    const CLOUDEVENTS_DATA: bool = true;
    /// Whether whoever could send to the door was vouched for (an SQS queue whose policy names
    /// who may send), so that a verified sender named on a record counts; on any other door it
    /// is removed (S1).
    const SENDER_VOUCHED: bool = false;
    /// Whether records that can never apply are parked (`DEDUP_PARKING_QUEUE_URL`, required).
    const PARKS: bool = false;
    /// Where the deadline cuts the work off.
    const CUT: Cut = Cut::EachRecord;

    /// The message attribute that is a record's identity when the builder was given none.
    const IDENTITY: Option<&'static str> = None;
    /// The message attribute that is a record's tenant when the builder was given none (a
    /// tenant the payload names: the function must declare its producers trusted, S1).
    const TENANT: Option<&'static str> = None;

    /// The event's records in their order, each under its own id.
    fn messages(&self, event: &Self::Event, context: &lambda_runtime::Context) -> Vec<Record>;

    /// Whether a flow that takes a batch whole (a batch-wide transaction) may take this one.
    fn whole(&self, event: &Self::Event) -> bool {
        let _ = event;
        true
    }

    /// The event as the SQS records reconciliation sends on (S10), if late events are routed
    /// there; `batch` is the invocation's messages.
    fn reconciled<'a>(
        &self,
        event: &'a Self::Event,
        batch: &[Message],
    ) -> Option<Cow<'a, SqsEvent>> {
        let _ = (event, batch);
        None
    }

    /// The invocation's own metrics (name, count), for a door that answers one request and
    /// counts it by its answer (an HTTP door: `Requests` and the answer's outcome) rather than
    /// by the account's EMF line (S14); `None`, the default: the account's line.
    fn metrics(
        &self,
        event: &Self::Event,
        report: &BatchReport,
    ) -> Option<Vec<(&'static str, u64)>> {
        let _ = (event, report);
        None
    }

    /// The invocation's answer, once its report is accounted. Provided for a door that answers
    /// SQS's `SqsBatchResponse`: the partial batch response listing exactly the report's
    /// failures ([`sqs_response`]), as the SQS door answers. A door that answers anything else
    /// writes its own; without it, each of its invocations fails, naming the door.
    fn answer(
        &self,
        event: &Self::Event,
        done: Answered<'_>,
    ) -> impl Future<Output = Result<Self::Response, lambda_runtime::Error>> + Send {
        let _ = event;
        let partial: Box<dyn Any> = Box::new(sqs_response(done.report));
        std::future::ready(match partial.downcast::<Self::Response>() {
            Ok(answer) => Ok(*answer),
            Err(_) => Err(NoAnswer { door: Self::NAME }.into()),
        })
    }
}

/// A door that answers something other than SQS's partial batch response without an
/// [`answer`](Door::answer) of its own.
#[derive(Debug, thiserror::Error)]
#[error("the door {door} has no answer: its Door::answer must build its response")]
struct NoAnswer {
    door: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::events::sqs_event;
    use crate::testing::{env, on_memory};
    use crate::{Dedup, Effect, Event};

    /// SQS messages as they come, answering Lambda's plain `()` with no answer of its own.
    struct Unanswered;

    impl Door for Unanswered {
        type Event = SqsEvent;
        type Response = ();
        type Ordering = AnyOrder;
        const NAME: &'static str = "unanswered";

        fn messages(&self, event: &SqsEvent, _: &lambda_runtime::Context) -> Vec<Record> {
            sqs_messages(event).into_iter().map(Ok).collect()
        }
    }

    /// The provided answer is SQS's partial batch response; a door answering anything else
    /// without an answer of its own fails each invocation, naming itself (no panic).
    #[tokio::test]
    async fn a_door_that_answers_no_partial_batch_response_writes_its_own_answer() {
        let (dedup, _) = on_memory(Dedup::read(&env(&[]), "f").expect("settings"));
        let service = dedup
            .door(Unanswered, |_: Event<serde_json::Value>| {
                Vec::<Effect>::new()
            })
            .expect("service");
        let refused = service.call_with(sqs_event(&["{}"])).await;
        let refused = refused.expect_err("no answer of its own");
        assert!(refused.to_string().contains("unanswered"), "{refused}");
    }
}
