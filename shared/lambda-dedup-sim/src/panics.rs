//! Handler panics: the work of some deliveries panics, as a bug in a user's handler would. The
//! library catches it (a plan's panic in the flow, the work's in `run_batch`): the delivery is
//! retried, never acknowledged, and nothing is applied twice when it comes again.

use std::sync::Once;

use crate::world::{Shared, World, lock};

/// The payload of every simulated panic: the panic hook keeps these off the output.
const PAYLOAD: &str = "simulated handler panic";

/// Panics, as the seed says (the world's `handler_panics` per thousand), in the work of `what`
/// on instance `inst`, after logging it.
pub fn maybe(world: &Shared, inst: usize, what: &str) {
    panic_when(world, |w| {
        let rate = w.handler_panics;
        w.rng
            .chance(rate)
            .then(|| format!("i{inst} {what} handler panicked"))
    });
}

/// Panics in the work of event `ev` on instance `inst` if `ev` is the world's poison and its
/// fix is not deployed yet.
pub fn poisoned(world: &Shared, inst: usize, ev: &str) {
    panic_when(world, |w| {
        let now = w.now_ms();
        w.poison
            .as_ref()
            .is_some_and(|(p, until)| p == ev && now < *until)
            .then(|| format!("i{inst} {ev} handler panicked (poison)"))
    });
}

/// Panics when `hit`, asked under the world's lock, gives the line to log first.
fn panic_when(world: &Shared, hit: impl FnOnce(&mut World) -> Option<String>) {
    let line = {
        let mut w = lock(world);
        let line = hit(&mut w);
        if let Some(line) = &line {
            w.log(line.clone());
        }
        line
    };
    if line.is_some() {
        quiet();
        std::panic::panic_any(PAYLOAD);
    }
}

/// Keeps the simulated panics off stderr (others are printed as before).
fn quiet() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&PAYLOAD) {
                before(info);
            }
        }));
    });
}
