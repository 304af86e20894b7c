//! Checks the function crates share in their tests.

use lambda_dedup::{KeySpec, Message};
use serde_json::{Value, json};

/// S11, for a function's declared `depends_on` fields: under the same event id as `sample`, a
/// change to any of them gives another fingerprint (a conflict, never a duplicate), while a
/// change of the envelope's `time` (a producer's retry) gives the same one. Panics naming the
/// field that is not covered.
pub fn assert_fingerprint_covers(spec: &KeySpec, sample: &Value, depends_on: &[&str]) {
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

/// An SQS event of one message per body, with message ids `m0`, `m1`, …: what a function's
/// tests hand its service.
pub fn sqs_event(bodies: &[&str]) -> aws_lambda_events::event::sqs::SqsEvent {
    let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
    event.records = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut m = aws_lambda_events::event::sqs::SqsMessage::default();
            m.message_id = Some(format!("m{i}"));
            m.body = Some((*b).to_owned());
            m
        })
        .collect();
    event
}

/// `env` with `DEDUP_DEADLINE_MARGIN_MS` set to `margin`, if one is given: for the tests of
/// what a margin does to a service.
pub fn with_margin(env: crate::Env, margin: Option<&str>) -> crate::Env {
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

/// S11 for a function's key configuration: `configure` applied to a builder on a minimal
/// environment (what the function's `main` applies to its own), then
/// [`assert_fingerprint_covers`] on `sample`.
pub fn assert_configured_fingerprint_covers(
    configure: impl FnOnce(crate::Dedup) -> crate::Dedup,
    sample: &Value,
    depends_on: &[&str],
) {
    let env = crate::Env::from_pairs([("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", "marks")]);
    let dedup = crate::Dedup::read(&env, "c").expect("settings");
    assert_fingerprint_covers(&configure(dedup).key_spec(), sample, depends_on);
}

/// The operators' tool is told a CloudEvents function's key spec in the README
/// (`lambda-dedup --key-spec cloudevents:<tenant extension>:<depends_on>`): it must stay the one
/// the function declares. Panics naming `function` when the README lacks it.
pub fn assert_readme_key_spec(
    readme: &str,
    function: &str,
    tenant_extension: &str,
    depends_on: &[&str],
) {
    let spec = format!(
        "--key-spec cloudevents:{tenant_extension}:{}",
        depends_on.join(",")
    );
    assert!(
        readme.contains(&spec),
        "README lacks `{spec}` for {function}"
    );
}

/// A DynamoDB stream record as Lambda hands it over: `event_name` (`INSERT`, `MODIFY`,
/// `REMOVE`) with `new_image` (DynamoDB JSON), for the tests of what a relay reads of one.
#[cfg(any(feature = "dynamodb-streams", test))]
pub fn stream_record(
    event_name: &str,
    new_image: Value,
) -> aws_lambda_events::event::dynamodb::EventRecord {
    serde_json::from_value(json!({
        "awsRegion": "us-east-1", "eventID": "1", "eventName": event_name,
        "eventSource": "aws:dynamodb",
        "dynamodb": {"ApproximateCreationDateTime": 1_700_000_000, "Keys": {},
                     "NewImage": new_image, "SequenceNumber": "100", "SizeBytes": 10,
                     "StreamViewType": "NEW_AND_OLD_IMAGES"}
    }))
    .expect("a stream record")
}

/// A DynamoDB stream `INSERT` record (JSON, as in a stream event's `Records`) with sequence
/// number `seq`, `keys` and `new_image` in DynamoDB JSON: for the tests of a stream service.
pub fn insert_record(seq: u64, keys: Value, new_image: Value) -> Value {
    json!({"eventID": format!("e{seq}"), "eventName": "INSERT", "eventSource": "aws:dynamodb",
           "awsRegion": "us-east-1",
           "eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/orders/stream/x",
           "dynamodb": {"ApproximateCreationDateTime": 1_700_000_000, "Keys": keys,
                        "NewImage": new_image, "SequenceNumber": format!("{seq:021}"),
                        "SizeBytes": 40, "StreamViewType": "NEW_IMAGE"}})
}

/// The metric names an EMF line declares, in order: what a function prints, as CloudWatch
/// reads it.
pub fn emf_metric_names(line: &Value) -> Vec<&str> {
    line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["Name"].as_str()).collect())
        .unwrap_or_default()
}

/// A webhook request as a Standard Webhooks sender sends it now: `webhook-id`,
/// `webhook-timestamp` and `webhook-signature` over `{id}.{timestamp}.{body}` with `secret`
/// (`whsec_…`). (The end-to-end tests sign with the sender's own library; this is for the
/// tests of the wiring.)
#[cfg(any(feature = "webhook", test))]
pub fn signed_webhook(secret: &str, id: &str, body: &str) -> lambda_http::Request {
    use lambda_dedup::signature::{Scheme, sign};
    let now = lambda_dedup::clock::epoch_secs(std::time::SystemTime::now());
    let signature = sign(Scheme::StandardWebhooks, secret, id, now, body.as_bytes())
        .expect("a whsec_ secret of 16 bytes or more");
    lambda_http::http::Request::builder()
        .method("POST")
        .header("webhook-id", id)
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", signature)
        .body(lambda_http::Body::Text(body.to_owned()))
        .expect("a request")
}
