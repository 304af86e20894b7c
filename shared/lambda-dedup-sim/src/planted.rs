//! The planted bugs: each a mutation of the library compiled only with `simulation-planted`,
//! and the invariant expected to catch it.

/// Every planted bug, by the name the library's `planted::is` checks.
pub const PLANTED: &[&str] = &[
    "complete-ignores-owner",
    "release-ignores-owner",
    "claim-ignores-live-lease",
    "commit-not-atomic",
    "fingerprint-not-compared",
    "create-once-overwrites",
    "fifo-group-not-blocked",
    "leased-completes-before-call",
    "store-fault-acknowledged",
    "retention-below-horizon-accepted",
    "checkpoint-passes-unsettled",
    "relay-settles-before-call",
    "cache-shared-across-tenants",
    "webhook-conflict-acknowledged",
];
