//! The bounds: how long the latency model alone makes a run take, from the draws of the
//! requests it issued — computed, not measured.
//!
//! **Our modes' bound** ([`of`]): each batch's critical path over its requests' draws, the
//! batches one after another. Within a batch, its lanes (`crate::place`: the messages, or
//! FIFO groups, a batch's messages run at once; a batch mode's one lane) are in flight together
//! and cost the longest of them; a lane's calls depend on each other and add; within a call,
//! the requests of one step (the rounds of a wave) are in flight together and cost the longest
//! draw, and its steps (waves, `BatchGetItem` chunks) add. Nothing else counts: no execution,
//! no client time, no emulator.
//!
//! **Powertools' bound** ([`powertools`]): Powertools' `BatchProcessor` handles a batch's
//! messages one after another, and `idempotent_function` sends 3 requests one after another per
//! new event (the conditional `PutItem` of the record, the effect's `UpdateItem`, the record's
//! `UpdateItem` to completed) and 1 per duplicate (the `PutItem` whose condition fails), so its
//! bound is the sum of those draws, taken from a fresh stream of the same seed in the order its
//! run sends them (every workload in turn, the untimed first pass of `all_duplicates`
//! included, as the emulator bed's proxy draws them).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use local_dynamodb::latency::Delays;

use super::draws::Draw;
use crate::place::Place;

/// Our modes' bound over `draws` (module docs).
pub(crate) fn of(draws: &[Draw]) -> Duration {
    per_batch(draws).iter().sum()
}

/// Each batch's critical path over `draws` (module docs), in batch order.
pub(crate) fn per_batch(draws: &[Draw]) -> Vec<Duration> {
    // (batch, lane) → call → stage → the longest draw of the stage.
    let mut steps: BTreeMap<Place, BTreeMap<(u64, usize), Duration>> = BTreeMap::new();
    for d in draws {
        let longest = steps
            .entry(d.place)
            .or_default()
            .entry((d.call, d.stage))
            .or_default();
        *longest = (*longest).max(d.held);
    }
    let mut batches: BTreeMap<usize, Duration> = BTreeMap::new();
    for (place, stages) in steps {
        let lane: Duration = stages.values().sum();
        let batch = batches.entry(place.batch).or_default();
        *batch = (*batch).max(lane);
    }
    batches.into_values().collect()
}

/// Powertools' bound of each workload (each a list of event ids, in the order they are
/// delivered, run one after another on one stream of `delays`): the sum of its timed requests'
/// draws. `untimed_first` names the workload whose events are all processed once, untimed,
/// before its timed pass (`all_duplicates`).
pub(crate) fn powertools(
    delays: &Delays,
    workloads: &[(&str, Vec<usize>)],
    untimed_first: &str,
) -> Vec<Duration> {
    workloads
        .iter()
        .map(|(name, ids)| {
            let mut seen = HashSet::new();
            if *name == untimed_first {
                for &i in ids {
                    if seen.insert(i) {
                        new_event(delays);
                    } else {
                        delays.next("PutItem", 1);
                    }
                }
            }
            ids.iter()
                .map(|&i| {
                    if seen.insert(i) {
                        new_event(delays)
                    } else {
                        delays.next("PutItem", 1)
                    }
                })
                .sum()
        })
        .collect()
}

/// A new event's 3 dependent requests.
fn new_event(delays: &Delays) -> Duration {
    delays.next("PutItem", 1) + delays.next("UpdateItem", 1) + delays.next("UpdateItem", 1)
}
