//! One SQS invocation: event in, partial batch response out (S12, S14).

use std::borrow::Cow;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_dedup::{AttributeValue, Message};
use lambda_dedup_engine::{BatchReport, Outcome, RetryCause};

use crate::door::{Answered, AnyOrder, Door, Record, Refused};

/// The SQS messages of `event` as library messages (body, attributes, FIFO group).
pub fn messages(event: &SqsEvent) -> Vec<Message> {
    event.records.iter().map(message).collect()
}

/// One SQS record as a library message.
pub fn message(r: &SqsMessage) -> Message {
    Message {
        message_id: r.message_id.clone().unwrap_or_default(),
        body: r.body.clone().unwrap_or_default().into_bytes(),
        attributes: r
            .message_attributes
            .iter()
            .filter_map(|(name, a)| {
                let value = match (&a.string_value, &a.binary_value) {
                    (Some(s), _) => AttributeValue::String(s.clone()),
                    (None, Some(b)) => AttributeValue::Binary(b.0.clone()),
                    (None, None) => return None,
                };
                Some((name.clone(), value))
            })
            .collect(),
        group_id: r.attributes.get("MessageGroupId").cloned(),
    }
}

/// The partial batch response listing exactly the report's failures.
pub fn response(report: &BatchReport) -> SqsBatchResponse {
    let mut resp = SqsBatchResponse::default();
    for id in report.failures() {
        resp.add_failure(id.to_owned());
    }
    resp
}

/// The SQS door: each message under its `messageId`, opened first when the builder was given
/// an [`Envelope`](crate::Envelope); answered with the partial batch response listing exactly
/// the report's failures. Its queue's policy names who may send, so a verified sender on a
/// message counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sqs {
    pub(crate) envelope: Option<crate::Envelope>,
}

impl Door for Sqs {
    type Event = SqsEvent;
    type Response = SqsBatchResponse;
    type Ordering = AnyOrder;
    const NAME: &'static str = "SQS";
    const SENDER_VOUCHED: bool = true;

    fn messages(&self, event: &SqsEvent, _: &lambda_runtime::Context) -> Vec<Record> {
        let open = |m: Message| {
            let (id, group) = (m.message_id.clone(), m.group_id.clone());
            crate::source::envelope::opened(self.envelope, m).map_err(|outcome| Refused {
                id,
                group,
                outcome: Box::new(outcome),
            })
        };
        messages(event).into_iter().map(open).collect()
    }

    /// A FIFO batch in an envelope goes message by message, so that a message whose envelope is
    /// refused stops its group as any refusal does (S12).
    fn whole(&self, event: &SqsEvent) -> bool {
        let fifo = (event.records.iter()).any(|r| r.attributes.contains_key("MessageGroupId"));
        !(fifo && self.envelope.is_some())
    }

    fn reconciled<'a>(&self, event: &'a SqsEvent, _: &[Message]) -> Option<Cow<'a, SqsEvent>> {
        Some(Cow::Borrowed(event))
    }

    async fn answer(
        &self,
        _: &SqsEvent,
        done: Answered<'_>,
    ) -> Result<SqsBatchResponse, lambda_runtime::Error> {
        Ok(response(done.report))
    }
}

/// Where an invocation's account goes and where its events for reconciliation go: what
/// the runner needs beyond the batch.
#[derive(Debug, Clone)]
pub(crate) struct Accounting {
    /// The EMF namespace.
    pub namespace: String,
    /// Where events for reconciliation go.
    pub reconciliation: Reconciliation,
}

/// Where an invocation's events for reconciliation go.
#[derive(Debug, Clone)]
pub(crate) enum Reconciliation {
    /// This queue (the builder's, from its own environment); none: they stay failed, for the DLQ.
    To(Option<std::sync::Arc<crate::queue::Queue>>),
}

/// [`by_record`], with its internal errors logged and counted (`InternalErrors`): the report of
/// exactly the invocation's records (`ids`, in their order). Every source's runner uses it.
pub(crate) fn rebuilt(function: &str, ids: &[String], report: BatchReport) -> BatchReport {
    let (report, internal_errors) = by_record(ids, report);
    if internal_errors > 0 {
        tracing::error!(
            function,
            internal_errors,
            "records without exactly one outcome: reported failed (fail closed)"
        );
        crate::emf::emit(crate::emf::line(
            function,
            &[("InternalErrors", "Count", internal_errors)],
        ));
    }
    report
}

/// Prints the invocation's account as one EMF line in `namespace` and logs it (S14).
pub(crate) fn print_account(
    namespace: &str,
    function: &str,
    request_id: &str,
    report: &BatchReport,
) {
    crate::testing::observe(report);
    let a = &report.account;
    // EMF must be a bare JSON line on stdout for CloudWatch to extract it, hence not `tracing`.
    crate::emf::emit(a.emf_line(namespace, function));
    tracing::info!(
        function,
        request_id,
        received = a.received,
        applied = a.applied,
        duplicate = a.duplicate,
        retry = a.retry,
        conflict = a.conflict,
        rejected = a.rejected,
        closes = a.closes(),
        "batch done"
    );
}

/// The batch with each message once, and its record ids in their order, each once (S12, S14).
///
/// SQS standard queues deliver at least once, and Lambda's poller gathers several receives into
/// one batch, so two receipts of one message (the same `messageId`) can meet in a batch. They
/// are one message: processed once, and its one outcome answers for every copy, in the partial
/// batch response (which names records by id) and in the account (which counts records by id).
/// The extra receipts are logged and counted (`RepeatedReceipts`), never an internal error.
pub(crate) fn distinct(function: &str, batch: Vec<Message>) -> (Vec<Message>, Vec<String>) {
    let mut seen = std::collections::HashSet::with_capacity(batch.len());
    let total = batch.len();
    let batch: Vec<Message> = batch
        .into_iter()
        .filter(|m| seen.insert(m.message_id.clone()))
        .collect();
    let repeated = (total - batch.len()) as u64;
    if repeated > 0 {
        tracing::info!(
            function,
            repeated,
            "the same message received more than once in one batch: processed once"
        );
        crate::emf::emit(crate::emf::line(
            function,
            &[("RepeatedReceipts", "Count", repeated)],
        ));
    }
    let ids = batch.iter().map(|m| m.message_id.clone()).collect();
    (batch, ids)
}

/// The report rebuilt from the invocation's records, by id (S14: the account is of the records
/// that arrived, not of the outcomes produced): each record gets the outcome the batch gave it;
/// a record the batch gave none (a bug: a dropped outcome) is a retry, reported failed so the
/// queue redelivers it (fail closed); an outcome for no record, or a second outcome for one
/// record, is dropped. Returns the report and how many of those internal errors there were.
pub(crate) fn by_record(ids: &[String], report: BatchReport) -> (BatchReport, u64) {
    let mut given: std::collections::HashMap<String, Outcome> =
        std::collections::HashMap::with_capacity(report.outcomes().len());
    let mut errors = 0u64;
    for (id, outcome) in report.into_outcomes() {
        if !ids.contains(&id) || given.contains_key(&id) {
            errors += 1;
            continue;
        }
        given.insert(id, outcome);
    }
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    let outcomes = ids
        .iter()
        .map(|id| {
            let outcome = match given.get(id) {
                // Callers pass each id once ([`distinct`]); an id listed twice anyway is
                // answered once and the repeat failed closed.
                Some(o) if seen.insert(id.clone()) => o.clone(),
                _ => {
                    errors += 1;
                    Outcome::retry(
                        RetryCause::NotProcessed,
                        "internal error: no outcome for this record",
                    )
                }
            };
            (id.clone(), outcome)
        })
        .collect();
    (BatchReport::from_outcomes(outcomes), errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s12_sqs_event_round_trip() {
        let event: SqsEvent = serde_json::from_value(serde_json::json!({"Records": [
            {"messageId": "m1", "body": "{\"id\":1}", "attributes": {"MessageGroupId": "g1"},
             "messageAttributes": {
                "event-id": {"stringValue": "e-1", "dataType": "String"},
                "blob": {"binaryValue": "aGk=", "dataType": "Binary"}
             }},
            {"messageId": "m2", "body": "x", "attributes": {}, "messageAttributes": {}}
        ]}))
        .expect("event");
        let msgs = messages(&event);
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].message_id, "m1");
        assert_eq!(msgs[0].group_id.as_deref(), Some("g1"));
        assert_eq!(
            msgs[0].attributes.get("event-id"),
            Some(&AttributeValue::String("e-1".into()))
        );
        assert_eq!(
            msgs[0].attributes.get("blob"),
            Some(&AttributeValue::Binary(b"hi".to_vec()))
        );
        assert_eq!(msgs[1].group_id, None);

        let report = BatchReport::from_outcomes(vec![
            ("m1".into(), Outcome::Applied),
            ("m2".into(), Outcome::retry(RetryCause::Transient, "test")),
        ]);
        let json = serde_json::to_value(response(&report)).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m2"}]})
        );
    }

    fn report(outcomes: &[(&str, Outcome)]) -> BatchReport {
        BatchReport::from_outcomes(
            outcomes
                .iter()
                .map(|(id, o)| ((*id).to_owned(), o.clone()))
                .collect(),
        )
    }

    /// S14: the account is checked by record id in the runtime glue. A batch runner that drops one
    /// record's outcome cannot make that record look handled: it is reported failed and
    /// counted as an internal error, and the account still counts every record received.
    #[test]
    fn s14_a_record_without_an_outcome_is_reported_failed() {
        let ids: Vec<String> = ["m1", "m2", "m3"].map(String::from).to_vec();
        let dropped = report(&[("m1", Outcome::Applied), ("m3", Outcome::Applied)]);
        assert!(
            dropped.failures().is_empty(),
            "the runner alone reports nothing"
        );
        let (fixed, errors) = by_record(&ids, dropped);
        assert_eq!(errors, 1);
        assert_eq!(fixed.failures(), ["m2"]);
        assert_eq!(fixed.account.received, 3);
        assert_eq!(fixed.account.retry, 1);
        assert!(fixed.account.closes());
    }

    /// S14: an outcome for a record that did not arrive, or a second one for one record, does
    /// not count as a record handled.
    #[test]
    fn s14_outcomes_for_unknown_or_repeated_ids_are_internal_errors() {
        let ids: Vec<String> = ["m1", "m2"].map(String::from).to_vec();
        let odd = report(&[
            ("m1", Outcome::Applied),
            ("m1", Outcome::Applied),
            ("ghost", Outcome::Applied),
        ]);
        let (fixed, errors) = by_record(&ids, odd);
        assert_eq!(errors, 3, "the repeat, the ghost and the missing m2");
        assert_eq!(fixed.account.received, 2);
        assert_eq!(fixed.account.applied, 1);
        assert_eq!(fixed.failures(), ["m2"]);
    }

    #[test]
    fn a_complete_report_is_unchanged() {
        let ids: Vec<String> = ["m1", "m2"].map(String::from).to_vec();
        let full = report(&[
            ("m1", Outcome::Applied),
            (
                "m2",
                Outcome::Rejected {
                    code: lambda_dedup_engine::Reason::InvalidPayload,
                    reason: "x".into(),
                    key: None,
                    invalid: None,
                },
            ),
        ]);
        let (fixed, errors) = by_record(&ids, full.clone());
        assert_eq!(errors, 0);
        assert_eq!(fixed.failures(), full.failures());
        assert_eq!(fixed.account, full.account);
    }
}
