//! Where a store call is made from, for the modelled bed's bound (`modelled/bound.rs`): the batch it belongs to
//! and its lane — the chain of calls that depend on each other. The bench sets both around the
//! flows (a task-local, so the flows run unchanged): [`in_batch`] around each batch,
//! [`in_lane`] around each message's future in the modes that run a batch's messages at once
//! (one lane per message, or per FIFO group, whose messages run one after another). A batch
//! mode's calls all stay in the batch's lane 0: the pre-filter's read, then the commit.

use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};

tokio::task_local! {
    static PLACE: Place;
}

/// A call's batch (its number in the run) and lane (0: the batch's own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Place {
    pub(crate) batch: usize,
    pub(crate) lane: u64,
}

/// The place of the calling task: the innermost scope set, or batch 0, lane 0.
pub(crate) fn current() -> Place {
    PLACE.try_with(|p| *p).unwrap_or_default()
}

/// Runs `f` as batch `batch`, in its lane 0.
pub(crate) async fn in_batch<F: Future>(batch: usize, f: F) -> F::Output {
    PLACE.scope(Place { batch, lane: 0 }, f).await
}

/// Runs `f` in the lane named `lane` (a message id or a FIFO group) of the current batch.
pub(crate) async fn in_lane<F: Future>(lane: &str, f: F) -> F::Output {
    let mut h = DefaultHasher::new();
    lane.hash(&mut h);
    // Lane 0 is the batch's own; a name never maps onto it.
    let lane = h.finish().max(1);
    let batch = current().batch;
    PLACE.scope(Place { batch, lane }, f).await
}
