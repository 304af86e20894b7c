//! The S3 door end to end: the built `example-s3-catalog` binary, unmodified, polls a runtime
//! API of this test's own ([`local_lambda::concurrent`]) and is handed AWS's published sample
//! event (`events/example-s3-event.json`), its marks and catalog in the shared local DynamoDB.
//! A notification is catalogued once, its redelivery a duplicate, an older event of the same
//! object superseded and acknowledged (the newer state stands); the sample as AWS publishes it,
//! whose placeholder sequencer is not hex, is refused and the invocation fails, for Lambda's
//! async retries and the on-failure destination (S2, S8, S12).
//!
//! It needs the built functions (`DEDUP_FUNCTIONS_DIR`, which `cargo xtask test` sets); without
//! them it says so and is skipped.

use std::time::Duration;

use local_lambda::concurrent::Answer;

use dedup_tests as support;

/// AWS's sample, with `name` and `sequencer` when given.
fn event(name: &str, sequencer: Option<&str>) -> serde_json::Value {
    let mut sample = crate::built::sample("example-s3-event.json");
    sample["Records"][0]["eventName"] = name.into();
    if let Some(s) = sequencer {
        sample["Records"][0]["s3"]["object"]["sequencer"] = s.into();
    }
    sample
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_binary_catalogues_each_notification_once_and_newest_wins() {
    let Some(dir) = crate::built::functions_dir("the S3 end-to-end test") else {
        return;
    };
    let ddb = local_dynamodb::shared();
    let client = support::client_at(&ddb.endpoint());
    let marks = support::mark_table(&client).await;
    let catalog = support::effect_table(&client, "object").await;
    let (api, function) = crate::built::Built::start(
        format!("{dir}/example-s3-catalog"),
        "s3-catalog",
        ddb.endpoint(),
        [
            ("DEDUP_NAMESPACE", support::unique("s3")),
            ("DEDUP_MARK_TABLE", marks.clone()),
            ("CATALOG_TABLE", catalog.clone()),
        ],
    )
    .await;
    let wait = Duration::from_secs(20);
    let newer = event("ObjectRemoved:Delete", Some("0055AED6DCD90281E6"));
    let older = event("ObjectCreated:Put", Some("0055AED6DCD90281E5"));
    for e in [&newer, &newer, &older] {
        let run = api.invoke(e.clone(), wait).await;
        assert!(
            matches!(run.answer, Answer::Response(_)),
            "acknowledged: {run:?}"
        );
    }
    let object = "sourcebucket/Happy Face.jpg";
    let stored = support::get_item(&client, &catalog, "object", object).await;
    let state = stored.and_then(|i| i.get("state").and_then(|v| v.as_s().ok().cloned()));
    assert_eq!(
        state.as_deref(),
        Some("ObjectRemoved:Delete"),
        "the newer state stands"
    );
    let published = api.invoke(event("ObjectCreated:Put", None), wait).await;
    let Answer::Error(error) = &published.answer else {
        panic!("the placeholder sequencer was acknowledged: {published:?}");
    };
    assert!(error.to_string().contains("rejected"), "{error}");
    // One mark (the notification) and its object's high-water item.
    assert_eq!(support::mark_keys(&client, &marks).await.len(), 2);
    function.stop().await;
}
