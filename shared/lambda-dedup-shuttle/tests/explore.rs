//! Every check over thousands of schedules, no bug planted: each must hold in every one.
#![cfg(shuttle)]

use lambda_dedup_shuttle::explore::{Budget, FLOWS, STORE};
use lambda_dedup_shuttle::{cache_checks, fifo_checks, leased_checks, store_checks};

/// Explores `check` and says how many schedules passed.
fn explore(check: fn(), budget: Budget) {
    let schedules = lambda_dedup_shuttle::explore::explore(check, budget);
    println!("explored {schedules} schedules");
}

#[test]
fn memory_store_claims_of_one_key_have_one_winner() {
    explore(store_checks::claims_of_one_key_have_one_winner, STORE);
}

#[test]
fn memory_store_complete_release_and_takeover_are_fenced() {
    explore(
        store_checks::complete_release_and_takeover_are_fenced,
        STORE,
    );
}

#[test]
fn memory_store_commits_are_all_or_nothing() {
    explore(store_checks::commits_are_all_or_nothing, STORE);
}

#[test]
fn memory_store_create_once_creates_once() {
    explore(store_checks::create_once_creates_once, STORE);
}

#[test]
fn warm_cache_one_event_at_once_applies_once() {
    explore(cache_checks::one_event_at_once_applies_once, FLOWS);
}

#[test]
fn warm_cache_tenants_never_share_a_cached_mark() {
    explore(cache_checks::tenants_never_share_a_cached_mark, FLOWS);
}

#[test]
fn leased_flow_one_event_at_once_calls_the_provider_once() {
    explore(
        leased_checks::one_event_at_once_calls_the_provider_once,
        FLOWS,
    );
}

#[test]
fn fifo_groups_keep_order_and_stop_at_a_failure() {
    explore(fifo_checks::groups_keep_order_and_stop_at_a_failure, FLOWS);
}

/// A printed schedule replays what failed: every check is deterministic given its schedule
/// (shuttle runs each schedule twice and compares the choices made; the clock is manual).
#[test]
fn every_check_replays_deterministically() {
    let checks: [fn(); 8] = [
        store_checks::claims_of_one_key_have_one_winner,
        store_checks::complete_release_and_takeover_are_fenced,
        store_checks::commits_are_all_or_nothing,
        store_checks::create_once_creates_once,
        cache_checks::one_event_at_once_applies_once,
        cache_checks::tenants_never_share_a_cached_mark,
        leased_checks::one_event_at_once_calls_the_provider_once,
        fifo_checks::groups_keep_order_and_stop_at_a_failure,
    ];
    for check in checks {
        shuttle::check_uncontrolled_nondeterminism(check, 100);
    }
}
