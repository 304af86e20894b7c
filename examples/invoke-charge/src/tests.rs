//! The function as `main` wires it, on the in-memory store, with its payments API played by
//! the fake provider (`lambda-dedup-fake-provider`), which honours `Idempotency-Key`, counts
//! what it applied and fails as told.

use super::*;
use lambda_dedup_fake_provider::{Fault, Provider};
use lambda_dedup_runtime::{Env, InvokeError, Reason};
use lambda_runtime::{Context, LambdaEvent};

async fn payments_api() -> (Provider, String) {
    let payments = Provider::new();
    let (addr, _) = lambda_dedup_fake_provider::spawn(payments.clone(), ([127, 0, 0, 1], 0).into())
        .await
        .expect("payments API");
    (payments, format!("http://{addr}/v1"))
}

fn function(url: &str) -> Service<Value, Receipt> {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "example"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("PAYMENTS_API_URL", url),
        ("PROVIDER_TIMEOUT_MS", "300"),
    ]);
    let dedup = Dedup::read(&env, "invoke-charge").expect("settings");
    service(lambda_dedup_runtime::testing::on_memory(dedup).0).expect("service")
}

async fn invoke(
    f: &Service<Value, Receipt>,
    request_id: &str,
    payload: Value,
) -> Result<Receipt, InvokeError> {
    let mut context = Context::default();
    context.request_id = request_id.into();
    let mut f = f.clone();
    lambda_runtime::Service::call(&mut f, LambdaEvent::new(payload, context))
        .await
        .map_err(|e| e.downcast_ref::<InvokeError>().expect("typed").clone())
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
    assert_eq!(
        invoke(
            &f,
            "r-2",
            serde_json::json!({"order_id": "o-2", "cents": 1})
        )
        .await,
        Err(InvokeError::Conflict)
    );
    assert_eq!(
        invoke(
            &f,
            "r-3",
            serde_json::json!({"order_id": "o-3", "cents": 0})
        )
        .await,
        Err(InvokeError::Rejected {
            code: Reason::InvalidPayload
        })
    );
    assert_eq!(payments.total_effects(), 1);
}
