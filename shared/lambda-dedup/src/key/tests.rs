//! Tests of key derivation.

use super::*;
use serde_json::Value as Json;
use serde_json::json;

fn scope() -> Scope {
    Scope::new("prod", "ledger").expect("scope")
}

fn msg(body: &str) -> Message {
    Message {
        message_id: "m-1".into(),
        body: body.as_bytes().to_vec(),
        ..Message::default()
    }
}

fn ce(id: &str) -> String {
    json!({"specversion": "1.0", "type": "credit", "source": "/bank", "id": id,
           "tenantid": "acme", "data": {"account": "credito-17", "amount": 10}})
    .to_string()
}

fn ce_spec() -> KeySpec {
    KeySpec::cloudevents(scope(), "tenantid")
}

/// S1: the key depends on the declared identity, not on the delivery: a producer retry with a
/// new messageId and re-serialised JSON keeps its key.
#[test]
fn s1_cloudevents_key_is_stable_across_redeliveries_and_reserialisation() {
    let a = ce_spec().derive(&msg(&ce("evt-1"))).expect("derive");
    let mut retry = msg(
        r#"{ "data": {"amount": 10, "account": "credito-17"}, "id": "evt-1",
             "source": "/bank", "type": "credit", "specversion": "1.0", "tenantid": "acme" }"#,
    );
    retry.message_id = "m-2".into();
    let b = ce_spec().derive(&retry).expect("derive");
    assert_eq!(a.key, b.key);
    assert_eq!(
        a.fingerprint, b.fingerprint,
        "S11: same payload, same fingerprint"
    );
    assert!(a.body.is_some(), "the parsed body is handed back");
    let c = ce_spec().derive(&msg(&ce("evt-2"))).expect("derive");
    assert_ne!(a.key, c.key);
}

/// S1: namespace, consumer and tenant each separate keys.
#[test]
fn s1_scope_and_tenant_are_part_of_the_key() {
    let k = |ns: &str, consumer: &str, tenant: &str| {
        DedupKey::new(
            &Scope::new(ns, consumer).expect("scope"),
            tenant,
            &["x", "1"],
        )
    };
    let base = k("prod", "ledger", "acme");
    assert_ne!(base, k("dev", "ledger", "acme"));
    assert_ne!(base, k("prod", "billing", "acme"));
    assert_ne!(base, k("prod", "ledger", "globex"));
    assert!(base.as_str().starts_with("prod#ledger#"));
}

/// Stored marks must be found again after an upgrade: a key is the scope, then the digest of
/// its tenant and identity as every version has made it, in lowercase hex.
#[test]
fn s1_the_key_is_the_scope_and_the_digest_stored_keys_were_made_of() {
    let key = DedupKey::new(
        &Scope::new("prod", "ledger").expect("scope"),
        "acme",
        &["x", "1"],
    );
    let digest = crate::hash_parts("lambda-dedup/key/v1", [&b"acme"[..], b"x", b"1"]);
    assert_eq!(key.as_str(), format!("prod#ledger#{}", hex::encode(digest)));
    assert_eq!(DedupKey::from_stored(key.as_str().to_owned()), key);
}

/// S1: components are length-prefixed: shifting a boundary changes the key.
#[test]
fn s1_identity_components_cannot_be_confused() {
    let s = scope();
    assert_ne!(
        DedupKey::new(&s, "", &["ab", "c"]),
        DedupKey::new(&s, "", &["a", "bc"])
    );
    assert_ne!(
        DedupKey::new(&s, "a", &["b"]),
        DedupKey::new(&s, "", &["a", "b"])
    );
}

/// S1: each extractor, and the explicit (documented) messageId and body-hash choices.
#[test]
fn s1_every_extractor_derives_a_key() {
    let mut m = msg(r#"{"order":{"id":42},"note":"x"}"#);
    m.attributes
        .insert("event-id".into(), AttributeValue::String("evt-9".into()));
    let attr = KeySpec::new(scope(), IdentitySource::MessageAttribute("event-id".into()));
    let ptr = KeySpec::new(scope(), IdentitySource::JsonPointer("/order/id".into()));
    let mid = KeySpec::new(scope(), IdentitySource::SqsMessageId);
    let hash = KeySpec::new(scope(), IdentitySource::BodySha256);
    let keys: Vec<DedupKey> = [attr, ptr, mid, hash.clone()]
        .iter()
        .map(|s| s.derive(&m).expect("derive").key)
        .collect();
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b, "extractors never collide");
        }
    }
    // The body hash changes with the bytes, even for equal JSON (its documented caveat).
    let reserialised = msg(r#"{"note":"x","order":{"id":42}}"#);
    assert_ne!(hash.derive(&reserialised).expect("derive").key, keys[3]);
}

/// S3: personal data never appears in the key in clear.
#[test]
fn s3_no_identity_or_tenant_value_in_clear() {
    let body = json!({"plate": "1234-ABC", "email": "ana@example.com"}).to_string();
    let spec = KeySpec::new(scope(), IdentitySource::JsonPointer("/plate".into()))
        .tenant(TenantSource::JsonPointer("/email".into()));
    let key = spec.derive(&msg(&body)).expect("derive").key;
    assert!(!key.as_str().contains("1234"));
    assert!(!key.as_str().contains("ana"));
    assert_eq!(key.as_str().len(), "prod#ledger#".len() + 64);
}

fn rejected(spec: &KeySpec, m: &Message) -> Rejection {
    spec.derive(m).expect_err("must be rejected")
}

/// S2: no key, no processing: every way a message can lack an identity is a typed rejection
/// with a reason that names the field, never its value.
#[test]
fn s2_messages_without_a_derivable_identity_are_rejected_with_a_reason() {
    let spec = ce_spec();
    let cases: Vec<(&str, Message, &str)> = vec![
        ("not JSON", msg("{not json"), "body_not_json"),
        (
            "not UTF-8",
            Message {
                body: vec![0xff, 0xfe, b'{'],
                ..msg("")
            },
            "body_not_utf8",
        ),
        (
            "no id",
            msg(&json!({"specversion":"1.0","type":"t","source":"/s","tenantid":"a"}).to_string()),
            "identity_missing",
        ),
        ("empty id", msg(&ce("")), "identity_empty"),
        ("blank id", msg(&ce("   ")), "identity_empty"),
        (
            "huge id",
            msg(&ce(&"x".repeat(MAX_IDENTITY_BYTES + 1))),
            "identity_too_long",
        ),
        (
            "control chars",
            msg(&ce("evt\u{0}1")),
            "identity_bad_characters",
        ),
        (
            "numeric id",
            msg(
                &json!({"specversion":"1.0","type":"t","source":"/s","id":7,"tenantid":"a"})
                    .to_string(),
            ),
            "identity_wrong_type",
        ),
        (
            "no specversion",
            msg(&json!({"type":"t","source":"/s","id":"1","tenantid":"a"}).to_string()),
            "identity_missing",
        ),
        (
            "no tenant",
            msg(&json!({"specversion":"1.0","type":"t","source":"/s","id":"1"}).to_string()),
            "identity_missing",
        ),
        ("array body", msg("[1,2]"), "identity_wrong_type"),
    ];
    for (name, m, code) in cases {
        let r = rejected(&spec, &m);
        assert_eq!(r.code(), code, "{name}: {r}");
    }
    // The reason never quotes the value.
    let r = rejected(&spec, &msg(&ce(&format!("secret-{}", "y".repeat(2000)))));
    assert!(!r.to_string().contains("secret"), "{r}");
}

#[test]
fn s2_attribute_and_size_rejections() {
    let spec = KeySpec::new(scope(), IdentitySource::MessageAttribute("event-id".into()))
        .max_body_bytes(16);
    let mut m = msg("small");
    assert_eq!(rejected(&spec, &m).code(), "identity_missing");
    m.attributes
        .insert("event-id".into(), AttributeValue::Binary(vec![0xc3, 0x28]));
    assert_eq!(rejected(&spec, &m).code(), "identity_not_utf8");
    m.attributes
        .insert("event-id".into(), AttributeValue::String(String::new()));
    assert_eq!(rejected(&spec, &m).code(), "identity_empty");
    m.attributes
        .insert("event-id".into(), AttributeValue::String("ok".into()));
    assert!(spec.derive(&m).is_ok());
    m.body = vec![b'x'; 17];
    assert_eq!(rejected(&spec, &m).code(), "body_too_large");

    // The default is the platform's limit (1 MiB), not the 256 KiB of before 2026: a valid
    // 300 KiB message is processed, one over 1 MiB is not.
    let default = KeySpec::new(scope(), IdentitySource::MessageAttribute("event-id".into()));
    m.body = vec![b'x'; 300 * 1024];
    assert!(
        default.derive(&m).is_ok(),
        "300 KiB is within the platform limit"
    );
    m.body = vec![b'x'; 1024 * 1024 + 1];
    assert_eq!(rejected(&default, &m).code(), "body_too_large");

    let mid = KeySpec::new(scope(), IdentitySource::SqsMessageId);
    assert_eq!(rejected(&mid, &Message::default()).code(), "identity_empty");
    let hash = KeySpec::new(scope(), IdentitySource::BodySha256);
    assert_eq!(
        rejected(&hash, &Message::default()).code(),
        "identity_empty"
    );
}

#[test]
fn scope_names_are_checked() {
    assert!(Scope::new("", "x").is_err());
    assert!(Scope::new("prod", "has space").is_err());
    assert!(Scope::new("prod", "has#hash").is_err());
    assert!(Scope::new(&"p".repeat(65), "x").is_err());
    assert!(Scope::new("prod-1", "ledger_projector.v2").is_ok());
}

/// S10: the CloudEvents `time` is read as the event's time; an offset is honoured; a
/// malformed one rejects the message; without one the age is unknown.
#[test]
fn s10_cloudevents_time_is_the_event_time() {
    let with_time = |t: Json| {
        let body = json!({"specversion": "1.0", "type": "t", "source": "/s", "id": "1",
                          "tenantid": "a", "time": t});
        ce_spec().derive(&msg(&body.to_string()))
    };
    let at = |ms: u64| Some(crate::clock::from_epoch_millis(ms));
    let z = with_time(json!("2026-11-29T10:00:00Z")).expect("derive");
    assert_eq!(z.event_time, at(1_795_946_400_000));
    let offset = with_time(json!("2026-11-29T11:00:00.5+01:00")).expect("derive");
    assert_eq!(offset.event_time, at(1_795_946_400_500));
    for bad in [
        json!("yesterday"),
        json!("2026-11-29"),
        json!(1_795_946_400),
    ] {
        let r = with_time(bad).expect_err("malformed time");
        assert_eq!(r.code(), "identity_wrong_type");
    }
    let none =
        json!({"specversion": "1.0", "type": "t", "source": "/s", "id": "1", "tenantid": "a"});
    assert_eq!(
        ce_spec()
            .derive(&msg(&none.to_string()))
            .expect("derive")
            .event_time,
        None
    );
}

/// S10: a producer with its own JSON declares its event's time at a field of its choosing or in
/// a message attribute, in RFC 3339 or epoch units; a malformed declared time is a rejection,
/// never "no time"; an undeclared one is no time.
#[test]
fn s10_the_event_time_is_read_from_a_pointer_or_an_attribute() {
    let order = |t: Json| json!({"order_id": "o-1", "meta": {"at": t}}).to_string();
    let spec = |format| {
        KeySpec::new(scope(), IdentitySource::JsonPointer("/order_id".into())).event_time(
            EventTimeSource::JsonPointer {
                pointer: "/meta/at".into(),
                format,
            },
        )
    };
    let at = |ms: u64| Some(crate::clock::from_epoch_millis(ms));
    let rfc = spec(TimeFormat::Rfc3339)
        .derive(&msg(&order(json!("2026-11-29T10:00:00Z"))))
        .expect("derive");
    assert_eq!(rfc.event_time, at(1_795_946_400_000));
    let secs = spec(TimeFormat::EpochSeconds)
        .derive(&msg(&order(json!(1_795_946_400))))
        .expect("derive");
    assert_eq!(secs.event_time, at(1_795_946_400_000));
    let millis = spec(TimeFormat::EpochMillis)
        .derive(&msg(&order(json!(1_795_946_400_500u64))))
        .expect("derive");
    assert_eq!(millis.event_time, at(1_795_946_400_500));
    for (format, bad) in [
        (TimeFormat::Rfc3339, json!("yesterday")),
        (TimeFormat::Rfc3339, json!(1_795_946_400)),
        (TimeFormat::EpochSeconds, json!("2026-11-29T10:00:00Z")),
        (TimeFormat::EpochSeconds, json!(-5)),
        (TimeFormat::EpochMillis, json!(1.5)),
    ] {
        let r = spec(format)
            .derive(&msg(&order(bad.clone())))
            .expect_err("malformed declared time");
        assert_eq!(r.code(), "identity_wrong_type", "{bad}");
    }
    let undeclared = json!({"order_id": "o-1"}).to_string();
    assert_eq!(
        spec(TimeFormat::Rfc3339)
            .derive(&msg(&undeclared))
            .expect("derive")
            .event_time,
        None
    );
    // By default a non-CloudEvents spec reads no time at all, even from a `time` field.
    let plain = KeySpec::new(scope(), IdentitySource::JsonPointer("/order_id".into()));
    assert_eq!(plain.event_time_source(), &EventTimeSource::None);
    let with_time = json!({"order_id": "o-1", "time": "not a time"}).to_string();
    assert_eq!(
        plain.derive(&msg(&with_time)).expect("derive").event_time,
        None
    );

    let by_attribute = KeySpec::new(scope(), IdentitySource::JsonPointer("/order_id".into()))
        .event_time(EventTimeSource::MessageAttribute {
            name: "occurred-at".into(),
            format: TimeFormat::EpochSeconds,
        });
    let mut m = msg(&undeclared);
    m.attributes.insert(
        "occurred-at".into(),
        AttributeValue::String("1795946400".into()),
    );
    assert_eq!(
        by_attribute.derive(&m).expect("derive").event_time,
        at(1_795_946_400_000)
    );
    m.attributes
        .insert("occurred-at".into(), AttributeValue::String("soon".into()));
    assert!(by_attribute.derive(&m).is_err());
    // A CloudEvents spec told that its producer declares no time reads none.
    let ce_none = ce_spec().event_time(EventTimeSource::None);
    let stamped = json!({"specversion": "1.0", "type": "t", "source": "/s", "id": "1",
                         "tenantid": "a", "time": "2026-11-29T10:00:00Z"});
    assert_eq!(
        ce_none
            .derive(&msg(&stamped.to_string()))
            .expect("derive")
            .event_time,
        None
    );
}

/// AWS's published SNS sample (`events/example-sns-event.json`), its `Sns` notification as an
/// SQS body carries it without raw message delivery, with `Message` set to `inner`.
fn sns_notification(inner: &str) -> Message {
    let sample: Json =
        serde_json::from_str(include_str!("../../../../events/example-sns-event.json"))
            .expect("AWS sample");
    let mut sns = sample["Records"][0]["Sns"].clone();
    sns["Message"] = Json::String(inner.into());
    msg(&sns.to_string())
}

/// SNS → SQS without raw delivery: identity, tenant, fingerprint and time are read inside the
/// `Message` string (`/Message/order_id`); the key is the one the producer's JSON has bare, so
/// a retried publish (another envelope, the same message) keeps it.
#[test]
fn s1_sns_pointers_read_inside_the_message_string() {
    let inner = json!({"order_id": "o-17", "shop": "acme", "total": 5,
                       "at": "2026-01-02T03:04:05Z"})
    .to_string();
    let spec = |prefix: &str| {
        KeySpec::new(
            scope(),
            IdentitySource::JsonPointer(format!("{prefix}/order_id")),
        )
        .tenant(TenantSource::JsonPointer(format!("{prefix}/shop")))
        .fingerprint(crate::FingerprintSource::JsonPointer(format!(
            "{prefix}/total"
        )))
        .event_time(EventTimeSource::JsonPointer {
            pointer: format!("{prefix}/at"),
            format: TimeFormat::Rfc3339,
        })
    };
    let enveloped = spec("/Message")
        .derive(&sns_notification(&inner))
        .expect("derived inside the Message string");
    assert_eq!(enveloped.tenant, "acme");
    assert!(enveloped.event_time.is_some());
    let bare = spec("").derive(&msg(&inner)).expect("bare");
    assert_eq!(enveloped.fingerprint, bare.fingerprint);
    let other =
        json!({"order_id": "o-17", "shop": "acme", "total": 6, "at": "2026-01-02T03:04:05Z"});
    let changed = spec("/Message")
        .derive(&sns_notification(&other.to_string()))
        .expect("derived");
    assert_eq!(changed.key, enveloped.key);
    assert_ne!(changed.fingerprint, enveloped.fingerprint, "S11");
}

/// Hostile: AWS's own sample `Message` ("Hello\r\nworld!") is not JSON, a JSON string nested
/// past the bound, a huge string: each a typed rejection naming the pointer, never the value;
/// a missing field inside is `Missing` as it is outside.
#[test]
fn s2_a_message_string_that_cannot_be_read_is_rejected_by_pointer() {
    let spec = |p: &str| KeySpec::new(scope(), IdentitySource::JsonPointer(p.into()));
    let sample: Json =
        serde_json::from_str(include_str!("../../../../events/example-sns-event.json"))
            .expect("AWS sample");
    let as_is = msg(&sample["Records"][0]["Sns"].to_string());
    let e = spec("/Message/order_id")
        .derive(&as_is)
        .expect_err("rejected");
    assert_eq!(e.code(), "embedded_not_json");
    assert!(
        e.to_string().contains("/Message/order_id") && !e.to_string().contains("Hello"),
        "{e}"
    );
    let deep = json!({"a": json!({"b": json!({"order_id": "x"}).to_string()}).to_string()});
    let e = spec("/Message/a/b/order_id")
        .derive(&sns_notification(&deep.to_string()))
        .expect_err("rejected");
    assert_eq!(e.code(), "embedded_too_deep");
    let huge = json!({"order_id": "x".repeat(crate::pointer::MAX_EMBEDDED_BYTES)}).to_string();
    let e = spec("/Message/order_id")
        .derive(&sns_notification(&huge))
        .expect_err("rejected");
    assert_eq!(e.code(), "embedded_too_large");
    let e = spec("/Message/order_id")
        .derive(&sns_notification(r#"{"id": "o-1"}"#))
        .expect_err("rejected");
    assert_eq!(e.code(), "identity_missing");
    let fp = spec("/Message/id")
        .fingerprint(crate::FingerprintSource::JsonPointer("/Message/x/y".into()));
    let e = fp
        .derive(&sns_notification(r#"{"id": "o-1", "x": "not json"}"#))
        .expect_err("rejected");
    assert_eq!(e.code(), "embedded_not_json");
}

/// `ce("evt-1")` (tenant `acme`) with `sender` as the verified sender the inbox forwarder names.
fn forwarded(body: &str, sender: &str) -> Message {
    let mut m = msg(body);
    m.attributes.insert(
        VERIFIED_SENDER_ATTRIBUTE.into(),
        AttributeValue::String(sender.into()),
    );
    m
}

/// Issue 42 (webhook provenance): a message the inbox forwarder marks with its verified sender
/// may name only that sender's tenant; naming another is refused for good (`tenant_not_sender`),
/// the value never quoted. Its key lies in the sender's own key space: the same `source` + `id`
/// as an internal producer's event is another key, so neither shadows the other. Without the
/// attribute nothing changes (the internal producer's key is the one it always was).
#[test]
fn a_verified_senders_message_is_bound_to_its_tenant_and_keyed_in_its_own_space() {
    let internal = ce_spec().derive(&msg(&ce("evt-1"))).expect("derive");
    assert_eq!(internal.provenance, Provenance::Payload);

    let other = rejected(&ce_spec(), &forwarded(&ce("evt-1"), "globex"));
    assert!(matches!(other, Rejection::NotTheSender { .. }), "{other:?}");
    assert_eq!(crate::Reason::from(&other), crate::Reason::TenantNotSender);
    assert!(!other.to_string().contains("acme") && !other.to_string().contains("globex"));
    let by_pointer = KeySpec::new(scope(), IdentitySource::CloudEvents)
        .tenant(TenantSource::JsonPointer("/tenantid".into()));
    assert!(matches!(
        rejected(&by_pointer, &forwarded(&ce("evt-1"), "globex")),
        Rejection::NotTheSender { .. }
    ));

    let own = ce_spec()
        .derive(&forwarded(&ce("evt-1"), "acme"))
        .expect("its own tenant");
    assert_eq!(own.provenance, Provenance::Sender("acme".into()));
    assert_eq!(own.tenant, "acme");
    assert_ne!(
        own.key, internal.key,
        "apart from the internal producer's key"
    );
    assert_eq!(
        own.key,
        ce_spec()
            .derive(&forwarded(&ce("evt-1"), "acme"))
            .expect("again")
            .key,
        "stable across redeliveries"
    );

    // A consumer's own tenant (fixed, or none) is its declaration, kept; the key space is still
    // the sender's.
    let fixed = KeySpec::new(scope(), IdentitySource::CloudEvents)
        .tenant(TenantSource::Fixed("bank".into()));
    let kept = fixed
        .derive(&forwarded(&ce("evt-1"), "globex"))
        .expect("fixed");
    assert_eq!(kept.tenant, "bank");
    assert_ne!(
        kept.key,
        fixed.derive(&msg(&ce("evt-1"))).expect("internal").key
    );
    // An empty or control-character sender is no sender.
    assert!(matches!(
        rejected(&ce_spec(), &forwarded(&ce("evt-1"), "")),
        Rejection::Empty { .. }
    ));
}
