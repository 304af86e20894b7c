//! Committing a whole batch in as few `TransactWriteItems` as possible (one, usually).
//!
//! Each event keeps the guarantee of [`DynamoStore::commit`]: its mark and its effects are written
//! together or not at all (S5), because they always travel in the same transaction. Several
//! events share a transaction, so one event's failure cancels the others too; a fault still
//! belongs to its own event (S12):
//!
//! - the positional cancellation reasons say which event failed and why (a failed condition, or
//!   a permanent refusal of its writes such as a `ValidationError`), that event alone is settled,
//!   and the rest go again in the next round;
//! - a permanent refusal that names no position (a top-level `ValidationException`: a malformed
//!   expression, a transaction over 4 MB, two writes of one item) splits the round in halves
//!   until the culprit stands alone and is refused as it would be by [`DynamoStore::commit`];
//! - a transient fault (throttling, a conflicting transaction, a timeout) is no one event's
//!   fault: every request of the round not settled otherwise gets it, to be retried (S13).
//!
//! Rounds are bounded by DynamoDB's limits: 100 items, an estimate of the bytes under its 4 MB per
//! transaction, and no two operations on one item (the same key twice, two credits to one
//! account go in different rounds). An event too large to share a round goes alone.
//!
//! With [`DynamoStore::commit_batch_bounded`], the rounds of a wave are in flight at once (up to
//! the bound), and no item is written by two rounds of one wave: two credits to one account go
//! in different waves, one after the other, so concurrent transactions never conflict on an item
//! of the batch (a clash `touched` cannot see, two `Put`s of one key with different attributes,
//! is a `TransactionConflict` on DynamoDB: transient, so both are retried, S13).

use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, CancellationReason, TransactWriteItem};
use lambda_dedup::Effect;
use lambda_dedup::{Commit, CommitRequest, OwnerToken};

use crate::error::{Error, FaultKind};
use crate::store::{DynamoStore, transient_fault};

/// DynamoDB's limit of items in one transaction.
const MAX_ITEMS: usize = 100;
/// The estimated bytes one round may carry: DynamoDB refuses a transaction whose items add up
/// to more than 4 MB; the margin covers what the estimate cannot see (an update's stored item).
const MAX_ROUND_BYTES: usize = 3 * 1024 * 1024 + 512 * 1024;
/// Bytes counted per write on top of its attributes and expressions (names of the request's
/// members, the item's overhead).
const WRITE_OVERHEAD: usize = 100;

/// What identifies the items a request writes, to keep two writes of one item out of one
/// transaction. A `Put` is identified by its whole item (its key schema is unknown here); the
/// rare clash that misses is refused by DynamoDB as a whole, and the round is split.
fn touched(store_table: &str, r: &CommitRequest<'_>) -> Vec<String> {
    let mark = format!("{store_table}\u{0}{}", r.key.as_str());
    std::iter::once(mark)
        .chain(r.effects.iter().map(Effect::target))
        .collect()
}

/// A conservative estimate of an attribute value's size as DynamoDB counts it (UTF-8 bytes of
/// strings, raw bytes of binaries, a byte or so more than the digits of a number, the names
/// and a few bytes of overhead per element of a map or list).
fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => n.len() + 1,
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Ss(xs) => 3 + xs.iter().map(|x| x.len() + 1).sum::<usize>(),
        AttributeValue::Ns(xs) => 3 + xs.iter().map(|x| x.len() + 2).sum::<usize>(),
        AttributeValue::Bs(xs) => 3 + xs.iter().map(|x| x.as_ref().len() + 1).sum::<usize>(),
        AttributeValue::L(xs) => 3 + xs.iter().map(|x| value_size(x) + 1).sum::<usize>(),
        AttributeValue::M(m) => 3 + map_size(m) + m.len(),
        _ => 1,
    }
}

fn map_size(m: &HashMap<String, AttributeValue>) -> usize {
    m.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn names_size(m: Option<&HashMap<String, String>>) -> usize {
    m.map_or(0, |m| m.iter().map(|(k, v)| k.len() + v.len()).sum())
}

/// A conservative estimate of the bytes one write adds to a transaction: its item or key, its
/// expressions and their names and values, its table's name.
fn write_size(w: &TransactWriteItem) -> usize {
    let body = if let Some(p) = w.put() {
        parts_size(
            p.table_name(),
            p.item(),
            [p.condition_expression(), None],
            p.expression_attribute_names(),
            p.expression_attribute_values(),
        )
    } else if let Some(u) = w.update() {
        parts_size(
            u.table_name(),
            u.key(),
            [Some(u.update_expression()), u.condition_expression()],
            u.expression_attribute_names(),
            u.expression_attribute_values(),
        )
    } else if let Some(d) = w.delete() {
        parts_size(
            d.table_name(),
            d.key(),
            [d.condition_expression(), None],
            d.expression_attribute_names(),
            d.expression_attribute_values(),
        )
    } else if let Some(c) = w.condition_check() {
        parts_size(
            c.table_name(),
            c.key(),
            [Some(c.condition_expression()), None],
            c.expression_attribute_names(),
            c.expression_attribute_values(),
        )
    } else {
        0
    };
    WRITE_OVERHEAD + body
}

/// The bytes of one write's parts, whatever its kind: its table's name, its item or key, its
/// expressions, and their names and values.
fn parts_size(
    table: &str,
    item_or_key: &HashMap<String, AttributeValue>,
    expressions: [Option<&str>; 2],
    names: Option<&HashMap<String, String>>,
    values: Option<&HashMap<String, AttributeValue>>,
) -> usize {
    table.len()
        + map_size(item_or_key)
        + expressions.iter().flatten().map(|e| e.len()).sum::<usize>()
        + names_size(names)
        + values.map_or(0, map_size)
}

/// What became of a round that was sent.
enum Sent {
    /// Settled, except these requests, which go again in a later round.
    Again(Vec<usize>),
    /// DynamoDB refused the round as a whole, naming no position, for good: split it.
    RefusedWhole,
}

/// A batch's requests with the writes each commits (`None` for a request refused before any
/// round) and their estimated sizes, all at one time: what its rounds are built from.
struct Prepared<'a> {
    requests: &'a [CommitRequest<'a>],
    items: Vec<Option<Vec<TransactWriteItem>>>,
    sizes: Vec<usize>,
    now: SystemTime,
}

impl DynamoStore {
    /// Commits every request, each atomically with its own effects (S5), in as few
    /// `TransactWriteItems` as the requests allow, one at a time. Returns one result per request, in order,
    /// with the same meaning as [`DynamoStore::commit`]'s: in particular, a request whose own
    /// writes DynamoDB refuses gets [`Error::Refused`] and the others of its round still commit
    /// (S12); only a transient fault of a whole round fails every request of it (S13).
    pub async fn commit_batch(&self, requests: &[CommitRequest<'_>]) -> Vec<Result<Commit, Error>> {
        self.commit_batch_bounded(requests, 1).await
    }

    /// Like [`commit_batch`](Self::commit_batch), with up to `max_in_flight` transactions in
    /// flight at once: each wave of rounds is built so that no item is written by two of its
    /// rounds (a request touching an item another round of the wave writes waits for the next
    /// wave), and the rounds of a wave are sent together. A request cancelled only because of
    /// another one goes again in a later wave.
    pub async fn commit_batch_bounded(
        &self,
        requests: &[CommitRequest<'_>],
        max_in_flight: usize,
    ) -> Vec<Result<Commit, Error>> {
        let max_in_flight = max_in_flight.max(1);
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
        let sizes = items
            .iter()
            .map(|it| it.as_ref().map_or(0, |it| it.iter().map(write_size).sum()))
            .collect();
        let batch = Prepared {
            requests,
            items,
            sizes,
            now,
        };
        let mut pending: Vec<usize> = (0..requests.len())
            .filter(|i| results[*i].is_none())
            .collect();
        // Rounds to send as they are: the halves of rounds DynamoDB refused as a whole.
        let mut halves: Vec<Vec<usize>> = Vec::new();
        loop {
            let wave = match halves.pop() {
                Some(half) => vec![half],
                None if pending.is_empty() => break,
                None => {
                    let (wave, later) = self.next_wave(&batch, &pending, max_in_flight);
                    pending = later;
                    wave
                }
            };
            let sent =
                futures::future::join_all(wave.iter().map(|round| self.round(&batch, round))).await;
            for (round, (sent, settled)) in wave.into_iter().zip(sent) {
                for (i, r) in settled {
                    results[i] = Some(r);
                }
                match sent {
                    Sent::Again(again) => {
                        pending.extend(again);
                        pending.sort_unstable();
                    }
                    Sent::RefusedWhole => {
                        // One request (or a pair of them) is to blame, and DynamoDB did not say
                        // which: halve until it stands alone, where it is refused by itself.
                        let (first, second) = round.split_at(round.len() / 2);
                        halves.push(second.to_vec());
                        halves.push(first.to_vec());
                    }
                }
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Invalid("request was not processed".into()))))
            .collect()
    }

    /// One wave: up to `max_rounds` rounds, requests taken in order while they fit their round
    /// (items and estimated bytes) and touch nothing any round of the wave has taken; the first
    /// request of a round always fits, so a request too large to share a round goes alone.
    /// Returns the rounds and the requests left for later.
    fn next_wave(
        &self,
        batch: &Prepared<'_>,
        pending: &[usize],
        max_rounds: usize,
    ) -> (Vec<Vec<usize>>, Vec<usize>) {
        let (requests, items, sizes) = (batch.requests, &batch.items, &batch.sizes);
        let mut wave: Vec<Vec<usize>> = vec![Vec::new()];
        let mut later = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let (mut count, mut bytes) = (0, 0);
        for &i in pending {
            let n = items[i].as_ref().map_or(0, Vec::len);
            let keys = touched(self.table(), &requests[i]);
            if keys.iter().any(|k| seen.contains(k)) {
                later.push(i);
                continue;
            }
            let round_empty = wave.last().is_none_or(Vec::is_empty);
            let fits =
                round_empty || (count + n <= MAX_ITEMS && bytes + sizes[i] <= MAX_ROUND_BYTES);
            if !fits {
                if wave.len() >= max_rounds {
                    later.push(i);
                    continue;
                }
                wave.push(Vec::new());
                (count, bytes) = (0, 0);
            }
            seen.extend(keys);
            count += n;
            bytes += sizes[i];
            if let Some(round) = wave.last_mut() {
                round.push(i);
            }
        }
        wave.retain(|r| !r.is_empty());
        (wave, later)
    }

    /// Sends one round and records what it settled.
    async fn round(
        &self,
        batch: &Prepared<'_>,
        round: &[usize],
    ) -> (Sent, Vec<(usize, Result<Commit, Error>)>) {
        let mut settled = Vec::new();
        let sent = self.round_settling(batch, round, &mut settled).await;
        (sent, settled)
    }

    async fn round_settling(
        &self,
        batch: &Prepared<'_>,
        round: &[usize],
        results: &mut Vec<(usize, Result<Commit, Error>)>,
    ) -> Sent {
        let (requests, items) = (batch.requests, &batch.items);
        if let [single] = round {
            // Alone, it is exactly a commit: its reasons and refusals are its own.
            let r = &requests[*single];
            let alone = CommitRequest { ..*r };
            results.push((*single, self.commit(alone).await));
            return Sent::Again(Vec::new());
        }
        let all: Vec<TransactWriteItem> = round
            .iter()
            .flat_map(|i| items[*i].clone().unwrap_or_default())
            .collect();
        let attempt = OwnerToken::random();
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
                    results.push((i, Ok(Commit::Applied)));
                }
                return Sent::Again(Vec::new());
            }
            Err(err) => err,
        };
        if let Some(TransactWriteItemsError::TransactionCanceledException(tc)) =
            err.as_service_error()
        {
            return self.round_cancelled(batch, round, tc.cancellation_reasons(), results);
        }
        let shared = crate::error::from_sdk(err);
        if shared.fault_kind() == Some(FaultKind::Refused) {
            // Refused for good, naming no position: one of them is to blame (a malformed
            // expression, the round over 4 MB, two writes of one item), not all of them.
            return Sent::RefusedWhole;
        }
        for &i in round {
            results.push((
                i,
                Err(match &shared {
                    Error::Store { kind, message } => Error::Store {
                        kind: *kind,
                        message: message.clone(),
                    },
                    other => Error::Invalid(other.to_string()),
                }),
            ));
        }
        Sent::Again(Vec::new())
    }

    /// A round cancelled with `reasons` (one per item, in the round's order): each request
    /// settled by its own reasons, the others sent again — unless no reason names any of them.
    fn round_cancelled(
        &self,
        batch: &Prepared<'_>,
        round: &[usize],
        reasons: &[CancellationReason],
        results: &mut Vec<(usize, Result<Commit, Error>)>,
    ) -> Sent {
        let (requests, items, now) = (batch.requests, &batch.items, batch.now);
        // A transient reason (throttling, a conflicting transaction) is the round's, not any
        // one request's: every request it does not settle otherwise is retried (S13).
        let transient = transient_fault(reasons)
            .map(|(kind, c)| (kind, format!("batch transaction cancelled: {c}")));
        let mut again = Vec::new();
        let mut pos = 0;
        for &i in round {
            let n = items[i].as_ref().map_or(0, Vec::len);
            let r = &requests[i];
            let own = reasons.get(pos..pos + n).unwrap_or_default();
            match self.verdict(r.key, r.fingerprint, now, own, transient.as_ref()) {
                Some(o) => results.push((i, o)),
                // Cancelled only because of another request: send it again.
                None => again.push(i),
            }
            pos += n;
        }
        if again.len() == round.len() {
            // Cancelled with no reason that names any of them: do not loop; the caller
            // retries them (S13).
            for &i in round {
                results.push((i, Err(Error::Contended(requests[i].key.clone()))));
            }
            return Sent::Again(Vec::new());
        }
        Sent::Again(again)
    }
}
