//! The leased flow under concurrent invocations of one event (S6): claim, the provider's call,
//! complete, each store call a point where the scheduler may switch ([`Yielding`]), and the
//! call itself one too (an external request takes time).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lambda_dedup_engine::{Deduplicator, Outcome, RetryCause};
use shuttle::future::{block_on, spawn, yield_now};

use crate::world::{World, message, spec};
use crate::yielding::Yielding;

/// How many invocations of the event run at once.
const INVOCATIONS: usize = 3;

/// Three invocations of one event through the leased flow, at once, the lease live throughout:
/// the provider is called once, one invocation applies, the others see it in progress or
/// done, and none answers `duplicate` before the call it reports has been made.
pub fn one_event_at_once_calls_the_provider_once() {
    let world = World::new();
    let dedup = Deduplicator::new(spec(), Yielding::new(&world.store))
        .with_provider_key_retention(Duration::from_secs(86_400));
    let calls = Arc::new(AtomicUsize::new(0));
    let outcomes: Vec<Outcome> = block_on(async {
        let invocations: Vec<_> = (0..INVOCATIONS)
            .map(|_| {
                let (dedup, calls) = (dedup.clone(), calls.clone());
                spawn(async move {
                    let provider = calls.clone();
                    let outcome = dedup
                        .leased(
                            &message("acme", "p-1", None, false),
                            None,
                            |_, lease| async move {
                                yield_now().await;
                                provider.fetch_add(1, Ordering::SeqCst);
                                Ok(Some(lease.idempotency_key()))
                            },
                        )
                        .await;
                    if let Outcome::Duplicate { .. } = outcome {
                        assert!(
                            calls.load(Ordering::SeqCst) > 0,
                            "a duplicate answered before the provider's call"
                        );
                    }
                    outcome
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for invocation in invocations {
            outcomes.push(invocation.await.expect("invocation"));
        }
        outcomes
    });
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "provider calls: {outcomes:?}"
    );
    let applied = outcomes.iter().filter(|o| **o == Outcome::Applied).count();
    assert_eq!(applied, 1, "{outcomes:?}");
    assert!(
        outcomes.iter().all(|o| match o {
            Outcome::Applied | Outcome::Duplicate { .. } => true,
            Outcome::Retry { cause, .. } => *cause == RetryCause::InProgress,
            _ => false,
        }),
        "the others see it in progress or done: {outcomes:?}"
    );
}
