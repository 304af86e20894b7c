//! Running a check under the exploring scheduler: seeded random schedules, then PCT schedules
//! (which find bugs of a few ordering constraints with a known probability), or the one schedule
//! of `DEDUP_SHUTTLE_REPLAY`, as a failure prints it.

use shuttle::scheduler::{PctScheduler, RandomScheduler, ReplayScheduler};
use shuttle::{Config, Runner};

/// The seed of every exploration, so CI explores the same schedules on every run
/// (`SHUTTLE_RANDOM_SEED` overrides it, as shuttle reads it).
pub const SEED: u64 = 35;

/// How many schedules a check explores.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Schedules of the random scheduler.
    pub random: usize,
    /// Schedules of the PCT scheduler.
    pub pct: usize,
}

/// The budget of the checks that call the memory store directly (cheap schedules).
pub const STORE: Budget = Budget {
    random: 5_000,
    pct: 2_000,
};

/// The budget of the checks that run the flows (a key derived, JSON parsed per delivery).
pub const FLOWS: Budget = Budget {
    random: 2_500,
    pct: 1_000,
};

/// The PCT scheduler's depth: bugs needing up to this many ordering constraints.
const PCT_DEPTH: usize = 3;

/// Explores `check` under `budget`, or replays the schedule in `DEDUP_SHUTTLE_REPLAY` (the
/// string a failure prints): panics on the first failing schedule, after shuttle prints it.
/// Returns how many schedules ran.
pub fn explore(check: fn(), budget: Budget) -> usize {
    run(check, budget)
}

fn run(check: impl Fn() + Send + Sync + Copy + 'static, budget: Budget) -> usize {
    if let Ok(schedule) = std::env::var("DEDUP_SHUTTLE_REPLAY") {
        let replay = ReplayScheduler::new_from_encoded(schedule.trim());
        return Runner::new(replay, Config::new()).run(check);
    }
    let random = RandomScheduler::new_from_seed(SEED, budget.random);
    let pct = PctScheduler::new_from_seed(SEED, PCT_DEPTH, budget.pct);
    Runner::new(random, Config::new()).run(check) + Runner::new(pct, Config::new()).run(check)
}

/// With the planted bug `bug` switched on, the schedule (counted from 1) at which exploring
/// `check` (or replaying `DEDUP_SHUTTLE_REPLAY`) first failed, or `None` when every schedule
/// passed.
#[cfg(feature = "simulation-planted")]
pub fn caught(bug: lambda_dedup::planted::Planted, check: fn(), budget: Budget) -> Option<usize> {
    use std::cell::Cell;
    thread_local! {
        static RUNS: Cell<usize> = const { Cell::new(0) };
    }
    // The planted switch and the count are this thread's; shuttle runs every thread and task
    // of a schedule as a coroutine on this one.
    lambda_dedup::planted::set(Some(bug));
    RUNS.with(|r| r.set(0));
    let counted = move || {
        RUNS.with(|r| r.set(r.get() + 1));
        check();
    };
    let failed = std::panic::catch_unwind(|| run(counted, budget)).is_err();
    lambda_dedup::planted::set(None);
    failed.then(|| RUNS.with(Cell::get))
}
