//! The direct invoke door (`invoke-charge`'s shape): the work calls out, under a claim.

use lambda_dedup_runtime::{Dedup, Env, Event, HandlerError, InvokeScope, store::Items};

use super::{delivered, metered, ops};

/// A first invocation, its duplicate in the same container and in another.
#[tokio::test]
async fn round_trips_of_the_invoke_door() {
    let (meter, client) = metered();
    let marks = dedup_tests::mark_table(&client).await;
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "t"),
        ("DEDUP_MARK_TABLE", marks.as_str()),
    ]);
    let container = || {
        let dedup = Dedup::read(&env, "invoke-charge").expect("settings");
        let store = Items::dynamodb(client.clone(), dedup.settings());
        dedup
            .on(store)
            .identity("/order_id")
            .invoke(
                InvokeScope::tenant("acme"),
                |e: Event<serde_json::Value>| async move {
                    Ok::<_, HandlerError>(serde_json::json!({"receipt": e.payload["order_id"]}))
                },
            )
            .expect("service")
    };
    let (first, other) = (container(), container());
    let charge = serde_json::json!({"order_id": dedup_tests::unique("o"), "cents": 500});
    let mut rounds = Vec::new();
    for (receipt, requests) in delivered(&meter, &[&first, &first, &other], &charge).await {
        assert_eq!(receipt["receipt"], charge["order_id"]);
        rounds.push(requests);
    }
    assert_eq!(
        rounds,
        [
            // The claim, then the completion conditioned on its owner.
            ops(&[("UpdateItem", 2)]),
            // The warm cache.
            ops(&[]),
            // The claim, whose failed condition returns the stored response.
            ops(&[("UpdateItem", 1)]),
        ]
    );
}
