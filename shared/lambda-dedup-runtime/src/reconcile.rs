//! Late events go to reconciliation (S10). The library reports an event older than the retention
//! window as rejected with code `late_event`: the mark table cannot say whether it was handled.
//! With `DEDUP_RECONCILIATION_QUEUE_URL` set, such a message is sent to that queue and then
//! acknowledged; if the send fails, or no queue is configured, it stays a batch item failure and
//! ends in the DLQ like any rejection.
//!
//! What the reconciliation consumer gets, within SQS's 10 message attributes: the body as it
//! came; `dedup-reason` (`late_event`); `dedup-key`, the event's dedup key (stable across every
//! delivery of the event, so the consumer can deduplicate its own input); `dedup-message-id`,
//! the original SQS message id; `dedup-attributes`, every original string attribute as one JSON
//! object (nothing dropped); and the first `NATIVE_ATTRIBUTES` (6) of those, by name, as
//! attributes of their own.

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_dedup::DedupKey;
use lambda_dedup_engine::{BatchReport, Outcome, Reason};

use crate::queue::Queue;
use lambda_dedup_config::Settings;

/// The reconciliation queue `settings` name (`DEDUP_RECONCILIATION_QUEUE_URL`, sent to with their
/// SDK timeouts), or none: late events then stay failed, for the DLQ. Refused in a build without
/// an SQS client (the feature `sqs-client`): late events would silently go to the DLQ instead.
pub(crate) fn queue(
    settings: &Settings,
) -> Result<Option<std::sync::Arc<Queue>>, lambda_dedup_config::SettingsError> {
    let Some(url) = settings.queues.reconciliation.as_deref() else {
        return Ok(None);
    };
    #[cfg(not(feature = "sqs-client"))]
    {
        let _ = url;
        Err(lambda_dedup_config::SettingsError::refused(
            lambda_dedup_config::RECONCILIATION_QUEUE_VAR,
            lambda_dedup_config::SettingRule::NotInThisBuild {
                feature: "sqs-client",
                why: "late events would go to the DLQ instead of reconciliation",
            },
        ))
    }
    #[cfg(feature = "sqs-client")]
    Ok(Some(std::sync::Arc::new(Queue::new(
        url,
        settings.sdk_timeouts,
    ))))
}

/// The message attributes a late event is sent with (see the module docs): at most
/// `MAX_ATTRIBUTES`, whatever the original carried.
pub(crate) fn late_attributes(
    reason: Reason,
    key: &str,
    message_id: &str,
    original: &std::collections::HashMap<
        String,
        aws_lambda_events::event::sqs::SqsMessageAttribute,
    >,
) -> Vec<(String, String)> {
    let strings: std::collections::BTreeMap<&str, &str> = original
        .iter()
        .filter_map(|(k, a)| Some((k.as_str(), a.string_value.as_deref()?)))
        .collect();
    lambda_dedup_engine::late_attributes(reason, key, message_id, &strings)
}

/// Sends the report's events for reconciliation ([`Reason::for_reconciliation`]) to `queue`
/// (none: they stay failed, for the DLQ); each one sent becomes [`Outcome::Reconciled`]
/// (acknowledged). The account is unchanged: they stay `rejected` (S14).
pub(crate) async fn route_to(queue: Option<&Queue>, event: &SqsEvent, report: &mut BatchReport) {
    let late: std::collections::HashMap<String, (Reason, String, DedupKey)> = report
        .outcomes()
        .iter()
        .filter_map(|(id, o)| match o {
            Outcome::Rejected {
                code,
                reason,
                key: Some(key),
                ..
            } if code.for_reconciliation() => {
                Some((id.clone(), (*code, reason.clone(), key.clone())))
            }
            _ => None,
        })
        .collect();
    if late.is_empty() {
        return;
    }
    let Some(queue) = queue else {
        tracing::warn!(
            late = late.len(),
            "late events and no DEDUP_RECONCILIATION_QUEUE_URL: they go to the DLQ"
        );
        return;
    };
    let mut sent = Vec::new();
    for record in &event.records {
        let Some((id, (reason, detail, key))) = record
            .message_id
            .as_deref()
            .and_then(|id| Some((id, late.get(id)?)))
        else {
            continue;
        };
        if sent.iter().any(|(s, _, _, _)| s == id) {
            // A second receipt of a message already sent (see `sqs::distinct`).
            continue;
        }
        let attributes = late_attributes(*reason, key.as_str(), id, &record.message_attributes);
        match queue
            .send(record.body.clone().unwrap_or_default(), &attributes)
            .await
        {
            Ok(()) => {
                tracing::info!(message_id = id, "late event sent to reconciliation");
                sent.push((id.to_owned(), *reason, detail.clone(), key.clone()));
            }
            Err(e) => tracing::warn!(message_id = id, error = %e,
                "could not send a late event to reconciliation; it will be retried"),
        }
    }
    for (id, code, reason, key) in sent {
        report.set_outcome(
            &id,
            Outcome::Reconciled {
                code,
                reason,
                key: Some(key),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::event::sqs::SqsMessageAttribute;

    fn attribute(v: &str) -> SqsMessageAttribute {
        serde_json::from_value(serde_json::json!({"stringValue": v, "dataType": "String"}))
            .expect("attribute")
    }

    /// S10: a late event with the 10 attributes SQS allows is still routable: the router's
    /// own attributes fit, every original one is kept (in `dedup-attributes`), and the
    /// consumer gets the dedup key and the original message id to deduplicate its input.
    #[test]
    fn s10_late_event_attributes_stay_within_sqs_limit_and_carry_the_key() {
        let original: std::collections::HashMap<String, SqsMessageAttribute> = (0..10)
            .map(|i| (format!("attr-{i}"), attribute(&format!("v{i}"))))
            .collect();
        let out = late_attributes(Reason::LateEvent, "demo#ledger#abc", "m-1", &original);
        assert!(out.len() <= 10, "{} attributes: SQS allows 10", out.len());
        let get = |k: &str| out.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("dedup-reason"), Some("late_event"));
        assert_eq!(get("dedup-key"), Some("demo#ledger#abc"));
        assert_eq!(get("dedup-message-id"), Some("m-1"));
        let all: std::collections::BTreeMap<String, String> =
            serde_json::from_str(get("dedup-attributes").expect("kept")).expect("json");
        assert_eq!(all.len(), 10, "every original attribute is kept");
        assert_eq!(get("attr-0"), Some("v0"));
    }
}
