//! The record of every request the modelled store holds: which operation, how many items, the
//! draw it was held for, and where it stands in the run (batch, lane, call, stage) — what the
//! bound is computed from ([`super::bound`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use local_dynamodb::latency::Delays;

use crate::place::{self, Place};

/// One request as the DynamoDB store would send it, and its draw.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Draw {
    /// Batch and lane of the call that sent it.
    pub(crate) place: Place,
    /// The store call it belongs to (numbered in the run).
    pub(crate) call: u64,
    /// Its step within the call: the requests of one step are in flight together (the rounds
    /// of a wave), the steps one after another (waves, `BatchGetItem` chunks).
    pub(crate) stage: usize,
    /// The DynamoDB operation (`TransactWriteItems`, `PutItem`, …).
    pub(crate) operation: &'static str,
    /// Its items (a transaction's, a `BatchGetItem`'s keys; 1 otherwise).
    pub(crate) items: usize,
    /// How long it was held.
    pub(crate) held: Duration,
}

/// The draws of one store, from one stream of [`Delays`] shared by every store of the run.
#[derive(Debug)]
pub(crate) struct Recorder {
    delays: std::sync::Arc<Delays>,
    calls: AtomicU64,
    draws: Mutex<Vec<Draw>>,
    /// Hedges sent (a single write's second copy, [`Self::draw_hedged`]).
    hedges: AtomicU64,
}

impl Recorder {
    pub(crate) fn new(delays: std::sync::Arc<Delays>) -> Self {
        Self {
            delays,
            calls: AtomicU64::new(0),
            draws: Mutex::new(Vec::new()),
            hedges: AtomicU64::new(0),
        }
    }

    /// A new call's number.
    pub(crate) fn call(&self) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed)
    }

    /// The next draw of the stream for `operation` with `items` items, recorded as step
    /// `stage` of `call`, made from the calling task's place.
    pub(crate) fn draw(
        &self,
        call: u64,
        stage: usize,
        operation: &'static str,
        items: usize,
    ) -> Duration {
        let place = place::current();
        let mut draws = self.draws.lock().unwrap_or_else(|e| e.into_inner());
        // Drawn under the lock, so the record's order is the stream's.
        let held = self.delays.next(operation, items);
        draws.push(Draw {
            place,
            call,
            stage,
            operation,
            items,
            held,
        });
        held
    }

    /// A single write hedged after `after`: its draw, and when it is longer than `after` a
    /// second copy of the write sent at `after` with a draw of its own from `copies` (a stream
    /// apart, so the first writes draw what they draw unhedged); the call waits for whichever
    /// answers first, `min(first, after + second)`, recorded as its one draw (what the bound
    /// counts), the second copy counted in [`Self::take_hedges`].
    pub(crate) fn draw_hedged(
        &self,
        call: u64,
        operation: &'static str,
        after: Duration,
        copies: &Delays,
    ) -> Duration {
        let place = place::current();
        let mut draws = self.draws.lock().unwrap_or_else(|e| e.into_inner());
        let first = self.delays.next(operation, 1);
        let held = if first > after {
            self.hedges.fetch_add(1, Ordering::Relaxed);
            first.min(after + copies.next(operation, 1))
        } else {
            first
        };
        draws.push(Draw {
            place,
            call,
            stage: 0,
            operation,
            items: 1,
            held,
        });
        held
    }

    /// The hedges sent so far, taken (counted again from 0).
    pub(crate) fn take_hedges(&self) -> u64 {
        self.hedges.swap(0, Ordering::Relaxed)
    }

    /// The draws recorded so far, taken (the record starts again empty).
    pub(crate) fn take(&self) -> Vec<Draw> {
        std::mem::take(&mut *self.draws.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
