//! Operators' writes and reads of the mark table: removing a mark on purpose ([`DynamoStore::forget`],
//! always with an audit item) and counting marks for the account (S14, [`count_marks`]).
//!
//! An audit item lives in the mark table, apart from the marks: its `pk` is [`AUDIT_PREFIX`],
//! the forgotten mark's key and `#forgotten#<epoch ms>`. No namespace starts with `!`, so no
//! function role's `dynamodb:LeadingKeys` grant (`<namespace>#<consumer>#*`) covers it: a
//! function can neither forge nor rewrite an audit item, only the operators' own role can write
//! it. Its `status` is `FORGOTTEN` (never counted as a mark), and it holds the caller's identity
//! as AWS names it (STS `GetCallerIdentity`), the operator's own note (`--by`), when, why and
//! the mark as it was — its stored answer only as a SHA-256 digest (`result_sha256`): an answer
//! may hold personal data, and the audit item, like every item of the table, reaches the
//! stream's readers (`mark-auditor`). It carries the forgotten mark's own TTL (`expires_at`):
//! it lives as long as the mark would have, and its purge stands in for the mark's (the
//! `mark-auditor` counts it `Purged`). The account counts the audit items of completed marks per
//! consumer: marks = applied − purged − forgotten.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use lambda_dedup::clock::epoch_millis;
use lambda_dedup::{DedupKey, Mark, MarkStatus, MarkStore};
use sha2::{Digest, Sha256};

use crate::attr;
use crate::codec::{self, ms, s, secs};
use crate::error::Error;
use crate::{Client, DynamoStore};

/// The `status` of an audit item of a forgotten mark.
pub const FORGOTTEN: &str = "FORGOTTEN";
/// How an audit item's `pk` starts: outside every namespace (a namespace is letters, digits,
/// `.`, `_` and `-`), so outside every function role's `dynamodb:LeadingKeys`.
pub const AUDIT_PREFIX: &str = "!audit#";
/// Audit item attributes.
pub mod audit_attr {
    /// The operator's own note of who asked (`--by`, or `$USER`): not proof of anything.
    pub const BY: &str = "forgotten_by";
    /// Who forgot the mark, as AWS authenticated the caller (STS `GetCallerIdentity`'s ARN).
    pub const CALLER: &str = "forgotten_by_caller";
    /// Why.
    pub const REASON: &str = "reason";
    /// When (epoch milliseconds).
    pub const AT: &str = "forgotten_at";
    /// The key of the forgotten mark.
    pub const MARK_KEY: &str = "mark_pk";
    /// The forgotten mark's status (`COMPLETED` or `IN_PROGRESS`).
    pub const MARK_STATUS: &str = "mark_status";
    /// The forgotten mark as it was, as JSON, its stored answer as a digest only
    /// (`result_sha256`).
    pub const MARK: &str = "mark";
}

/// Who removes a mark, and why: recorded in the audit item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgetRequest<'a> {
    /// The mark's key.
    pub key: &'a DedupKey,
    /// Who asks, as the operator says (e.g. a user name): a note.
    pub by: &'a str,
    /// Who asks, as AWS authenticated the caller: STS `GetCallerIdentity`'s ARN.
    pub caller: &'a str,
    /// Why.
    pub reason: &'a str,
    /// Remove it even while a claim's lease is live.
    pub force: bool,
}

/// What [`DynamoStore::forget`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forgotten {
    /// The mark is gone and the audit item written, in one transaction. `audit_key` is the
    /// audit item's `pk`.
    Removed {
        /// The mark as it was.
        mark: Box<Mark>,
        /// The audit item's `pk`.
        audit_key: String,
    },
    /// No live mark under the key: nothing written.
    NoMark,
    /// A claim's lease is live (someone may be calling out right now): nothing written; pass
    /// `force` to remove it anyway.
    LiveLease(Box<Mark>),
    /// The mark changed between the read and the removal: nothing written; look again.
    Changed,
}

/// The mark as it was, as JSON for the audit item (times in epoch milliseconds), its stored
/// answer as its SHA-256 digest (hex), never the answer.
fn mark_json(m: &Mark) -> String {
    serde_json::json!({
        "pk": m.key.as_str(),
        "status": m.status.as_str(),
        "owner": m.owner.as_ref().map(|o| o.as_str()),
        "lease_expires_at": m.lease_expires_at.map(epoch_millis),
        "expires_at": epoch_millis(m.expires_at),
        "fingerprint": m.fingerprint.as_ref().map(|f| f.as_str().to_owned()),
        "result_sha256": m.result.as_ref().map(|r| hex::encode(Sha256::digest(r.as_bytes()))),
        "first_seen_at": epoch_millis(m.first_seen_at),
        "completed_at": m.completed_at.map(epoch_millis),
    })
    .to_string()
}

/// The audit item of `mark` forgotten at `now` under `audit_key` (see the module docs): no
/// stored answer, only its digest, and the mark's own TTL.
fn audit_item(
    mark: &Mark,
    request: &ForgetRequest<'_>,
    audit_key: &str,
    now: std::time::SystemTime,
) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (attr::PK.to_owned(), s(audit_key)),
        (attr::STATUS.to_owned(), s(FORGOTTEN)),
        (audit_attr::BY.to_owned(), s(request.by)),
        (audit_attr::CALLER.to_owned(), s(request.caller)),
        (audit_attr::REASON.to_owned(), s(request.reason)),
        (audit_attr::AT.to_owned(), ms(now)),
        (audit_attr::MARK_KEY.to_owned(), s(mark.key.as_str())),
        (audit_attr::MARK_STATUS.to_owned(), s(mark.status.as_str())),
        (audit_attr::MARK.to_owned(), s(mark_json(mark))),
        (attr::EXPIRES_AT.to_owned(), secs(mark.expires_at)),
    ])
}

/// The `pk` of the audit item of `key` forgotten at `now` (see the module docs).
pub fn audit_key(key: &DedupKey, now: std::time::SystemTime) -> String {
    format!(
        "{AUDIT_PREFIX}{}#forgotten#{}",
        key.as_str(),
        epoch_millis(now)
    )
}

impl DynamoStore {
    /// Removes the mark of `request.key` on purpose, so the event can be applied again, and
    /// records it: one transaction deletes the mark (conditioned on it being as read) and puts
    /// the audit item (see the module docs). A live lease is refused unless `force`.
    pub async fn forget(&self, request: ForgetRequest<'_>) -> Result<Forgotten, Error> {
        let now = self.now();
        let Some(mark) = self.get(request.key).await? else {
            return Ok(Forgotten::NoMark);
        };
        if mark.lease_is_live(now) && !request.force {
            return Ok(Forgotten::LiveLease(Box::new(mark)));
        }
        let audit_key = audit_key(&mark.key, now);
        let mut condition = "#s = :s".to_owned();
        let mut delete = Delete::builder()
            .table_name(self.table())
            .key(attr::PK, s(mark.key.as_str()))
            .expression_attribute_names("#s", attr::STATUS)
            .expression_attribute_values(":s", s(mark.status.as_str()));
        delete = match &mark.owner {
            Some(owner) => {
                condition.push_str(" AND #o = :o");
                delete
                    .expression_attribute_names("#o", attr::OWNER)
                    .expression_attribute_values(":o", s(owner.as_str()))
            }
            None => {
                condition.push_str(" AND attribute_not_exists(#o)");
                delete.expression_attribute_names("#o", attr::OWNER)
            }
        };
        let delete = delete
            .condition_expression(condition)
            .build()
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(audit_item(&mark, &request, &audit_key, now)))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let sent = self
            .client()
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().delete(delete).build())
            .transact_items(TransactWriteItem::builder().put(put).build())
            .send()
            .await;
        match sent {
            Ok(_) => Ok(Forgotten::Removed {
                mark: Box::new(mark),
                audit_key,
            }),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_transaction_canceled_exception()) =>
            {
                Ok(Forgotten::Changed)
            }
            Err(e) => Err(crate::error::from_sdk(e)),
        }
    }
}

/// The marks of one consumer, for the account (S14).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkCounts {
    /// Completed marks in the table.
    pub completed: u64,
    /// Audit items of completed marks removed on purpose ([`DynamoStore::forget`]).
    pub forgotten: u64,
}

/// Completed marks and forgotten completed marks per consumer in the mark `table`, or the items
/// of a create-once `table` (each its event's completed mark; a strongly
/// consistent scan, page by page; `progress` is called with the items read so far).
pub async fn count_marks(
    client: impl Into<Client>,
    table: &str,
    progress: &dyn Fn(u64),
) -> Result<BTreeMap<String, MarkCounts>, Error> {
    let client: &Client = &client.into();
    let mut counts: BTreeMap<String, MarkCounts> = BTreeMap::new();
    let mut start = None;
    let mut read = 0u64;
    loop {
        let out = client
            .sdk()
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(crate::error::from_sdk)?;
        for item in out.items() {
            let get = |k: &str| codec::get_s(item, k);
            // A create-once item (an inbox item, an order) is its event's completed mark.
            if let Some(consumer) =
                get(lambda_dedup::create_once::CREATED_KEY).and_then(|key| key.split('#').nth(1))
            {
                counts.entry(consumer.to_owned()).or_default().completed += 1;
                continue;
            }
            let pk = get(attr::PK).map(|pk| pk.strip_prefix(AUDIT_PREFIX).unwrap_or(pk));
            let Some(consumer) = pk.and_then(|pk| pk.split('#').nth(1)) else {
                continue;
            };
            let completed = MarkStatus::Completed.as_str();
            match get(attr::STATUS) {
                Some(status) if status == completed => {
                    counts.entry(consumer.to_owned()).or_default().completed += 1;
                }
                Some(FORGOTTEN) if get(audit_attr::MARK_STATUS) == Some(completed) => {
                    counts.entry(consumer.to_owned()).or_default().forgotten += 1;
                }
                _ => {}
            }
        }
        read += out.items().len() as u64;
        progress(read);
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return Ok(counts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    /// Issue 42: the audit item of a forgotten mark keeps a SHA-256 digest of the stored
    /// answer, never the answer (which may hold personal data, and reaches the stream's
    /// readers), and carries the mark's own TTL.
    #[test]
    fn forget_audit_item_keeps_a_digest_of_the_answer_and_a_ttl() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let key = DedupKey::from_stored("demo#ledger#00ff".to_owned());
        let answer = r#"{"name":"Ada Lovelace","email":"ada@example.com"}"#;
        let mark = Mark {
            key: key.clone(),
            status: MarkStatus::Completed,
            owner: None,
            lease_expires_at: None,
            expires_at: now + Duration::from_secs(86_400),
            fingerprint: None,
            result: Some(answer.to_owned()),
            first_seen_at: now,
            completed_at: Some(now),
        };
        let request = ForgetRequest {
            key: &key,
            by: "ops",
            caller: "arn:aws:iam::123456789012:user/ops",
            reason: "re-apply",
            force: false,
        };
        let item = audit_item(&mark, &request, &audit_key(&key, now), now);
        for (name, v) in &item {
            let text = format!("{v:?}");
            assert!(
                !text.contains("Ada") && !text.contains("ada@"),
                "{name}: {text}"
            );
        }
        let stored: serde_json::Value =
            serde_json::from_str(item[audit_attr::MARK].as_s().expect("text")).expect("json");
        assert_eq!(
            stored["result_sha256"],
            hex::encode(Sha256::digest(answer.as_bytes())),
            "{stored}"
        );
        assert_eq!(
            item.get(attr::EXPIRES_AT),
            Some(&AttributeValue::N((1_800_000_000u64 + 86_400).to_string())),
            "the mark's own TTL"
        );
    }
}
