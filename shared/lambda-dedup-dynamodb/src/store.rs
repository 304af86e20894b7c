use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use crate::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::{
    CancellationReason, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use lambda_dedup::create_once::{self, CreateOnce};
use lambda_dedup::sequence::{SequenceOutcome, SequencedWrite};
use lambda_dedup::store::{CreateOnceStoreImpl, LatestStoreImpl, MarkStoreImpl, SequenceStoreImpl};
use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, Effect, Fingerprint, Lease, Mark, MarkStatus,
    OwnerToken, Retention, Seen, StoreOptions,
};

use crate::attr;
use crate::codec::{self, Av, ms, s, secs};
use crate::error::{Error, FaultKind, classify_code};

pub use lambda_dedup::store::{DEFAULT_LEASE, DEFAULT_MAX_RESULT_BYTES, MAX_EFFECTS};

/// The mark store: marks in one DynamoDB table (see the crate docs for its layout).
///
/// Cheap to clone; build it once per process, outside the handler.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: aws_sdk_dynamodb::Client,
    table: Arc<str>,
    options: StoreOptions,
}

/// A condition expression with the names and values it uses (DynamoDB refuses unused ones).
struct Condition {
    expr: String,
    names: HashMap<String, String>,
    values: Av,
}

impl DynamoStore {
    /// A store on `table`, keeping marks for `retention` (S9).
    pub fn new(client: impl Into<Client>, table: impl Into<String>, retention: Retention) -> Self {
        Self {
            client: client.into().0,
            table: Arc::from(table.into()),
            options: StoreOptions::new(retention),
        }
    }

    pub(crate) fn client(&self) -> &aws_sdk_dynamodb::Client {
        &self.client
    }

    pub(crate) fn now_time(&self) -> SystemTime {
        self.options.now()
    }

    lambda_dedup::store_options_builders!(options);

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The condition under which a new mark may be written over whatever is stored (S4, S9,
    /// S11): no mark; or a mark whose TTL has passed (DynamoDB may not have deleted it yet); or
    /// an in-progress claim whose lease has run out and whose fingerprint matches.
    fn takeover(now: SystemTime, fp: Option<&Fingerprint>) -> Condition {
        let mut expr = String::from(
            "attribute_not_exists(#pk) OR #exp <= :now_s OR (#st = :inprog AND #lease <= :now_ms",
        );
        let (mut names, mut values) = claimable(now);
        if let Some(fp) = fp {
            expr.push_str(" AND (attribute_not_exists(#fp) OR #fp = :fp)");
            names.insert("#fp".into(), attr::FINGERPRINT.into());
            values.insert(":fp".into(), s(fp.as_str()));
        }
        expr.push(')');
        Condition {
            expr,
            names,
            values,
        }
    }

    /// The attributes every new mark has.
    fn new_mark(
        &self,
        key: &DedupKey,
        status: MarkStatus,
        now: SystemTime,
        fp: Option<&Fingerprint>,
    ) -> Av {
        let mut item: Av = HashMap::new();
        item.insert(attr::PK.into(), s(key.as_str()));
        item.insert(attr::STATUS.into(), s(status.as_str()));
        item.insert(attr::EXPIRES_AT.into(), secs(self.options.expires_at(now)));
        item.insert(attr::FIRST_SEEN.into(), ms(now));
        if let Some(fp) = fp {
            item.insert(attr::FINGERPRINT.into(), s(fp.as_str()));
        }
        item
    }

    /// Explains a failed takeover from the old item DynamoDB returned with it.
    pub(crate) fn explain(
        &self,
        key: &DedupKey,
        old: Option<&Av>,
        fp: Option<&Fingerprint>,
        now: SystemTime,
    ) -> Result<Seen, Error> {
        let Some(old) = old else {
            return Err(Error::Contended(key.clone()));
        };
        codec::mark(old)?
            .classify(fp, now)
            .ok_or_else(|| Error::Contended(key.clone()))
    }

    /// Claims `key` under a lease (S4, S6): a conditional `UpdateItem` (two for a takeover). Of any number of
    /// concurrent claims of one key, exactly one returns [`Claim::Claimed`]. The others learn why
    /// from the old item returned with the failed condition, at no extra read: a duplicate (with
    /// the stored result), an in-progress claim, or a conflict (S8, S11).
    ///
    /// The lease runs for the store's lease duration, cut to `deadline` (pass the invocation's
    /// deadline, so a lease never outlives the process that holds it).
    pub async fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, Error> {
        let now = self.options.now();
        let lease_end = self.options.lease_end(now, deadline)?;
        let owner = OwnerToken::random();
        let lease = |first_attempt_at| {
            Claim::Claimed(Lease {
                key: key.clone(),
                owner: owner.clone(),
                expires_at: lease_end,
                fingerprint: fp.cloned(),
                first_attempt_at,
            })
        };
        // Most claims find no mark (or one past its TTL, which counts as absent, S9): a new
        // chain of attempts starts now.
        let held = self.options.lease_held_until(lease_end);
        let old = match self.claim_write(key, fp, &owner, held, now, false).await? {
            Ok(first) => return Ok(lease(first)),
            Err(old) => old,
        };
        let expired_lease = old.as_ref().map(codec::mark).transpose()?.is_some_and(|m| {
            m.status == MarkStatus::InProgress
                && m.is_live(now)
                && m.lease_expires_at.is_some_and(|l| l <= now)
        });
        if !expired_lease {
            return self.explain(key, old.as_ref(), fp, now).map(Claim::Seen);
        }
        // A dead or released owner's claim: take it over, keeping the chain's first attempt.
        match self.claim_write(key, fp, &owner, held, now, true).await? {
            Ok(first) => Ok(lease(first)),
            Err(old) => self.explain(key, old.as_ref(), fp, now).map(Claim::Seen),
        }
    }

    /// One conditional `UpdateItem` claiming `key` for `owner`: over no live mark (`takeover`
    /// false; `first_seen_at` = now), or over a live `IN_PROGRESS` mark whose lease has ended
    /// (`takeover` true; `first_seen_at` kept, `if_not_exists`, in the same write, so no crash or
    /// lost request can make an old attempt look new, S16). `Ok(first attempt)` when it won,
    /// `Err(old item)` when its condition failed.
    async fn claim_write(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        owner: &OwnerToken,
        lease_end: SystemTime,
        now: SystemTime,
        takeover: bool,
    ) -> Result<Result<SystemTime, Option<Av>>, Error> {
        let ttl = self.options.expires_at(now);
        let claim = ClaimWrite::new(fp, owner, lease_end, now, ttl, takeover);
        let update = self
            .update_mark(key)
            .update_expression(claim.update)
            .condition_expression(claim.condition)
            .set_expression_attribute_names(Some(claim.names))
            .set_expression_attribute_values(Some(claim.values))
            .return_values(ReturnValue::AllNew);
        Ok(conditionally(update, crate::error::from_sdk)
            .await?
            .map(|out| {
                out.attributes()
                    .and_then(|a| a.get(attr::FIRST_SEEN))
                    .and_then(|v| v.as_n().ok())
                    .and_then(|n| n.parse::<u64>().ok())
                    .map_or(now, lambda_dedup::clock::from_epoch_millis)
            }))
    }

    /// An `UpdateItem` of `key`'s mark item, to be given its expressions.
    fn update_mark(&self, key: &DedupKey) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(self.table.as_ref())
            .key(attr::PK, s(key.as_str()))
    }

    /// Commits the completed mark of `key` together with `effects` in one `TransactWriteItems`
    /// (S5): either the mark and every effect are written, or nothing is.
    ///
    /// - The mark is written only where [`claim`](Self::claim) could write one; otherwise nothing
    ///   is written and the outcome says what stood in the way ([`Commit::Seen`]).
    /// - An effect whose condition fails gives [`Commit::EffectRejected`]; no mark is written.
    /// - Writes DynamoDB refuses as they are (a `ValidationError` at one of them, such as an `ADD`
    ///   to a string; a malformed expression; an item or the transaction over its size limit)
    ///   give [`Error::Refused`]: permanent, and this event's own (S15). Transient faults
    ///   (throttling, a conflicting transaction) stay retryable [`Error::Store`]s (S13).
    /// - The request carries a `ClientRequestToken` for this attempt, so if the SDK retries it
    ///   after a lost response, DynamoDB answers with the first success instead of applying twice.
    pub async fn commit(&self, request: CommitRequest<'_>) -> Result<Commit, Error> {
        let CommitRequest {
            key,
            fingerprint: fp,
            result,
            effects,
        } = request;
        let now = self.options.now();
        let items = self.commit_items(key, fp, result, effects, now)?;
        let attempt = OwnerToken::random();
        let sent = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(key.request_token(&attempt))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(Commit::Applied),
            Err(err) => match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(tc)) => {
                    self.cancelled(key, fp, now, tc.cancellation_reasons())
                }
                Some(TransactWriteItemsError::IdempotentParameterMismatchException(_)) => {
                    Err(Error::Invalid(format!(
                        "request token reused with other parameters for {key}"
                    )))
                }
                // The request held this event's writes only: a validation refusal is its own.
                _ => Err(crate::error::from_sdk_for(key, err)),
            },
        }
    }

    /// The transaction items of one commit: the completed mark (conditioned like a claim, S4/S9/
    /// S11), then the effects in order.
    pub(crate) fn commit_items(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        result: Option<&str>,
        effects: &[Effect],
        now: SystemTime,
    ) -> Result<Vec<TransactWriteItem>, Error> {
        if effects.len() > MAX_EFFECTS {
            return Err(Error::Invalid(format!(
                "{} effects; one transaction holds the mark and at most {MAX_EFFECTS}",
                effects.len()
            )));
        }
        self.options.check_result(result)?;
        let mut item = self.new_mark(key, MarkStatus::Completed, now, fp);
        item.insert(attr::COMPLETED_AT.into(), ms(now));
        if let Some(r) = result {
            item.insert(attr::RESULT.into(), s(r));
        }
        let cond = Self::takeover(now, fp);
        let mark = Put::builder()
            .table_name(self.table.as_ref())
            .set_item(Some(item))
            .condition_expression(cond.expr)
            .set_expression_attribute_names(Some(cond.names))
            .set_expression_attribute_values(Some(cond.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let mut items = Vec::with_capacity(effects.len() + 1);
        items.push(TransactWriteItem::builder().put(mark).build());
        for e in effects {
            items.push(codec::effect(e)?);
        }
        Ok(items)
    }

    /// Maps a cancelled commit's positional reasons: position 0 is the mark, 1.. the effects.
    pub(crate) fn cancelled(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        now: SystemTime,
        reasons: &[CancellationReason],
    ) -> Result<Commit, Error> {
        let transient = transient_fault(reasons).map(|(kind, _)| {
            let codes: Vec<&str> = reasons
                .iter()
                .map(reason_code)
                .filter(|c| *c != NO_REASON)
                .collect();
            (
                kind,
                format!("transaction cancelled: [{}]", codes.join(", ")),
            )
        });
        self.verdict(key, fp, now, reasons, transient.as_ref())
            .unwrap_or_else(|| {
                Err(Error::store(
                    FaultKind::Refused,
                    "transaction cancelled with no reason",
                ))
            })
    }

    /// What a cancelled transaction says about one event, from the reasons at its own positions
    /// (`own`: 0 its mark, 1.. its effects) and the transaction's transient fault, if it had one
    /// (`transient`: its kind and the message to report). Shared by [`commit`](Self::commit) and
    /// the batch commit, so an event ends the same way alone or in a shared transaction:
    ///
    /// 1. its mark's condition failed: what stands in the way ([`Commit::Seen`], S4, S8, S11);
    /// 2. one of its effects' conditions failed: [`Commit::EffectRejected`];
    /// 3. the transaction had a transient reason (throttling, a conflicting transaction): that
    ///    fault, retryable (S13); it is no one event's fault, so it wins over 4;
    /// 4. a permanent reason at one of its own positions (`ValidationError`,
    ///    `ItemCollectionSizeLimitExceeded`): [`Error::Refused`], this event's alone (S12, S15);
    /// 5. otherwise `None`: it was cancelled for another event's sake only.
    pub(crate) fn verdict(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        now: SystemTime,
        own: &[CancellationReason],
        transient: Option<&(FaultKind, String)>,
    ) -> Option<Result<Commit, Error>> {
        if let Some(mark) = own.first()
            && reason_code(mark) == CONDITION_FAILED
        {
            return Some(self.explain(key, mark.item(), fp, now).map(Commit::Seen));
        }
        if let Some(i) = own
            .iter()
            .skip(1)
            .position(|r| reason_code(r) == CONDITION_FAILED)
        {
            return Some(Ok(Commit::EffectRejected { index: i }));
        }
        if let Some((kind, message)) = transient {
            return Some(Err(Error::store(*kind, message.clone())));
        }
        own.iter()
            .enumerate()
            .find(|(_, r)| permanent(reason_code(r)))
            .map(|(position, r)| {
                Err(Error::Refused {
                    key: key.clone(),
                    code: reason_code(r).to_owned(),
                    position: Some(position),
                })
            })
    }

    /// Completes a claim (S6): the mark becomes `COMPLETED` with `result`, but only if `lease`
    /// still owns it. A lease that ran out and was taken over by another process gets
    /// [`Error::Fenced`] and changes nothing. Completing twice with the same lease is harmless.
    pub async fn complete(&self, lease: &Lease, result: Option<&str>) -> Result<(), Error> {
        self.options.check_result(result)?;
        let now = self.options.now();
        let mut update = String::from("SET #st = :done, #cat = :now_ms");
        let mut names = codec::names([
            ("#st", attr::STATUS),
            ("#cat", attr::COMPLETED_AT),
            ("#owner", attr::OWNER),
            ("#lease", attr::LEASE),
        ]);
        let mut values = codec::values([
            (":done", s(MarkStatus::Completed.as_str())),
            (":inprog", s(MarkStatus::InProgress.as_str())),
            (":now_ms", ms(now)),
            (":owner", s(lease.owner.as_str())),
        ]);
        if let Some(r) = result {
            update.push_str(", #res = :res");
            names.insert("#res".into(), attr::RESULT.into());
            values.insert(":res".into(), s(r));
        }
        update.push_str(" REMOVE #lease");
        let update = self
            .update_mark(&lease.key)
            .update_expression(update)
            .condition_expression("#owner = :owner AND #st = :inprog")
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values));
        let Err(old) = conditionally(update, crate::error::from_sdk).await? else {
            return Ok(());
        };
        match old.as_ref().map(codec::mark).transpose()? {
            // Our own earlier completion (a retry after a lost response).
            Some(m)
                if m.status == MarkStatus::Completed && m.owner.as_ref() == Some(&lease.owner) =>
            {
                Ok(())
            }
            current => Err(fenced(lease, current)),
        }
    }

    /// Releases a claim after a handler error (S6), so a redelivery can try again at once, but
    /// only if `lease` still owns it: otherwise [`Error::Fenced`], and nothing changes.
    pub async fn release(&self, lease: &Lease) -> Result<(), Error> {
        // The lease ends now; the mark stays (with its first attempt's time, S16) until the
        // next delivery takes it over or its TTL passes.
        let update = self
            .update_mark(&lease.key)
            // The owner becomes `released-<owner>`: a released lease can neither complete nor
            // release a claim taken over since; releasing again is harmless.
            .update_expression("SET #lease = :ended, #owner = :released")
            .condition_expression("(#owner = :owner OR #owner = :released) AND #st = :inprog")
            .expression_attribute_names("#owner", attr::OWNER)
            .expression_attribute_names("#st", attr::STATUS)
            .expression_attribute_names("#lease", attr::LEASE)
            .expression_attribute_values(":owner", s(lease.owner.as_str()))
            .expression_attribute_values(
                ":released",
                s(format!("released-{}", lease.owner.as_str())),
            )
            .expression_attribute_values(":inprog", s(MarkStatus::InProgress.as_str()))
            .expression_attribute_values(":ended", ms(std::time::UNIX_EPOCH));
        match conditionally(update, crate::error::from_sdk).await? {
            // Released, or nothing stored: never there (or its TTL purged it).
            Ok(_) | Err(None) => Ok(()),
            Err(Some(old)) => Err(fenced(lease, Some(codec::mark(&old)?))),
        }
    }

    /// Sequence mode: one conditional `UpdateItem` of the effect item carrying the aggregate's
    /// high-water (see [`lambda_dedup::sequence`]). One write request unit for a small item.
    pub async fn apply_in_sequence(
        &self,
        write: SequencedWrite<'_>,
    ) -> Result<SequenceOutcome, Error> {
        let effect = write.effect_to_send()?;
        match self.write_one(&effect, write.key).await? {
            None => Ok(SequenceOutcome::Applied),
            Some(old) => Ok(write.judge_failed(old.as_ref().map(codec::from_item).as_ref())),
        }
    }

    /// Create-once mode: the effect's item, carrying the event's key, fingerprint and result, in
    /// one conditional `PutItem` (see [`lambda_dedup::create_once`]). One write request unit for
    /// an item up to 1 KB; a failed condition returns the old item, judged as a mark is.
    pub async fn create_once(&self, write: CreateOnce<'_>) -> Result<Commit, Error> {
        self.options.check_result(write.result)?;
        let effect = write.effect_to_send(self.options.now())?;
        match self.write_one(&effect, write.key).await? {
            None => Ok(Commit::Applied),
            Some(old) => Ok(create_once::judge(
                old.as_ref().map(codec::from_item).as_ref(),
                write.key,
                write.fingerprint,
            )),
        }
    }

    /// One effect, a `Put` or an `Update`, as a single-item conditional write (`PutItem`,
    /// `UpdateItem`) that returns the old item when its condition fails: what sequence and
    /// create-once modes send. `None`: written; `Some(old)`: the condition failed on `old`
    /// (`None`: no item).
    async fn write_one(
        &self,
        effect: &Effect,
        key: &DedupKey,
    ) -> Result<Option<Option<Av>>, Error> {
        let tx = codec::effect(effect)?;
        let on_fail = ReturnValuesOnConditionCheckFailure::AllOld;
        if let Some(p) = tx.put() {
            let sent = self
                .client
                .put_item()
                .table_name(p.table_name())
                .set_item(Some(p.item().clone()))
                .set_condition_expression(p.condition_expression().map(str::to_owned))
                .set_expression_attribute_names(p.expression_attribute_names().cloned())
                .set_expression_attribute_values(p.expression_attribute_values().cloned())
                .return_values_on_condition_check_failure(on_fail)
                .send()
                .await;
            return match sent {
                Ok(_) => Ok(None),
                Err(err) => match err.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(c)) => {
                        Ok(Some(c.item().cloned()))
                    }
                    _ => Err(crate::error::from_sdk_for(key, err)),
                },
            };
        }
        let Some(u) = tx.update() else {
            return Err(Error::Invalid(
                "a single write is a put or an update".into(),
            ));
        };
        let update = self
            .client
            .update_item()
            .table_name(u.table_name())
            .set_key(Some(u.key().clone()))
            .update_expression(u.update_expression())
            .set_condition_expression(u.condition_expression().map(str::to_owned))
            .set_expression_attribute_names(u.expression_attribute_names().cloned())
            .set_expression_attribute_values(u.expression_attribute_values().cloned());
        let sent = conditionally(update, |err| crate::error::from_sdk_for(key, err)).await?;
        Ok(sent.err())
    }

    /// The live mark of `key` (strongly consistent read), or `None`. A mark whose TTL has passed
    /// is `None` even while DynamoDB still stores it (S9).
    pub async fn get(&self, key: &DedupKey) -> Result<Option<Mark>, Error> {
        let out = self
            .client
            .get_item()
            .table_name(self.table.as_ref())
            .key(attr::PK, s(key.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(crate::error::from_sdk)?;
        let now = self.options.now();
        match out.item() {
            None => Ok(None),
            Some(item) => Ok(Some(codec::mark(item)?).filter(|m| m.is_live(now))),
        }
    }
}

impl DynamoStore {
    /// The live marks of `keys`, strongly consistent, in `BatchGetItem`s of up to 100 keys:
    /// one answer per key, in order, `None` for no live mark. Keys DynamoDB leaves unprocessed
    /// after a few tries are answered `None` (not known): this read only filters known
    /// duplicates out of a batch, the conditional write still decides (S4).
    pub async fn get_many(&self, keys: &[&DedupKey]) -> Result<Vec<Option<Mark>>, Error> {
        use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
        let now = self.options.now();
        let mut found: HashMap<String, Mark> = HashMap::new();
        // DynamoDB refuses a key asked twice in one request (a batch may carry an event twice).
        let mut unique: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
        unique.sort_unstable();
        unique.dedup();
        for chunk in unique.chunks(100) {
            let mut ask: Vec<HashMap<String, AttributeValue>> = chunk
                .iter()
                .map(|k| HashMap::from([(attr::PK.to_owned(), s(*k))]))
                .collect();
            for _ in 0..3 {
                if ask.is_empty() {
                    break;
                }
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut ask)))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| Error::Invalid(e.to_string()))?;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(self.table.as_ref(), request)
                    .send()
                    .await
                    .map_err(crate::error::from_sdk)?;
                for item in out
                    .responses()
                    .and_then(|r| r.get(self.table.as_ref()))
                    .into_iter()
                    .flatten()
                {
                    let mark = codec::mark(item)?;
                    if mark.is_live(now) {
                        found.insert(mark.key.as_str().to_owned(), mark);
                    }
                }
                ask = out
                    .unprocessed_keys()
                    .and_then(|u| u.get(self.table.as_ref()))
                    .map(|k| k.keys().to_vec())
                    .unwrap_or_default();
            }
        }
        Ok(keys
            .iter()
            .map(|k| found.get(k.as_str()).cloned())
            .collect())
    }
}

/// The names and values every condition on whether a mark may be claimed uses (the takeover
/// condition's and the claim's): the key, the TTL, the status and the lease, judged at `now`.
fn claimable(now: SystemTime) -> (HashMap<String, String>, Av) {
    let names = codec::names([
        ("#pk", attr::PK),
        ("#exp", attr::EXPIRES_AT),
        ("#st", attr::STATUS),
        ("#lease", attr::LEASE),
    ]);
    let values = codec::values([
        (":now_s", secs(now)),
        (":now_ms", ms(now)),
        (":inprog", s(MarkStatus::InProgress.as_str())),
    ]);
    (names, values)
}

/// The claim's `UpdateItem`, written out: a fresh claim over no live mark, or a takeover of a
/// live `IN_PROGRESS` mark whose lease has ended (see `DynamoStore::claim_write`).
struct ClaimWrite {
    update: String,
    condition: String,
    names: HashMap<String, String>,
    values: Av,
}

impl ClaimWrite {
    fn new(
        fp: Option<&Fingerprint>,
        owner: &OwnerToken,
        lease_end: SystemTime,
        now: SystemTime,
        ttl: SystemTime,
        takeover: bool,
    ) -> Self {
        let (mut names, mut values) = claimable(now);
        names.extend(codec::names([
            ("#owner", attr::OWNER),
            ("#first", attr::FIRST_SEEN),
            ("#result", attr::RESULT),
            ("#done", attr::COMPLETED_AT),
            ("#fp", attr::FINGERPRINT),
        ]));
        values.extend(codec::values([
            (":owner", s(owner.as_str())),
            (":lease", ms(lease_end)),
            (":ttl", secs(ttl)),
        ]));
        let mut condition = if takeover {
            "#exp > :now_s AND #st = :inprog AND #lease <= :now_ms".to_owned()
        } else {
            "attribute_not_exists(#pk) OR #exp <= :now_s".to_owned()
        };
        let mut set = vec![
            "#st = :inprog",
            "#owner = :owner",
            "#lease = :lease",
            "#exp = :ttl",
            if takeover {
                "#first = if_not_exists(#first, :now_ms)"
            } else {
                "#first = :now_ms"
            },
        ];
        let mut remove = vec!["#result", "#done"];
        match fp {
            Some(fp) => {
                values.insert(":fp".into(), s(fp.as_str()));
                set.push("#fp = :fp");
                if takeover {
                    condition.push_str(" AND (attribute_not_exists(#fp) OR #fp = :fp)");
                }
            }
            None => remove.push("#fp"),
        }
        if takeover {
            // Only the fresh claim's condition names the key (unused names are refused).
            names.remove("#pk");
        }
        Self {
            update: format!("SET {} REMOVE {}", set.join(", "), remove.join(", ")),
            condition,
            names,
            values,
        }
    }
}

// Each trait method is the store's own (inherent, public) method of the same name: a path
// `DynamoStore::claim` names the inherent one, which takes precedence over the trait's.
impl MarkStoreImpl for DynamoStore {
    async fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, Error> {
        DynamoStore::claim(self, key, fp, deadline).await
    }

    async fn commit(&self, request: CommitRequest<'_>) -> Result<Commit, Error> {
        DynamoStore::commit(self, request).await
    }

    async fn commit_batch<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a>],
    ) -> Vec<Result<Commit, Error>> {
        DynamoStore::commit_batch(self, requests).await
    }

    async fn commit_batch_bounded<'a>(
        &'a self,
        requests: &'a [CommitRequest<'a>],
        max_in_flight: usize,
    ) -> Vec<Result<Commit, Error>> {
        DynamoStore::commit_batch_bounded(self, requests, max_in_flight).await
    }

    async fn get_many<'a>(&'a self, keys: &'a [&'a DedupKey]) -> Result<Vec<Option<Mark>>, Error> {
        DynamoStore::get_many(self, keys).await
    }

    async fn complete(&self, lease: &Lease, result: Option<&str>) -> Result<(), Error> {
        DynamoStore::complete(self, lease, result).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), Error> {
        DynamoStore::release(self, lease).await
    }

    async fn get(&self, key: &DedupKey) -> Result<Option<Mark>, Error> {
        DynamoStore::get(self, key).await
    }

    fn options(&self) -> &StoreOptions {
        &self.options
    }
}

impl SequenceStoreImpl for DynamoStore {
    async fn apply_in_sequence(&self, write: SequencedWrite<'_>) -> Result<SequenceOutcome, Error> {
        DynamoStore::apply_in_sequence(self, write).await
    }
}

/// The high-water items live in the mark table, under the mark's own key and TTL attributes.
impl LatestStoreImpl for DynamoStore {
    fn high_water_table(&self) -> &str {
        self.table()
    }
}

impl CreateOnceStoreImpl for DynamoStore {
    async fn create_once(&self, write: CreateOnce<'_>) -> Result<Commit, Error> {
        DynamoStore::create_once(self, write).await
    }
}

/// Sends `update` with the old item returned on a failed condition: `Ok(Ok(output))` when it
/// was written, `Ok(Err(old item))` (`None`: no item) when its condition failed; any other
/// failure as `fault` says.
async fn conditionally(
    update: UpdateItemFluentBuilder,
    fault: impl FnOnce(SdkError<UpdateItemError, HttpResponse>) -> Error,
) -> Result<Result<UpdateItemOutput, Option<Av>>, Error> {
    let sent = update
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    match sent {
        Ok(out) => Ok(Ok(out)),
        Err(err) => match err.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(c)) => Ok(Err(c.item().cloned())),
            _ => Err(fault(err)),
        },
    }
}

fn fenced(lease: &Lease, current: Option<Mark>) -> Error {
    Error::Fenced {
        key: lease.key.clone(),
        current: current.map(Box::new),
    }
}

/// The code of a reason that cancelled nothing.
const NO_REASON: &str = "None";
/// The code of a failed condition.
const CONDITION_FAILED: &str = "ConditionalCheckFailed";

fn reason_code(r: &CancellationReason) -> &str {
    r.code().unwrap_or(NO_REASON)
}

/// Whether a cancellation reason is one that retrying cannot fix ([`classify_code`] says
/// [`FaultKind::Refused`]): the write at that position is refused as it is (S15). A failed
/// condition is not a fault and is mapped on its own.
fn permanent(code: &str) -> bool {
    code != NO_REASON
        && code != CONDITION_FAILED
        && classify_code(Some(code), 400) == FaultKind::Refused
}

/// The first transient reason of a cancelled transaction (throttling, a conflicting
/// transaction): no one event's fault, so every event not settled otherwise is retried (S13).
pub(crate) fn transient_fault(reasons: &[CancellationReason]) -> Option<(FaultKind, String)> {
    reasons
        .iter()
        .map(reason_code)
        .filter(|c| *c != NO_REASON && *c != CONDITION_FAILED)
        .map(|c| (classify_code(Some(c), 400), c))
        .find(|(kind, _)| *kind != FaultKind::Refused)
        .map(|(kind, c)| (kind, c.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::config::{BehaviorVersion, Region};
    use std::time::Duration;

    fn reasons(codes: &[&str]) -> Vec<CancellationReason> {
        codes
            .iter()
            .map(|c| CancellationReason::builder().code(*c).build())
            .collect()
    }

    #[test]
    fn a_transient_reason_among_others_is_the_transactions_fault() {
        // Throttling and conflicting transactions are no event's fault (S13); "None" (the
        // positions that cancelled nothing) and failed conditions are not faults at all.
        let conflict = reasons(&["None", "ConditionalCheckFailed", "TransactionConflict"]);
        assert_eq!(
            transient_fault(&conflict),
            Some((
                FaultKind::TransactionConflict,
                "TransactionConflict".to_owned()
            ))
        );
        let throttled = reasons(&["ThrottlingError", "None"]);
        assert_eq!(
            transient_fault(&throttled).map(|(kind, _)| kind),
            Some(FaultKind::Throttled)
        );
        for settled in [
            reasons(&["None", "ConditionalCheckFailed"]),
            reasons(&["ValidationError", "None"]),
        ] {
            assert_eq!(transient_fault(&settled), None, "{settled:?}");
        }
    }

    #[test]
    fn a_commit_cancelled_for_a_transient_reason_is_retried_and_names_it() {
        let conf = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .build();
        let retention = Retention::unchecked(Duration::from_secs(3_600)).expect("retention");
        let store = DynamoStore::new(
            aws_sdk_dynamodb::Client::from_conf(conf),
            "marks",
            retention,
        );
        let key = DedupKey::from_stored("tests#transient".to_owned());
        let cancelled = reasons(&["None", "TransactionConflict"]);
        let err = store
            .cancelled(&key, None, SystemTime::now(), &cancelled)
            .expect_err("a fault, not an outcome");
        assert_eq!(err.fault_kind(), Some(FaultKind::TransactionConflict));
        assert!(err.is_retryable(), "{err}");
        assert!(
            err.to_string()
                .contains("transaction cancelled: [TransactionConflict]"),
            "the reasons that cancelled it, not the positions that did not: {err}"
        );
    }
}
