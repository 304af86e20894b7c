//! The step guard on the SDK's local runner: a crash between a step's effect and its checkpoint
//! (a checkpoint write that fails, so the runner invokes again and the SDK replays the step)
//! applies the effect once, and a long wait between a call's claim and its call loses no lease.
//! Each scenario is written once over any mark store ([`World`]) and run here on the memory
//! store, and on PostgreSQL and Valkey in [`servers`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_durable_execution_sdk::test_util::LocalRunner;
use lambda_dedup::{Effect, Item, ManualClock, MarkStatus, MarkStore, OwnerToken, Value};
use lambda_dedup_memory::MemoryStore;
use serde_json::json;

use super::steps::Claimed;
use super::{BoxError, DurableContext, Steps, Writes};
use crate::{Dedup, Env};

mod servers;

fn env() -> Env {
    Env::from_pairs([("DEDUP_NAMESPACE", "test"), ("DEDUP_MARK_TABLE", "marks")])
}

/// The settings the step guard's stores are built with in these tests (its scope, retention
/// and lease).
fn dedup() -> Dedup<crate::store::NoStore> {
    Dedup::read(&env(), "orders").expect("settings")
}

/// A mark store the step guard runs on: the guard, the store (whose clock the test moves) and
/// the write that adds to the account's balance, in the store's own effect type.
struct World<E> {
    steps: Steps<E>,
    store: Arc<dyn MarkStore<E>>,
    clock: Arc<ManualClock>,
    add: Arc<dyn Fn(i64) -> E + Send + Sync>,
}

/// The runner's step checkpoints, in order: the step's start, then its outcome. Failing the
/// outcome's write (retryably) ends the invocation after the body ran: the crash between the
/// effect and the checkpoint.
const OUTCOME_OF_FIRST_STEP: usize = 1;

/// A crash after the step's commit and before its checkpoint: the step's body runs twice (the
/// crash, then the replay) and the replay answers with the output stored at the first commit,
/// not a conflict. The caller reads the balance: 5, added once.
async fn a_crash_after_the_commit<E: Clone + Send + Sync + 'static>(world: &World<E>) {
    let planned = Arc::new(AtomicUsize::new(0));
    let (p, steps, add) = (planned.clone(), world.steps.clone(), world.add.clone());
    let result = LocalRunner::new()
        .fail_checkpoints_after_retryable(OUTCOME_OF_FIRST_STEP, 1)
        .run(
            move |_: serde_json::Value, ctx: DurableContext| {
                let (steps, p, add) = (steps.clone(), p.clone(), add.clone());
                async move {
                    let receipt: String = steps
                        .transact(&ctx, "debit", move || {
                            let n = p.fetch_add(1, Ordering::SeqCst);
                            Ok(Writes {
                                effects: vec![add(5)],
                                output: format!("debited on attempt {n}"),
                            })
                        })
                        .await?;
                    Ok::<_, BoxError>(receipt)
                }
            },
            json!({"order": "o-1"}),
        )
        .await;
    assert!(result.is_success(), "{:?}", result.error_message());
    assert_eq!(planned.load(Ordering::SeqCst), 2, "the step was replayed");
    assert_eq!(
        result.output().map(String::as_str),
        Some("debited on attempt 0")
    );
}

/// The call's checkpoints: its claim step's start and outcome, then its call step's start and
/// outcome (the fourth write, the third skipped).
const OUTCOME_OF_CALL_STEP: usize = 3;

/// A crash after the call and before its checkpoint: one call, with the step's key; the replay
/// returns the stored charge.
async fn a_crash_after_the_call<E: Clone + Send + Sync + 'static>(world: &World<E>) {
    let keys = Arc::new(Mutex::new(Vec::<String>::new()));
    let (k, steps) = (keys.clone(), world.steps.clone());
    let result = LocalRunner::new()
        .fail_checkpoints_after_retryable(OUTCOME_OF_CALL_STEP, 1)
        .run(
            move |_: serde_json::Value, ctx: DurableContext| {
                let (steps, k) = (steps.clone(), k.clone());
                async move {
                    let expected = steps.idempotency_key(&ctx, "charge");
                    let charge: String = steps
                        .call(&ctx, "charge", move |key| async move {
                            k.lock().expect("lock").push(key.clone());
                            Ok(format!("ch_{key}"))
                        })
                        .await?;
                    Ok::<_, BoxError>((expected, charge))
                }
            },
            json!({"order": "o-1"}),
        )
        .await;
    assert!(result.is_success(), "{:?}", result.error_message());
    let keys = keys.lock().expect("lock");
    assert_eq!(
        keys.len(),
        1,
        "one call: the replay returned the stored charge"
    );
    let (expected, charge) = result.output().expect("output");
    assert_eq!(keys[0], *expected);
    assert_eq!(*charge, format!("ch_{expected}"));
}

/// How long the workflow below waits between a call's claim and its call: two hours, far past
/// the store's lease (`DEDUP_LEASE_SECONDS`, 60 s by default) and one invocation's 15 minutes.
const LONG_WAIT: Duration = Duration::from_secs(2 * 3600);

/// Issue 44: a long wait between steps loses no lease. The workflow claims the call (its claim
/// step checkpointed), waits two hours (the SDK suspends it; the runner skips the time and
/// invokes again, and the store's clock is moved past the lease), then calls: the call step, in
/// a later invocation, completes the mark under the owner its claim step checkpointed, and the
/// call is made once. A later run of the same execution (every step run again, the marks kept)
/// returns the stored charge without calling.
async fn a_long_wait_between_the_claim_and_the_call<E: Clone + Send + Sync + 'static>(
    world: &World<E>,
) {
    let calls = Arc::new(Mutex::new(Vec::<String>::new()));
    let waited = Arc::new(AtomicBool::new(false));
    let (c, s, k) = (calls.clone(), world.steps.clone(), world.clock.clone());
    let workflow = move |_: serde_json::Value, ctx: DurableContext| {
        let (steps, calls, clock, waited) = (s.clone(), c.clone(), k.clone(), waited.clone());
        async move {
            let claimed = steps.claim_step(&ctx, "charge").await?;
            ctx.wait(LONG_WAIT).name("settle").await?;
            // The runner skips the wait's time; the store's clock passes it once.
            if !waited.swap(true, Ordering::SeqCst) {
                clock.advance(LONG_WAIT);
            }
            let charge: String = steps
                .call_step(&ctx, "charge", claimed, move |key| async move {
                    calls.lock().expect("lock").push(key.clone());
                    Ok(format!("ch_{key}"))
                })
                .await?;
            Ok::<_, BoxError>((ctx.execution_arn().to_owned(), charge))
        }
    };
    let result = LocalRunner::new()
        .run(workflow.clone(), json!({"order": "o-1"}))
        .await;
    assert!(result.is_success(), "{:?}", result.error_message());
    assert!(result.invocation_count() >= 2, "the wait suspended the run");
    let (arn, charge) = result.output().expect("output").clone();
    let claim = (result.operations().iter())
        .find(|op| op.name() == Some("charge/claim"))
        .and_then(|op| op.result())
        .expect("the claim step's checkpoint");
    let Ok(Claimed::Held {
        owner, expires_ms, ..
    }) = serde_json::from_str(claim)
    else {
        panic!("the claim step held the call: {claim}");
    };
    assert!(
        lambda_dedup::clock::epoch_millis(world.store.now()) > expires_ms,
        "the store's clock passed the lease"
    );
    let mark = (world.store.get(&world.steps.key(&arn, "charge")).await)
        .expect("read")
        .expect("the step's mark");
    assert_eq!(mark.status, MarkStatus::Completed);
    assert_eq!(
        mark.owner,
        Some(OwnerToken::from_stored(owner)),
        "completed under the checkpointed owner"
    );
    assert_eq!(calls.lock().expect("lock").len(), 1, "one call");
    assert_eq!(charge, format!("ch_{}", calls.lock().expect("lock")[0]));

    world.clock.advance(LONG_WAIT);
    let again = LocalRunner::new()
        .run(workflow, json!({"order": "o-1"}))
        .await;
    assert!(again.is_success(), "{:?}", again.error_message());
    assert_eq!(again.output().map(|(_, c)| c), Some(&charge));
    assert_eq!(calls.lock().expect("lock").len(), 1, "the stored charge");
}

/// The memory store as a function's tests have it (`Dedup::durable_steps` on it), its clock the
/// test's, with the account's table.
fn on_memory() -> (World<Effect>, MemoryStore) {
    let dedup = dedup();
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let store = crate::testing::memory_store(dedup.settings()).with_clock(clock.clone());
    store.create_table("accounts", "id");
    let steps = (dedup.on(crate::store::Items::new(store.clone())))
        .durable_steps()
        .expect("steps");
    let add = |n: i64| Effect::add("accounts", Item::new().with("id", "a-1"), "balance", n);
    let world = World {
        steps,
        store: Arc::new(store.clone()),
        clock,
        add: Arc::new(add),
    };
    (world, store)
}

fn balance(store: &MemoryStore) -> Option<Value> {
    let item = store.item("accounts", &Item::new().with("id", "a-1"))?;
    item.0.get("balance").cloned()
}

#[tokio::test]
async fn a_crash_after_the_commit_and_before_the_checkpoint_applies_the_effect_once() {
    let (world, store) = on_memory();
    a_crash_after_the_commit(&world).await;
    assert_eq!(balance(&store), Some(Value::N("5".into())));
}

#[tokio::test]
async fn a_crash_after_the_call_and_before_the_checkpoint_calls_once_with_one_key() {
    a_crash_after_the_call(&on_memory().0).await;
}

#[tokio::test]
async fn a_long_wait_between_the_claim_and_the_call_loses_no_lease() {
    a_long_wait_between_the_claim_and_the_call(&on_memory().0).await;
}

/// A call that fails is retried by the SDK under the claim its first attempt checkpointed, with
/// the same idempotency key, and completes.
#[tokio::test]
async fn a_failed_call_is_retried_with_the_same_key_under_the_checkpointed_claim() {
    let steps = on_memory().0.steps;
    let keys = Arc::new(Mutex::new(Vec::<String>::new()));
    let k = keys.clone();
    let result = LocalRunner::new()
        .run(
            move |_: serde_json::Value, ctx: DurableContext| {
                let (steps, k) = (steps.clone(), k.clone());
                async move {
                    let charge: String = steps
                        .call(&ctx, "charge", move |key| async move {
                            let mut keys = k.lock().expect("lock");
                            keys.push(key.clone());
                            if keys.len() == 1 {
                                return Err(BoxError::from("the provider timed out"));
                            }
                            Ok(format!("ch_{key}"))
                        })
                        .await?;
                    Ok::<_, BoxError>(charge)
                }
            },
            json!({"order": "o-1"}),
        )
        .await;
    assert!(result.is_success(), "{:?}", result.error_message());
    let keys = keys.lock().expect("lock");
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1], "the same key on the retry");
}

/// Two executions, or two steps of one, never share a mark or a key.
#[test]
fn keys_are_per_execution_and_step() {
    let steps = on_memory().0.steps;
    let a = "arn:aws:lambda:eu-west-1:1:function:f:$LATEST/durable-execution/a/1";
    let b = "arn:aws:lambda:eu-west-1:1:function:f:$LATEST/durable-execution/b/1";
    assert_eq!(steps.key(a, "debit"), steps.key(a, "debit"));
    assert_ne!(steps.key(a, "debit"), steps.key(b, "debit"));
    assert_ne!(steps.key(a, "debit"), steps.key(a, "charge"));
}

/// S9 at start: marks kept no longer than an execution may run are refused.
#[test]
fn marks_kept_no_longer_than_an_execution_runs_are_refused() {
    let env = env().with("DURABLE_EXECUTION_TIMEOUT_SECONDS", "31622400");
    let dedup = Dedup::read(&env, "orders").expect("settings");
    let (dedup, _) = crate::testing::on_memory(dedup);
    let err = dedup.durable_steps().expect_err("refused");
    assert!(err.to_string().contains("DEDUP_RETENTION_SECONDS"), "{err}");
}
