//! Planted bugs for the deterministic simulation (`lambda-dedup-sim`): compiled only with the
//! `simulation-planted` feature, which no function's build enables. Each mutation in the
//! library is guarded by `planted::is("<name>")`, so one simulation build holds them all and
//! switches one on at a time, on the simulating thread only.

use std::cell::Cell;

thread_local! {
    static ACTIVE: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Switches the planted bug `name` on for this thread (`None`: every bug off).
pub fn set(name: Option<&'static str>) {
    ACTIVE.with(|a| a.set(name));
}

/// Whether the planted bug `name` is on for this thread.
pub fn is(name: &str) -> bool {
    ACTIVE.with(|a| a.get() == Some(name))
}
