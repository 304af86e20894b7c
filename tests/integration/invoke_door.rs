//! The direct invoke door end to end: the built `example-invoke-charge` binary, unmodified,
//! polls a runtime API that hands out many invocations at once ([`local_lambda::concurrent`],
//! `AWS_LAMBDA_MAX_CONCURRENCY`), its marks in the local DynamoDB and its payments API the fake
//! provider. The same charge invoked six times at once, each under its own request id: one
//! claim wins on DynamoDB's conditional write (S4), the payments API is called once (S6), and
//! every invocation answers the same receipt — the concurrent duplicates by waiting for it
//! (`DEDUP_IN_PROGRESS_WAIT_MS`), later ones from the stored mark (S8); a conflicting amount and
//! a charge without an identity are answered with typed errors (S11, S2), each invocation one
//! EMF line (S14).
//!
//! It needs the built example (`DEDUP_FUNCTIONS_DIR`, which `cargo xtask test` sets); without
//! it it says so and is skipped.

use std::time::Duration;

use local_lambda::concurrent::Answer;

use dedup_tests as support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_concurrent_duplicates_of_one_charge_get_one_charge_and_one_receipt() {
    let Some(dir) = crate::built::functions_dir("invoke door") else {
        return;
    };
    let binary = format!("{dir}/example-invoke-charge");
    if !std::path::Path::new(&binary).exists() {
        eprintln!("invoke door skipped: {binary} is not built");
        return;
    }
    let ddb = local_dynamodb::shared();
    let client = support::client_at(&ddb.endpoint());
    let marks = support::mark_table(&client).await;
    let payments = lambda_dedup_fake_provider::Provider::new();
    let (url, _server) = payments.serve().await.expect("payments API");
    // Each charge takes a while, so the duplicates meet it in progress.
    payments.inject(lambda_dedup_fake_provider::Fault::slow(
        1,
        Duration::from_millis(600),
    ));
    let (api, function) = crate::built::Built::start(
        &binary,
        "invoke-charge",
        ddb.endpoint(),
        [
            ("AWS_LAMBDA_MAX_CONCURRENCY", "8".into()),
            ("DEDUP_NAMESPACE", support::unique("invoke")),
            ("DEDUP_MARK_TABLE", marks.clone()),
            ("PAYMENTS_API_URL", format!("{url}/v1")),
            ("CHARGE_TENANT", "acme".into()),
            ("DEDUP_IN_PROGRESS_WAIT_MS", "8000".into()),
        ],
    )
    .await;

    let charge = serde_json::json!({"order_id": "o-1", "cents": 500});
    let calls = (0..6).map(|_| api.invoke(charge.clone(), Duration::from_secs(20)));
    let first = futures::future::join_all(calls).await;
    assert!(
        api.most_in_flight() > 1,
        "the invocations ran at once (most in flight: {})",
        api.most_in_flight()
    );
    let receipts: Vec<&serde_json::Value> = first
        .iter()
        .map(|i| match &i.answer {
            Answer::Response(r) => r,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(receipts.iter().all(|r| *r == receipts[0]), "{receipts:?}");
    assert_eq!(receipts[0]["order_id"], "o-1");
    let again = api.invoke(charge, Duration::from_secs(10)).await;
    assert!(
        matches!(&again.answer, Answer::Response(r) if r == receipts[0]),
        "{again:?}"
    );
    assert_eq!(payments.total_effects(), 1, "charged once");

    let error = |payload: serde_json::Value| {
        let api = &api;
        async move {
            match api.invoke(payload, Duration::from_secs(10)).await.answer {
                Answer::Error(e) => e["errorMessage"].as_str().unwrap_or_default().to_owned(),
                other => panic!("{other:?}"),
            }
        }
    };
    let conflict = error(serde_json::json!({"order_id": "o-1", "cents": 1})).await;
    assert!(conflict.contains("conflict"), "{conflict}");
    let nameless = error(serde_json::json!({"cents": 1})).await;
    assert!(nameless.contains("identity_missing"), "{nameless}");
    assert_eq!(payments.total_effects(), 1);
    assert_eq!(support::mark_keys(&client, &marks).await.len(), 1);

    tokio::time::sleep(Duration::from_millis(300)).await;
    let emf = function.stop().await.len();
    assert_eq!(emf, 9, "one EMF line per invocation");
}
