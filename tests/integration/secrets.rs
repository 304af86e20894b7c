//! The webhook receiver's secrets read at init from Secrets Manager (`WEBHOOK_SECRETS_ARN`,
//! feature `secrets-manager`), against moto's Secrets Manager (the SQS emulator `cargo xtask
//! test` starts, `DEDUP_SQS_ENDPOINT`; moto serves every service on one port): a rotation
//! picked up without a restart, a forgery flood costing a bounded number of reads (counted from
//! outside, by a metering proxy in front of moto), a missing secret refusing the start by name.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use dedup_tests::unique;
use lambda_dedup::{Retention, Scope};
use lambda_dedup_config::{Env, SecretError, SettingRule, SettingsError};
use lambda_dedup_engine::CreateOnceDeduplicator;
use lambda_dedup_memory::MemoryStore;
use lambda_dedup_runtime::webhook::webhook_config_in;
use lambda_dedup_runtime::webhook::{Receiver, WebhookConfig};
use lambda_dedup_signature::{
    Scheme, WEBHOOK_ID_HEADER, WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER, sign,
};
use lambda_http::http::{HeaderMap, HeaderValue, Method};
use local_dynamodb::meter::Meter;

/// Before and after the rotation (Standard Webhooks' `whsec_` and base64 of the key).
const BEFORE: &str = "whsec_b2xkLXNlY3JldC0wMTIzNDU2Nzg5";
const AFTER: &str = "whsec_d2hzZWMtdGVzdC0wMTIzNDU2Nzg5";
/// A secret the forger guesses.
const FORGED: &str = "whsec_Zm9yZ2VkLXNlY3JldC0wMTIzNDU2Nzg5";

/// moto's endpoint, or `None` (the test skipped, saying so) outside `cargo xtask test`.
fn moto() -> Option<String> {
    let endpoint = std::env::var("DEDUP_SQS_ENDPOINT").ok();
    if endpoint.is_none() {
        let thread = std::thread::current();
        eprintln!(
            "skipped {}: it needs moto's Secrets Manager; run it with `cargo xtask test -p dedup-tests -- secrets`",
            thread.name().unwrap_or("this test")
        );
    }
    endpoint
}

fn client(endpoint: &str) -> aws_sdk_secretsmanager::Client {
    lambda_dedup_testkit::local_client!(aws_sdk_secretsmanager, endpoint)
}

/// A new secret holding `text`: its ARN.
async fn secret(admin: &aws_sdk_secretsmanager::Client, text: &str) -> String {
    let out = admin
        .create_secret()
        .name(unique("webhook-secrets"))
        .secret_string(text)
        .send()
        .await
        .expect("create secret");
    out.arn().expect("arn").to_owned()
}

fn env(arn: &str, refresh_secs: &str) -> Env {
    env_with(arn, refresh_secs, &[])
}

/// The receiver's variables, its secrets named by `arn`, and `extra`.
fn env_with(arn: &str, refresh_secs: &str, extra: &[(&str, &str)]) -> Env {
    let map: HashMap<String, String> = [
        ("WEBHOOK_TENANT", "acme"),
        ("INBOX_TABLE", "inbox"),
        ("WEBHOOK_SECRETS_ARN", arn),
        ("WEBHOOK_SECRETS_REFRESH_SECONDS", refresh_secs),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    Env::from_pairs(map)
}

fn receiver(config: WebhookConfig) -> Receiver {
    let store = MemoryStore::new(Retention::unchecked(Duration::from_secs(86_400)).expect("r"));
    store.create_table("inbox", "event_key");
    let spec = config.key_spec(Scope::new("t", "webhook-receiver").expect("scope"));
    Receiver::new(
        "webhook-receiver",
        config,
        CreateOnceDeduplicator::new(spec, store),
        lambda_dedup_config::DeadlineMargin::DEFAULT,
    )
}

/// A delivery of event `id` signed under `secret` now: its status.
async fn deliver(r: &Receiver, id: &str, secret: &str) -> u16 {
    let body = format!(r#"{{"id":"{id}"}}"#);
    let now = SystemTime::now();
    let ts = lambda_dedup::clock::epoch_secs(now);
    let sig = sign(Scheme::StandardWebhooks, secret, id, ts, body.as_bytes()).expect("sign");
    let mut h = HeaderMap::new();
    for (name, v) in [
        (WEBHOOK_ID_HEADER, id.to_owned()),
        (WEBHOOK_TIMESTAMP_HEADER, ts.to_string()),
        (WEBHOOK_SIGNATURE_HEADER, sig),
    ] {
        h.insert(name, HeaderValue::from_str(&v).expect("header"));
    }
    r.answer(&Method::POST, &h, body.as_bytes(), "req", now)
        .await
        .status
}

/// Reads of the secret moto has answered through the meter so far.
fn reads(meter: &Meter) -> u64 {
    meter
        .usage()
        .by_operation
        .get("GetSecretValue")
        .copied()
        .unwrap_or(0)
}

/// The secret is rotated in Secrets Manager while the receiver runs: a delivery signed with the
/// new secret is refused until the refresh interval has passed, then accepted, with no restart.
#[tokio::test]
async fn rotated_webhook_secret_is_picked_up_without_a_restart() {
    let Some(moto) = moto() else { return };
    let admin = client(&moto);
    let arn = secret(&admin, BEFORE).await;
    let config = webhook_config_in(&env(&arn, "1"), client(&moto))
        .await
        .expect("load");
    let r = receiver(config);
    assert_eq!(deliver(&r, "evt-before", BEFORE).await, 200);
    admin
        .put_secret_value()
        .secret_id(&arn)
        .secret_string(AFTER)
        .send()
        .await
        .expect("rotate");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(
        deliver(&r, "evt-after", AFTER).await,
        200,
        "the rotated secret is read again on the first mismatch after the interval"
    );
    assert_eq!(
        deliver(&r, "evt-old", BEFORE).await,
        401,
        "the secret rotated out is no longer held"
    );
}

/// A flood of forged signatures, many at once: within one interval it reads the secret no
/// more than once after init, whatever the number of forgeries; each is answered 401.
#[tokio::test]
async fn forgery_flood_reads_the_secret_a_bounded_number_of_times() {
    let Some(moto) = moto() else { return };
    let admin = client(&moto);
    let arn = secret(&admin, BEFORE).await;
    let meter = Meter::start(&moto, Duration::ZERO).expect("meter");
    let config = webhook_config_in(&env(&arn, "2"), client(&meter.endpoint()))
        .await
        .expect("load");
    assert_eq!(reads(&meter), 1, "one read at init");
    let r = receiver(config);
    // Within the first interval: none; after it, one, however many forgeries come at once.
    let flood = |n: usize| {
        let r = &r;
        futures::future::join_all(
            (0..n).map(move |i| async move { deliver(r, &format!("forged-{i}"), FORGED).await }),
        )
    };
    assert!(flood(200).await.iter().all(|s| *s == 401));
    assert_eq!(
        reads(&meter),
        1,
        "no read within the interval of the read at init"
    );
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    assert!(flood(200).await.iter().all(|s| *s == 401));
    assert_eq!(
        reads(&meter),
        2,
        "one read for the interval, not one per forgery"
    );
}

/// A secret that does not exist refuses the start, naming the variable and the secret, and
/// so does one set beside the plain variable (which holds the secrets is ambiguous).
#[tokio::test]
async fn missing_webhook_secret_refuses_the_start_by_name() {
    let Some(moto) = moto() else { return };
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:no-such-secret-AbCdEf";
    let e = webhook_config_in(&env(arn, "30"), client(&moto))
        .await
        .expect_err("refused");
    assert_eq!(
        e,
        SettingsError::Secret {
            var: "WEBHOOK_SECRETS_ARN",
            error: SecretError::NotFound { id: arn.to_owned() }
        }
    );
    assert!(
        e.to_string().contains("WEBHOOK_SECRETS_ARN") && e.to_string().contains(arn),
        "{e}"
    );
}

/// The secrets from Secrets Manager and from the plain variable at once are refused (which
/// holds them would be ambiguous), and so are a refresh interval of zero or over an hour, all
/// before any call to Secrets Manager; the synchronous reading refuses the ARN it cannot fetch.
#[tokio::test]
async fn plain_and_arn_webhook_secrets_together_refuse_the_start() {
    let unreachable = client("http://127.0.0.1:9");
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:webhook-AbCdEf";
    let with = |extra: &[(&str, &str)], refresh: &str| env_with(arn, refresh, extra);
    let both = with(&[("WEBHOOK_SECRETS", BEFORE)], "30");
    let e = webhook_config_in(&both, unreachable.clone())
        .await
        .expect_err("both");
    assert!(
        matches!(
            &e,
            SettingsError::Refused {
                var: "WEBHOOK_SECRETS_ARN",
                rule: SettingRule::BothSet {
                    other: "WEBHOOK_SECRETS",
                    ..
                }
            }
        ),
        "{e:?}"
    );
    for (refresh, zero) in [("0", true), ("3601", false)] {
        let e = webhook_config_in(&with(&[], refresh), unreachable.clone())
            .await
            .expect_err("refresh");
        assert!(
            matches!(&e, SettingsError::Refused { var: "WEBHOOK_SECRETS_REFRESH_SECONDS", rule }
                if matches!(rule, SettingRule::Zero) == zero),
            "{refresh}: {e:?}"
        );
    }
    let e = WebhookConfig::read(&with(&[], "30")).expect_err("read");
    assert!(
        matches!(
            &e,
            SettingsError::Refused {
                var: "WEBHOOK_SECRETS_ARN",
                rule: SettingRule::ReadAtInit { .. }
            }
        ),
        "{e:?}"
    );
}
