//! The service as `main` wires it: the e-mail goes out once on the memory store always, and on
//! Valkey when `DEDUP_VALKEY_URL` names a server (`cargo xtask test` starts one; otherwise that
//! run is skipped with a message). The mail API is the fake provider, which honours
//! `Idempotency-Key`, counts what it sent and fails as told.

use super::*;
use lambda_dedup_fake_provider::{Fault, Provider};
use lambda_dedup_runtime::events::{SqsEvent, SqsMessage};
use lambda_dedup_runtime::{Env, store::NoStore};

/// The mail API, on a port of its own.
async fn mail_api() -> (Provider, String) {
    let mail = Provider::new();
    let (url, _) = mail.serve().await.expect("mail API");
    (mail, format!("{url}/v1"))
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{nanos:x}")
}

/// The builder as `main` reads it, from these variables.
fn settings(mail_url: &str, valkey_url: &str) -> Dedup<NoStore> {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "test"),
        ("MAIL_API_URL", mail_url),
        ("PROVIDER_TIMEOUT_MS", "500"),
        ("VALKEY_URL", valkey_url),
    ])
    .with("VALKEY_KEY_PREFIX", format!("{}:", unique("welcome")));
    Dedup::read(&env, "valkey-email").expect("settings")
}

fn signup(message_id: &str, id: &str, email: &str) -> SqsMessage {
    let body = serde_json::json!({"specversion": "1.0", "type": "UserSignedUp",
        "source": "/users", "id": id, "tenantid": "acme", "data": {"email": email}});
    let mut m = SqsMessage::default();
    m.message_id = Some(message_id.into());
    m.body = Some(body.to_string());
    m
}

async fn deliver(service: &SqsService, records: Vec<SqsMessage>) -> Vec<String> {
    let mut event = SqsEvent::default();
    event.records = records;
    let response = service.call_with(event).await.expect("answered");
    let failures = response.batch_item_failures.into_iter();
    failures.map(|f| f.item_identifier).collect()
}

/// Three deliveries of one sign-up, the mail API down for the first: one e-mail, the retry under
/// the same idempotency key; another sign-up is its own e-mail, and a sign-up without an
/// address is failed without a call.
async fn sends_once(service: SqsService, mail: &Provider) {
    let id = unique("user");
    mail.inject(Fault::error_5xx(1));
    let ada = || signup("m1", &id, "ada@example.com");
    assert_eq!(
        deliver(&service, vec![ada()]).await,
        ["m1"],
        "the 503 is retried"
    );
    assert!(deliver(&service, vec![ada()]).await.is_empty());
    assert!(
        deliver(&service, vec![ada()]).await.is_empty(),
        "a duplicate"
    );
    let mut nobody = signup("m9", &unique("user"), "");
    nobody.body = nobody
        .body
        .map(|b| b.replace(r#""email":"""#, r#""mail":"x""#));
    let other = signup("m2", &unique("user"), "bo@example.com");
    assert_eq!(deliver(&service, vec![other, nobody]).await, ["m9"]);
    let sent: Vec<serde_json::Value> = mail
        .applied()
        .into_values()
        .map(|m| m["to"].clone())
        .collect();
    assert_eq!(sent.len(), 2, "one e-mail per sign-up: {sent:?}");
    assert!(
        sent.contains(&serde_json::json!("ada@example.com")),
        "{sent:?}"
    );
    assert_eq!(
        mail.total_effects(),
        2,
        "the retry and the duplicate sent nothing more"
    );
}

#[tokio::test]
async fn the_welcome_email_is_sent_once_on_the_memory_store() {
    let (mail, url) = mail_api().await;
    let (dedup, _) = lambda_dedup_runtime::testing::on_memory_recording::<ValkeyEffect>(settings(
        &url,
        "redis://unused",
    ));
    sends_once(service(dedup).expect("service"), &mail).await;
}

#[tokio::test]
async fn the_welcome_email_is_sent_once_on_valkey() {
    let Ok(valkey) = std::env::var("DEDUP_VALKEY_URL") else {
        eprintln!(
            "valkey-email on Valkey skipped: DEDUP_VALKEY_URL is not set; `cargo xtask test` starts Valkey and sets it"
        );
        return;
    };
    let (mail, url) = mail_api().await;
    let dedup = settings(&url, &valkey).valkey().expect("the Valkey store");
    sends_once(service(dedup).expect("service"), &mail).await;
}

/// `main`'s wiring refuses to start without its Valkey server or its mail API.
#[test]
fn a_start_without_valkey_url_or_mail_api_is_refused() {
    let env = Env::from_pairs([
        ("DEDUP_NAMESPACE", "test"),
        ("MAIL_API_URL", "http://127.0.0.1:1/v1"),
    ]);
    let Err(e) = Dedup::read(&env, "valkey-email")
        .expect("settings")
        .valkey()
    else {
        panic!("started without VALKEY_URL");
    };
    assert!(e.to_string().contains("VALKEY_URL"), "{e}");
    let (dedup, _) = lambda_dedup_runtime::testing::on_memory_recording::<ValkeyEffect>(
        Dedup::read(
            &Env::from_pairs([("DEDUP_NAMESPACE", "test")]),
            "valkey-email",
        )
        .expect("settings"),
    );
    let Err(e) = service(dedup) else {
        panic!("started without MAIL_API_URL");
    };
    assert!(e.to_string().contains("MAIL_API_URL"), "{e}");
}

/// The builder and the store `main`'s `.valkey()` chooses, from the Valkey variables `vars`
/// (and its others).
fn valkey_with(
    vars: &[(&str, &str)],
) -> Result<(Dedup<NoStore>, lambda_dedup_valkey::ValkeyStore), lambda_dedup_runtime::SettingsError>
{
    let base = [
        ("DEDUP_NAMESPACE", "test"),
        ("MAIL_API_URL", "http://127.0.0.1:1/v1"),
    ];
    let env = Env::from_pairs(base.iter().chain(vars).copied());
    let dedup = Dedup::read(&env, "valkey-email").expect("settings");
    let store = lambda_dedup_runtime::store::valkey(dedup.env(), dedup.settings())?;
    Ok((dedup, store))
}

/// `main`'s `.valkey()` reads Valkey Cluster's hash tag, the replicas' wait and a private CA's
/// roots: the tag is in the mark keys it lays out; a value in no such form, roots that cannot
/// be read or given for a server without TLS, and a wait of zero, over the store's limit or
/// without replicas refuse the start, each naming its variable.
#[test]
fn valkey_hash_tag_replicas_and_tls_roots_are_read_by_mains_wiring() {
    use lambda_dedup_runtime::{SettingRule, SettingsError};
    let key = |(dedup, store): &(Dedup<NoStore>, lambda_dedup_valkey::ValkeyStore)| {
        let m = lambda_dedup::Message {
            message_id: "m-1".into(),
            body: signup("m-1", "e-1", "a@example.com")
                .body
                .unwrap_or_default()
                .into_bytes(),
            attributes: Default::default(),
            group_id: None,
        };
        let key = lambda_dedup_runtime::testing::key_spec(dedup)
            .derive(&m)
            .expect("key")
            .key;
        store.mark_key(&key)
    };
    let url = ("VALKEY_URL", "redis://127.0.0.1:1");
    let plain = key(&valkey_with(&[url]).expect("no tag"));
    assert!(!plain.contains('{'), "{plain}");
    let event = key(&valkey_with(&[url, ("VALKEY_HASH_TAG", "event")]).expect("event"));
    assert!(event.contains('{') && event.ends_with('}'), "{event}");
    let fixed = key(&valkey_with(&[url, ("VALKEY_HASH_TAG", "fixed:welcome")]).expect("fixed"));
    assert!(fixed.contains("{welcome}"), "{fixed}");
    assert!(
        valkey_with(&[
            url,
            ("VALKEY_REPLICAS", "1"),
            ("VALKEY_REPLICAS_TIMEOUT_MS", "200")
        ])
        .is_ok()
    );

    let refused_var = |vars: &[(&str, &str)]| match valkey_with(vars) {
        Err(SettingsError::Refused { var, rule }) => Some((var, rule)),
        Err(e) => panic!("{vars:?}: {e:?}"),
        Ok(_) => None,
    };
    let var = |vars: &[(&str, &str)]| refused_var(vars).map(|(v, _)| v);
    assert_eq!(
        var(&[url, ("VALKEY_HASH_TAG", "cluster")]),
        Some("VALKEY_HASH_TAG")
    );
    assert_eq!(
        var(&[url, ("VALKEY_HASH_TAG", "fixed:{x}")]),
        Some("VALKEY_HASH_TAG")
    );
    assert_eq!(
        var(&[
            url,
            ("VALKEY_KEY_PREFIX", "{mail}:"),
            ("VALKEY_HASH_TAG", "event")
        ]),
        Some("VALKEY_HASH_TAG")
    );
    assert!(matches!(
        refused_var(&[
            url,
            ("VALKEY_REPLICAS", "1"),
            ("VALKEY_REPLICAS_TIMEOUT_MS", "0")
        ]),
        Some(("VALKEY_REPLICAS_TIMEOUT_MS", SettingRule::Zero))
    ));
    assert!(matches!(
        refused_var(&[
            url,
            ("VALKEY_REPLICAS", "1"),
            ("VALKEY_REPLICAS_TIMEOUT_MS", "60000")
        ]),
        Some((
            "VALKEY_REPLICAS_TIMEOUT_MS",
            SettingRule::AboveMaximum { .. }
        ))
    ));
    assert_eq!(
        var(&[url, ("VALKEY_REPLICAS_TIMEOUT_MS", "100")]),
        Some("VALKEY_REPLICAS_TIMEOUT_MS")
    );
    let tls = ("VALKEY_URL", "rediss://127.0.0.1:1");
    let ca = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/lambda-dedup-valkey/tests/fixtures/test-ca.pem"
    );
    assert!(
        valkey_with(&[tls, ("VALKEY_CA_BUNDLE", ca)]).is_ok(),
        "a private CA's roots"
    );
    assert_eq!(
        var(&[tls, ("VALKEY_CA_BUNDLE", "/no/such/ca.pem")]),
        Some("VALKEY_CA_BUNDLE")
    );
    assert_eq!(
        var(&[url, ("VALKEY_CA_BUNDLE", ca)]),
        Some("VALKEY_CA_BUNDLE"),
        "roots without TLS"
    );
    let not_pem = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    assert_eq!(
        var(&[tls, ("VALKEY_CA_BUNDLE", not_pem)]),
        Some("VALKEY_CA_BUNDLE"),
        "not PEM"
    );
}
