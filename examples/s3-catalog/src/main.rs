//! Run with `cargo test -p example-s3-catalog` (its tests, on the memory store); in Lambda,
//! `cargo lambda build --release -p example-s3-catalog` and deploy it with the environment below.
//!
//! An S3-notification Lambda (S3 invoking it directly, asynchronously) that keeps one catalog
//! item per object — its state (`ObjectCreated:Put`, `ObjectRemoved:Delete`…), size and
//! sequencer — written once per notification, however often S3 delivers it, and **newest
//! wins**: an event older than one applied for the same object is superseded, acknowledged and
//! never written over the newer one. The item, the notification's mark and the object's
//! high-water sequencer commit in one DynamoDB transaction. The object is its bucket and its
//! decoded key (S3 URL-encodes keys in notifications).
//!
//! Environment: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE`) plus `CATALOG_TABLE` (key `object`). Give the function an on-failure
//! destination: a record that is not acknowledged fails the invocation for Lambda's retries.

use lambda_dedup_runtime::aws_lambda_events::event::s3::{S3Event, S3EventRecord};
use lambda_dedup_runtime::flow::latest_wins;
use lambda_dedup_runtime::{Dedup, Effect, Event, Item, Service, source::S3};

/// The function: each notification's catalog item, committed with its mark and its object's
/// high-water.
fn service(dedup: Dedup) -> Result<Service<S3Event, ()>, lambda_runtime::Error> {
    let catalog = dedup.env().required("CATALOG_TABLE")?;
    let work = latest_wins(move |e: Event<S3EventRecord>| {
        let r = e.payload;
        let bucket = r.s3.bucket.name.unwrap_or_default();
        let key = r.s3.object.url_decoded_key.unwrap_or_default();
        let object = format!("{bucket}/{key}");
        Effect::update(&catalog, Item::new().with("object", object.as_str()))
            .expression("SET #state = :state, #size = :size, #seq = :seq")
            .name("#state", "state")
            .name("#size", "size")
            .name("#seq", "sequencer")
            .value(":state", r.event_name.unwrap_or_default().as_str())
            .value(":size", r.s3.object.size.unwrap_or(0))
            .value(":seq", r.s3.object.sequencer.unwrap_or_default().as_str())
    });
    Ok(dedup.door(S3, work)?)
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(
        lambda_runtime::run_concurrent(service(Dedup::from_env("s3-catalog")?.dynamodb().await)?)
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup_runtime::Value;
    use lambda_dedup_runtime::testing::{attribute, env, event, read_json, service_on_memory};

    /// AWS's sample event (`events/example-s3-event.json`) with a hex sequencer, as real
    /// notifications carry: written once, its redelivery a duplicate, and an older event of the
    /// same object superseded — the catalog keeps the newer state.
    #[tokio::test]
    async fn s3_sample_notification_is_catalogued_once_and_an_older_one_superseded() {
        let sample: serde_json::Value = read_json(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/example-s3-event.json"
        ));
        let env = env(&[("CATALOG_TABLE", "catalog")]);
        let catalog = [("catalog", "object")];
        let (service, store) =
            service_on_memory(&env, "s3-catalog", &catalog, service).expect("service");
        let with = |name: &str, sequencer: &str| {
            let mut e = sample.clone();
            e["Records"][0]["eventName"] = name.into();
            e["Records"][0]["s3"]["object"]["sequencer"] = sequencer.into();
            event::<S3Event>(&e)
        };
        for _ in 0..2 {
            let answer = service.call_with(with("ObjectRemoved:Delete", "0055AED6DCD90281E6"));
            answer.await.expect("acknowledged");
        }
        let older = with("ObjectCreated:Put", "0055AED6DCD90281E5");
        service.call_with(older).await.expect("acknowledged");
        let object = ("object", "sourcebucket/Happy Face.jpg");
        let state = attribute(&store, "catalog", object, "state");
        assert_eq!(state, Some(Value::S("ObjectRemoved:Delete".into())));
    }

    /// The function's own wiring carries the warm cache (`DEDUP_CACHE_SIZE`): a notification
    /// redelivered to the same container is answered without a store call; with the cache set
    /// to 0, the store is asked again (and finds the duplicate).
    #[tokio::test]
    async fn a_redelivery_to_the_same_container_is_answered_by_the_warm_cache_unless_it_is_off() {
        let mut sample: serde_json::Value = read_json(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/example-s3-event.json"
        ));
        sample["Records"][0]["s3"]["object"]["sequencer"] = "0055AED6DCD90281E5".into();
        let notification = || event::<S3Event>(&sample);
        for (cache, calls_for_the_redelivery) in [(None, 0), (Some("0"), 1)] {
            let mut pairs = vec![("CATALOG_TABLE", "catalog")];
            pairs.extend(cache.map(|size| ("DEDUP_CACHE_SIZE", size)));
            let catalog = [("catalog", "object")];
            let (service, store) =
                service_on_memory(&env(&pairs), "s3-catalog", &catalog, service).expect("service");
            service
                .call_with(notification())
                .await
                .expect("acknowledged");
            let calls = store.calls();
            service
                .call_with(notification())
                .await
                .expect("acknowledged");
            assert_eq!(
                store.calls() - calls,
                calls_for_the_redelivery,
                "DEDUP_CACHE_SIZE {cache:?}"
            );
        }
    }
}
