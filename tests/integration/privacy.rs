//! Isolation and privacy (S1, S3): one tenant's events never suppress another's, and no personal
//! data from a payload reaches a key or a log line at the default level.

use std::io::Write;
use std::sync::{Arc, Mutex};

use dedup_tests::{client, effect_table, unique};
use lambda_dedup::{DedupKey, KeySpec, Message, Scope};
use lambda_dedup_engine::{Deduplicator, HandlerError, Plan};
use proptest::prelude::*;
use serde_json::json;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const PLATE: &str = "9876-XYZ";
const EMAIL: &str = "ana.personal@example.com";
const TENANT: &str = "city-of-secretville";

fn notice(id: &str, amount: i64) -> Message {
    Message {
        message_id: unique("m"),
        body: json!({"specversion": "1.0", "type": "fine.notice", "source": "/dgt", "id": id,
                     "tenantid": TENANT, "data": {"plate": PLATE, "owner_email": EMAIL, "amount_cents": amount}})
        .to_string()
        .into_bytes(),
        ..Message::default()
    }
}

/// S3: processing, a duplicate, a conflict, a rejection and a failed external call all log at
/// INFO without the plate, the e-mail or the tenant appearing anywhere; and none is in the key.
///
/// The capturing subscriber is the process-wide default: a thread-scoped one misses events whose
/// callsites other tests (on other threads, with no subscriber) registered first. So this test
/// also checks the other tests' logs; none of them carries these values either.
#[tokio::test(flavor = "current_thread")]
async fn s3_no_personal_data_in_keys_or_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber)
        .expect("only this test installs a subscriber");

    let client = client();
    let fines = effect_table(&client, "fine_id").await;
    let spec = KeySpec::cloudevents(Scope::new("test", "privacy").expect("scope"), "tenantid");
    let dedup = Deduplicator::new(spec.clone(), dedup_tests::fresh_store(&client).await)
        .with_provider_key_retention(std::time::Duration::from_secs(86_400));
    let plan = |e: &lambda_dedup::Derived| -> Result<Plan, HandlerError> {
        let data = &e
            .body
            .as_ref()
            .ok_or_else(|| HandlerError::invalid("no body"))?["data"];
        Ok(Plan {
            effects: vec![lambda_dedup::Effect::put(
                &fines,
                lambda_dedup::Item::new()
                    .with("fine_id", e.key.idempotency_key().as_str())
                    .with("plate", data["plate"].as_str().unwrap_or_default()),
            )],
            result: None,
        })
    };
    let id = unique("evt");
    let first = notice(&id, 100);
    let key = spec.derive(&first).expect("key").key;
    for text in [PLATE, EMAIL, TENANT, id.as_str()] {
        assert!(!key.as_str().contains(text), "{text} in the key {key}");
    }
    assert_eq!(dedup.transactional(&first, plan).await.label(), "applied");
    assert_eq!(
        dedup.transactional(&notice(&id, 100), plan).await.label(),
        "duplicate"
    );
    assert_eq!(
        dedup.transactional(&notice(&id, 999), plan).await.label(),
        "conflict"
    );
    let mut no_id = notice(&id, 1);
    no_id.body =
        json!({"specversion": "1.0", "type": "fine.notice", "source": "/dgt", "tenantid": TENANT,
                        "data": {"plate": PLATE, "owner_email": EMAIL}})
        .to_string()
        .into_bytes();
    assert_eq!(dedup.transactional(&no_id, plan).await.label(), "rejected");
    let pay = notice(&unique("evt"), 5);
    let failed = dedup
        .leased(&pay, None, |_e, _l| async {
            Err(HandlerError::transient("provider 503"))
        })
        .await;
    assert_eq!(failed.label(), "retry");

    let logs = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    assert!(
        logs.contains("applied") && logs.contains("duplicate skipped") && logs.contains("conflict"),
        "the outcomes were logged: {logs}"
    );
    for text in [PLATE, EMAIL, TENANT] {
        assert!(!logs.contains(text), "{text} appears in the logs:\n{logs}");
    }
}

proptest! {
    /// S1: different tenants never share a key, whatever the identity: one tenant's event can
    /// never suppress another's.
    #[test]
    fn s1_tenants_never_share_a_key(a in ".{0,24}", b in ".{0,24}", id in ".{1,40}") {
        prop_assume!(a != b);
        let scope = Scope::new("prod", "ledger").expect("scope");
        prop_assert_ne!(DedupKey::new(&scope, &a, &["cloudevents", "/s", &id]), DedupKey::new(&scope, &b, &["cloudevents", "/s", &id]));
    }
}
