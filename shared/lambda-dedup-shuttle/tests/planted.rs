//! Each checker can fail: with a planted bug switched on, exploring finds a failing schedule
//! (shuttle prints it). `check-then-act` and `cache-filled-before-commit` break only some
//! interleavings: no single-threaded test meets them.
#![cfg(all(shuttle, feature = "simulation-planted"))]

use lambda_dedup::planted::Planted;
use lambda_dedup_shuttle::explore::{Budget, FLOWS, STORE, caught};
use lambda_dedup_shuttle::{cache_checks, fifo_checks, leased_checks, store_checks};

fn assert_caught(bug: Planted, check: fn(), budget: Budget) {
    let at = caught(bug, check, budget);
    println!("planted {bug}: caught at schedule {at:?}");
    assert!(at.is_some(), "planted {bug}: missed");
}

#[test]
fn check_then_act_is_caught_by_one_winner_of_n_claims() {
    assert_caught(
        Planted::CheckThenAct,
        store_checks::claims_of_one_key_have_one_winner,
        STORE,
    );
}

#[test]
fn check_then_act_is_caught_by_commits_applying_once() {
    assert_caught(
        Planted::CheckThenAct,
        store_checks::commits_are_all_or_nothing,
        STORE,
    );
}

#[test]
fn claim_ignores_live_lease_is_caught_by_one_winner_of_n_claims() {
    assert_caught(
        Planted::ClaimIgnoresLiveLease,
        store_checks::claims_of_one_key_have_one_winner,
        STORE,
    );
}

#[test]
fn complete_ignores_owner_is_caught_by_fencing() {
    assert_caught(
        Planted::CompleteIgnoresOwner,
        store_checks::complete_release_and_takeover_are_fenced,
        STORE,
    );
}

#[test]
fn release_ignores_owner_is_caught_by_fencing() {
    assert_caught(
        Planted::ReleaseIgnoresOwner,
        store_checks::complete_release_and_takeover_are_fenced,
        STORE,
    );
}

#[test]
fn commit_not_atomic_is_caught_by_all_or_nothing() {
    assert_caught(
        Planted::CommitNotAtomic,
        store_checks::commits_are_all_or_nothing,
        STORE,
    );
}

#[test]
fn create_once_overwrites_is_caught_by_one_creation() {
    assert_caught(
        Planted::CreateOnceOverwrites,
        store_checks::create_once_creates_once,
        STORE,
    );
}

#[test]
fn cache_filled_before_commit_is_caught_by_no_early_duplicate() {
    assert_caught(
        Planted::CacheFilledBeforeCommit,
        cache_checks::one_event_at_once_applies_once,
        FLOWS,
    );
}

#[test]
fn fifo_group_not_blocked_is_caught_by_group_order() {
    assert_caught(
        Planted::FifoGroupNotBlocked,
        fifo_checks::groups_keep_order_and_stop_at_a_failure,
        FLOWS,
    );
}

#[test]
fn key_ignores_tenant_is_caught_by_tenants_apart() {
    assert_caught(
        Planted::KeyIgnoresTenant,
        cache_checks::tenants_never_share_a_cached_mark,
        FLOWS,
    );
}

#[test]
fn leased_completes_before_call_is_caught_by_no_duplicate_before_the_call() {
    assert_caught(
        Planted::LeasedCompletesBeforeCall,
        leased_checks::one_event_at_once_calls_the_provider_once,
        FLOWS,
    );
}

#[test]
fn claim_ignores_live_lease_is_caught_by_one_provider_call() {
    assert_caught(
        Planted::ClaimIgnoresLiveLease,
        leased_checks::one_event_at_once_calls_the_provider_once,
        FLOWS,
    );
}

#[test]
fn fifo_group_pipelined_is_caught_by_group_order() {
    assert_caught(
        Planted::FifoGroupPipelined,
        fifo_checks::groups_keep_order_and_stop_at_a_failure,
        FLOWS,
    );
}
