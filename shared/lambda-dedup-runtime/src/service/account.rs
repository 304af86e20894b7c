//! The invocation's account (S14): the batch with each record once, the report rebuilt by
//! record, printed as one EMF line, and where the account and late events go.

use lambda_dedup::Message;
use lambda_dedup_engine::{BatchReport, Outcome, RetryCause};

tokio::task_local! {
    /// The outcomes of the invocations run inside [`with_outcomes`].
    pub(crate) static OUTCOMES: std::cell::RefCell<Vec<(String, Outcome)>>;
}

/// `invocation` run, with the outcome of each of its records in the order the service answered
/// them (what `testing::with_outcomes` hands a function's tests).
pub(crate) async fn with_outcomes<F: std::future::Future>(
    invocation: F,
) -> (F::Output, Vec<(String, Outcome)>) {
    OUTCOMES
        .scope(std::cell::RefCell::new(Vec::new()), async {
            let answer = invocation.await;
            (answer, OUTCOMES.with(|o| o.take()))
        })
        .await
}

/// Hands `report`'s outcomes to [`with_outcomes`], when the invocation runs inside it.
fn observe(report: &BatchReport) {
    let _ = OUTCOMES.try_with(|o| o.borrow_mut().extend(report.outcomes().iter().cloned()));
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
/// exactly the invocation's records (`ids`, in their order). The runner uses it.
pub(crate) fn rebuilt(function: &str, ids: &[String], report: BatchReport) -> BatchReport {
    let (report, internal_errors) = by_record(ids, report);
    if internal_errors > 0 {
        tracing::error!(
            function,
            internal_errors,
            "records without exactly one outcome: reported failed (fail closed)"
        );
        count(function, &[("InternalErrors", internal_errors)]);
    }
    report
}

/// Prints one EMF line of `function`'s counts (name, count).
pub(crate) fn count(function: &str, counts: &[(&str, u64)]) {
    let metrics: Vec<_> = counts.iter().map(|&(name, n)| (name, "Count", n)).collect();
    crate::emf::emit(crate::emf::line(function, &metrics));
}

/// Prints the invocation's account as one EMF line in `namespace` and logs it (S14).
pub(crate) fn print_account(
    namespace: &str,
    function: &str,
    request_id: &str,
    report: &BatchReport,
) {
    observe(report);
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
    let total = batch.len();
    let batch: Vec<Message> = if all_distinct(batch.iter().map(|m| m.message_id.as_str())) {
        batch
    } else {
        let mut seen = std::collections::HashSet::with_capacity(total);
        batch
            .into_iter()
            .filter(|m| seen.insert(m.message_id.clone()))
            .collect()
    };
    let repeated = (total - batch.len()) as u64;
    if repeated > 0 {
        tracing::info!(
            function,
            repeated,
            "the same message received more than once in one batch: processed once"
        );
        count(function, &[("RepeatedReceipts", repeated)]);
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
    // The usual case: one outcome per record, in the records' order, each record once.
    if report.outcomes().len() == ids.len()
        && report
            .outcomes()
            .iter()
            .zip(ids)
            .all(|((id, _), r)| id == r)
        && all_distinct(ids.iter().map(String::as_str))
    {
        return (BatchReport::from_outcomes(report.into_outcomes()), 0);
    }
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

/// Whether no two of `ids` are equal (sorted and compared, not hashed).
fn all_distinct<'a>(ids: impl ExactSizeIterator<Item = &'a str>) -> bool {
    let mut sorted: Vec<&str> = Vec::with_capacity(ids.len());
    sorted.extend(ids);
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

#[cfg(test)]
mod tests {
    use super::*;

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
