//! What a broken or hostile producer can send, and what happens to it: one test row per row of
//! `docs/HOSTILE_INPUTS.md`, through the real transactional flow against the local DynamoDB (S1–S3,
//! S11), plus property tests that no input panics and every input gets an outcome.

use dedup_tests::{balance, client, cloudevents_spec, credit_plan, effect_table, unique};
use lambda_dedup::{FingerprintSource, IdentitySource, KeySpec, Message, Scope, TenantSource};
use lambda_dedup_engine::{Deduplicator, Outcome};
use proptest::prelude::*;
use serde_json::{Value, json};

fn ce(id: Value, tenant: Value, data: Value) -> Value {
    json!({"specversion": "1.0", "type": "credit", "source": "/producer", "id": id, "tenantid": tenant, "data": data})
}

/// A credit of `amount` to `account`: event `id` of tenant `tenant`.
fn credit_msg(id: &str, tenant: &str, account: &str, amount: i64) -> Message {
    let data = json!({"account": account, "amount": amount});
    msg(ce(json!(id), json!(tenant), data).to_string())
}

fn msg(body: impl Into<Vec<u8>>) -> Message {
    Message {
        message_id: unique("m"),
        body: body.into(),
        ..Message::default()
    }
}

/// A test's balances and marks: a fresh effect table and mark table on the local DynamoDB.
struct Ledger {
    client: aws_sdk_dynamodb::Client,
    balances: String,
    dedup: Deduplicator,
}

impl Ledger {
    async fn new() -> Self {
        let client = client();
        let balances = effect_table(&client, "account").await;
        let dedup = dedup_tests::fresh_dedup(&client, "hostile").await;
        Self {
            client,
            balances,
            dedup,
        }
    }

    /// `m` through the transactional flow as a credit.
    async fn credit(&self, m: &Message) -> Outcome {
        self.dedup
            .transactional(m, credit_plan(&self.balances))
            .await
    }

    async fn balance(&self, account: &str) -> Option<i64> {
        balance(&self.client, &self.balances, account).await
    }
}

fn code(o: &Outcome) -> String {
    match o {
        Outcome::Rejected { code, .. } => format!("rejected:{code}"),
        other => other.label().to_owned(),
    }
}

/// Every stateless row of the table: the outcome, and for rejections the reason code.
#[tokio::test]
async fn every_hostile_input_gets_its_documented_outcome() {
    let ledger = Ledger::new().await;
    let run = unique("h");
    let data = json!({"account": format!("{run}-acct"), "amount": 1});
    let id = |s: &str| json!(format!("{run}-{s}"));
    let body = |v: Value| v.to_string().into_bytes();
    let big_pad = "x".repeat(1024 * 1024 - 400);
    let mut nested = String::new();
    for _ in 0..200 {
        nested.push_str("{\"a\":");
    }
    nested.push('1');
    nested.push_str(&"}".repeat(200));
    let rows: Vec<(&str, Message, &str)> = vec![
        ("malformed JSON", msg(&b"{\"id\": "[..]), "rejected:body_not_json"),
        ("body not UTF-8", msg(vec![0xff, 0xfe, b'{', b'}']), "rejected:body_not_utf8"),
        ("JSON array body", msg(&b"[1, 2, 3]"[..]), "rejected:identity_wrong_type"),
        ("JSON null body", msg(&b"null"[..]), "rejected:identity_wrong_type"),
        ("id is a number", msg(body(ce(json!(42), json!("t1"), data.clone()))), "rejected:identity_wrong_type"),
        ("source is an object", msg(body({ let mut v = ce(id("s"), json!("t1"), data.clone()); v["source"] = json!({"a": 1}); v })), "rejected:identity_wrong_type"),
        ("id missing", msg(body({ let mut v = ce(id("x"), json!("t1"), data.clone()); v.as_object_mut().map(|o| o.remove("id")); v })), "rejected:identity_missing"),
        ("source missing", msg(body({ let mut v = ce(id("x"), json!("t1"), data.clone()); v.as_object_mut().map(|o| o.remove("source")); v })), "rejected:identity_missing"),
        ("specversion missing", msg(body({ let mut v = ce(id("x"), json!("t1"), data.clone()); v.as_object_mut().map(|o| o.remove("specversion")); v })), "rejected:identity_missing"),
        ("type missing", msg(body({ let mut v = ce(id("x"), json!("t1"), data.clone()); v.as_object_mut().map(|o| o.remove("type")); v })), "rejected:identity_missing"),
        ("id empty", msg(body(ce(json!(""), json!("t1"), data.clone()))), "rejected:identity_empty"),
        ("id blank", msg(body(ce(json!("  \t "), json!("t1"), data.clone()))), "rejected:identity_empty"),
        ("id over 1024 bytes", msg(body(ce(json!("i".repeat(1025)), json!("t1"), data.clone()))), "rejected:identity_too_long"),
        ("id with a control character", msg(body(ce(json!(format!("{run}-a\nb")), json!("t1"), data.clone()))), "rejected:identity_bad_characters"),
        ("time not RFC 3339", msg(body({ let mut v = ce(id("time"), json!("t1"), data.clone()); v["time"] = json!("yesterday"); v })), "rejected:identity_wrong_type"),
        ("time older than the retention window", msg(body({ let mut v = ce(id("old"), json!("t1"), data.clone()); v["time"] = json!("2020-01-01T00:00:00Z"); v })), "rejected:late_event"),
        ("tenant missing", msg(body({ let mut v = ce(id("t"), json!("t1"), data.clone()); v.as_object_mut().map(|o| o.remove("tenantid")); v })), "rejected:identity_missing"),
        ("tenant empty", msg(body(ce(id("t"), json!(""), data.clone()))), "rejected:identity_empty"),
        ("body over 1 MiB", msg(body({ let mut v = ce(id("big"), json!("t1"), data.clone()); v["pad"] = json!(format!("{big_pad}{}", "y".repeat(1000))); v })), "rejected:body_too_large"),
        ("body just under 1 MiB (the platform limit since 2026)", msg(body({ let mut v = ce(id("big-ok"), json!("t1"), data.clone()); v["pad"] = json!(big_pad.clone()); v })), "applied"),
        ("odd Unicode id (emoji, bidi override, zero-width)", msg(body(ce(json!(format!("{run}-🦀\u{202e}\u{200b}")), json!("t1"), data.clone()))), "applied"),
        ("same id in NFC and NFD: two identities", msg(body(ce(json!(format!("{run}-caf\u{e9}")), json!("t1"), data.clone()))), "applied"),
        ("same id in NFC and NFD: two identities (NFD)", msg(body(ce(json!(format!("{run}-cafe\u{301}")), json!("t1"), data.clone()))), "applied"),
        ("JSON nested 200 deep", msg(nested.into_bytes()), "rejected:body_not_json"),
        ("duplicate JSON keys: the last one counts", msg(format!(r#"{{"specversion":"1.0","type":"credit","source":"/p","tenantid":"t1","id":"{run}-first","id":"{run}-last","data":{{"account":"{run}-acct","amount":1}}}}"#).into_bytes()), "applied"),
        ("wrong type in the payload (amount is a string)", msg(body(ce(id("str"), json!("t1"), json!({"account": "a", "amount": "10"})))), "rejected:invalid_payload"),
    ];
    for (name, m, want) in rows {
        let got = ledger.credit(&m).await;
        assert_eq!(code(&got), want, "{name}");
        if let Outcome::Rejected { reason, .. } = &got {
            assert!(
                !reason.contains(&run),
                "{name}: the reason quotes the value: {reason}"
            );
        }
    }
    // The duplicate-key row applied under the last id: the first id is still new.
    let first = msg(format!(r#"{{"specversion":"1.0","type":"credit","source":"/p","tenantid":"t1","id":"{run}-first","data":{{"account":"{run}-acct","amount":1}}}}"#).into_bytes());
    assert_eq!(code(&ledger.credit(&first).await), "applied");
}

/// S11: the same id with a different payload is a conflict, not applied, not a duplicate.
#[tokio::test]
async fn same_id_different_payload_is_a_conflict() {
    let ledger = Ledger::new().await;
    let acct = unique("acct");
    let a = credit_msg("evt-1", "t1", &acct, 5);
    let b = credit_msg("evt-1", "t1", &acct, 5000);
    assert_eq!(code(&ledger.credit(&a).await), "applied");
    assert_eq!(code(&ledger.credit(&b).await), "conflict");
    assert_eq!(ledger.balance(&acct).await, Some(5));
}

/// S1: a forged tenant (another tenant's source and id) is another tenant's event: it neither
/// suppresses the real tenant's event nor is suppressed by it. Authenticating the tenant is the
/// transport's job (a queue per tenant, signed events); isolation is ours.
#[tokio::test]
async fn a_forged_tenant_cannot_suppress_another_tenants_event() {
    let ledger = Ledger::new().await;
    let (a_acct, b_acct) = (unique("a"), unique("b"));
    let forged = credit_msg("evt-7", "tenant-b", &b_acct, 1);
    let real = credit_msg("evt-7", "tenant-a", &a_acct, 1);
    assert_eq!(code(&ledger.credit(&forged).await), "applied");
    assert_eq!(
        code(&ledger.credit(&real).await),
        "applied",
        "tenant A's event is not suppressed"
    );
    assert_eq!(code(&ledger.credit(&real).await), "duplicate");
    assert_eq!(ledger.balance(&a_acct).await, Some(1));
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(
                "(id|source|specversion|type|tenantid|data|[a-z]{1,6})",
                inner,
                0..8
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn known_code(c: &str) -> bool {
    [
        "body_too_large",
        "body_not_utf8",
        "body_not_json",
        "identity_missing",
        "identity_empty",
        "identity_too_long",
        "identity_not_utf8",
        "identity_bad_characters",
        "identity_wrong_type",
        // A pointer that continues past a string reads inside it: a string that is not JSON
        // (or nested too deep, or too large) is its own rejection, naming the pointer.
        "embedded_not_json",
        "embedded_too_deep",
        "embedded_too_large",
    ]
    .contains(&c)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// S2: arbitrary bytes never panic key derivation; each gets a key or a known rejection.
    #[test]
    fn s2_arbitrary_bytes_get_an_outcome(body in prop::collection::vec(any::<u8>(), 0..512)) {
        match cloudevents_spec("hostile").derive(&msg(body)) {
            Ok(d) => prop_assert!(d.key.as_str().starts_with("test#hostile#")),
            Err(r) => prop_assert!(known_code(r.code()), "{}", r.code()),
        }
    }

    /// S2: arbitrary JSON (shaped like CloudEvents or not) never panics; a derived key never
    /// contains the identity in clear (S3).
    #[test]
    fn s2_s3_arbitrary_json_gets_an_outcome(v in arb_json()) {
        match cloudevents_spec("hostile").derive(&msg(v.to_string())) {
            Ok(d) => {
                let id = v["id"].as_str().unwrap_or_default();
                prop_assert!(id.len() < 8 || !d.key.as_str().contains(id));
            }
            Err(r) => prop_assert!(known_code(r.code()), "{}", r.code()),
        }
    }

    /// The other extractors and a JSON-pointer tenant, on arbitrary JSON and attributes.
    #[test]
    fn s2_every_extractor_is_total(v in arb_json(), attr in prop::option::of(prop::collection::vec(any::<u8>(), 0..64))) {
        let mut m = msg(v.to_string());
        if let Some(a) = attr {
            m.attributes.insert("event-id".into(), lambda_dedup::AttributeValue::Binary(a));
        }
        let scope = Scope::new("test", "hostile").expect("scope");
        for identity in [
            IdentitySource::JsonPointer("/id".into()),
            IdentitySource::MessageAttribute("event-id".into()),
            IdentitySource::SqsMessageId,
            IdentitySource::BodySha256,
        ] {
            let spec = KeySpec::new(scope.clone(), identity)
                .tenant(TenantSource::JsonPointer("/tenantid".into()))
                .fingerprint(FingerprintSource::WholeBody);
            if let Err(r) = spec.derive(&m) {
                prop_assert!(known_code(r.code()), "{}", r.code());
            }
        }
    }
}
