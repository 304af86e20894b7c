//! One asynchronous invocation (a direct SNS subscription, an EventBridge target): Lambda's
//! async invoke has no partial batch response, so the invocation's answer is all or nothing.
//!
//! - **Ok** when every record is acknowledged: applied, a duplicate (S8), or a late event safely
//!   in the reconciliation queue (S10).
//! - **An error** ([`NotAcknowledged`]) otherwise: Lambda retries the event (up to the
//!   function's `MaximumRetryAttempts`, 0–2) and then sends it, whole, to the function's
//!   on-failure destination or dead-letter queue, where an operator finds it and can redrive
//!   it. A retry (S8 in progress, S13 a store fault) may succeed then; a rejection or a
//!   conflict (S2, S11) cannot, and Lambda's bounded retries end it in that destination: never
//!   retried forever, never dropped, each attempt counted (S14). An async function without an
//!   on-failure destination loses what fails there: the template must give it one.
//!
//! A transient failure that outlasts Lambda's retries lands in the destination too (S15 would
//! retry it longer; Lambda's async retries are at most two): redrive it from there.

use std::borrow::Cow;
use std::marker::PhantomData;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_dedup::Message;
use lambda_dedup_engine::BatchReport;

use crate::door::{Answered, Door, Record};

/// An asynchronous invocation not acknowledged: Lambda retries it, then sends it to the
/// function's on-failure destination. Names the records and their outcomes, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} of {received} records not acknowledged: {}", failed.len(), listed(failed))]
pub struct NotAcknowledged {
    /// How many records the invocation had.
    pub received: usize,
    /// Each record not acknowledged and its outcome's label (`retry`, `conflict`, `rejected`).
    pub failed: Vec<(String, &'static str)>,
}

fn listed(failed: &[(String, &'static str)]) -> String {
    failed
        .iter()
        .map(|(id, outcome)| format!("{id} {outcome}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An event Lambda invokes the function with asynchronously (a direct SNS subscription, an
/// EventBridge target, S3's notifications): what its door ([`Invoked`]) reads.
pub(crate) trait AsyncEvent: Send + Sync + 'static {
    /// The order its door keeps.
    type Ordering: crate::door::Ordering;
    /// [`Door::NAME`].
    const NAME: &'static str;
    /// [`Door::ENVELOPE_ID`].
    const ENVELOPE_ID: bool = true;
    /// [`Door::CLOUDEVENTS_DATA`].
    const CLOUDEVENTS_DATA: bool = false;
    /// [`Door::IDENTITY`].
    const IDENTITY: Option<&'static str> = None;

    /// The event's records, in order ([`Door::messages`]).
    fn records(&self, context: &lambda_runtime::Context) -> Vec<Record>;
}

/// The door of an asynchronous invocation of event `E`: its records each cut at the deadline,
/// late events routed to reconciliation as SQS records of its messages, and the answer all or
/// nothing: Ok when every record is acknowledged, else [`NotAcknowledged`], for Lambda's async
/// retries and the on-failure destination.
pub(crate) struct Invoked<E>(PhantomData<fn() -> E>);

impl<E> Invoked<E> {
    pub(crate) fn new() -> Self {
        Self(PhantomData)
    }
}

impl<E: AsyncEvent> Door for Invoked<E> {
    type Event = E;
    type Response = ();
    type Ordering = E::Ordering;
    const NAME: &'static str = E::NAME;
    const ENVELOPE_ID: bool = E::ENVELOPE_ID;
    const CLOUDEVENTS_DATA: bool = E::CLOUDEVENTS_DATA;
    const IDENTITY: Option<&'static str> = E::IDENTITY;

    fn messages(&self, event: &E, context: &lambda_runtime::Context) -> Vec<Record> {
        event.records(context)
    }

    fn reconciled<'a>(&self, _: &'a E, batch: &[Message]) -> Option<Cow<'a, SqsEvent>> {
        Some(Cow::Owned(as_sqs(batch)))
    }

    async fn answer(&self, _: &E, done: Answered<'_>) -> Result<(), lambda_runtime::Error> {
        Ok(answer(done.report)?)
    }
}

/// Ok when every record of `report` is acknowledged, else which were not.
pub(crate) fn answer(report: &BatchReport) -> Result<(), NotAcknowledged> {
    let failed: Vec<(String, &'static str)> = report
        .outcomes()
        .iter()
        .filter(|(_, o)| !o.acknowledged())
        .map(|(id, o)| (id.clone(), o.label()))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(NotAcknowledged {
        received: report.outcomes().len(),
        failed,
    })
}

/// The messages as the SQS records reconciliation sends on: the inner message's body and its
/// string attributes, under the record's id.
fn as_sqs(batch: &[Message]) -> SqsEvent {
    use aws_lambda_events::event::sqs::{SqsMessage, SqsMessageAttribute};
    let mut event = SqsEvent::default();
    event.records = batch
        .iter()
        .map(|m| {
            let mut r = SqsMessage::default();
            r.message_id = Some(m.message_id.clone());
            r.body = Some(String::from_utf8_lossy(&m.body).into_owned());
            r.message_attributes = m
                .attributes
                .iter()
                .filter_map(|(name, v)| match v {
                    lambda_dedup::AttributeValue::String(s) => {
                        let mut a = SqsMessageAttribute::default();
                        a.string_value = Some(s.clone());
                        a.data_type = Some("String".into());
                        Some((name.clone(), a))
                    }
                    lambda_dedup::AttributeValue::Binary(_) => None,
                })
                .collect();
            r
        })
        .collect();
    event
}
