//! What the function crates share in their tests: checks of a key spec, events as Lambda hands
//! them over ([`events`]: a builder per door), and (feature `memory`) the function on the memory store of its own settings.

use lambda_dedup::{KeySpec, Message};

pub mod events;
#[cfg(test)]
pub(crate) mod ledger;
use lambda_dedup_engine::Outcome;
use serde_json::{Value, json};

/// Whether this build of the runtime has the side queues' SQS client (its feature `sqs-client`,
/// perhaps enabled by another crate built with yours): a test of what a function does without it
/// (`DEDUP_RECONCILIATION_QUEUE_URL` refused at start) knows which build it is testing.
pub const SQS_CLIENT: bool = cfg!(feature = "sqs-client");

/// An SQS message as the SQS door reads it, for a test of a function's key spec.
pub use crate::door::sqs::message as sqs_message;

/// `invocation` run, with the outcome of each of its records — applied, duplicate, or why it
/// was retried, rejected or sent to reconciliation — in the order the service answered them:
/// what a test reads when a record fails (the partial batch response names ids only). Every
/// SQS and stream service of the builder reports them.
///
/// ```ignore
/// let (answer, outcomes) = with_outcomes(service.call_with(event)).await;
/// assert!(answer?.batch_item_failures.is_empty(), "{outcomes:?}");
/// ```
pub async fn with_outcomes<F: std::future::Future>(
    invocation: F,
) -> (F::Output, Vec<(String, Outcome)>) {
    crate::service::account::with_outcomes(invocation).await
}

/// Now, written as `format` (an event's `time`, a field of your own): fixtures stamped with it
/// are never late (S10) however long after they were written a test runs.
pub fn now_as(format: lambda_dedup::TimeFormat) -> Value {
    format.write(std::time::SystemTime::now())
}

/// S11, for a function's declared `depends_on` fields: under the same event id as `sample`, a
/// change to any of them gives another fingerprint (a conflict, never a duplicate), while a
/// change of the envelope's `time` (a producer's retry) gives the same one. Panics naming the
/// field that is not covered.
pub(crate) fn assert_fingerprint_covers(spec: &KeySpec, sample: &Value, depends_on: &[&str]) {
    let derive = |body: &Value| {
        let m = Message {
            body: body.to_string().into_bytes(),
            ..Message::default()
        };
        let d = spec.derive(&m).expect("the sample derives a key");
        (d.key, d.fingerprint.expect("the spec fingerprints"))
    };
    let (key, original) = derive(sample);
    for pointer in depends_on {
        let mut changed = sample.clone();
        let field = changed
            .pointer_mut(pointer)
            .unwrap_or_else(|| panic!("the sample has no {pointer}"));
        *field = match &*field {
            Value::Number(n) => json!(n.as_i64().unwrap_or(0) + 1),
            Value::String(s) => json!(format!("{s}-other")),
            other => json!([other.clone()]),
        };
        let (same_key, other) = derive(&changed);
        assert_eq!(same_key, key, "{pointer}: still the same event");
        assert_ne!(
            other, original,
            "{pointer} changed under the same id must conflict"
        );
    }
    let mut retried = sample.clone();
    retried["time"] = json!("2026-11-30T10:00:05Z");
    assert_eq!(
        derive(&retried).1,
        original,
        "a producer retry with a new time is a duplicate"
    );
}

/// A fresh in-memory store configured from `settings` as the function's DynamoDB store is
/// (the runtime's mark store from the settings): the settings' retention (S9) and
/// lease (S6). Add a clock with `with_clock` where a test moves time; otherwise prefer
/// [`on_memory`], which also hands the store to the builder.
#[cfg(feature = "memory")]
pub fn memory_store(settings: &lambda_dedup_config::Settings) -> lambda_dedup_memory::MemoryStore {
    lambda_dedup_memory::MemoryStore::new(settings.retention)
        .with_lease(settings.lease)
        .with_clock_skew(settings.clock_skew)
}

/// Testing a function is calling the same service on the memory store: `dedup` with its marks
/// in a fresh [`memory_store`] of its own settings, and a handle on that store's data (to
/// create the function's tables, read its items and marks, inject faults). A test cannot give
/// the service a store whose retention or lease disagrees with what the function reads.
#[cfg(feature = "memory")]
pub fn on_memory(
    dedup: crate::service::Dedup<crate::store::NoStore>,
) -> (crate::service::Dedup, lambda_dedup_memory::MemoryStore) {
    let store = memory_store(dedup.settings());
    (dedup.on(crate::store::Items::new(store.clone())), store)
}

/// [`on_memory`] for a function written for a store of another effect type `E` (a
/// PostgreSQL `SqlEffect`, a Valkey command): the marks in a fresh [`memory_store`] of its own
/// settings, the effects each commit wrote recorded in order
/// ([`Recording::committed`](lambda_dedup_memory::Recording::committed)).
#[cfg(feature = "memory")]
pub fn on_memory_recording<E: Clone + Send + Sync + std::fmt::Debug + 'static>(
    dedup: crate::service::Dedup<crate::store::NoStore>,
) -> (
    crate::service::Dedup<crate::store::Store<E>>,
    lambda_dedup_memory::Recording<E>,
) {
    let store = lambda_dedup_memory::Recording::new(memory_store(dedup.settings()));
    (dedup.on(crate::store::Store::new(store.clone())), store)
}

/// The key spec `dedup` derives keys with: the identity, tenant, fingerprint and time chosen,
/// with the settings' body limit and event-time source applied.
pub fn key_spec<S>(dedup: &crate::service::Dedup<S>) -> KeySpec {
    dedup.key_spec()
}

/// `dedup` parking the stream records that can never apply in `parking` (a test's queue)
/// rather than in the queue
/// `DEDUP_PARKING_QUEUE_URL` names (S15).
#[cfg(feature = "parking")]
pub fn parked_in<S>(
    dedup: crate::service::Dedup<S>,
    parking: crate::parking::Parking,
) -> crate::service::Dedup<S> {
    dedup.parking(parking)
}

/// A function as its `main` builds it, on the memory store of its own settings
/// ([`function_on_memory`]).
#[cfg(feature = "memory")]
#[derive(Debug)]
pub struct OnMemory<S> {
    /// The service the function's wiring built.
    pub service: S,
    /// The store's data, shared with the service's.
    pub store: lambda_dedup_memory::MemoryStore,
    /// The key spec the function declares: what a test derives the keys it expects with.
    pub key_spec: KeySpec,
}

/// The function `function` with the environment `env`: the service `build` (the wiring its
/// `main` runs) makes [`on_memory`], and the key spec `configure` (its key configuration)
/// declares. Either's refusal of the settings is the error.
#[cfg(feature = "memory")]
pub fn function_on_memory<S, E: From<lambda_dedup_config::SettingsError>>(
    env: &lambda_dedup_config::Env,
    function: &str,
    configure: impl FnOnce(
        crate::service::Dedup<crate::store::NoStore>,
    ) -> crate::service::Dedup<crate::store::NoStore>,
    build: impl FnOnce(crate::service::Dedup) -> Result<S, E>,
) -> Result<OnMemory<S>, E> {
    let key_spec = configure(crate::service::Dedup::read(env, function)?).key_spec();
    let (service, store) = service_on_memory(env, function, &[], build)?;
    Ok(OnMemory {
        service,
        store,
        key_spec,
    })
}

/// The service `build` (the wiring a function's `main` runs) makes for `function` from the
/// settings `env` gives, [`on_memory`], with the function's `tables` (each a name and its key
/// attribute) created in the store; and the store's data. The settings' refusal, or the
/// wiring's, is the error.
#[cfg(feature = "memory")]
pub fn service_on_memory<S, E: From<lambda_dedup_config::SettingsError>>(
    env: &lambda_dedup_config::Env,
    function: &str,
    tables: &[(&str, &str)],
    build: impl FnOnce(crate::service::Dedup) -> Result<S, E>,
) -> Result<(S, lambda_dedup_memory::MemoryStore), E> {
    let (dedup, store) = on_memory(crate::service::Dedup::read(env, function)?);
    for (table, key) in tables {
        store.create_table(table, key);
    }
    Ok((build(dedup)?, store))
}

/// `payload` invoked as Lambda invokes a function, under the request id `request_id` (Lambda's
/// retry of an asynchronous invocation keeps it; a caller's new invocation gets a new one): the
/// invoke door's answer, or its refusal typed. Panics naming the error when the service fails
/// with anything but an [`InvokeError`](crate::InvokeError).
pub async fn invoke<E, R>(
    service: &crate::service::Service<E, R>,
    request_id: &str,
    payload: E,
) -> Result<R, crate::service::InvokeError> {
    let mut context = lambda_runtime::Context::default();
    context.request_id = request_id.to_owned();
    let event = lambda_runtime::LambdaEvent::new(payload, context);
    let answer = lambda_runtime::Service::call(&mut service.clone(), event).await;
    answer.map_err(|e| match e.downcast_ref::<crate::service::InvokeError>() {
        Some(refusal) => refusal.clone(),
        None => panic!("not an InvokeError: {e}"),
    })
}

/// `env` with `DEDUP_DEADLINE_MARGIN_MS` set to `margin`, if one is given: for the tests of
/// what a margin does to a service.
#[cfg(test)]
pub(crate) fn with_margin(env: crate::Env, margin: Option<&str>) -> crate::Env {
    match margin {
        Some(m) => env.with("DEDUP_DEADLINE_MARGIN_MS", m),
        None => env,
    }
}

/// The ids a partial batch response asks SQS to redeliver, in order: what a function's tests
/// compare after calling its handler.
pub fn failed_ids(response: aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect()
}

/// The least environment a function starts with — `DEDUP_NAMESPACE` `t` and
/// `DEDUP_MARK_TABLE` `marks` — with `more` (a function's own variables, a setting the test is
/// about) beside or over them.
pub fn env(more: &[(&str, &str)]) -> lambda_dedup_config::Env {
    let least = [("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", "marks")];
    lambda_dedup_config::Env::from_pairs(least.iter().chain(more).copied())
}

/// A JSON file — a sample event as Lambda hands it over, a fixture — read as `T`
/// (`serde_json::Value` to edit it into the test's case first). Panics naming the file when it
/// cannot be read or is not a `T`.
pub fn read_json<T: serde::de::DeserializeOwned>(path: impl AsRef<std::path::Path>) -> T {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `sample` (a sample event edited into a test's case) as the event type `E` a service takes:
/// what a test hands the service each time it delivers the same event again.
pub fn event<E: serde::de::DeserializeOwned>(sample: &Value) -> E {
    serde_json::from_value(sample.clone()).unwrap_or_else(|e| panic!("not the event: {e}"))
}

/// The attribute `attribute` of the item of `table` whose key `key.0` is `key.1`, in the
/// memory store's data, if the item and the attribute are there: what a function's test
/// reads its effect back with.
#[cfg(feature = "memory")]
pub fn attribute(
    store: &lambda_dedup_memory::MemoryStore,
    table: &str,
    key: (&str, &str),
    attribute: &str,
) -> Option<lambda_dedup::Value> {
    let item = store.item(table, &lambda_dedup::Item::new().with(key.0, key.1))?;
    item.0.get(attribute).cloned()
}

/// The builder of `function` on the least environment a function starts with ([`env`]):
/// what the key-configuration checks apply a function's `configure` to.
fn minimal_dedup(function: &str) -> crate::service::Dedup<crate::store::NoStore> {
    crate::service::Dedup::read(&env(&[]), function).expect("settings")
}

/// S11 for a function's key configuration: `configure` applied to a builder on a minimal
/// environment (what the function's `main` applies to its own); then, under the same event id
/// as `sample`, a change to any of the `depends_on` fields gives another fingerprint (a
/// conflict, never a duplicate), while a change of the envelope's `time` (a producer's retry)
/// gives the same one. Panics naming the field that is not covered.
pub fn assert_configured_fingerprint_covers(
    configure: impl FnOnce(
        crate::service::Dedup<crate::store::NoStore>,
    ) -> crate::service::Dedup<crate::store::NoStore>,
    sample: &Value,
    depends_on: &[&str],
) {
    let dedup = minimal_dedup("c");
    assert_fingerprint_covers(&configure(dedup).key_spec(), sample, depends_on);
}

/// The operators' tool is told a CloudEvents function's key spec as a `--key-spec` text
/// (`cloudevents:<tenant extension>[:<fingerprint pointer>,…]`), which the function's template
/// entry declares for it (`Metadata.LambdaDedupKeySpec`): `text`, read as the tool reads it
/// ([`lambda_dedup_config::cloudevents_key_spec`]), must be the spec `configure` (the function's key
/// configuration) declares for `function`. Panics naming `function`, the text and the spec
/// when it is not, or when there is no text.
pub fn assert_declared_key_spec(
    text: Option<&str>,
    function: &str,
    configure: impl FnOnce(
        crate::service::Dedup<crate::store::NoStore>,
    ) -> crate::service::Dedup<crate::store::NoStore>,
) {
    let dedup = minimal_dedup(function);
    let settings = dedup.settings().clone();
    let declared = configure(dedup).key_spec();
    let text = text.unwrap_or_else(|| {
        panic!("no key spec is declared for {function} (it declares {declared:?})")
    });
    let given = lambda_dedup_config::cloudevents_key_spec(text, settings.scope.clone())
        .unwrap_or_else(|e| panic!("{function}: {e}"));
    assert_eq!(
        settings.key_spec(given),
        declared,
        "the key spec declared for {function} ({text}) is not the one its code declares"
    );
}

/// The metric names an EMF line declares, in order: what a function prints, as CloudWatch
/// reads it.
pub fn emf_metric_names(line: &Value) -> Vec<&str> {
    line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["Name"].as_str()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::events::sqs_event;
    use super::*;
    use crate::{Dedup, Env, Event};
    use lambda_dedup::{Lease, MarkStore};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, SystemTime};

    /// `with_outcomes` says why each record ended as it did, in its order: the applied one, the
    /// duplicate, and the rejected one with the reason naming what was wrong (never its value);
    /// outside it, nothing is collected.
    #[tokio::test]
    async fn with_outcomes_names_each_records_outcome_and_reason() {
        let env = env(&[]);
        let (dedup, _) = on_memory(Dedup::read(&env, "payer").expect("settings"));
        #[derive(serde::Deserialize)]
        struct Pay {
            #[allow(dead_code)]
            amount: i64,
        }
        let service = dedup
            .identity("/id")
            .sqs(|_: Event<Pay>| Vec::<lambda_dedup::Effect>::new())
            .expect("service");
        let bodies = [
            r#"{"id": "p-1", "amount": 5}"#,
            r#"{"id": "p-1", "amount": 5}"#,
            r#"{"id": "p-2", "amount": "secret-value"}"#,
        ];
        let (answer, outcomes) = with_outcomes(service.call_with(sqs_event(&bodies))).await;
        assert_eq!(failed_ids(answer.expect("answer")), ["m2"]);
        let labels: Vec<(&str, &str)> = outcomes
            .iter()
            .map(|(id, o)| (id.as_str(), o.label()))
            .collect();
        assert_eq!(
            labels,
            [("m0", "applied"), ("m1", "duplicate"), ("m2", "rejected")]
        );
        let why = format!("{:?}", outcomes[2].1);
        assert!(why.contains("payload does not fit"), "{why}");
        assert!(!why.contains("secret-value"), "{why}");
        assert!(
            matches!(
                &outcomes[2].1,
                Outcome::Rejected {
                    code: lambda_dedup_engine::Reason::InvalidPayload,
                    invalid: Some(lambda_dedup_engine::Invalid::Misfit { path }),
                    ..
                } if path == "amount"
            ),
            "the misfit, typed, at its field: {why}"
        );
        service
            .call_with(sqs_event(&bodies[..1]))
            .await
            .expect("answer");
        assert!(
            crate::service::account::OUTCOMES.try_with(|_| ()).is_err(),
            "nothing kept outside"
        );
    }

    /// A fixture stamped with `now_as` is on time, and the same fixture stamped 31 days ago is
    /// late (S10), its time read where `DEDUP_EVENT_TIME_FROM` says.
    #[tokio::test]
    async fn a_fixture_stamped_now_is_never_late() {
        let env = env(&[("DEDUP_EVENT_TIME_FROM", "json:/at")]);
        let (dedup, _) = on_memory(Dedup::read(&env, "payer").expect("settings"));
        let service = dedup
            .identity("/id")
            .sqs(|_: Event<Value>| Vec::<lambda_dedup::Effect>::new())
            .expect("service");
        let old = SystemTime::now() - Duration::from_secs(31 * 86_400);
        let fresh = json!({"id": "e-1", "at": now_as(lambda_dedup::TimeFormat::Rfc3339)});
        let stale = json!({"id": "e-2", "at": lambda_dedup::TimeFormat::Rfc3339.write(old)});
        let bodies = [fresh.to_string(), stale.to_string()];
        let bodies: Vec<&str> = bodies.iter().map(String::as_str).collect();
        let (_, outcomes) = with_outcomes(service.call_with(sqs_event(&bodies))).await;
        let labels: Vec<&str> = outcomes.iter().map(|(_, o)| o.label()).collect();
        assert_eq!(labels[0], "applied", "{outcomes:?}");
        assert_ne!(labels[1], "applied", "{outcomes:?}");
    }

    /// `DEDUP_CLOCK_SKEW_MS` through the builder's wiring: while a call is out, the store records
    /// its lease held the allowance past the end the call was given (S6); an allowance not
    /// shorter than the lease refuses the start, naming the variable.
    #[tokio::test]
    async fn the_clock_skew_setting_reaches_the_leases_the_store_records() {
        let env = env(&[
            ("DEDUP_LEASE_SECONDS", "90"),
            ("DEDUP_CLOCK_SKEW_MS", "2500"),
        ]);
        let (dedup, store) = on_memory(Dedup::read(&env, "payer").expect("settings"));
        let held = Arc::new(Mutex::new(Vec::new()));
        let (seen, marks) = (held.clone(), store.clone());
        let service = dedup
            .identity("/id")
            .sqs(crate::flow::calls(move |_: Event<Value>, lease: Lease| {
                let recorded = marks.marks().iter().find_map(|m| m.lease_expires_at);
                seen.lock()
                    .expect("lock")
                    .push((lease.expires_at, recorded));
                async { Ok(None) }
            }))
            .expect("service");
        let answer = service
            .call_with(sqs_event(&[r#"{"id": "p-1"}"#]))
            .await
            .expect("answer");
        assert!(answer.batch_item_failures.is_empty());
        let held = held.lock().expect("lock").clone();
        let (given, recorded) = held[0];
        let recorded = recorded.expect("the claim's lease is recorded while the call is out");
        assert_eq!(
            recorded.duration_since(given).expect("later"),
            Duration::from_millis(2500)
        );
        let refused = Dedup::read(&env.clone().with("DEDUP_CLOCK_SKEW_MS", "90000"), "payer");
        assert!(
            matches!(
                refused,
                Err(crate::SettingsError::Refused {
                    var: "DEDUP_CLOCK_SKEW_MS",
                    rule: crate::SettingRule::NotShorterThan {
                        other: "DEDUP_LEASE_SECONDS",
                        ..
                    },
                })
            ),
            "an allowance as long as the lease accepted: {refused:?}"
        );
    }

    /// The store `on_memory` gives the service is the settings' own: a lease and a retention set
    /// through the environment (not the defaults, 60 s and 30 days) are the ones a claim and a
    /// completed mark get, and the handle returned sees the marks the service wrote.
    #[tokio::test]
    async fn on_memory_configures_the_store_from_the_functions_settings() {
        let env = env(&[
            ("DEDUP_LEASE_SECONDS", "90"),
            ("DEDUP_RETENTION_SECONDS", "3456000"),
        ]);
        let (dedup, store) = on_memory(Dedup::read(&env, "payer").expect("settings"));
        assert_eq!(store.options().lease, Duration::from_secs(90));
        assert_eq!(store.retention().duration(), Duration::from_secs(3_456_000));
        let leases = Arc::new(Mutex::new(Vec::new()));
        let seen = leases.clone();
        let service = dedup
            .identity("/id")
            .sqs(crate::flow::calls(move |_: Event<Value>, lease: Lease| {
                seen.lock().expect("lock").push(lease.expires_at);
                async { Ok(None) }
            }))
            .expect("service");
        let before = SystemTime::now();
        let answer = service
            .call_with(sqs_event(&[r#"{"id": "p-1"}"#]))
            .await
            .expect("answer");
        assert!(answer.batch_item_failures.is_empty());
        let from_now = |t: SystemTime| t.duration_since(before).expect("later").as_secs();
        let leases = leases.lock().expect("lock").clone();
        assert_eq!(leases.len(), 1);
        assert!((89..=91).contains(&from_now(leases[0])), "the 90 s lease");
        let marks = store.marks();
        assert_eq!(
            marks.len(),
            1,
            "the service's mark, seen through the handle"
        );
        assert!(
            (3_455_999..=3_456_001).contains(&from_now(marks[0].expires_at)),
            "the 40-day retention"
        );
    }

    /// `env` is the least environment with the test's variables beside it and over it;
    /// `service_on_memory` builds the wiring on the settings' store with the function's tables,
    /// and `attribute` reads back what the service wrote there (nothing for an absent item).
    #[tokio::test]
    async fn service_on_memory_builds_the_wiring_with_its_tables_and_attribute_reads_them() {
        let env = env(&[("DEDUP_NAMESPACE", "other"), ("DEDUP_LEASE_SECONDS", "90")]);
        assert_eq!(env.get("DEDUP_NAMESPACE").as_deref(), Some("other"));
        assert_eq!(env.get("DEDUP_MARK_TABLE").as_deref(), Some("marks"));
        let wiring = |dedup: Dedup| {
            dedup.identity("/id").sqs(|e: Event<Value>| {
                let id = e.payload["id"].as_str().unwrap_or_default().to_owned();
                lambda_dedup::Effect::put(
                    "notes",
                    lambda_dedup::Item::new()
                        .with("id", id.as_str())
                        .with("n", 1),
                )
            })
        };
        let (service, store) =
            service_on_memory(&env, "payer", &[("notes", "id")], wiring).expect("service");
        assert_eq!(store.options().lease, Duration::from_secs(90));
        let answer = service.call_with(sqs_event(&[r#"{"id": "p-1"}"#])).await;
        assert!(answer.expect("answer").batch_item_failures.is_empty());
        let n = attribute(&store, "notes", ("id", "p-1"), "n");
        assert_eq!(n, Some(lambda_dedup::Value::N("1".into())));
        assert_eq!(attribute(&store, "notes", ("id", "p-2"), "n"), None);
    }

    /// `function_on_memory` builds the service as the wiring does, on the settings' store, and
    /// hands back the key spec `configure` declares: the key of the mark the service writes.
    #[tokio::test]
    async fn function_on_memory_gives_the_wirings_service_its_store_and_key_spec() {
        let env = env(&[("DEDUP_LEASE_SECONDS", "90")]);
        fn configure<S>(dedup: Dedup<S>) -> Dedup<S> {
            dedup.identity("/id")
        }
        let function = function_on_memory(&env, "payer", configure, |dedup| {
            configure(dedup).sqs(crate::flow::calls(|_: Event<Value>, _: Lease| async {
                Ok(None)
            }))
        })
        .expect("service");
        assert_eq!(function.store.options().lease, Duration::from_secs(90));
        let body = r#"{"id": "p-1"}"#;
        let answer = function
            .service
            .call_with(sqs_event(&[body]))
            .await
            .expect("answer");
        assert!(answer.batch_item_failures.is_empty());
        let message = lambda_dedup::Message {
            body: body.as_bytes().to_vec(),
            ..lambda_dedup::Message::default()
        };
        let expected = function.key_spec.derive(&message).expect("derived").key;
        let keys: Vec<_> = function.store.marks().into_iter().map(|m| m.key).collect();
        assert_eq!(keys, [expected]);
        let refused = function_on_memory(
            &Env::from_pairs([("DEDUP_MARK_TABLE", "marks")]),
            "payer",
            configure,
            |dedup| {
                configure(dedup).sqs(crate::flow::calls(|_: Event<Value>, _: Lease| async {
                    Ok(None)
                }))
            },
        );
        assert!(matches!(refused, Err(crate::BuildError::Settings(_))));
    }
}
