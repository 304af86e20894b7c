//! The direct invoke door (`Dedup::invoke`) on the memory store: the response stored and
//! returned to duplicates (S8), the identity from the payload (inside a JSON-encoded string
//! field too), the request id only as the opt-in fallback, a concurrent duplicate answered
//! `InProgress` or made to wait for the response (`DEDUP_IN_PROGRESS_WAIT_MS`), and hostile
//! payloads answered with typed errors (S2, S11).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lambda_dedup_engine::{Reason, RetryCause};
use lambda_dedup_runtime::testing::{invoke, on_memory};
use lambda_dedup_runtime::{
    BuildError, Dedup, Env, Event, HandlerError, Identity, InvokeError, InvokeScope,
    InvokeScopeError, Service, Tenant,
};

use serde_json::{Value, json};

#[derive(Debug, serde::Deserialize)]
struct Charge {
    order_id: String,
    cents: i64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Receipt {
    order_id: String,
    charge: usize,
}

fn env(wait_ms: &str) -> Env {
    Env::from_pairs([
        ("DEDUP_NAMESPACE", "test"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("DEDUP_IN_PROGRESS_WAIT_MS", wait_ms),
    ])
}

/// The service, charging under a lease: each charge counted, `delay` long.
fn charges(dedup: Dedup, delay: Duration) -> (Service<Value, Receipt>, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let service = dedup
        .invoke(InvokeScope::shared_key_space(), move |e: Event<Charge>| {
            let c = c.clone();
            async move {
                if e.payload.cents <= 0 {
                    return Err(HandlerError::invalid("cents must be positive"));
                }
                tokio::time::sleep(delay).await;
                let charge = c.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(Receipt {
                    order_id: e.payload.order_id,
                    charge,
                })
            }
        })
        .expect("service");
    (service, count)
}

fn on(wait_ms: &str) -> Dedup {
    on_memory(Dedup::read(&env(wait_ms), "charger").expect("settings")).0
}

/// S8: a second invocation of the same charge (another request id: the caller invoked again)
/// gets the first response back, the stored one, and nothing is charged twice.
#[tokio::test]
async fn invoke_returns_the_first_response_to_a_duplicate() {
    let (service, count) = charges(on("0").identity("/order_id"), Duration::ZERO);
    let charge = json!({"order_id": "o-1", "cents": 500});
    let first = invoke(&service, "r-1", charge.clone())
        .await
        .expect("charged");
    let again = invoke(&service, "r-2", charge).await.expect("answered");
    assert_eq!(
        first,
        Receipt {
            order_id: "o-1".into(),
            charge: 1
        }
    );
    assert_eq!(again, first);
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

/// S1: the identity read inside a JSON-encoded string field of the event (`/body/order_id`,
/// the body of an API Gateway event, say); the payload is still the whole event.
#[tokio::test]
async fn invoke_identity_inside_a_json_encoded_string_field() {
    #[derive(Debug, serde::Deserialize)]
    struct Wrapped {
        body: String,
    }
    let service = on("0")
        .identity("/body/order_id")
        .invoke(
            InvokeScope::shared_key_space(),
            |e: Event<Wrapped>| async move {
                let inner: Value = serde_json::from_str(&e.payload.body)
                    .map_err(|_| HandlerError::invalid("body"))?;
                Ok::<_, HandlerError>(inner["cents"].as_i64().unwrap_or_default())
            },
        )
        .expect("service");
    let call = |request_id: &'static str, cents: i64| {
        let service = service.clone();
        async move {
            let body = json!({"order_id": "o-2", "cents": cents}).to_string();
            invoke(&service, request_id, json!({ "body": body })).await
        }
    };
    assert_eq!(call("r-1", 7).await, Ok(7));
    assert_eq!(
        call("r-2", 7).await,
        Ok(7),
        "a duplicate by the inner order_id"
    );
    assert_eq!(call("r-3", 8).await, Err(InvokeError::Conflict), "S11");
}

/// A concurrent duplicate: without a wait it is answered `InProgress` (the caller retries);
/// with `DEDUP_IN_PROGRESS_WAIT_MS` it waits for the first one's response and returns it. One
/// charge either way.
#[tokio::test]
async fn invoke_a_concurrent_duplicate_is_told_in_progress_or_waits() {
    for (wait, waits) in [("0", false), ("5000", true)] {
        let (service, count) = charges(on(wait).identity("/order_id"), Duration::from_millis(300));
        let charge = json!({"order_id": "o-3", "cents": 100});
        let first = invoke(&service, "r-1", charge.clone());
        let second = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            invoke(&service, "r-2", charge.clone()).await
        };
        let (first, second) = tokio::join!(first, second);
        let first = first.expect("charged");
        if waits {
            assert_eq!(second, Ok(first));
        } else {
            assert_eq!(second, Err(InvokeError::InProgress));
        }
        assert_eq!(count.load(Ordering::SeqCst), 1, "wait={wait}");
    }
}

/// S2, S11: hostile payloads get typed errors and nothing charged: no identity, an identity
/// inside a string that is not JSON, a payload that is not a `Charge`, the work's own refusal,
/// the same identity with another payload; a store that cannot be reached is a retry (S13).
#[tokio::test]
async fn invoke_hostile_payloads_get_typed_errors() {
    let (service, count) = charges(on("0").identity("/order_id"), Duration::ZERO);
    let code = |r: Result<Receipt, InvokeError>| match r {
        Err(InvokeError::Rejected { code }) => code,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        code(invoke(&service, "r-1", json!({"cents": 1})).await),
        Reason::IdentityMissing
    );
    assert_eq!(
        code(invoke(&service, "r-2", json!({"order_id": "o-4", "cents": "one"})).await),
        Reason::InvalidPayload
    );
    assert_eq!(
        code(invoke(&service, "r-3", json!({"order_id": "o-5", "cents": 0})).await),
        Reason::InvalidPayload
    );
    assert_eq!(
        code(
            invoke(
                &service,
                "r-4",
                json!({"order_id": "x".repeat(2000), "cents": 1})
            )
            .await
        ),
        Reason::IdentityTooLong
    );
    invoke(&service, "r-5", json!({"order_id": "o-6", "cents": 1}))
        .await
        .expect("charged");
    assert_eq!(
        invoke(&service, "r-6", json!({"order_id": "o-6", "cents": 2})).await,
        Err(InvokeError::Conflict)
    );
    let (nested, _) = charges(on("0").identity("/order/id"), Duration::ZERO);
    assert_eq!(
        code(invoke(&nested, "r-7", json!({"order": "not json", "cents": 1})).await),
        Reason::EmbeddedNotJson
    );
    assert_eq!(count.load(Ordering::SeqCst), 1);

    let (dedup, store) = on_memory(Dedup::read(&env("0"), "charger").expect("settings"));
    drop(dedup);
    let down = Dedup::read(&env("0"), "charger")
        .expect("settings")
        .on(lambda_dedup_runtime::store::Items::new(store.unreachable()))
        .identity("/order_id");
    let (down, _) = charges(down, Duration::ZERO);
    assert_eq!(
        invoke(&down, "r-8", json!({"order_id": "o-7", "cents": 1})).await,
        Err(InvokeError::Retry {
            cause: RetryCause::Store
        })
    );
}

/// S1: the request id is an identity only when chosen (Lambda keeps it across its own async
/// retries): the same request id is a duplicate, a new invocation of the same payload is new.
#[tokio::test]
async fn invoke_request_id_is_only_an_opt_in_fallback() {
    let (service, count) = charges(on("0").identity(Identity::envelope_id()), Duration::ZERO);
    let charge = json!({"order_id": "o-8", "cents": 1});
    let first = invoke(&service, "r-1", charge.clone())
        .await
        .expect("charged");
    assert_eq!(invoke(&service, "r-1", charge.clone()).await, Ok(first));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    invoke(&service, "r-2", charge)
        .await
        .expect("charged again");
    assert_eq!(
        count.load(Ordering::SeqCst),
        2,
        "a new request id is a new event to it"
    );
}

/// Work that outlives `PROVIDER_TIMEOUT_MS` is given up and its claim released: the caller is
/// told to retry (typed), and the retry is not kept waiting on a lease nobody holds.
#[tokio::test]
async fn invoke_work_past_the_provider_timeout_is_a_retry_that_frees_the_event() {
    let env = env("0").with("PROVIDER_TIMEOUT_MS", "200");
    let dedup = on_memory(Dedup::read(&env, "charger").expect("settings")).0;
    let (service, count) = charges(dedup.identity("/order_id"), Duration::from_secs(30));
    let charge = json!({"order_id": "o-9", "cents": 1});
    let started = std::time::Instant::now();
    assert_eq!(
        invoke(&service, "r-1", charge.clone()).await,
        Err(InvokeError::Retry {
            cause: RetryCause::Transient
        })
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        invoke(&service, "r-2", charge).await,
        Err(InvokeError::Retry {
            cause: RetryCause::Transient
        }),
        "claimed again, not in progress"
    );
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

/// Issue 42: a fixed tenant is the only tenant; a builder that also reads one from the payload
/// (`.tenant(..)`, a pointer or a CloudEvents extension) is refused, as is an empty fixed tenant, typed. The shared key
/// space said openly builds beside a payload tenant.
#[test]
fn invoke_scope_a_fixed_tenant_is_not_read_from_the_payload() {
    let work = |e: Event<Value>| async move { Ok::<_, HandlerError>(e.payload) };
    let refused = |r: Result<Service<Value, Value>, BuildError>| match r {
        Err(BuildError::InvokeScope(e)) => e,
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("built"),
    };
    let built = on("0")
        .identity("/order_id")
        .tenant("/tenant")
        .invoke(InvokeScope::tenant("acme"), work);
    assert_eq!(refused(built), InvokeScopeError::TenantFromPayload);
    let built = on("0")
        .tenant(Tenant::extension("tenantid"))
        .invoke(InvokeScope::tenant("acme"), work);
    assert_eq!(refused(built), InvokeScopeError::TenantFromPayload);
    for tenant in ["", " ", "a\nb"] {
        let built = on("0")
            .identity("/order_id")
            .invoke(InvokeScope::tenant(tenant), work);
        assert_eq!(
            refused(built),
            InvokeScopeError::TenantInvalid,
            "{tenant:?}"
        );
    }
    let shared = on("0")
        .identity("/order_id")
        .tenant("/tenant")
        .trusted_producers()
        .invoke(InvokeScope::shared_key_space(), work);
    assert!(shared.is_ok());
}

/// Issue 42: `42` and `"42"` are not one identity, nor one tenant: a value read by a pointer
/// that is not a JSON string is refused `identity_wrong_type`, nothing charged.
#[tokio::test]
async fn invoke_identity_and_tenant_are_json_strings() {
    let dedup = on("0")
        .identity("/order_id")
        .tenant("/tenant")
        .trusted_producers();
    let (service, count) = charges(dedup, Duration::ZERO);
    let named = json!({"order_id": "42", "tenant": "7", "cents": 1});
    invoke(&service, "r-1", named).await.expect("charged");
    for payload in [
        json!({"order_id": 42, "tenant": "7", "cents": 1}),
        json!({"order_id": "42", "tenant": 7, "cents": 1}),
    ] {
        assert_eq!(
            invoke(&service, "r-2", payload).await,
            Err(InvokeError::Rejected {
                code: Reason::IdentityWrongType
            })
        );
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
}
