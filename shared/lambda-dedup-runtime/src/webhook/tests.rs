//! The receiver as `main` builds it, on the memory store: every documented answer.

use super::answer::Answer;
use super::receiver::INBOX_EXPIRES_AT;
use super::*;
use lambda_dedup::Scope;
use lambda_dedup::{Retention, Value};
use lambda_dedup_config::{DEFAULT_INBOX_RETENTION_SECS, MIN_INBOX_RETENTION};
use lambda_dedup_config::{Env, SettingRule, SettingsError};
use lambda_dedup_engine::CreateOnceDeduplicator;
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_signature::sign;
use lambda_dedup_signature::{
    GITHUB_DELIVERY_HEADER, GITHUB_SIGNATURE_HEADER, SHOPIFY_HMAC_HEADER,
    SHOPIFY_WEBHOOK_ID_HEADER, SLACK_SIGNATURE_HEADER, SLACK_TIMESTAMP_HEADER, SVIX_ID_HEADER,
    SVIX_SIGNATURE_HEADER, SVIX_TIMESTAMP_HEADER, Scheme,
};
use lambda_dedup_signature::{
    WEBHOOK_ID_HEADER, WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER,
};
use lambda_http::http::HeaderValue;
use lambda_http::http::{HeaderMap, Method};
use lambda_http::{Body, Request};
use std::time::{Duration, SystemTime};

/// Standard Webhooks' published test vector (specification and reference libraries).
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SW_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SW_TS: u64 = 1_614_265_330;
const SW_BODY: &str = r#"{"test": 2432232314}"#;
const SW_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
/// Made by Stripe's own Python library (stripe 16.1.0, `generate_signature_header`).
const ST_SECRET: &str = "whsec_test_secret";
const ST_BODY: &str = r#"{"id": "evt_test_webhook", "object": "event"}"#;
const ST_HEADER: &str =
    "t=1614265330,v1=64776382e3b272a50ff9d6821bb74452794757d5dd79f1b091f36be25190d080";

/// The secret being rotated out (the base64 of `old-secret-0123456789`) and the current one.
const OLD: &str = "whsec_b2xkLXNlY3JldC0wMTIzNDU2Nzg5";
const SECRET: &str = "whsec_d2hzZWMtdGVzdC0wMTIzNDU2Nzg5";
const NOW: u64 = 1_800_000_000;

/// The configuration `main` reads, from these variables (and nothing else).
fn config(vars: &[(&str, &str)]) -> Result<WebhookConfig, SettingsError> {
    let least = [("WEBHOOK_TENANT", "acme"), ("INBOX_TABLE", "inbox")];
    WebhookConfig::read(&Env::from_pairs(least.iter().chain(vars).copied()))
}

/// A receiver built as `main` builds it, from `vars`, on a memory store.
fn receiver_from(vars: &[(&str, &str)], max_body: &str) -> (Receiver, MemoryStore) {
    let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).expect("r"));
    store.create_table("inbox", "event_key");
    let mut vars = vars.to_vec();
    vars.push(("WEBHOOK_MAX_BODY_BYTES", max_body));
    let config = config(&vars).expect("config");
    let spec = config.key_spec(Scope::new("t", "webhook-receiver").expect("scope"));
    let r = Receiver::new(
        "webhook-receiver",
        config,
        CreateOnceDeduplicator::new(spec, store.clone()),
        lambda_dedup_config::DeadlineMargin::DEFAULT,
    );
    (r, store)
}

fn receiver(max_body_bytes: usize) -> (Receiver, MemoryStore) {
    let secrets = format!("{OLD},{SECRET}");
    receiver_from(
        &[("WEBHOOK_SECRETS", &secrets)],
        &max_body_bytes.to_string(),
    )
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, v) in pairs {
        h.append(*name, HeaderValue::from_str(v).expect("header"));
    }
    h
}

/// The headers a Standard Webhooks sender sends for `body` with event id `id`, signed at
/// `ts` under `secret` (our signer reproduces the published vector: `lambda_dedup`'s tests).
fn signed(id: &str, body: &str, ts: u64, secret: &str) -> HeaderMap {
    let sig = sign(Scheme::StandardWebhooks, secret, id, ts, body.as_bytes()).expect("sign");
    headers(&[
        (WEBHOOK_ID_HEADER, id),
        (WEBHOOK_TIMESTAMP_HEADER, &ts.to_string()),
        (WEBHOOK_SIGNATURE_HEADER, &sig),
    ])
}

/// The signature of `body` alone (GitHub's, Shopify's: no id or time signed) with `secret`.
fn body_signature(scheme: Scheme, secret: &str, body: &str) -> String {
    sign(scheme, secret, "", 0, body.as_bytes()).expect("sign")
}

/// `captured` (signed over the body alone) is applied, and sent again `later` seconds on under
/// the new, unsigned id `new_id` in `id_header`, is a duplicate: the identity is in the signed
/// body.
async fn replayed_under_a_new_id(
    r: &Receiver,
    captured: &HeaderMap,
    (id_header, new_id): (&'static str, &'static str),
    body: &str,
    later: u64,
) {
    let a = post(r, captured, body, NOW).await;
    assert_eq!((a.status, a.outcome), (200, "Applied"), "{a:?}");
    let mut replayed = captured.clone();
    replayed.insert(id_header, HeaderValue::from_static(new_id));
    let a = post(r, &replayed, body, NOW + later).await;
    assert_eq!((a.status, a.outcome), (200, "Duplicate"), "{a:?}");
}

/// `r` with its store down: every store call fails.
fn down(r: &Receiver, store: &MemoryStore) -> Receiver {
    let config = r.config.clone();
    let spec = config.key_spec(Scope::new("t", "webhook-receiver").expect("scope"));
    Receiver::new(
        "webhook-receiver",
        config,
        CreateOnceDeduplicator::new(spec, store.unreachable()),
        lambda_dedup_config::DeadlineMargin::DEFAULT,
    )
}

async fn post(r: &Receiver, headers: &HeaderMap, body: &str, now: u64) -> Answer {
    r.answer(&Method::POST, headers, body.as_bytes(), "req", at(now))
        .await
}

fn inbox_len(store: &MemoryStore) -> usize {
    store.items("inbox").len()
}

/// The inbox item — the event's mark — carries `expires_at` for the table's TTL, the inbox
/// retention after the request (so raw bodies are not kept forever); a retention shorter than
/// the senders' retry horizon is refused at start, naming the variable.
#[tokio::test]
async fn the_inbox_item_expires_after_the_inbox_retention_never_before_the_senders_retries() {
    let (r, store) = receiver(1024);
    let body = r#"{"id":"evt-9"}"#;
    let first = post(&r, &signed("evt-9", body, NOW, SECRET), body, NOW).await;
    assert_eq!(first.status, 200, "{first:?}");
    let item = &store.items("inbox")[0];
    let expected = NOW + DEFAULT_INBOX_RETENTION_SECS;
    assert_eq!(
        item.0.get(INBOX_EXPIRES_AT),
        Some(&Value::N(expected.to_string())),
        "{item:?}"
    );
    let secrets = ("WEBHOOK_SECRETS", SECRET);
    let week = config(&[secrets, ("WEBHOOK_INBOX_RETENTION_SECONDS", "604800")]);
    assert_eq!(
        week.expect("a week").inbox_retention,
        Duration::from_secs(604_800)
    );
    let day = config(&[secrets, ("WEBHOOK_INBOX_RETENTION_SECONDS", "86400")]);
    assert_eq!(
        day.map(|_| ()),
        Err(SettingsError::refused(
            "WEBHOOK_INBOX_RETENTION_SECONDS",
            SettingRule::BelowMinimum {
                value: 86_400,
                min: MIN_INBOX_RETENTION.as_secs(),
                why: "shorter than the senders' retry horizon: a retry after its inbox item \
                      expired would be a new event",
            }
        ))
    );
}

/// Valid, replayed, re-signed, stale, forged, oversized and conflicting deliveries each get
/// their documented answer, and the inbox holds the event once.
#[tokio::test]
async fn each_delivery_gets_its_documented_answer_and_the_inbox_holds_each_event_once() {
    let (r, store) = receiver(1024);
    let body = r#"{"id":"evt-1","amount":10}"#;
    let first = post(&r, &signed("evt-1", body, NOW, SECRET), body, NOW).await;
    assert_eq!((first.status, first.outcome), (200, "Applied"), "{first:?}");
    assert!(first.headers.is_empty());

    // The sender's retry, byte for byte: the first answer again, marked as a replay.
    let replay = post(&r, &signed("evt-1", body, NOW, SECRET), body, NOW + 10).await;
    assert_eq!((replay.status, replay.outcome), (200, "Duplicate"));
    assert_eq!(replay.body, first.body, "the stored answer");
    assert_eq!(replay.headers, vec![(REPLAYED_HEADER, "true".to_owned())]);

    // A later retry signs again with a new timestamp, under the secret being rotated out.
    let resigned = post(&r, &signed("evt-1", body, NOW + 120, OLD), body, NOW + 120).await;
    assert_eq!(
        (resigned.status, resigned.body.as_str()),
        (200, first.body.as_str())
    );

    // A captured request replayed after the window.
    let stale = post(&r, &signed("evt-2", body, NOW, SECRET), body, NOW + 301).await;
    assert_eq!((stale.status, stale.outcome), (401, "Unauthorized"));
    assert!(stale.body.contains("stale_signature"));
    // Counted: refusals before the deduplicator are not `Received`; the rest are.
    assert!(!stale.received() && first.received() && replay.received());

    // A forger without the secret; and a valid signature over another body.
    let forger = "whsec_Z3Vlc3NlZC1zZWNyZXQtMDAwMDAw";
    let forged = post(&r, &signed("evt-3", body, NOW, forger), body, NOW).await;
    assert_eq!(forged.status, 401);
    let altered = post(
        &r,
        &signed("evt-1", body, NOW, SECRET),
        r#"{"id":"evt-1","amount":99}"#,
        NOW,
    )
    .await;
    assert_eq!((altered.status, altered.outcome), (401, "Unauthorized"));

    // The same id, another body, properly signed: a conflict, never the first answer.
    let other = r#"{"id":"evt-1","amount":99}"#;
    let conflict = post(&r, &signed("evt-1", other, NOW, SECRET), other, NOW).await;
    assert_eq!((conflict.status, conflict.outcome), (409, "Conflict"));
    assert!(!conflict.body.contains("inbox_key"));

    // Too large, whatever its signature.
    let big = format!(r#"{{"id":"evt-4","pad":"{}"}}"#, "x".repeat(1024));
    let large = post(&r, &signed("evt-4", &big, NOW, SECRET), &big, NOW).await;
    assert_eq!((large.status, large.outcome), (413, "TooLarge"));

    assert_eq!(inbox_len(&store), 1, "one event in the inbox");
    let item = &store.items("inbox")[0];
    assert_eq!(item.0.get("body"), Some(&Value::S(body.into())), "as sent");
    assert_eq!(item.0.get("tenant"), Some(&Value::S("acme".into())));
}

/// The replay attack the signature is there to stop: a delivery captured inside the window
/// and sent again under another `webhook-id` (or with a second `webhook-id` after the signed
/// one) is refused, and the inbox gains nothing.
#[tokio::test]
async fn a_delivery_replayed_under_another_id_is_refused() {
    let (r, store) = receiver(1024);
    let body = r#"{"amount":10}"#;
    let captured = signed("evt-1", body, NOW, SECRET);
    assert_eq!(post(&r, &captured, body, NOW).await.status, 200);

    let mut renamed = captured.clone();
    renamed.insert(WEBHOOK_ID_HEADER, HeaderValue::from_static("evt-1-again"));
    let a = post(&r, &renamed, body, NOW + 5).await;
    assert_eq!((a.status, a.outcome), (401, "Unauthorized"), "{a:?}");
    assert!(a.body.contains("bad_signature"), "{}", a.body);

    let mut doubled = captured.clone();
    doubled.append(WEBHOOK_ID_HEADER, HeaderValue::from_static("evt-1-again"));
    let a = post(&r, &doubled, body, NOW + 5).await;
    assert_eq!((a.status, a.outcome), (401, "Unauthorized"), "{a:?}");
    assert!(a.body.contains("repeated_header"), "{}", a.body);

    assert_eq!(inbox_len(&store), 1, "no second event");
}

/// A Function URL request (API Gateway payload 2.0) as Lambda hands it to `main`, with these
/// headers (a header sent more than once arrives once, its values joined with commas) and
/// this body.
fn function_url_request(headers: &[(&str, &str)], body: &str) -> Request {
    let headers: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .collect();
    let event = serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "receiver",
            "domainName": "receiver.lambda-url.eu-west-1.on.aws",
            "domainPrefix": "receiver",
            "http": {
                "method": "POST",
                "path": "/",
                "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1",
                "userAgent": "sender"
            },
            "requestId": "req-joined",
            "routeKey": "$default",
            "stage": "$default",
            "time": "03/Dec/2026:08:00:00 +0000",
            "timeEpoch": 1_796_284_800_000_u64
        },
        "body": body,
        "isBase64Encoded": false
    });
    lambda_http::request::from_str(&event.to_string()).expect("a Function URL request")
}

async fn status_and_body(r: &Receiver, request: Request) -> (u16, String) {
    let response = r.handle(request).await;
    let status = response.status().as_u16();
    let body = match response.body() {
        Body::Text(t) => t.clone(),
        other => panic!("a JSON text answer: {other:?}"),
    };
    (status, body)
}

/// A Standard Webhooks delivery through a Function URL: `id` and `timestamp` sent as given (a
/// value may be two joined with a comma), signed with [`SECRET`] over `id`, `now` and `body`.
fn function_url_delivery(id: &str, timestamp: &str, now: u64, body: &str) -> Request {
    let sig = sign(Scheme::StandardWebhooks, SECRET, id, now, body.as_bytes()).expect("sign");
    function_url_request(
        &[
            (WEBHOOK_ID_HEADER, id),
            (WEBHOOK_TIMESTAMP_HEADER, timestamp),
            (WEBHOOK_SIGNATURE_HEADER, &sig),
        ],
        body,
    )
}

/// Behind a Function URL, a `webhook-id` or `webhook-timestamp` sent twice reaches the
/// receiver as one header whose values are joined with a comma, so counting copies cannot
/// see the repetition. Neither an id nor a timestamp holds a comma: one that does is refused
/// as a repeated header, even when the signature was made over the joined text, and nothing
/// is stored.
#[tokio::test]
async fn a_webhook_id_or_timestamp_joined_with_a_comma_by_a_function_url_is_refused() {
    let (r, store) = receiver(1024);
    let body = r#"{"amount":10}"#;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let ts = now.to_string();

    let joined_id = "evt-1,evt-1-again";
    let request = function_url_delivery(joined_id, &ts, now, body);
    assert_eq!(
        request.headers().get_all(WEBHOOK_ID_HEADER).iter().count(),
        1,
        "lambda_http hands the joined values as one header"
    );
    let (status, answer) = status_and_body(&r, request).await;
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("repeated_header"), "{answer}");

    let joined_ts = format!("{now},{now}");
    let request = function_url_delivery("evt-2", &joined_ts, now, body);
    let (status, answer) = status_and_body(&r, request).await;
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("repeated_header"), "{answer}");

    // The same delivery with each header once is accepted: only the comma was refused.
    let request = function_url_delivery("evt-2", &ts, now, body);
    let (status, answer) = status_and_body(&r, request).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(inbox_len(&store), 1, "only the delivery sent once");
}

/// An unsigned request is refused before any store call; requests without an identity, or
/// not POSTed, get their own answers and write nothing.
#[tokio::test]
async fn nothing_is_stored_for_refused_requests() {
    let (r, store) = receiver(1024);
    let body = r#"{"id":"evt-1"}"#;
    let down = down(&r, &store);
    let mut unsigned = signed("evt-1", body, NOW, SECRET);
    unsigned.remove(WEBHOOK_SIGNATURE_HEADER);
    let a = post(&down, &unsigned, body, NOW).await;
    assert_eq!(
        (a.status, a.outcome),
        (401, "Unauthorized"),
        "no store call made"
    );
    let get = down
        .answer(
            &Method::GET,
            &signed("evt-1", body, NOW, SECRET),
            body.as_bytes(),
            "req",
            at(NOW),
        )
        .await;
    assert_eq!(get.status, 405);
    // The store is down: a signed request is asked to come back, never acknowledged.
    let a = post(&down, &signed("evt-1", body, NOW, SECRET), body, NOW).await;
    assert_eq!((a.status, a.outcome), (503, "Retry"));
    assert_eq!(a.headers, vec![("retry-after", "5".to_owned())]);

    // No webhook-id: nothing to verify the signature over.
    let mut anonymous = signed("evt-1", body, NOW, SECRET);
    anonymous.remove(WEBHOOK_ID_HEADER);
    let a = post(&r, &anonymous, body, NOW).await;
    assert_eq!((a.status, a.outcome), (401, "Unauthorized"));
    assert!(a.body.contains("missing_id"), "{}", a.body);
    let latin1 = {
        let sig = sign(Scheme::StandardWebhooks, SECRET, "evt-9", NOW, b"caf\xe9").expect("s");
        headers(&[
            (WEBHOOK_ID_HEADER, "evt-9"),
            (WEBHOOK_TIMESTAMP_HEADER, &NOW.to_string()),
            (WEBHOOK_SIGNATURE_HEADER, &sig),
        ])
    };
    let a = r
        .answer(&Method::POST, &latin1, b"caf\xe9", "req", at(NOW))
        .await;
    assert_eq!((a.status, a.outcome), (400, "Rejected"), "{a:?}");
    assert_eq!(inbox_len(&store), 0);
}

/// The body limit is the first check after the method: an oversized body is answered 413
/// whatever its signature (none at all here) and with the store down, so no signature was
/// computed over it and no store call made; nothing is stored.
#[tokio::test]
async fn an_oversized_body_is_refused_before_its_signature_or_the_store_is_reached() {
    let (r, store) = receiver(64);
    let down = down(&r, &store);
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(64));
    let a = post(&down, &HeaderMap::new(), &big, NOW).await;
    assert_eq!((a.status, a.outcome), (413, "TooLarge"), "{a:?}");
    assert!(!a.received(), "refused before the deduplicator");
    assert_eq!(inbox_len(&store), 0);
}

/// Standard Webhooks' published vector, through the configuration `main` reads: accepted
/// once, then a duplicate; refused under another id.
#[tokio::test]
async fn the_standard_webhooks_vector_is_accepted_through_mains_wiring() {
    let (r, store) = receiver_from(&[("WEBHOOK_SECRETS", SW_SECRET)], "1024");
    let h = headers(&[
        (WEBHOOK_ID_HEADER, SW_ID),
        (WEBHOOK_TIMESTAMP_HEADER, "1614265330"),
        (WEBHOOK_SIGNATURE_HEADER, SW_SIGNATURE),
    ]);
    let a = post(&r, &h, SW_BODY, SW_TS + 60).await;
    assert_eq!((a.status, a.outcome), (200, "Applied"), "{a:?}");
    let a = post(&r, &h, SW_BODY, SW_TS + 61).await;
    assert_eq!((a.status, a.outcome), (200, "Duplicate"));
    let mut other = h.clone();
    other.insert(WEBHOOK_ID_HEADER, HeaderValue::from_static("msg_other"));
    assert_eq!(post(&r, &other, SW_BODY, SW_TS).await.status, 401);
    assert_eq!(inbox_len(&store), 1);
}

/// `WEBHOOK_SCHEME=stripe`: the header Stripe's library makes is accepted, the event is the
/// signed body's `id`, and a `webhook-id` header (unsigned there) names nothing: the same
/// delivery under another one is the same event. A body without an `id` is rejected.
#[tokio::test]
async fn a_stripe_delivery_is_accepted_and_its_identity_is_the_signed_event_id() {
    let (r, store) = receiver_from(
        &[("WEBHOOK_SCHEME", "stripe"), ("WEBHOOK_SECRETS", ST_SECRET)],
        "1024",
    );
    let h = headers(&[("stripe-signature", ST_HEADER)]);
    let a = post(&r, &h, ST_BODY, SW_TS).await;
    assert_eq!((a.status, a.outcome), (200, "Applied"), "{a:?}");
    let mut renamed = h.clone();
    renamed.insert(WEBHOOK_ID_HEADER, HeaderValue::from_static("another-id"));
    let a = post(&r, &renamed, ST_BODY, SW_TS + 1).await;
    assert_eq!((a.status, a.outcome), (200, "Duplicate"));
    // Another event id in the body is another signed content: refused.
    let a = post(&r, &h, r#"{"id": "evt_other", "object": "event"}"#, SW_TS).await;
    assert_eq!(a.status, 401);
    // A Standard Webhooks signature is no Stripe signature.
    let a = post(&r, &signed("evt-1", ST_BODY, SW_TS, SECRET), ST_BODY, SW_TS).await;
    assert_eq!((a.status, a.outcome), (401, "Unauthorized"));
    assert!(a.body.contains("missing_signature"), "{}", a.body);

    let no_id = r#"{"object":"event"}"#;
    let header = sign(Scheme::Stripe, ST_SECRET, "", NOW, no_id.as_bytes()).expect("sign");
    let a = post(&r, &headers(&[("stripe-signature", &header)]), no_id, NOW).await;
    assert_eq!((a.status, a.outcome), (400, "Rejected"), "{a:?}");
    assert!(a.body.contains("identity_missing"), "{}", a.body);
    assert_eq!(inbox_len(&store), 1);
}

/// Svix's header names (`svix-id`, `svix-timestamp`, `svix-signature`) carry the Standard
/// Webhooks scheme: a delivery under them is recorded, and is the same event as the same
/// delivery under the specification's names (the identity is the verified id, whichever name
/// it came under); an id sent under both names with two values is refused, and nothing more
/// is stored.
#[tokio::test]
async fn a_svix_delivery_is_recorded_once_under_either_header_family() {
    let (r, store) = receiver(1024);
    let body = r#"{"amount":10}"#;
    let sig = sign(
        Scheme::StandardWebhooks,
        SECRET,
        "msg_svix_1",
        NOW,
        body.as_bytes(),
    )
    .expect("sign");
    let ts = NOW.to_string();
    let svix = headers(&[
        (SVIX_ID_HEADER, "msg_svix_1"),
        (SVIX_TIMESTAMP_HEADER, &ts),
        (SVIX_SIGNATURE_HEADER, &sig),
    ]);
    let a = post(&r, &svix, body, NOW).await;
    assert_eq!((a.status, a.outcome), (200, "Applied"), "{a:?}");
    let spec = headers(&[
        (WEBHOOK_ID_HEADER, "msg_svix_1"),
        (WEBHOOK_TIMESTAMP_HEADER, &ts),
        (WEBHOOK_SIGNATURE_HEADER, &sig),
    ]);
    let again = post(&r, &spec, body, NOW + 1).await;
    assert_eq!(
        (again.status, again.outcome),
        (200, "Duplicate"),
        "{again:?}"
    );
    assert_eq!(again.body, a.body, "the first answer");

    let mut disagree = svix.clone();
    disagree.insert(WEBHOOK_ID_HEADER, HeaderValue::from_static("msg_svix_2"));
    let a = post(&r, &disagree, body, NOW).await;
    assert_eq!((a.status, a.outcome), (401, "Unauthorized"), "{a:?}");
    assert!(a.body.contains("conflicting_headers"), "{}", a.body);
    let mut renamed = svix.clone();
    renamed.insert(SVIX_ID_HEADER, HeaderValue::from_static("msg_svix_2"));
    assert_eq!(
        post(&r, &renamed, body, NOW).await.status,
        401,
        "svix-id is signed"
    );
    assert_eq!(inbox_len(&store), 1);
}

/// The GitHub configuration the README shows (`WEBHOOK_SCHEME=github`, the identity from the
/// signed body).
fn github_receiver() -> (Receiver, MemoryStore) {
    receiver_from(
        &[
            ("WEBHOOK_SCHEME", "github"),
            (
                "WEBHOOK_SECRETS",
                "github-secret-rotated-out,github-secret-current-0001",
            ),
            ("WEBHOOK_ID_FROM", "json:/delivery_id"),
        ],
        "1024",
    )
}

/// GitHub signs the body only. A delivery is recorded; the captured delivery sent again with a
/// new `X-GitHub-Delivery` (unsigned) and days later (no timestamp is signed) is the same event,
/// because the identity is in the signed body; a repeated or malformed signature header, or
/// none, is refused, and nothing more is stored.
#[tokio::test]
async fn a_github_delivery_replayed_under_a_new_delivery_id_is_a_duplicate() {
    let (r, store) = github_receiver();
    let body = r#"{"delivery_id":"gh-evt-1","action":"opened"}"#;
    let sig = body_signature(Scheme::GitHub, "github-secret-current-0001", body);
    let captured = headers(&[
        (GITHUB_SIGNATURE_HEADER, &sig),
        (
            GITHUB_DELIVERY_HEADER,
            "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        ),
    ]);
    let new_id = (
        GITHUB_DELIVERY_HEADER,
        "00000000-0000-0000-0000-000000000000",
    );
    replayed_under_a_new_id(&r, &captured, new_id, body, 3 * 86_400).await;

    let mut doubled = captured.clone();
    doubled.append(
        GITHUB_SIGNATURE_HEADER,
        HeaderValue::from_str(&sig).expect("v"),
    );
    let refused = [
        (doubled, "repeated_header"),
        (
            headers(&[(GITHUB_SIGNATURE_HEADER, &sig[..70])]),
            "malformed_signature",
        ),
        (
            headers(&[(GITHUB_SIGNATURE_HEADER, "sha256=zz")]),
            "malformed_signature",
        ),
        (
            headers(&[(GITHUB_DELIVERY_HEADER, "72d3162e")]),
            "missing_signature",
        ),
    ];
    for (h, code) in refused {
        let a = post(&r, &h, body, NOW).await;
        assert_eq!(
            (a.status, a.outcome),
            (401, "Unauthorized"),
            "{code}: {a:?}"
        );
        assert!(a.body.contains(code), "{code}: {}", a.body);
    }
    let other = r#"{"delivery_id":"gh-evt-1","action":"closed"}"#;
    let a = post(&r, &captured, other, NOW).await;
    assert_eq!(a.status, 401, "another body under the captured signature");
    assert_eq!(inbox_len(&store), 1);
}

/// Behind a Function URL, a GitHub signature header sent twice arrives joined with a comma: a
/// digest never holds one, so it is refused as repeated, even with a valid digest first.
#[tokio::test]
async fn a_github_signature_joined_with_a_comma_by_a_function_url_is_refused() {
    let (r, store) = github_receiver();
    let body = r#"{"delivery_id":"gh-evt-2"}"#;
    let sig = body_signature(Scheme::GitHub, "github-secret-current-0001", body);
    let joined = format!("{sig},sha256={}", "0".repeat(64));
    let request = function_url_request(&[(GITHUB_SIGNATURE_HEADER, &joined)], body);
    let (status, answer) = status_and_body(&r, request).await;
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("repeated_header"), "{answer}");
    let request = function_url_request(&[(GITHUB_SIGNATURE_HEADER, &sig)], body);
    assert_eq!(status_and_body(&r, request).await.0, 200);
    assert_eq!(inbox_len(&store), 1);
}

/// Shopify: the base64 HMAC of the body; the identity from the signed body, so a replay under
/// a new `X-Shopify-Webhook-Id` is a duplicate; a hex digest (another sender's encoding) is
/// refused as malformed.
#[tokio::test]
async fn a_shopify_delivery_replayed_under_a_new_webhook_id_is_a_duplicate() {
    let (r, store) = receiver_from(
        &[
            ("WEBHOOK_SCHEME", "shopify"),
            ("WEBHOOK_SECRETS", "shopify-client-secret-0001"),
            ("WEBHOOK_ID_FROM", "json:/id"),
        ],
        "1024",
    );
    let body = r#"{"id":820982911946154508,"email":"jon@example.com"}"#;
    let sig = body_signature(Scheme::Shopify, "shopify-client-secret-0001", body);
    let h = headers(&[
        (SHOPIFY_HMAC_HEADER, &sig),
        (
            SHOPIFY_WEBHOOK_ID_HEADER,
            "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        ),
    ]);
    let new_id = (SHOPIFY_WEBHOOK_ID_HEADER, "forged-new-id");
    replayed_under_a_new_id(&r, &h, new_id, body, 86_400).await;
    let hex = body_signature(Scheme::GitHub, "shopify-client-secret-0001", body);
    let a = post(&r, &headers(&[(SHOPIFY_HMAC_HEADER, &hex[7..])]), body, NOW).await;
    assert!(
        a.status == 401 && a.body.contains("malformed_signature"),
        "{a:?}"
    );
    assert_eq!(inbox_len(&store), 1);
}

/// Slack: the Events API payload's `event_id` (in the signed body) is the identity by default.
/// Slack's retry, signed again at a later timestamp, is a duplicate; a stale signature is
/// refused; a signed body with no `event_id` is rejected (400), not recorded.
#[tokio::test]
async fn a_slack_event_is_recorded_once_by_its_event_id() {
    let secret = "8f742231b10e8888abcd99yyyzzz85a5";
    let (r, store) = receiver_from(
        &[("WEBHOOK_SCHEME", "slack"), ("WEBHOOK_SECRETS", secret)],
        "1024",
    );
    let body =
        r#"{"type":"event_callback","event_id":"Ev0LAN670R","event":{"type":"app_mention"}}"#;
    let slack = |ts: u64, body: &str| {
        let sig = sign(Scheme::Slack, secret, "", ts, body.as_bytes()).expect("sign");
        headers(&[
            (SLACK_TIMESTAMP_HEADER, &ts.to_string()),
            (SLACK_SIGNATURE_HEADER, &sig),
        ])
    };
    let a = post(&r, &slack(NOW, body), body, NOW).await;
    assert_eq!((a.status, a.outcome), (200, "Applied"), "{a:?}");
    let a = post(&r, &slack(NOW + 60, body), body, NOW + 60).await;
    assert_eq!((a.status, a.outcome), (200, "Duplicate"), "{a:?}");
    let a = post(&r, &slack(NOW, body), body, NOW + 301).await;
    assert!(
        a.status == 401 && a.body.contains("stale_signature"),
        "{a:?}"
    );
    let no_id = r#"{"type":"url_verification","challenge":"abc"}"#;
    let a = post(&r, &slack(NOW, no_id), no_id, NOW).await;
    assert_eq!((a.status, a.outcome), (400, "Rejected"), "{a:?}");
    assert_eq!(inbox_len(&store), 1);
}
