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

/// How the `pk` of `forget`'s audit item starts (`lambda_dedup_dynamodb::AUDIT_PREFIX`): the
/// forgotten mark's key follows.
const AUDIT_PREFIX: &str = "!audit#";

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
    /// An audit item's: the forgotten mark's status.
    mark_status: Option<String>,
}

impl OldMark {
    /// The consumer whose completed mark this removal purges by TTL: a completed mark's, or
    /// the audit item of a forgotten completed mark (it carries the mark's TTL, and its purge
    /// stands in for the mark's, so the account's forgotten count becomes a purge).
    fn purged_consumer(&self) -> Option<&str> {
        let pk = self.pk.as_deref()?;
        match (pk.strip_prefix(AUDIT_PREFIX), self.status.as_deref()) {
            (None, Some("COMPLETED")) => consumer(pk),
            (Some(mark), Some("FORGOTTEN")) if self.mark_status.as_deref() == Some("COMPLETED") => {
                consumer(mark)
            }
            _ => None,
        }
    }
}

pub(crate) fn tally(records: &[EventRecord]) -> Tally {
    let mut t = Tally::default();
    for r in records {
        if r.event_name != "REMOVE" {
            continue;
        }
        let old: OldMark = serde_dynamo::from_item(r.change.old_image.clone()).unwrap_or_default();
        match (is_ttl_purge(r), old.purged_consumer()) {
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

    /// Issue 42: `forget`'s audit items carry the forgotten mark's TTL; the TTL purge of one
    /// of a completed mark counts as that mark's purge (the account's forgotten count becomes a
    /// purged one), by the consumer in the mark's key; an operator's deletion of it, or the
    /// audit of an in-progress claim, does not.
    #[test]
    fn forget_audit_items_purged_by_ttl_count_as_their_marks_purge() {
        let ttl = Some(("Service", "dynamodb.amazonaws.com"));
        let audit = |identity, mark_status: &str| {
            let mut r = record(
                "REMOVE",
                identity,
                "!audit#prod#ledger-projector#aa#forgotten#1700000000000",
                "FORGOTTEN",
            );
            r.change.old_image.insert(
                "mark_status".into(),
                serde_dynamo::AttributeValue::S(mark_status.to_owned()),
            );
            r
        };
        let t = tally(&[
            audit(ttl, "COMPLETED"),
            audit(None, "COMPLETED"),
            audit(ttl, "IN_PROGRESS"),
        ]);
        assert_eq!(t.purged.get("ledger-projector"), Some(&1), "{t:?}");
        assert_eq!(t.purged.len(), 1, "{t:?}");
        assert_eq!(t.removed_otherwise, 2);
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
