//! Telling TTL purges from other deletions on the mark table's stream.

use std::collections::BTreeMap;

use aws_lambda_events::event::dynamodb::EventRecord;

/// What one stream batch removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// TTL purges of completed marks, by consumer.
    pub(crate) purged: BTreeMap<String, u64>,
    /// Removals that were not TTL purges of completed marks (released claims, operators, TTL
    /// purges of abandoned in-progress claims, which were never applied).
    pub(crate) removed_otherwise: u64,
}

/// Whether a record is a deletion by DynamoDB's TTL process: a `REMOVE` whose user identity is
/// the service `dynamodb.amazonaws.com`, as AWS documents it.
pub(crate) fn is_ttl_purge(record: &EventRecord) -> bool {
    record.event_name == "REMOVE"
        && record
            .user_identity
            .as_ref()
            .is_some_and(|u| u.type_ == "Service" && u.principal_id == "dynamodb.amazonaws.com")
}

/// The consumer of a mark, from its key `namespace#consumer#digest`.
fn consumer(pk: &str) -> Option<&str> {
    let mut parts = pk.splitn(3, '#');
    let (_ns, consumer, _digest) = (parts.next()?, parts.next()?, parts.next()?);
    Some(consumer)
}

/// What a removed mark's old image says (read with `serde_dynamo`); an image that does not
/// read counts as a removal other than a TTL purge.
#[derive(Debug, Default, serde::Deserialize)]
struct OldMark {
    pk: Option<String>,
    status: Option<String>,
}

pub(crate) fn tally(records: &[EventRecord]) -> Tally {
    let mut t = Tally::default();
    for r in records {
        if r.event_name != "REMOVE" {
            continue;
        }
        let old: OldMark = serde_dynamo::from_item(r.change.old_image.clone()).unwrap_or_default();
        let completed = old.status.as_deref() == Some("COMPLETED");
        match (
            is_ttl_purge(r) && completed,
            old.pk.as_deref().and_then(consumer),
        ) {
            (true, Some(c)) => *t.purged.entry(c.to_owned()).or_default() += 1,
            _ => t.removed_otherwise += 1,
        }
    }
    t
}

/// One EMF record of `purged` TTL purges for `consumer`.
pub(crate) fn emf_line(consumer: &str, purged: u64) -> String {
    lambda_dedup_runtime::emf::line(consumer, &[("Purged", "Count", purged)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(name: &str, identity: Option<(&str, &str)>, pk: &str, status: &str) -> EventRecord {
        let mut r = json!({
            "awsRegion": "us-east-1", "eventID": "1", "eventName": name, "eventSource": "aws:dynamodb",
            "dynamodb": {"ApproximateCreationDateTime": 1700000000, "Keys": {"pk": {"S": pk}},
                         "OldImage": {"pk": {"S": pk}, "status": {"S": status}},
                         "SequenceNumber": "1", "SizeBytes": 10, "StreamViewType": "OLD_IMAGE"}
        });
        if let Some((t, p)) = identity {
            r["userIdentity"] = json!({"type": t, "principalId": p});
        }
        serde_json::from_value(r).expect("record")
    }

    /// S14: a TTL deletion (a `REMOVE` by the DynamoDB service) of a completed mark counts as
    /// purged; releases, operator deletions and TTL purges of abandoned claims do not, and neither
    /// does a record with an event name the SDK does not know.
    #[test]
    fn s14_ttl_purges_are_told_from_other_removals() {
        let records = vec![
            record(
                "REMOVE",
                Some(("Service", "dynamodb.amazonaws.com")),
                "prod#ledger-projector#aa",
                "COMPLETED",
            ),
            record(
                "REMOVE",
                Some(("Service", "dynamodb.amazonaws.com")),
                "prod#ledger-projector#bb",
                "COMPLETED",
            ),
            record(
                "REMOVE",
                Some(("Service", "dynamodb.amazonaws.com")),
                "prod#payment-dispatcher#cc",
                "COMPLETED",
            ),
            record(
                "UNKNOWN_TO_SDK_VERSION",
                None,
                "prod#payment-dispatcher#cx",
                "COMPLETED",
            ),
            record("REMOVE", None, "prod#payment-dispatcher#dd", "IN_PROGRESS"), // a released claim
            record(
                "REMOVE",
                Some(("Service", "dynamodb.amazonaws.com")),
                "prod#payment-dispatcher#ee",
                "IN_PROGRESS",
            ), // abandoned claim purged
            record("REMOVE", None, "prod#ledger-projector#ff", "COMPLETED"),     // an operator
            record("INSERT", None, "prod#ledger-projector#gg", "COMPLETED"),
        ];
        let t = tally(&records);
        assert_eq!(t.purged.get("ledger-projector"), Some(&2));
        assert_eq!(t.purged.get("payment-dispatcher"), Some(&1));
        assert_eq!(t.removed_otherwise, 3);
    }

    #[test]
    fn emf_carries_the_purge_count_per_consumer() {
        let v: serde_json::Value =
            serde_json::from_str(&emf_line("ledger-projector", 3)).expect("json");
        assert_eq!(v["Function"], "ledger-projector");
        assert_eq!(v["Purged"], 3);
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"],
            "Purged"
        );
    }
}
