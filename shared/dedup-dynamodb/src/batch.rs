//! Committing a whole batch in as few `TransactWriteItems` as possible (one, usually).
//!
//! Each event keeps the guarantee of [`MarkStore::commit`]: its mark and its effects are written
//! together or not at all (S5), because they always travel in the same transaction. Several
//! events share a transaction, so one event's failed condition cancels the others too; the
//! positional cancellation reasons say which event failed and why, and the rest go again in the
//! next round. DynamoDB refuses two operations on one item in a transaction, so events that touch
//! the same item (the same key twice, two credits to one account) go in different rounds.

use std::collections::HashSet;
use std::time::SystemTime;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::TransactWriteItem;
use dedup::effect::EffectKind;
use dedup::{Commit, DedupKey, Effect, Fingerprint, OwnerToken};

use crate::error::{Error, classify_code};
use crate::store::MarkStore;

/// DynamoDB's limit of items in one transaction.
const MAX_ITEMS: usize = 100;

/// One event to commit in a batch.
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    /// The event's key.
    pub key: &'a DedupKey,
    /// Its fingerprint (S11).
    pub fingerprint: Option<&'a Fingerprint>,
    /// The result to store with the mark (S8).
    pub result: Option<&'a str>,
    /// Its effects.
    pub effects: &'a [Effect],
}

/// What identifies the items a request writes, to keep two writes of one item out of one
/// transaction. A `Put` is identified by its whole item (its key schema is unknown here); the
/// rare clash that misses is caught by DynamoDB's validation and handled by falling back.
fn touched(store_table: &str, r: &CommitRequest<'_>) -> Vec<String> {
    let mut out = vec![format!("{store_table}\u{0}{}", r.key.as_str())];
    for e in r.effects {
        let kind = if e.kind() == EffectKind::Put {
            "put"
        } else {
            "key"
        };
        out.push(format!("{}\u{0}{kind}\u{0}{:?}", e.table(), e.item()));
    }
    out
}

impl MarkStore {
    /// Commits every request, each atomically with its own effects (S5), in as few
    /// `TransactWriteItems` as the requests allow. Returns one result per request, in order,
    /// with the same meaning as [`MarkStore::commit`]'s.
    pub async fn commit_batch(&self, requests: &[CommitRequest<'_>]) -> Vec<Result<Commit, Error>> {
        let now = self.now_time();
        let mut results: Vec<Option<Result<Commit, Error>>> =
            (0..requests.len()).map(|_| None).collect();
        let mut items: Vec<Option<Vec<TransactWriteItem>>> = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            match self.commit_items(r.key, r.fingerprint, r.result, r.effects, now) {
                Ok(it) => items.push(Some(it)),
                Err(e) => {
                    results[i] = Some(Err(e));
                    items.push(None);
                }
            }
        }
        let mut pending: Vec<usize> = (0..requests.len())
            .filter(|i| results[*i].is_none())
            .collect();
        while !pending.is_empty() {
            // One round: take requests in order while they fit and touch nothing taken already.
            let mut round = Vec::new();
            let mut later = Vec::new();
            let mut seen: HashSet<String> = HashSet::new();
            let mut size = 0;
            for &i in &pending {
                let n = items[i].as_ref().map_or(0, Vec::len);
                let keys = touched(self.table(), &requests[i]);
                if size + n <= MAX_ITEMS && keys.iter().all(|k| !seen.contains(k)) {
                    seen.extend(keys);
                    size += n;
                    round.push(i);
                } else {
                    later.push(i);
                }
            }
            let retry = self
                .round(requests, &items, &round, now, &mut results)
                .await;
            pending = retry.into_iter().chain(later).collect();
            pending.sort_unstable();
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Invalid("request was not processed".into()))))
            .collect()
    }

    /// Sends one round; records what it settled and returns the requests to send again.
    async fn round(
        &self,
        requests: &[CommitRequest<'_>],
        items: &[Option<Vec<TransactWriteItem>>],
        round: &[usize],
        now: SystemTime,
        results: &mut [Option<Result<Commit, Error>>],
    ) -> Vec<usize> {
        if let [single] = round {
            // Alone, it is exactly a commit: no need to split reasons.
            let r = &requests[*single];
            results[*single] = Some(self.commit(r.key, r.fingerprint, r.result, r.effects).await);
            return Vec::new();
        }
        let all: Vec<TransactWriteItem> = round
            .iter()
            .flat_map(|i| items[*i].clone().unwrap_or_default())
            .collect();
        let attempt = OwnerToken::random();
        self.count_call();
        let sent = self
            .client()
            .transact_write_items()
            .set_transact_items(Some(all))
            .client_request_token(requests[round[0]].key.request_token(&attempt))
            .send()
            .await;
        let err = match sent {
            Ok(_) => {
                for &i in round {
                    results[i] = Some(Ok(Commit::Applied));
                }
                return Vec::new();
            }
            Err(err) => err,
        };
        if let Some(TransactWriteItemsError::TransactionCanceledException(tc)) =
            err.as_service_error()
        {
            let reasons = tc.cancellation_reasons();
            let code = |p: usize| reasons.get(p).and_then(|r| r.code()).unwrap_or("None");
            // A fault that cancelled the whole round (throttling, a conflicting transaction)
            // leaves every request of it to be retried by the caller (S13).
            let fault = reasons
                .iter()
                .filter_map(|r| r.code())
                .filter(|c| *c != "None" && *c != "ConditionalCheckFailed")
                .map(|c| (c.to_owned(), classify_code(Some(c), 400)))
                .next();
            let mut again = Vec::new();
            let mut pos = 0;
            for &i in round {
                let n = items[i].as_ref().map_or(0, Vec::len);
                let r = &requests[i];
                let outcome = if code(pos) == "ConditionalCheckFailed" {
                    Some(
                        self.explain(r.key, reasons[pos].item(), r.fingerprint, now)
                            .map(Commit::Seen),
                    )
                } else if let Some(e) = (1..n).find(|k| code(pos + k) == "ConditionalCheckFailed") {
                    Some(Ok(Commit::EffectRejected { index: e - 1 }))
                } else if let Some((c, kind)) = &fault {
                    Some(Err(Error::Store {
                        kind: *kind,
                        message: format!("batch transaction cancelled: {c}"),
                    }))
                } else {
                    None // cancelled only because of another request: send it again
                };
                match outcome {
                    Some(o) => results[i] = Some(o),
                    None => again.push(i),
                }
                pos += n;
            }
            if again.len() == round.len() {
                // Cancelled with no reason that names any of them: do not loop; the caller
                // retries them (S13).
                for &i in round {
                    results[i] = Some(Err(Error::Contended(requests[i].key.clone())));
                }
                return Vec::new();
            }
            return again;
        }
        if err.code() == Some("ValidationException")
            && err
                .message()
                .is_some_and(|m| m.contains("multiple operations on one item"))
        {
            // Two requests wrote one item after all (a Put whose key we could not see): commit
            // this round one request at a time.
            for &i in round {
                let r = &requests[i];
                results[i] = Some(self.commit(r.key, r.fingerprint, r.result, r.effects).await);
            }
            return Vec::new();
        }
        let shared = Error::from_sdk(err);
        for &i in round {
            results[i] = Some(Err(match &shared {
                Error::Store { kind, message } => Error::Store {
                    kind: *kind,
                    message: message.clone(),
                },
                other => Error::Invalid(other.to_string()),
            }));
        }
        Vec::new()
    }
}
