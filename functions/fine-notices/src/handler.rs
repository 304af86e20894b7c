//! The service: `fine-notices` as `main` builds it, callable directly (as its tests do).

use std::sync::Arc;

use lambda_dedup::ItemStore;
use lambda_dedup::items::{number, text};
use lambda_dedup_runtime::SecretsManagerSecret;
use lambda_dedup_runtime::flow::transact;
use lambda_dedup_runtime::{Dedup, Event, SqsService};
use lambda_dedup_runtime::{SettingRule, SettingsError};
use lambda_runtime::Error;

use crate::notice::{self, Notice, Tables};

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub(crate) const FUNCTION: &str = "fine-notices";

/// The variable naming the Secrets Manager secret (its ARN) whose text is the correlation key,
/// read once at init ([`correlation_key`]).
pub(crate) const KEY_ARN_VAR: &str = "FINES_CORRELATION_KEY_ARN";
/// The variable holding the correlation key itself: for local use only, refused beside
/// [`KEY_ARN_VAR`].
pub(crate) const KEY_VAR: &str = "FINES_CORRELATION_KEY";
/// The shortest correlation key accepted, bytes (S3: a short key makes the HMAC of a plate
/// guessable).
const MIN_KEY_BYTES: u64 = 16;

/// The key of the correlation hash, read once at init: never logged, never in an error.
#[derive(Clone)]
pub(crate) struct CorrelationKey(Vec<u8>);

/// The correlation key as `main` reads it at init: the text of the Secrets Manager secret
/// `FINES_CORRELATION_KEY_ARN` names, through the client `secrets` makes (not copied into the
/// function's configuration, where `lambda:GetFunctionConfiguration` shows it), or, for local
/// use, `FINES_CORRELATION_KEY`. Both set, neither, a secret that cannot be read, or a key under
/// 16 bytes refuse the start, naming the variable.
pub(crate) async fn correlation_key<S>(
    dedup: &Dedup<S>,
    secrets: impl FnOnce() -> aws_sdk_secretsmanager::Client,
) -> Result<CorrelationKey, SettingsError> {
    let set = |name| {
        dedup
            .env()
            .required(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
    };
    let (key, var) = match (set(KEY_ARN_VAR), set(KEY_VAR)) {
        (Some(_), Some(_)) => {
            return Err(SettingsError::refused(
                KEY_ARN_VAR,
                SettingRule::BothSet {
                    other: KEY_VAR,
                    why: "the key comes from Secrets Manager or, for local use, from the \
                          variable, never both",
                },
            ));
        }
        (Some(arn), None) => {
            let text = SecretsManagerSecret::new(secrets(), &arn)
                .fetch()
                .await
                .map_err(|error| SettingsError::Secret {
                    var: KEY_ARN_VAR,
                    error,
                })?;
            (text.trim().to_owned(), KEY_ARN_VAR)
        }
        (None, Some(key)) => (key, KEY_VAR),
        (None, None) => {
            return Err(SettingsError::refused(
                KEY_ARN_VAR,
                SettingRule::NeitherSet {
                    or: KEY_VAR,
                    why: "the key of the correlation hash: the Secrets Manager secret's ARN, or \
                          the key itself for local use",
                },
            ));
        }
    };
    let len = u64::try_from(key.len()).unwrap_or(u64::MAX);
    if len < MIN_KEY_BYTES {
        return Err(SettingsError::refused(
            var,
            SettingRule::BelowMinimum {
                value: len,
                min: MIN_KEY_BYTES,
                why: "the key must be at least 16 bytes: a shorter one makes the HMAC of a \
                      plate guessable",
            },
        ));
    }
    Ok(CorrelationKey(key.into_bytes()))
}

/// The function as `main` runs it: each notice's fine, intent and correlation item with its
/// mark in one transaction (S5, S7), the batch in as few transactions as possible, answered with
/// a partial batch response (S12); then the review count of the notices applied now. The
/// settings plus `FINES_TABLE`, `INTENTS_TABLE` and `FINE_REVIEWS_TABLE`, and the correlation
/// key read at init ([`correlation_key`]); the correlation items are read from `items`
/// (DynamoDB in Lambda, the memory store in the tests).
pub(crate) fn service(
    dedup: Dedup,
    items: impl ItemStore + 'static,
    key: CorrelationKey,
) -> Result<SqsService, Error> {
    let items: Arc<dyn ItemStore> = Arc::new(items);
    let tables = Arc::new(tables(&dedup, key)?);
    let reviewed = tables.clone();
    let plan = transact(move |e: Event<Notice>| notice::plan(&tables, &e));
    let flow = plan.one_transaction_per_batch().then(move |applied| {
        let (tables, items) = (reviewed.clone(), items.clone());
        async move {
            let flagged = count_flagged(&tables, items.as_ref(), &applied).await;
            if flagged > 0 {
                println!(
                    "{}",
                    lambda_dedup_runtime::emf::line(
                        FUNCTION,
                        &[("FlaggedForReview", "Count", flagged)]
                    )
                );
            }
        }
    });
    Ok(notice::configure(dedup).sqs(flow)?)
}

/// The function's own variables, read from the same environment as its settings, and the
/// correlation key read at init.
fn tables(dedup: &Dedup, key: CorrelationKey) -> Result<Tables, Error> {
    Ok(Tables {
        fines: dedup.env().required("FINES_TABLE")?,
        intents: dedup.env().required("INTENTS_TABLE")?,
        reviews: dedup.env().required("FINE_REVIEWS_TABLE")?,
        correlation_secret: key.0,
    })
}

/// After a batch: each notice applied now whose correlation item names it as the latest of
/// two or more notices is a business duplicate, flagged for review (the item, written in its
/// transaction, is the review). Counts them as `FlaggedForReview`. Best effort: the review is
/// in the table whether or not this read succeeds.
async fn count_flagged(tables: &Tables, items: &dyn ItemStore, applied: &[Event<Notice>]) -> u64 {
    let mut flagged = 0;
    for event in applied {
        let Ok(review) = notice::review(tables, event) else {
            continue;
        };
        let key = lambda_dedup::Item::new().with("correlation", review.correlation.as_str());
        match items.read(&tables.reviews, &key).await {
            Ok(Some(item)) => {
                let notices = number(&item, "notices").unwrap_or(0);
                if notices >= 2 && text(&item, "last_notice") == Some(review.fine_id.as_str()) {
                    tracing::warn!(key = %event.key, fine_id = %review.fine_id,
                        correlation = %review.correlation, notices,
                        "another notice of the same fine: both recorded, flagged for review");
                    flagged += 1;
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(key = %event.key, error = %e,
                "could not read the correlation item; the review stands in the table"),
        }
    }
    flagged
}

#[cfg(test)]
mod tests {
    use super::*;

    use lambda_dedup::Item;
    use lambda_dedup_memory::MemoryStore;
    use lambda_dedup_runtime::events::SqsEvent;
    use lambda_dedup_runtime::{Env, testing::on_memory};
    use lambda_runtime::LambdaEvent;
    use lambda_runtime::tower::ServiceExt;

    /// The function as `main` builds it (`service`), its marks and tables in the memory store.
    struct Notices {
        service: SqsService,
        env: Env,
        tables: Tables,
        store: MemoryStore,
    }

    impl Notices {
        /// The items of `table` whose `name` is `value`.
        fn items_where(&self, table: &str, name: &str, value: &str) -> Vec<Item> {
            self.store
                .items(table)
                .into_iter()
                .filter(|i| text(i, name) == Some(value))
                .collect()
        }
    }

    /// The function's variables, its correlation key aside.
    const VARS: [(&str, &str); 5] = [
        ("DEDUP_NAMESPACE", "test"),
        ("DEDUP_MARK_TABLE", "marks"),
        ("FINES_TABLE", "fines"),
        ("INTENTS_TABLE", "intents"),
        ("FINE_REVIEWS_TABLE", "reviews"),
    ];

    /// The function as `main` builds it, with `vars` on top of its variables.
    async fn notices_with(vars: &[(&str, &str)]) -> Result<Notices, Error> {
        let key = ("FINES_CORRELATION_KEY", "test-secret-of-16+");
        let env = Env::from_pairs(VARS.into_iter().chain([key]));
        let env = vars.iter().fold(env, |env, (k, v)| env.with(k, *v));
        let (dedup, store) = on_memory(Dedup::read(&env, FUNCTION)?);
        for (table, key) in [
            ("fines", "fine_id"),
            ("intents", "intent_id"),
            ("reviews", "correlation"),
        ] {
            store.create_table(table, key);
        }
        let key = correlation_key(&dedup, || secrets_at("http://127.0.0.1:9")).await?;
        let tables = tables(&dedup, key.clone())?;
        let service = service(dedup, store.clone(), key)?;
        Ok(Notices {
            service,
            env,
            tables,
            store,
        })
    }

    /// A Secrets Manager client of `endpoint`.
    fn secrets_at(endpoint: &str) -> aws_sdk_secretsmanager::Client {
        use aws_sdk_secretsmanager::config;
        let conf = config::Config::builder()
            .behavior_version(config::BehaviorVersion::latest())
            .region(config::Region::new("us-east-1"))
            .credentials_provider(config::Credentials::new(
                "local", "local", None, None, "test",
            ))
            .endpoint_url(endpoint)
            .build();
        aws_sdk_secretsmanager::Client::from_conf(conf)
    }

    /// A Secrets Manager that answers every `GetSecretValue` with `text` as the secret's
    /// string: its endpoint.
    async fn secrets_manager(text: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut chunk = [0u8; 4096];
                // The request's head, then as much body as it says.
                while let Ok(n) = socket.read(&mut chunk).await {
                    request.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                let body = serde_json::json!({
                    "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:fines-key-AbCdEf",
                    "Name": "fines-key",
                    "SecretString": text,
                    "VersionId": "v1",
                    "VersionStages": ["AWSCURRENT"],
                })
                .to_string();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        format!("http://{addr}")
    }

    /// Issue 42: the correlation key is read at init from the Secrets Manager secret
    /// `FINES_CORRELATION_KEY_ARN` names, never from a plain variable in the function's
    /// configuration: the key itself (`FINES_CORRELATION_KEY`, local use) beside the ARN is
    /// refused, and so is a secret that cannot be read or is too short.
    #[tokio::test]
    async fn fines_correlation_key_is_read_from_secrets_manager_by_arn() {
        let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:fines-key-AbCdEf";
        let env = |pairs: &[(&str, &str)]| {
            let env = Env::from_pairs(VARS);
            let env = pairs.iter().fold(env, |env, (k, v)| env.with(k, *v));
            Dedup::read(&env, FUNCTION).expect("settings")
        };
        let manager = secrets_manager("key-from-secrets-manager-2026\n").await;
        let key = correlation_key(&env(&[(KEY_ARN_VAR, arn)]), || secrets_at(&manager))
            .await
            .expect("read by ARN");
        assert_eq!(key.0, b"key-from-secrets-manager-2026");

        let both = env(&[(KEY_ARN_VAR, arn), (KEY_VAR, "local-correlation-secret")]);
        assert!(matches!(
            correlation_key(&both, || secrets_at(&manager)).await,
            Err(SettingsError::Refused {
                var: KEY_ARN_VAR,
                rule: SettingRule::BothSet { other: KEY_VAR, .. }
            })
        ));
        let unreachable = correlation_key(&env(&[(KEY_ARN_VAR, arn)]), || {
            secrets_at("http://127.0.0.1:9")
        })
        .await;
        assert!(
            matches!(
                unreachable,
                Err(SettingsError::Secret {
                    var: KEY_ARN_VAR,
                    ..
                })
            ),
            "{:?}",
            unreachable.err()
        );
        let short = secrets_manager("short").await;
        let refused = correlation_key(&env(&[(KEY_ARN_VAR, arn)]), || secrets_at(&short)).await;
        assert!(
            matches!(
                refused,
                Err(SettingsError::Refused {
                    var: KEY_ARN_VAR,
                    rule: SettingRule::BelowMinimum { .. }
                })
            ),
            "{:?}",
            refused.err()
        );
        let none = correlation_key(&env(&[]), || secrets_at(&manager)).await;
        assert!(
            none.is_err_and(|e| e.to_string().contains(KEY_ARN_VAR)),
            "neither set"
        );
    }

    async fn notices() -> Notices {
        notices_with(&[]).await.expect("settings")
    }

    async fn handle(
        notices: &Notices,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<lambda_dedup_runtime::events::SqsBatchResponse, Error> {
        notices.service.clone().oneshot(event).await
    }

    /// The function's own variables are required, and the correlation key must be long enough
    /// (S3: a short key makes the HMAC of a plate guessable).
    #[tokio::test]
    async fn its_own_variables_are_required_and_checked() {
        for name in [
            "FINES_TABLE",
            "INTENTS_TABLE",
            "FINE_REVIEWS_TABLE",
            "FINES_CORRELATION_KEY",
        ] {
            let Err(err) = notices_with(&[(name, "")]).await else {
                panic!("started without {name}");
            };
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
        let Err(err) = notices_with(&[("FINES_CORRELATION_KEY", "short")]).await else {
            panic!("a 5-byte correlation key accepted");
        };
        assert!(err.to_string().contains("16 bytes"), "{err}");
    }

    fn record(
        message_id: &str,
        body: serde_json::Value,
    ) -> lambda_dedup_runtime::events::SqsMessage {
        let mut m = lambda_dedup_runtime::events::SqsMessage::default();
        m.message_id = Some(message_id.into());
        m.body = Some(body.to_string());
        m
    }

    /// Two providers report one fine (the fines article): two events, both recorded, and the
    /// second flagged for review in its own transaction — the correlation item names both
    /// notices and the fields that matched, and the batch counts one `FlaggedForReview`. A
    /// redelivery of a notice is a transport duplicate and changes nothing.
    #[tokio::test]
    async fn business_duplicates_are_recorded_and_flagged_never_suppressed() {
        let notices = notices().await;
        let notice = |source: &str, id: &str, number: &str, plate: &str, at: &str, place: &str| {
            serde_json::json!({"specversion": "1.0", "type": "fine.notice", "source": source,
                "id": id, "tenantid": "dgt", "data": {"notice_number": number, "plate": plate,
                "offence": "speeding", "issued_at": at, "amount_cents": 10000, "place": place}})
        };
        let a = notice(
            "/provider-a",
            "a-1",
            "A-77",
            "1234-ABC",
            "2026-11-01T10:00:00Z",
            "Calle Mayor 3",
        );
        let b = notice(
            "/provider-b",
            "b-9",
            "B-12",
            "1234 abc",
            "2026-11-01T11:00:00+01:00",
            "calle  mayor 3",
        );
        let run = |records: Vec<lambda_dedup_runtime::events::SqsMessage>| {
            let notices = &notices;
            async move {
                let mut e = SqsEvent::default();
                e.records = records;
                handle(
                    notices,
                    LambdaEvent::new(e, lambda_runtime::Context::default()),
                )
                .await
                .expect("handled")
            }
        };
        assert!(
            run(vec![record("m1", a.clone())])
                .await
                .batch_item_failures
                .is_empty()
        );
        assert!(
            run(vec![record("m2", b.clone()), record("m3", a)])
                .await
                .batch_item_failures
                .is_empty()
        );
        let fines = notices.items_where(&notices.tables.fines, "offence", "speeding");
        assert_eq!(fines.len(), 2, "both notices recorded");
        let reviews = notices.items_where(
            &notices.tables.reviews,
            "matched_fields",
            notice::MATCHED_FIELDS,
        );
        assert_eq!(reviews.len(), 1, "one real-world fine");
        let review = &reviews[0];
        assert_eq!(number(review, "notices"), Some(2), "{review:?}");
        let named: std::collections::BTreeSet<&str> = ["first_notice", "last_notice"]
            .iter()
            .filter_map(|k| text(review, k))
            .collect();
        let ids: std::collections::BTreeSet<&str> =
            fines.iter().filter_map(|f| text(f, "fine_id")).collect();
        assert_eq!(named, ids, "the review names both notices");
        assert!(
            !format!("{review:?}").contains("1234"),
            "no plate in the review"
        );
        // The count after a batch: the second notice is flagged.
        let dedup = notice::configure(Dedup::read(&notices.env, FUNCTION).expect("settings"));
        let spec = lambda_dedup_runtime::testing::key_spec(&dedup);
        let key = spec
            .derive(&lambda_dedup_runtime::testing::sqs_message(&record(
                "m4",
                b.clone(),
            )))
            .expect("key")
            .key;
        let applied = Event {
            payload: lambda_dedup_runtime::parse(&b["data"]).expect("a notice"),
            tenant: "dgt".into(),
            key,
            time: None,
            provenance: lambda_dedup_runtime::Provenance::Payload,
        };
        assert_eq!(
            count_flagged(&notices.tables, &notices.store, &[applied]).await,
            1
        );
    }

    /// The handler, called as Lambda calls it, on the sample notice, twice: one fine and one
    /// pending collection intent, written once (S5, S7, S8); nothing reported failed.
    #[tokio::test]
    async fn the_handler_writes_the_fine_and_its_intent_once() {
        let notices = notices().await;
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../events/fine-notice.json");
        let sample: SqsEvent = lambda_dedup_runtime::testing::read_json(path);
        for _ in 0..2 {
            let answer = handle(
                &notices,
                LambdaEvent::new(sample.clone(), lambda_runtime::Context::default()),
            )
            .await
            .expect("handled");
            assert!(answer.batch_item_failures.is_empty());
            let fines = notices
                .items_where(&notices.tables.fines, "notice_number", "N-1")
                .len();
            let intents = notices
                .items_where(&notices.tables.intents, "status", "PENDING")
                .len();
            assert_eq!(fines, 1, "one fine");
            assert_eq!(intents, 1, "one pending intent");
        }
    }
}
