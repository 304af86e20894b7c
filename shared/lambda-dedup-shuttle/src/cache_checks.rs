//! The warm cache under concurrent invocations in one container (Lambda Managed Instances):
//! one [`Deduplicator::with_cache`] on one store, each invocation a shuttle task, every store
//! call a point where the scheduler may switch ([`Yielding`]), and the cache's lock shuttle's.

use lambda_dedup::MarkStatus;
use lambda_dedup_engine::{Deduplicator, Outcome};
use shuttle::future::{block_on, spawn};

use crate::world::{World, account, credit, key, message, spec};
use crate::yielding::Yielding;

/// Runs one delivery of event `id` of each of `tenants` per entry, all at once, through one
/// cached deduplicator; checks each duplicate answer against the store as it answers. Returns
/// each delivery's tenant and outcome.
fn deliver(world: &World, tenants: &[&'static str], id: &'static str) -> Vec<(String, Outcome)> {
    let store = Yielding::new(&world.store);
    let dedup = Deduplicator::new(spec(), store).with_cache(16);
    block_on(async {
        let deliveries: Vec<_> = tenants
            .iter()
            .map(|&tenant| {
                let (dedup, world) = (dedup.clone(), world.clone());
                spawn(async move {
                    let outcome = dedup
                        .transactional(&message(tenant, id, None, false), credit)
                        .await;
                    if let Outcome::Duplicate { .. } = outcome {
                        // A duplicate reports a commit: it must have landed, in this tenant's key.
                        let key = key(tenant, id);
                        let landed = world
                            .store
                            .marks()
                            .into_iter()
                            .any(|m| m.key == key && m.status == MarkStatus::Completed);
                        assert!(landed, "{tenant}: a duplicate answered before its commit");
                    }
                    (tenant.to_owned(), outcome)
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for delivery in deliveries {
            outcomes.push(delivery.await.expect("delivery"));
        }
        outcomes
    })
}

/// Three invocations of one event at once, through the cache: the credit once, one `applied`,
/// the others duplicates, none answered before the commit it reports.
pub fn one_event_at_once_applies_once() {
    let world = World::new();
    let outcomes = deliver(&world, &["acme", "acme", "acme"], "e-1");
    let applied = outcomes
        .iter()
        .filter(|(_, o)| *o == Outcome::Applied)
        .count();
    assert_eq!(applied, 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|(_, o)| matches!(o, Outcome::Applied | Outcome::Duplicate { .. })),
        "{outcomes:?}"
    );
    assert_eq!(world.balance(&account("acme")), 1, "the credit once");
}

/// Two tenants deliver the same event id twice each, at once, through one cache: each
/// tenant's credit once, in its own account; the cache never answers one tenant's key for the
/// other's (S1).
pub fn tenants_never_share_a_cached_mark() {
    let world = World::new();
    let outcomes = deliver(&world, &["acme", "globex", "acme", "globex"], "e-1");
    for tenant in ["acme", "globex"] {
        let applied = outcomes
            .iter()
            .filter(|(t, o)| t == tenant && *o == Outcome::Applied)
            .count();
        assert_eq!(applied, 1, "{tenant}: {outcomes:?}");
        assert_eq!(world.balance(&account(tenant)), 1, "{tenant}'s credit once");
    }
}
