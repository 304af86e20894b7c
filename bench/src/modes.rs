//! The bench's modes and workloads, the same on both beds: the event every message carries
//! (a CloudEvents credit to one of [`ACCOUNTS`] accounts), each mode's effect, its
//! deduplicators on one store, one container's run of its batches ([`run_one`]), and the order
//! of events a workload delivers ([`workload_ids`]).

use std::time::{Duration, Instant};

use lambda_dedup::store::{CreateOnceStore, SequenceStore};
use lambda_dedup::{Effect, Item, KeySpec, Message, SequenceSource};
use lambda_dedup_engine::{
    CreateOnceDeduplicator, Deduplicator, HandlerError, Plan, SequencedDeduplicator, run_batch,
    run_batch_transactional,
};
use serde_json::json;

use crate::place;

/// The same event shape and effect as the Powertools side: a credit of 1 to one of 1000 accounts.
/// `seq` is the producer's sequence per account (used by sequence mode only); the account is
/// the FIFO message group.
pub(crate) fn message(i: usize) -> Message {
    let account = format!("acct-{}", i % ACCOUNTS);
    Message {
        message_id: format!("m-{i}-{}", Instant::now().elapsed().as_nanos()),
        body: json!({"specversion": "1.0", "type": "credit", "source": "/bench", "id": format!("evt-{i}"),
                     "tenantid": "t", "data": {"account": account, "amount": 1, "seq": i / ACCOUNTS + 1}})
        .to_string()
        .into_bytes(),
        ..Message::default()
    }
}

pub(crate) const ACCOUNTS: usize = 1000;

fn credit(balances: &str, e: &lambda_dedup::Derived) -> std::result::Result<Effect, HandlerError> {
    let data = HandlerError::data(e)?;
    let account = data["account"]
        .as_str()
        .ok_or_else(|| HandlerError::invalid("account"))?;
    Ok(
        Effect::update(balances, Item::new().with("account", account))
            .expression("ADD #b :a")
            .name("#b", "balance")
            .value(":a", 1),
    )
}

/// Create-once mode's effect: the credit recorded as its own entry item, keyed by the event (in
/// the table `entries`, key `entry`): one item per event, which is the mark.
fn entry(entries: &str, e: &lambda_dedup::Derived) -> std::result::Result<Plan, HandlerError> {
    let data = HandlerError::data(e)?;
    let account = data["account"]
        .as_str()
        .ok_or_else(|| HandlerError::invalid("account"))?;
    let item = Item::new()
        .with("entry", e.key.as_str())
        .with("account", account)
        .with("amount", 1);
    Ok(Effect::put(entries, item).into())
}

fn plan(
    balances: &str,
) -> impl Fn(&lambda_dedup::Derived) -> std::result::Result<Plan, HandlerError> + '_ {
    move |e| {
        Ok(Plan {
            effects: vec![credit(balances, e)?],
            result: None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    PerMessage,
    Batch,
    BatchCache,
    BatchPrefilter,
    Sequence,
    CreateOnce,
}

impl Mode {
    /// Every mode, in the order the rows are run.
    pub(crate) const ALL: [Mode; 6] = [
        Mode::PerMessage,
        Mode::Batch,
        Mode::BatchCache,
        Mode::BatchPrefilter,
        Mode::Sequence,
        Mode::CreateOnce,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::PerMessage => "per_message",
            Mode::Batch => "batch_transaction",
            Mode::BatchCache => "batch_transaction_warm_cache",
            Mode::BatchPrefilter => "batch_transaction_prefilter",
            Mode::Sequence => "sequence",
            Mode::CreateOnce => "create_once",
        }
    }
}

/// One container's deduplicators, all on its one store: the flows of every mode.
pub(crate) struct Dedups {
    dedup: Deduplicator,
    sequenced: SequencedDeduplicator,
    create_once: CreateOnceDeduplicator,
}

impl Dedups {
    /// The deduplicators of `spec` on `store` (DynamoDB, or the modelled bed's), the mode's
    /// options set.
    pub(crate) fn new<S>(spec: &KeySpec, store: std::sync::Arc<S>, mode: Mode) -> Self
    where
        S: SequenceStore + CreateOnceStore + 'static,
    {
        let dedup = Deduplicator::with_store(spec.clone(), store.clone());
        Self {
            dedup: match mode {
                Mode::BatchCache => dedup.with_cache(100_000),
                Mode::BatchPrefilter => dedup.with_duplicate_prefilter(true),
                _ => dedup,
            },
            sequenced: SequencedDeduplicator::with_store(spec.clone(), store.clone()),
            create_once: CreateOnceDeduplicator::with_store(spec.clone(), store),
        }
    }
}

/// One container's work: its batches, one at a time, as one Lambda container processes them.
/// Each batch runs in its place ([`place::in_batch`]), each message of a mode that runs a
/// batch's messages at once in its lane (its FIFO group, or itself): what the modelled bed's
/// bound is computed over; nothing else reads them.
pub(crate) async fn run_one(
    dedups: &Dedups,
    balances: &str,
    mode: Mode,
    ids: &[usize],
    batch_size: usize,
) -> (Vec<Duration>, u64) {
    let mut latencies = Vec::new();
    let mut failures = 0;
    let source = SequenceSource::pointer("/data/seq");
    let dedup = &dedups.dedup;
    for (number, chunk) in ids.chunks(batch_size).enumerate() {
        let batch: Vec<Message> = chunk.iter().map(|i| message(*i)).collect();
        let t = Instant::now();
        let report = place::in_batch(number, async {
            match mode {
                Mode::PerMessage => {
                    let p = plan(balances);
                    run_batch(batch, batch_size, |m| {
                        let p = &p;
                        async move {
                            let lane = m.message_id.clone();
                            place::in_lane(&lane, dedup.transactional(&m, p)).await
                        }
                    })
                    .await
                }
                Mode::Batch | Mode::BatchCache | Mode::BatchPrefilter => {
                    run_batch_transactional(batch, batch_size, dedup, plan(balances)).await
                }
                Mode::Sequence => {
                    // A FIFO batch: each account is a message group, kept in order.
                    let batch = batch
                        .into_iter()
                        .zip(chunk)
                        .map(|(mut m, i)| {
                            m.group_id = Some(format!("acct-{}", i % ACCOUNTS));
                            m
                        })
                        .collect();
                    let source = &source;
                    run_batch(batch, batch_size, |m| async move {
                        let lane = m.group_id.clone().unwrap_or_default();
                        let applied = dedups
                            .sequenced
                            .sequenced(&m, source, |e| credit(balances, e));
                        place::in_lane(&lane, applied).await
                    })
                    .await
                }
                Mode::CreateOnce => {
                    run_batch(batch, batch_size, |m| async move {
                        let lane = m.message_id.clone();
                        let created = dedups.create_once.create_once(&m, |e| entry(balances, e));
                        place::in_lane(&lane, created).await
                    })
                    .await
                }
            }
        })
        .await;
        latencies.push(t.elapsed());
        failures += report.failures().len() as u64;
    }
    (latencies, failures)
}

/// The events a workload delivers, in order: each a number (its event id, its account).
/// `mixed`: each batch delivers 30 % redeliveries of events of earlier batches, interleaved
/// (positions 2, 5 and 8 of every 10), the rest new; the first batch is all new. The same
/// sequence as `powertools_bench.py`'s.
pub(crate) fn workload_ids(workload: &str, n: usize, batch: usize) -> Vec<usize> {
    match workload {
        "half_duplicates" => (0..n).map(|i| i % (n / 2)).collect(),
        "mixed" => {
            let (mut ids, mut fresh, mut r) = (Vec::with_capacity(n), 0, 0);
            while ids.len() < n {
                let before = fresh;
                for k in 0..batch.min(n - ids.len()) {
                    if matches!(k % 10, 2 | 5 | 8) && before > 0 {
                        ids.push((r * 7919) % before);
                        r += 1;
                    } else {
                        ids.push(fresh);
                        fresh += 1;
                    }
                }
            }
            ids
        }
        _ => (0..n).collect(),
    }
}
