//! The service: `fine-notices` as `main` builds it, callable directly (as its tests do).

use std::sync::Arc;

use lambda_dedup::ItemStore;
use lambda_dedup::items::{number, text};
use lambda_dedup_runtime::flow::transact;
use lambda_dedup_runtime::{Dedup, Event, SqsService};
use lambda_runtime::Error;

use crate::notice::{self, Notice, Tables};

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub(crate) const FUNCTION: &str = "fine-notices";

/// The function as `main` runs it: each notice's fine, intent and correlation item with its
/// mark in one transaction (S5, S7), the batch in as few transactions as possible, answered with
/// a partial batch response (S12); then the review count of the notices applied now. The
/// settings plus `FINES_TABLE`, `INTENTS_TABLE`, `FINE_REVIEWS_TABLE` and
/// `FINES_CORRELATION_KEY` (at least 16 bytes); the correlation items are read from `items`
/// (DynamoDB in Lambda, the memory store in the tests).
pub(crate) fn service(dedup: Dedup, items: impl ItemStore + 'static) -> Result<SqsService, Error> {
    let items: Arc<dyn ItemStore> = Arc::new(items);
    let tables = Arc::new(tables(&dedup)?);
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

/// The function's own variables, read from the same environment as its settings.
fn tables(dedup: &Dedup) -> Result<Tables, Error> {
    let secret = dedup.setting("FINES_CORRELATION_KEY")?;
    if secret.len() < 16 {
        return Err("FINES_CORRELATION_KEY must be at least 16 bytes".into());
    }
    Ok(Tables {
        fines: dedup.setting("FINES_TABLE")?,
        intents: dedup.setting("INTENTS_TABLE")?,
        reviews: dedup.setting("FINE_REVIEWS_TABLE")?,
        correlation_secret: secret.into_bytes(),
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

    use aws_lambda_events::event::sqs::SqsEvent;
    use lambda_dedup::Item;
    use lambda_dedup_memory::MemoryStore;
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

    /// The function as `main` builds it, with `vars` on top of its variables.
    async fn notices_with(vars: &[(&str, &str)]) -> Result<Notices, Error> {
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "test"),
            ("DEDUP_MARK_TABLE", "marks"),
            ("FINES_TABLE", "fines"),
            ("INTENTS_TABLE", "intents"),
            ("FINE_REVIEWS_TABLE", "reviews"),
            ("FINES_CORRELATION_KEY", "test-secret-of-16+"),
        ]);
        let env = vars.iter().fold(env, |env, (k, v)| env.with(k, *v));
        let (dedup, store) = on_memory(Dedup::read(&env, FUNCTION)?);
        for (table, key) in [
            ("fines", "fine_id"),
            ("intents", "intent_id"),
            ("reviews", "correlation"),
        ] {
            store.create_table(table, key);
        }
        let tables = tables(&dedup)?;
        let service = service(dedup, store.clone())?;
        Ok(Notices {
            service,
            env,
            tables,
            store,
        })
    }

    async fn notices() -> Notices {
        notices_with(&[]).await.expect("settings")
    }

    async fn handle(
        notices: &Notices,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<aws_lambda_events::event::sqs::SqsBatchResponse, Error> {
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
    ) -> aws_lambda_events::event::sqs::SqsMessage {
        let mut m = aws_lambda_events::event::sqs::SqsMessage::default();
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
        let run = |records: Vec<aws_lambda_events::event::sqs::SqsMessage>| {
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
        let spec =
            notice::configure(Dedup::read(&notices.env, FUNCTION).expect("settings")).key_spec();
        let key = spec
            .derive(&lambda_dedup_runtime::sqs::message(&record(
                "m4",
                b.clone(),
            )))
            .expect("key")
            .key;
        let applied = Event {
            payload: lambda_dedup_runtime::service::parse(&b["data"]).expect("a notice"),
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
        let sample: SqsEvent =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("event");
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
