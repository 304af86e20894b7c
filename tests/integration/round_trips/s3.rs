//! Latest-wins (`s3-catalog`): the S3 door, each notification committed with its mark and its
//! object's high-water sequencer.

use lambda_dedup_runtime::aws_lambda_events::event::s3::S3EventRecord;
use lambda_dedup_runtime::flow::latest_wins;
use lambda_dedup_runtime::source::S3;
use lambda_dedup_runtime::testing::events::s3_event;
use lambda_dedup_runtime::{Effect, Event, Item};

use super::{delivered, metered_tables, on_dynamodb, on_marks, ops};

/// A notification, its redelivery to the same container and to another, then an older
/// notification of the same object (superseded), and its redelivery to the same container.
#[tokio::test]
async fn round_trips_of_latest_wins() {
    let (meter, client, marks, catalog) = metered_tables("object").await;
    let env = on_marks(&marks, &[]);
    let container = || {
        let catalog = catalog.clone();
        on_dynamodb(&client, &env, "s3-catalog")
            .door(
                S3,
                latest_wins(move |e: Event<S3EventRecord>| {
                    let object = e.payload.s3.object.url_decoded_key.unwrap_or_default();
                    let sequencer = e.payload.s3.object.sequencer.unwrap_or_default();
                    Effect::update(&catalog, Item::new().with("object", object.as_str()))
                        .expression("SET #seq = :seq")
                        .name("#seq", "sequencer")
                        .value(":seq", sequencer.as_str())
                }),
            )
            .expect("service")
    };
    let (first, other) = (container(), container());
    let newer = s3_event("photos", &[("cat.jpg", "0055AED6DCD90281E6")]);
    let mut rounds: Vec<_> = delivered(&meter, &[&first, &first, &other], &newer)
        .await
        .into_iter()
        .map(|((), requests)| requests)
        .collect();
    let older = s3_event("photos", &[("cat.jpg", "0055AED6DCD90281E5")]);
    rounds.extend(
        delivered(&meter, &[&first, &first], &older)
            .await
            .into_iter()
            .map(|r| r.1),
    );
    // The notification's mark, its item and the object's high-water in one transaction; the
    // same container answers its redelivery from the warm cache; in another, a duplicate is the
    // transaction's failed condition. An older notification (a key of its own) is superseded
    // by the failed high-water condition, and writes no mark, so its redelivery asks again.
    let one_commit = ops(&[("TransactWriteItems", 1)]);
    assert_eq!(
        rounds,
        [
            one_commit.clone(),
            ops(&[]),
            one_commit.clone(),
            one_commit.clone(),
            one_commit
        ]
    );
}
