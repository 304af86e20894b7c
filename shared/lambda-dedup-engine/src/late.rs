//! What a late event carries to reconciliation (S10), within SQS's 10 message attributes:
//! `dedup-reason`, `dedup-key` (stable across every delivery of the event), `dedup-message-id`
//! (the original message id), `dedup-attributes` (every original string attribute as one JSON
//! object, nothing dropped), and the first six of those (`NATIVE_ATTRIBUTES`), by name, as
//! attributes of their own. No SQS type here: the runtime and the operators' tool send them.

use crate::Reason;

/// SQS's limit of message attributes on one message.
const MAX_ATTRIBUTES: usize = 10;
/// Attributes the router adds: reason, key, original message id, original attributes.
const OWN_ATTRIBUTES: usize = 4;
/// Original attributes also copied as attributes of their own (all are in `dedup-attributes`).
const NATIVE_ATTRIBUTES: usize = MAX_ATTRIBUTES - OWN_ATTRIBUTES;

/// The message attributes a late event is sent to reconciliation with, from the original's
/// string attributes by name: at most `MAX_ATTRIBUTES` (SQS's limit), whatever the original
/// carried (the runtime's router, and the operators' `lambda-dedup redrive` from a dead-letter
/// queue).
pub fn late_attributes(
    reason: Reason,
    key: &str,
    message_id: &str,
    original: &std::collections::BTreeMap<&str, &str>,
) -> Vec<(String, String)> {
    let strings: std::collections::BTreeMap<&str, &str> = original
        .iter()
        .filter(|(k, _)| !k.starts_with("dedup-"))
        .map(|(k, v)| (*k, *v))
        .collect();
    let mut out = vec![
        ("dedup-reason".to_owned(), reason.code().to_owned()),
        ("dedup-key".to_owned(), key.to_owned()),
        ("dedup-message-id".to_owned(), message_id.to_owned()),
        (
            "dedup-attributes".to_owned(),
            serde_json::to_string(&strings).unwrap_or_else(|_| "{}".into()),
        ),
    ];
    out.extend(
        strings
            .iter()
            .take(NATIVE_ATTRIBUTES)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    out
}
