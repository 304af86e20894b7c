//! The e-mail goes out once: on the memory store always, and on Valkey when `DEDUP_VALKEY_URL`
//! names a server (`cargo xtask test` starts one; otherwise those runs are skipped with a
//! message).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use lambda_dedup_valkey::ValkeyStore;

/// A mail API that honours idempotency keys, counts what it sent, and can fail its next calls.
#[derive(Default)]
struct FakeMail {
    sent: Mutex<HashMap<String, (String, usize)>>,
    deliveries: AtomicUsize,
    fail_next: AtomicUsize,
    attempts: Mutex<Vec<String>>,
}

impl MailApi for FakeMail {
    async fn send(&self, to: &str, _: &str, key: &str) -> Result<String, HandlerError> {
        self.attempts.lock().expect("lock").push(key.to_owned());
        if self.fail_next.load(Ordering::SeqCst) > 0 {
            self.fail_next.fetch_sub(1, Ordering::SeqCst);
            return Err(HandlerError::Transient("mail API unavailable".into()));
        }
        let mut sent = self.sent.lock().expect("lock");
        let entry = sent.entry(key.to_owned()).or_insert_with(|| {
            self.deliveries.fetch_add(1, Ordering::SeqCst);
            (to.to_owned(), 0)
        });
        entry.1 += 1;
        Ok(format!("msg-{}", key.len()))
    }
}

fn signup(message_id: &str, id: &str, email: &str) -> Message {
    Message {
        message_id: message_id.into(),
        body: serde_json::json!({"specversion": "1.0", "type": "UserSignedUp", "source": "/users",
            "id": id, "tenantid": "acme", "data": {"email": email}})
        .to_string()
        .into_bytes(),
        ..Message::default()
    }
}

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{nanos:x}")
}

/// The settings as `main` would read them, from these variables.
fn settings() -> Settings {
    let env = lambda_dedup_runtime::Env::from_pairs([("DEDUP_NAMESPACE", "test")]);
    Settings::read(&env, "welcome-email").expect("settings")
}

/// Three deliveries of one sign-up, the mail API down for the first: one e-mail, and the
/// retry used the same idempotency key; another sign-up is its own e-mail.
async fn sends_once<E: 'static>(dedup: LeasedDeduplicator<E>) {
    let mail = FakeMail::default();
    let id = unique("user");
    mail.fail_next.store(1, Ordering::SeqCst);
    let first = send_welcome(&dedup, &signup("m1", &id, "ada@example.com"), None, &mail).await;
    assert!(matches!(first, Outcome::Retry { .. }), "{first:?}");
    let second = send_welcome(&dedup, &signup("m2", &id, "ada@example.com"), None, &mail).await;
    assert!(matches!(second, Outcome::Applied), "{second:?}");
    let third = send_welcome(&dedup, &signup("m3", &id, "ada@example.com"), None, &mail).await;
    assert!(matches!(third, Outcome::Duplicate { .. }), "{third:?}");
    let other = send_welcome(
        &dedup,
        &signup("m4", &unique("user"), "bo@example.com"),
        None,
        &mail,
    )
    .await;
    assert!(matches!(other, Outcome::Applied), "{other:?}");
    assert_eq!(
        mail.deliveries.load(Ordering::SeqCst),
        2,
        "one e-mail per sign-up"
    );
    let calls: Vec<usize> = mail
        .sent
        .lock()
        .expect("lock")
        .values()
        .map(|v| v.1)
        .collect();
    assert_eq!(
        calls.iter().sum::<usize>(),
        2,
        "the duplicate never called the API"
    );
    let attempts = mail.attempts.lock().expect("lock").clone();
    assert_eq!(attempts.len(), 3);
    assert_eq!(
        attempts[0], attempts[1],
        "the retry reused the idempotency key"
    );
    assert_ne!(attempts[1], attempts[2], "another sign-up has its own key");
}

#[tokio::test]
async fn the_welcome_email_is_sent_once_on_the_memory_store() {
    let settings = settings();
    let store = lambda_dedup_runtime::testing::memory_store(&settings);
    sends_once(welcome_deduplicator(&settings, store)).await;
}

#[tokio::test]
async fn the_welcome_email_is_sent_once_on_valkey() {
    let Ok(url) = std::env::var("DEDUP_VALKEY_URL") else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "valkey-email on Valkey skipped: DEDUP_VALKEY_URL is not set; `cargo xtask test -p example-valkey-email` starts Valkey and sets it"
        );
        return;
    };
    let settings = settings();
    let store = ValkeyStore::from_url(&url, settings.retention)
        .expect("url")
        .with_prefix(&format!("{}:", unique("welcome")))
        .expect("prefix");
    sends_once(welcome_deduplicator(&settings, store)).await;
}
