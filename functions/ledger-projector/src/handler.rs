//! The handler: `ledger-projector`'s service (the library's [`service`]), and its tests on the
//! in-memory store.

pub(crate) use ledger_projector::{FUNCTION, service};

#[cfg(test)]
mod tests {
    //! The service on the in-memory store, built by `service` — the wiring `main` runs — so
    //! every setting a test sets is read as the function reads it.

    use super::*;
    use lambda_dedup_runtime::{Dedup, SqsService};
    use ledger_projector::ledger;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use lambda_dedup::{MarkStore, Value};
    use lambda_dedup_memory::MemoryStore;
    use lambda_dedup_runtime::Env;
    /// The ledger as `main` builds it, with `vars` on top of its required variables.
    use lambda_dedup_runtime::events::SqsEvent;
    use lambda_dedup_runtime::testing::{OnMemory, attribute, function_on_memory};
    use lambda_runtime::LambdaEvent;
    use lambda_runtime::tower::ServiceExt;

    /// The function as `main` wires it, with `vars` over the usual settings, on the in-memory
    /// store built from its own settings (retention, lease).
    type Ledger = OnMemory<SqsService>;

    fn env() -> Env {
        Env::from_pairs([
            ("DEDUP_NAMESPACE", "test"),
            ("DEDUP_MARK_TABLE", "marks"),
            ("BALANCES_TABLE", "balances"),
        ])
    }

    fn ledger_with(vars: &[(&str, &str)]) -> Ledger {
        let env = vars.iter().fold(env(), |env, (k, v)| env.with(k, *v));
        let ledger =
            function_on_memory(&env, FUNCTION, ledger::configure, service).expect("settings");
        ledger.store.create_table("balances", "account");
        ledger
    }

    fn ledger() -> Ledger {
        ledger_with(&[])
    }

    async fn failed(ledger: &Ledger, event: SqsEvent) -> Vec<String> {
        let event = LambdaEvent::new(event, lambda_runtime::Context::default());
        let answer = ledger
            .service
            .clone()
            .oneshot(event)
            .await
            .expect("handled");
        lambda_dedup_runtime::testing::failed_ids(answer)
    }

    /// The balance the sample event credits.
    fn sample_balance(ledger: &Ledger) -> Option<i64> {
        balance(ledger, "bank-a", "credito-17")
    }

    fn sample() -> SqsEvent {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../events/ledger-credit.json"
        );
        lambda_dedup_runtime::testing::read_json(path)
    }

    /// The handler, called as Lambda calls it, on the sample batch (a credit, its duplicate,
    /// a debit): the balance moves once per event, within the tenant (S1, S5, S8), and the
    /// same batch again moves nothing; no message is reported failed either time.
    #[tokio::test]
    async fn the_handler_applies_each_event_once() {
        let ledger = ledger();
        for _ in 0..2 {
            assert!(failed(&ledger, sample()).await.is_empty());
            assert_eq!(
                sample_balance(&ledger),
                Some(7),
                "10 credited once, 3 debited once"
            );
        }
    }

    /// A malformed message is reported failed (for the DLQ); the rest of the batch is applied.
    #[tokio::test]
    async fn a_malformed_message_is_reported_and_the_rest_applied() {
        let ledger = ledger();
        let mut event = sample();
        event.records[1].body = Some("{not json".into());
        assert_eq!(failed(&ledger, event).await, ["m-2"]);
        assert_eq!(sample_balance(&ledger), Some(7));
    }

    /// The sample with every record's body passed through `edit`.
    fn sample_with(edit: impl Fn(serde_json::Value) -> serde_json::Value) -> SqsEvent {
        let mut event = sample();
        for r in &mut event.records {
            let body: serde_json::Value =
                serde_json::from_str(r.body.as_deref().expect("body")).expect("json");
            r.body = Some(edit(body).to_string());
        }
        event
    }

    /// S12, S14: SQS delivers at least once, and two receipts of one message (the same
    /// `messageId`) can meet in one batch. They are one message: applied once, acknowledged
    /// (not failed as an internal error), and counted once.
    #[tokio::test]
    async fn s12_two_receipts_of_one_message_in_a_batch_are_one_message() {
        let ledger = ledger();
        let mut event = sample();
        let again = event.records[0].clone();
        event.records.push(again);
        assert_eq!(event.records.len(), 4);
        assert!(
            failed(&ledger, event).await.is_empty(),
            "nothing to redeliver"
        );
        assert_eq!(sample_balance(&ledger), Some(7));
    }

    /// `DEDUP_EVENT_TIME_FROM` (S10): a producer that stamps its events at its own field has
    /// that time read, so an event older than the retention is never applied (its mark may be
    /// gone) but reported for reconciliation; without the setting the same event is applied.
    #[tokio::test]
    async fn s10_the_event_time_setting_judges_late_events_by_the_producers_field() {
        let sixty_days_ago = SystemTime::now() - Duration::from_secs(60 * 86_400);
        let secs = sixty_days_ago
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        let stamped = || {
            sample_with(|mut b| {
                b["data"]["booked_at"] = secs.into();
                b
            })
        };
        let late = ledger_with(&[
            ("DEDUP_EVENT_TIME_FROM", "json:/data/booked_at"),
            ("DEDUP_EVENT_TIME_FORMAT", "epoch-seconds"),
        ]);
        assert_eq!(
            failed(&late, stamped()).await,
            ["m-1", "m-2", "m-3"],
            "late: not applied; without a reconciliation queue, for the DLQ"
        );
        assert_eq!(sample_balance(&late), None);

        let unset = ledger_with(&[]);
        assert!(failed(&unset, stamped()).await.is_empty());
        assert_eq!(sample_balance(&unset), Some(7));

        // `none`: a CloudEvents producer's own `time` is not read either.
        let none = ledger_with(&[("DEDUP_EVENT_TIME_FROM", "none")]);
        let old = chrono::DateTime::from_timestamp(secs as i64, 0)
            .expect("time")
            .to_rfc3339();
        let ce_stamped = sample_with(|mut b| {
            b["time"] = old.clone().into();
            b
        });
        assert!(failed(&none, ce_stamped.clone()).await.is_empty());
        assert_eq!(sample_balance(&none), Some(7));
        let default = ledger_with(&[]);
        assert_eq!(
            failed(&default, ce_stamped).await.len(),
            3,
            "CloudEvents `time` by default"
        );
    }

    /// `DEDUP_RETENTION_SECONDS` (S9): the mark's TTL is the retention from now.
    #[tokio::test]
    async fn s9_the_retention_setting_is_the_marks_ttl() {
        let ledger = ledger_with(&[("DEDUP_RETENTION_SECONDS", "3000000")]);
        assert!(failed(&ledger, sample()).await.is_empty());
        let marks = &ledger.store;
        let msg = lambda_dedup_runtime::testing::sqs_message(&sample().records[0]);
        let key = ledger.key_spec.derive(&msg).expect("key").key;
        let mark = marks.get(&key).await.expect("get").expect("a mark");
        let ttl = mark
            .expires_at
            .duration_since(SystemTime::now())
            .expect("in the future");
        assert!(
            (Duration::from_secs(2_999_000)..=Duration::from_secs(3_000_001)).contains(&ttl),
            "{ttl:?}"
        );
        assert_eq!(sample_balance(&ledger), Some(7));
    }

    /// S9: every term of the redelivery horizon is read: raising any one of them past what the
    /// default 30-day retention covers makes the function refuse to start, naming the horizon.
    #[tokio::test]
    async fn s9_each_horizon_setting_can_refuse_the_retention() {
        for (name, value) in [
            ("DEDUP_QUEUE_RETENTION_SECONDS", "1209600"),
            ("DEDUP_MAX_RECEIVE_COUNT", "10000"),
            ("DEDUP_VISIBILITY_TIMEOUT_SECONDS", "100000"),
            ("DEDUP_DLQ_RETENTION_SECONDS", "2000000"),
            ("DEDUP_REPLAY_WINDOW_SECONDS", "1500000"),
        ] {
            let env = env();
            let memory = || {
                MemoryStore::new(
                    lambda_dedup::Retention::unchecked(Duration::from_secs(1)).expect("r"),
                )
            };
            let build = |env: &Env| {
                let dedup = Dedup::read(env, FUNCTION)?;
                service(dedup.on(lambda_dedup_runtime::store::Items::new(memory())))
            };
            assert!(build(&env).is_ok());
            let Err(err) = build(&env.with(name, value)) else {
                panic!("{name}={value} accepted");
            };
            assert!(
                err.to_string().contains("redelivery horizon"),
                "{name}: {err}"
            );
        }
    }

    /// `tenant`'s balance of `account`, if it has one.
    fn balance(ledger: &Ledger, tenant: &str, account: &str) -> Option<i64> {
        let account = lambda_dedup::tenant_scoped(tenant, account);
        match attribute(&ledger.store, "balances", ("account", &account), "balance")? {
            Value::N(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// One SQS record as Lambda sends it: a credit of `amount` to `credito-17` of `tenant`,
    /// CloudEvents `source` `/core-banking` and `id`, with the inbox forwarder's
    /// `dedup-verified-sender` attribute when `sender` is given (a webhook's event).
    fn credit(
        message_id: &str,
        id: &str,
        tenant: &str,
        amount: i64,
        sender: Option<&str>,
    ) -> SqsEvent {
        let body = serde_json::json!({"specversion": "1.0", "type": "credit",
            "source": "/core-banking", "id": id, "tenantid": tenant,
            "data": {"account": "credito-17", "amount": amount}});
        let attributes = match sender {
            Some(s) => serde_json::json!({"dedup-verified-sender": {"stringValue": s,
                "stringListValues": [], "binaryListValues": [], "dataType": "String"}}),
            None => serde_json::json!({}),
        };
        serde_json::from_value(serde_json::json!({"Records": [{
            "messageId": message_id, "receiptHandle": "local", "body": body.to_string(),
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1796000000000",
                "SenderId": "local", "ApproximateFirstReceiveTimestamp": "1796000000000"},
            "messageAttributes": attributes, "md5OfBody": "", "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:ledger-projector",
            "awsRegion": "us-east-1"}]}))
        .expect("an SQS event")
    }

    /// Issue 42 (high): a validly signed webhook from sender `bank-b`, forwarded from the inbox
    /// with its verified sender, names tenant `bank-a` in its body: refused for good (reported,
    /// for the DLQ), no balance of either tenant moves, and its redelivery is refused again. The
    /// same sender naming itself is applied to its own balance.
    #[tokio::test]
    async fn a_verified_senders_event_naming_another_tenant_moves_no_balance() {
        let ledger = ledger();
        for _ in 0..2 {
            let forged = credit("w-1", "evt-9", "bank-a", 10, Some("bank-b"));
            assert_eq!(failed(&ledger, forged).await, ["w-1"]);
            assert_eq!(balance(&ledger, "bank-a", "credito-17"), None);
            assert_eq!(balance(&ledger, "bank-b", "credito-17"), None);
        }
        let own = credit("w-2", "evt-9", "bank-b", 10, Some("bank-b"));
        assert!(failed(&ledger, own).await.is_empty());
        assert_eq!(balance(&ledger, "bank-b", "credito-17"), Some(10));
        assert_eq!(balance(&ledger, "bank-a", "credito-17"), None);
    }

    /// Issue 42 (high): a webhook's event reusing the `source` + `id` of an internal producer's
    /// coming event (same tenant: the sender's own) is keyed in the sender's own key space, so
    /// the internal event is neither dropped as its duplicate nor dead-lettered as its conflict:
    /// both are applied, each once.
    #[tokio::test]
    async fn a_webhook_event_reusing_an_internal_id_does_not_shadow_it() {
        let ledger = ledger();
        let webhook = || credit("w-1", "evt-1", "bank-a", 5, Some("bank-a"));
        let internal = || credit("m-1", "evt-1", "bank-a", 10, None);
        assert!(failed(&ledger, webhook()).await.is_empty());
        assert!(
            failed(&ledger, internal()).await.is_empty(),
            "not a conflict"
        );
        assert_eq!(
            balance(&ledger, "bank-a", "credito-17"),
            Some(15),
            "both applied"
        );
        // Redeliveries of either stay duplicates of their own.
        assert!(failed(&ledger, webhook()).await.is_empty());
        assert!(failed(&ledger, internal()).await.is_empty());
        assert_eq!(balance(&ledger, "bank-a", "credito-17"), Some(15));
    }

    /// `BALANCES_TABLE` is required, and it is where the balances go.
    #[tokio::test]
    async fn the_balances_table_setting_is_required() {
        let env = Env::from_pairs([("DEDUP_NAMESPACE", "test"), ("DEDUP_MARK_TABLE", "marks")]);
        let dedup = Dedup::read(&env, FUNCTION).expect("settings");
        let Err(err) = service(lambda_dedup_runtime::testing::on_memory(dedup).0) else {
            panic!("started without BALANCES_TABLE");
        };
        assert!(err.to_string().contains("BALANCES_TABLE"), "{err}");
    }
}
