//! "A fault belongs to its own request" (S12, S15): one message whose writes DynamoDB refuses,
//! whose plan panics, or whose size would break a shared transaction fails alone, in
//! batch-transaction mode and per-message mode alike; the rest of the batch is applied on its
//! first delivery, and the account closes (S14).
//!
//! Each of these tests failed on the code before the isolation change: batch mode failed every
//! request of a round at the first permanent cancellation reason or top-level refusal (so nothing
//! was applied), per-message mode mapped a refused effect to a retry (never dead-lettered), a
//! round holding more than 4 MB was refused whole, and a panicking plan unwound out of
//! `run_batch_transactional`.

use aws_sdk_dynamodb::types::AttributeValue;
use dedup_tests::{
    Metered, balance, client, cloudevents_spec, credit, credit_data, credit_effect, credit_plan,
    effect_table, get_item, mark_table, retention, unique,
};
use lambda_dedup::{Effect, Item, Message};
use lambda_dedup_dynamodb::DynamoStore;
use lambda_dedup_engine::{
    BatchReport, Deduplicator, HandlerError, Outcome, Plan, run_batch, run_batch_transactional,
};

const CONSUMER: &str = "isolation";

struct Setup {
    client: aws_sdk_dynamodb::Client,
    balances: String,
    marks: String,
    dedup: Deduplicator,
    /// Counts the store's requests.
    meter: Metered,
}

async fn setup() -> Setup {
    let client = client();
    let balances = effect_table(&client, "account").await;
    let marks = mark_table(&client).await;
    let meter = Metered::start();
    let store = DynamoStore::new(meter.client(), marks.clone(), retention());
    let dedup = Deduplicator::new(cloudevents_spec(CONSUMER), store);
    Setup {
        client,
        balances,
        marks,
        dedup,
        meter,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `run_batch_transactional`: the batch shares transactions.
    Batch,
    /// `run_batch` with `Deduplicator::transactional`: one transaction per message.
    PerMessage,
}

impl Setup {
    async fn run<F>(&self, mode: Mode, batch: Vec<Message>, plan: F) -> BatchReport
    where
        F: Fn(&lambda_dedup::Derived) -> Result<Plan, HandlerError>,
    {
        match mode {
            Mode::Batch => run_batch_transactional(batch, 10, &self.dedup, plan).await,
            Mode::PerMessage => {
                let plan = &plan;
                run_batch(batch, 4, |m| async move {
                    self.dedup.transactional(&m, plan).await
                })
                .await
            }
        }
    }

    /// Whether `msg`'s mark is in the table, read with the SDK (not the library).
    async fn has_mark(&self, msg: &Message) -> bool {
        let key = cloudevents_spec(CONSUMER)
            .derive(msg)
            .expect("a key")
            .key
            .as_str()
            .to_owned();
        get_item(&self.client, &self.marks, "pk", &key)
            .await
            .is_some()
    }

    /// Asserts that `culprit` alone failed in `report`: the `applied` others were applied and the
    /// account closes; the culprit was rejected as an effect DynamoDB refused, with a reason that
    /// quotes none of `secrets` (S3), and left no mark. `why` names the case in the messages.
    async fn assert_refused_alone(
        &self,
        report: &BatchReport,
        applied: u64,
        culprit: &Message,
        secrets: &[&str],
        why: &str,
    ) {
        assert_eq!(
            report.account.applied,
            applied,
            "{why}: {:?}",
            labels(report)
        );
        assert!(report.account.closes(), "{why}");
        assert_eq!(report.failures(), [culprit.message_id.as_str()], "{why}");
        assert_effect_refused(report, &culprit.message_id, secrets);
        assert!(
            !self.has_mark(culprit).await,
            "{why}: no mark for the culprit"
        );
    }
}

fn labels(report: &BatchReport) -> Vec<&'static str> {
    report.outcomes().iter().map(|(_, o)| o.label()).collect()
}

/// The outcome of message `id` in `report`.
fn outcome<'a>(report: &'a BatchReport, id: &str) -> &'a Outcome {
    &report
        .outcomes()
        .iter()
        .find(|(m, _)| m == id)
        .expect("an outcome per message")
        .1
}

/// Asserts `id` was rejected as an effect DynamoDB refused, with a reason that quotes nothing
/// of the payload or the stored item (S3); returns the reason.
fn assert_effect_refused(report: &BatchReport, id: &str, secrets: &[&str]) {
    match outcome(report, id) {
        Outcome::Rejected { code, reason, .. } => {
            assert_eq!(
                *code,
                lambda_dedup_engine::Reason::EffectRefused,
                "{reason}"
            );
            for s in secrets {
                assert!(!reason.contains(s), "the reason quotes {s:?}: {reason}");
            }
        }
        other => panic!("{id}: expected Rejected{{effect_refused}}, got {other:?}"),
    }
}

/// S12, S15: a batch of ten whose fifth credit ADDs to an attribute that holds a string: DynamoDB
/// names it with a `ValidationError` at its position. The nine others are applied on the first
/// delivery, in batch-transaction and per-message mode alike; the poison is rejected
/// (`effect_refused`, dead-lettered through the redrive policy), reported as the only batch item
/// failure, leaves no mark, and the account closes.
///
/// Before the change: batch mode failed all ten (retry); per-message mode retried the poison
/// instead of rejecting it.
#[tokio::test]
async fn s12_s15_a_permanently_refused_effect_fails_only_its_own_message() {
    for mode in [Mode::Batch, Mode::PerMessage] {
        let s = setup().await;
        let run = unique("poison");
        let poison_account = format!("{run}-poison");
        s.client
            .put_item()
            .table_name(&s.balances)
            .item("account", AttributeValue::S(poison_account.clone()))
            .item("balance", AttributeValue::S("not-a-number-secret".into()))
            .send()
            .await
            .expect("seed the poison's account");
        let batch: Vec<Message> = (0..10)
            .map(|i| {
                let account = if i == 4 {
                    poison_account.clone()
                } else {
                    format!("{run}-a{i}")
                };
                credit(&format!("m{i}"), &format!("{run}-e{i}"), &account, 1 + i)
            })
            .collect();
        let report = s.run(mode, batch.clone(), credit_plan(&s.balances)).await;
        let secrets = ["not-a-number-secret", &poison_account];
        let why = format!("{mode:?}, the poison");
        s.assert_refused_alone(&report, 9, &batch[4], &secrets, &why)
            .await;
        assert_eq!(report.account.rejected, 1, "{mode:?}");
        for (i, msg) in batch.iter().enumerate().filter(|(i, _)| *i != 4) {
            assert_eq!(
                balance(&s.client, &s.balances, &format!("{run}-a{i}")).await,
                Some(1 + i as i64),
                "{mode:?}"
            );
            assert!(s.has_mark(msg).await, "{mode:?}: mark of m{i}");
        }
        let stored = get_item(&s.client, &s.balances, "account", &poison_account)
            .await
            .expect("the poison's item");
        assert_eq!(
            stored["balance"].as_s().ok().map(String::as_str),
            Some("not-a-number-secret"),
            "{mode:?}: the refused effect changed nothing"
        );
    }
}

/// S12, S15: a plan that writes a malformed update expression for one message makes DynamoDB
/// refuse the whole request with a top-level `ValidationException` that names no position. The
/// round is split until the culprit stands alone: the others are applied, the culprit is
/// rejected (`effect_refused`) and leaves no mark.
///
/// Before the change: batch mode failed all ten (retry); per-message mode retried the culprit.
#[tokio::test]
async fn s12_s15_a_refusal_naming_no_position_is_isolated() {
    // An amount of 13 makes a plan whose update expression does not parse.
    let plan = |balances: &str| {
        let balances = balances.to_owned();
        move |e: &lambda_dedup::Derived| {
            let (account, amount) = credit_data(e)?;
            let effect = if amount == 13 {
                Effect::update(&balances, Item::new().with("account", account))
                    .expression("ADD ADD #b :a ,,")
                    .name("#b", "balance")
                    .value(":a", amount)
            } else {
                credit_effect(&balances, account, amount)
            };
            Ok(Plan {
                effects: vec![effect],
                result: None,
            })
        }
    };
    for mode in [Mode::Batch, Mode::PerMessage] {
        let s = setup().await;
        let run = unique("malformed");
        let batch = ten_credits(&run, |i| if i == 7 { 13 } else { 1 + i });
        let report = s.run(mode, batch.clone(), plan(&s.balances)).await;
        let why = format!("{mode:?}");
        s.assert_refused_alone(&report, 9, &batch[7], &[&format!("{run}-a7")], &why)
            .await;
        assert_eq!(
            balance(&s.client, &s.balances, &format!("{run}-a7")).await,
            None
        );
        for i in (0..10).filter(|i| *i != 7) {
            assert_eq!(
                balance(&s.client, &s.balances, &format!("{run}-a{i}")).await,
                Some(1 + i),
                "{mode:?}"
            );
        }
    }
}

/// Ten credits of `run`, message `m{i}` (event `{run}-e{i}`) crediting `amount(i)` to account
/// `{run}-a{i}`.
fn ten_credits(run: &str, amount: impl Fn(i64) -> i64) -> Vec<Message> {
    (0..10)
        .map(|i| {
            credit(
                &format!("m{i}"),
                &format!("{run}-e{i}"),
                &format!("{run}-a{i}"),
                amount(i),
            )
        })
        .collect()
}

/// The plan of a "bulk" event: `count` items of `bytes` bytes each, keyed `<account>-<n>`, with
/// `count` and `bytes` read from the amount (`count * 1_000_000 + bytes`).
fn bulk_plan(table: &str) -> impl Fn(&lambda_dedup::Derived) -> Result<Plan, HandlerError> + '_ {
    move |e| {
        let (account, amount) = credit_data(e)?;
        let (count, bytes) = (amount / 1_000_000, (amount % 1_000_000) as usize);
        Ok(Plan {
            effects: (0..count)
                .map(|n| {
                    Effect::put(
                        table,
                        Item::new()
                            .with("account", format!("{account}-{n}"))
                            .with("blob", "x".repeat(bytes)),
                    )
                })
                .collect(),
            result: None,
        })
    }
}

/// S5, S12: rounds are bounded by bytes as well as items. Ten events whose two `Put`s carry
/// 300 KB each (6 MB together, over DynamoDB's 4 MB per transaction) are split into rounds
/// that fit, up front: all ten applied in a few calls, none failed. An eleventh event whose own
/// writes (twelve items of 380 KB) exceed 4 MB goes alone and fails alone (`effect_refused`).
///
/// Before the change: the 6 MB round was refused whole, and all eleven were retries.
#[tokio::test]
async fn s5_s12_rounds_are_bounded_by_bytes_and_an_oversized_event_fails_alone() {
    let s = setup().await;
    let run = unique("bytes");
    let mut batch = ten_credits(&run, |_| 2_000_000 + 300_000);
    let huge = format!("{run}-huge");
    batch.push(credit("huge", &huge, &huge, 12_000_000 + 380_000));
    let report = run_batch_transactional(batch.clone(), 10, &s.dedup, bulk_plan(&s.balances)).await;
    s.assert_refused_alone(&report, 10, &batch[10], &[&huge], "the oversized event")
        .await;
    assert!(
        get_item(&s.client, &s.balances, "account", &format!("{run}-huge-0"))
            .await
            .is_none()
    );
    // Two or three rounds of the ten (6 MB in rounds under 4 MB), plus the oversized one alone:
    // split by size up front, not by trial and error.
    assert!(
        s.meter.calls() <= 4,
        "rounds are cut by bytes before sending: {} calls",
        s.meter.calls()
    );
    for (i, msg) in batch.iter().enumerate().take(10) {
        for n in 0..2 {
            let item = get_item(
                &s.client,
                &s.balances,
                "account",
                &format!("{run}-a{i}-{n}"),
            )
            .await
            .expect("applied");
            assert_eq!(item["blob"].as_s().map(String::len).ok(), Some(300_000));
        }
        assert!(s.has_mark(msg).await, "mark of m{i}");
    }
}

/// S12, S13: a plan that panics for one message, in batch-transaction mode: the others are
/// applied, that one is a retry (redelivered, never acknowledged), and the account closes.
///
/// Before the change: the panic unwound out of `run_batch_transactional` and lost the batch.
#[tokio::test]
async fn s12_a_panicking_plan_fails_only_its_own_message_in_batch_mode() {
    let s = setup().await;
    let run = unique("panic");
    let batch = ten_credits(&run, |i| if i == 3 { 666 } else { 1 + i });
    let balances = s.balances.clone();
    let plan = move |e: &lambda_dedup::Derived| {
        let (account, amount) = credit_data(e)?;
        assert!(amount != 666, "a bug in one message's plan");
        Ok(Plan {
            effects: vec![credit_effect(&balances, account, amount)],
            result: None,
        })
    };
    let report = run_batch_transactional(batch.clone(), 10, &s.dedup, plan).await;
    assert_eq!(report.account.applied, 9, "{:?}", labels(&report));
    assert_eq!(report.account.retry, 1);
    assert!(report.account.closes());
    assert_eq!(report.failures(), ["m3"]);
    assert!(matches!(outcome(&report, "m3"), Outcome::Retry { .. }));
    assert!(!s.has_mark(&batch[3]).await);
    for i in (0..10).filter(|i| *i != 3) {
        assert_eq!(
            balance(&s.client, &s.balances, &format!("{run}-a{i}")).await,
            Some(1 + i)
        );
    }
}

/// S13, S15: a transient reason in a shared transaction (throttling) is no one request's fault:
/// every request of the round is a retryable error, even the one whose own position also holds
/// a permanent reason; nothing is refused on the strength of a throttled transaction. (A
/// regression guard: this held before the isolation change too, and must keep holding.)
#[tokio::test]
async fn s13_a_transient_reason_still_retries_the_whole_round() {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    use aws_smithy_mocks::{MockResponseInterceptor, RuleMode, create_mock_http_client, mock};

    let rule = mock!(aws_sdk_dynamodb::Client::transact_write_items)
        .sequence()
        .http_response(dedup_tests::cancelled(&[
            "None",
            "ValidationError",
            "None",
            "ThrottlingError",
        ]))
        .repeatedly()
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("a", "b", None, None, "isolation"))
            .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
            .http_client(create_mock_http_client())
            .interceptor(
                MockResponseInterceptor::new()
                    .rule_mode(RuleMode::MatchAny)
                    .with_rule(&rule),
            )
            .build(),
    );
    let store = DynamoStore::new(client, "marks", retention());
    let keys = ["a", "b"].map(|e| lambda_dedup::DedupKey::new(&dedup_tests::scope(), "t", &[e]));
    let effects = [
        credit_effect("balances", "x", 1),
        credit_effect("balances", "y", 1),
    ];
    let requests: Vec<lambda_dedup_dynamodb::CommitRequest<'_>> = keys
        .iter()
        .zip(&effects)
        .map(|(key, effect)| lambda_dedup_dynamodb::CommitRequest {
            key,
            fingerprint: None,
            result: None,
            effects: std::slice::from_ref(effect),
        })
        .collect();
    let results = store.commit_batch(&requests).await;
    assert_eq!(rule.num_calls(), 1);
    for r in results {
        let e = r.expect_err("a throttled round commits nothing");
        assert!(e.is_retryable(), "{e} must be retryable");
        assert_eq!(
            e.fault_kind(),
            Some(lambda_dedup_dynamodb::FaultKind::Throttled),
            "{e}"
        );
    }
}

/// S15: a mark that cannot be decoded (an operator's hand edit, a foreign writer) fails the same
/// way on every redelivery: its message is rejected as `mark_corrupt` (dead-lettered and
/// counted), not retried until the queue gives up, and its effect is not applied. The other
/// messages of the batch are not affected.
#[tokio::test]
async fn s15_a_corrupt_mark_is_rejected_not_retried() {
    let s = setup().await;
    let run = unique("corrupt");
    let bad = credit(&unique("m"), &format!("{run}-bad"), &format!("{run}-a"), 5);
    let good = credit(&unique("m"), &format!("{run}-good"), &format!("{run}-b"), 7);
    let key = cloudevents_spec(CONSUMER).derive(&bad).expect("key").key;
    let far = (std::time::SystemTime::now() + std::time::Duration::from_secs(3600))
        .duration_since(std::time::UNIX_EPOCH)
        .expect("epoch")
        .as_secs();
    s.client
        .put_item()
        .table_name(&s.marks)
        .item("pk", AttributeValue::S(key.as_str().into()))
        .item("status", AttributeValue::S("HALF_WRITTEN".into()))
        .item("expires_at", AttributeValue::N(far.to_string()))
        .send()
        .await
        .expect("a corrupt mark");
    let plan = credit_plan(&s.balances);
    let outcome = s.dedup.transactional(&bad, &plan).await;
    assert!(
        matches!(
            &outcome,
            Outcome::Rejected {
                code: lambda_dedup_engine::Reason::MarkCorrupt,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(s.dedup.transactional(&good, &plan).await, Outcome::Applied);
    assert_eq!(
        balance(&s.client, &s.balances, &format!("{run}-a")).await,
        None
    );
    assert_eq!(
        balance(&s.client, &s.balances, &format!("{run}-b")).await,
        Some(7)
    );
}
