//! The function as `main` wires it, on the in-memory store, with its payments API played by
//! the fake provider (`lambda-dedup-fake-provider`), which honours `Idempotency-Key`, counts
//! what it applied and fails as told.

use super::*;
use lambda_dedup_fake_provider::{Fault, Provider};
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::testing::invoke;
use lambda_dedup_runtime::{Env, InvokeError, Reason};

async fn payments_api() -> (Provider, String) {
    let payments = Provider::new();
    let (url, _) = payments.serve().await.expect("payments API");
    (payments, format!("{url}/v1"))
}

fn env(url: &str, tenant: &str) -> Env {
    Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("PAYMENTS_API_URL", url),
        ("PROVIDER_TIMEOUT_MS", "300"),
        ("CHARGE_TENANT", tenant),
    ])
}

fn function(url: &str) -> Service<Value, Receipt> {
    let dedup = Dedup::read(&env(url, "acme"), "invoke-charge").expect("settings");
    service(lambda_dedup_runtime::testing::on_memory(dedup).0).expect("service")
}

/// The function deployed for `tenant`, its marks in `store` (shared with another deployment).
fn function_on(url: &str, tenant: &str, store: &MemoryStore) -> Service<Value, Receipt> {
    let dedup = Dedup::read(&env(url, tenant), "invoke-charge").expect("settings");
    service(dedup.on(lambda_dedup_runtime::store::Items::new(store.clone()))).expect("service")
}

/// S6, S8: one charge however often the caller invokes; every duplicate gets the first receipt.
#[tokio::test]
async fn invoke_charges_once_and_returns_the_first_receipt() {
    let (payments, url) = payments_api().await;
    let f = function(&url);
    let charge = serde_json::json!({"order_id": "o-1", "cents": 500});
    let first = invoke(&f, "r-1", charge.clone()).await.expect("charged");
    for request in ["r-2", "r-3"] {
        assert_eq!(invoke(&f, request, charge.clone()).await, Ok(first.clone()));
    }
    assert_eq!(payments.total_effects(), 1);
    assert_eq!(first.cents, 500);
}

/// S13, S15: the payments API down is a retry the caller (or Lambda's async retries) makes
/// under the same key, charged once when it comes back; the same order with another amount is
/// a conflict, a zero amount a rejection, neither charged.
#[tokio::test]
async fn invoke_retries_a_provider_outage_and_refuses_conflicts() {
    let (payments, url) = payments_api().await;
    let f = function(&url);
    payments.inject(Fault::error_5xx(1));
    let charge = serde_json::json!({"order_id": "o-2", "cents": 700});
    assert!(matches!(
        invoke(&f, "r-1", charge.clone()).await,
        Err(InvokeError::Retry { .. })
    ));
    let receipt = invoke(&f, "r-1", charge)
        .await
        .expect("charged on the retry");
    assert_eq!(receipt.order_id, "o-2");
    let invalid = InvokeError::Rejected {
        code: Reason::InvalidPayload,
    };
    let order = |id: &str, cents: i64| serde_json::json!({"order_id": id, "cents": cents});
    let refused = [
        ("r-2", order("o-2", 1), InvokeError::Conflict),
        ("r-3", order("o-3", 0), invalid),
    ];
    for (request, charge, refusal) in refused {
        assert_eq!(invoke(&f, request, charge).await, Err(refusal));
    }
    assert_eq!(payments.total_effects(), 1);
}

/// Issue 42: the receipt stored and handed to every invoker naming the order is minimal — the
/// order, the amount, the payment's id — never the payments API's whole answer (its echo of
/// the request, the idempotency key).
#[tokio::test]
async fn invoke_charge_stores_a_minimal_receipt_not_the_providers_answer() {
    let (_payments, url) = payments_api().await;
    let f = function(&url);
    let charge = serde_json::json!({"order_id": "o-10", "cents": 900});
    let first = invoke(&f, "r-1", charge.clone()).await.expect("charged");
    let again = invoke(&f, "r-2", charge).await.expect("the stored receipt");
    for receipt in [&first, &again] {
        let stored = serde_json::to_value(receipt).expect("receipt");
        let mut fields: Vec<&str> = stored
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        fields.sort_unstable();
        assert_eq!(fields, ["cents", "order_id", "payment_id"], "{stored}");
        assert!(!stored.to_string().contains("idempotency_key"), "{stored}");
        assert_eq!(stored["payment_id"], "payments_1", "{stored}");
    }
}

/// Issue 42: two deployments of the function, each for its own `CHARGE_TENANT`, on one mark
/// table: the same `order_id` is a charge of each tenant, and neither invoker receives the
/// other tenant's receipt.
#[tokio::test]
async fn invoke_charge_keys_are_scoped_to_the_fixed_tenant() {
    let (payments, url) = payments_api().await;
    let env = env(&url, "acme");
    let store = lambda_dedup_runtime::testing::on_memory(
        Dedup::read(&env, "invoke-charge").expect("settings"),
    )
    .1;
    let acme = function_on(&url, "acme", &store);
    let globex = function_on(&url, "globex", &store);
    let charge = serde_json::json!({"order_id": "o-11", "cents": 400});
    let for_acme = invoke(&acme, "r-1", charge.clone()).await.expect("charged");
    let for_globex = invoke(&globex, "r-2", charge.clone())
        .await
        .expect("charged");
    assert_ne!(for_acme, for_globex, "globex got acme's receipt");
    assert_eq!(payments.total_effects(), 2, "each tenant's charge made");
    assert_eq!(invoke(&acme, "r-3", charge).await, Ok(for_acme));
}

/// Issue 42: the identity is a JSON string. `{"order_id": 42}` is refused
/// `identity_wrong_type`, never taken for the order `"42"` and answered with its receipt.
#[tokio::test]
async fn invoke_charge_a_numeric_order_id_is_not_the_string_one() {
    let (payments, url) = payments_api().await;
    let f = function(&url);
    let named = serde_json::json!({"order_id": "42", "cents": 300});
    invoke(&f, "r-1", named).await.expect("charged");
    let numeric = serde_json::json!({"order_id": 42, "cents": 300});
    assert_eq!(
        invoke(&f, "r-2", numeric).await,
        Err(InvokeError::Rejected {
            code: Reason::IdentityWrongType
        })
    );
    assert_eq!(payments.total_effects(), 1);
}

/// Issue 42: the function does not start without its tenant.
#[test]
fn invoke_charge_refuses_to_start_without_its_tenant() {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("PAYMENTS_API_URL", "http://127.0.0.1:9/v1"),
    ]);
    let dedup = Dedup::read(&env, "invoke-charge").expect("settings");
    let refused = service(lambda_dedup_runtime::testing::on_memory(dedup).0).err();
    let refused = refused.map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("CHARGE_TENANT"), "{refused}");
}
