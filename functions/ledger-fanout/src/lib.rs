//! `ledger-fanout`: the ledger behind an SNS topic. The topic's SQS subscription delivers
//! without raw message delivery, so each SQS body is SNS's envelope and the ledger's
//! CloudEvent is its `Message` string; [`service`] opens it ([`Envelope::Sns`]) and then runs
//! exactly `ledger-projector`'s work: the same rule, key spec and one transaction per batch
//! (S5). Its own crate, not a setting of `ledger-projector`: the envelope is a fact of the
//! wiring (which resource feeds the queue), the consumer name and the EMF `Function` are this
//! crate's [`FUNCTION`], and the local stack, packaging and least-privilege proof key a
//! function by its crate.

use lambda_dedup_runtime::{Dedup, Envelope, SqsService};

/// The function's name: the consumer of its keys and the `Function` of its metrics.
pub const FUNCTION: &str = "ledger-fanout";

/// The envelope each SQS body is in: the topic's subscription keeps SNS's (no raw delivery).
/// The template declares it too (`Metadata.LambdaDedupEnvelope`), so that `cargo xtask
/// check-infra` refuses a subscription that would deliver otherwise.
pub const ENVELOPE: Envelope = Envelope::Sns;

/// `ledger-fanout` as `main` runs it: `ledger-projector`'s service behind the SNS envelope
/// (a body that is not an SNS notification is rejected, `envelope_malformed`, dead-lettered).
pub fn service(dedup: Dedup) -> Result<SqsService, lambda_runtime::Error> {
    ledger_projector::service(dedup.envelope(ENVELOPE))
}

/// The key configuration: the ledger's own ([`ledger_projector::ledger::configure`]), read
/// inside the envelope.
pub fn configure<S>(dedup: Dedup<S>) -> Dedup<S> {
    ledger_projector::ledger::configure(dedup)
}

#[cfg(test)]
mod tests {
    //! The service on the in-memory store, built by [`service`] as `main` builds it, fed SQS
    //! events whose bodies are SNS notifications in the shape AWS publishes
    //! (`events/example-sns-event.json`'s `Sns` object, `events/example-sqs-event-obj.json`'s
    //! record).

    use super::*;
    use lambda_dedup::Value;
    use lambda_dedup_cli::template::{Flow, function_entry};
    use lambda_dedup_engine::Outcome;
    use lambda_dedup_runtime::events::SqsEvent;
    use lambda_dedup_runtime::testing::{
        OnMemory, assert_declared_key_spec, attribute, function_on_memory, with_outcomes,
    };
    use lambda_dedup_runtime::{Env, SqsService};
    use serde_json::json;

    fn fanout() -> OnMemory<SqsService> {
        let env = Env::from_pairs([
            ("DEDUP_NAMESPACE", "test"),
            ("DEDUP_MARK_TABLE", "marks"),
            ("BALANCES_TABLE", "balances"),
            // One at a time: a republish meets its first publish as a duplicate, not a race.
            ("DEDUP_MAX_CONCURRENCY", "1"),
        ]);
        let f = function_on_memory(&env, FUNCTION, configure, service).expect("settings");
        f.store.create_table("balances", "account");
        f
    }

    fn sample(name: &str) -> serde_json::Value {
        let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
        lambda_dedup_runtime::testing::read_json(path)
    }

    /// AWS's SNS notification with `message` as its `Message` and `sns_id` as its `MessageId`.
    fn notification(sns_id: &str, message: &str) -> String {
        let mut sns = sample("example-sns-event.json")["Records"][0]["Sns"].clone();
        sns["MessageId"] = sns_id.into();
        sns["Message"] = message.into();
        sns.to_string()
    }

    /// An SQS event of AWS's record shape, one record per `(messageId, body)`.
    fn sqs_event(bodies: &[(&str, String)]) -> SqsEvent {
        let record = sample("example-sqs-event-obj.json")["Records"][0].clone();
        let records: Vec<_> = bodies
            .iter()
            .map(|(id, body)| {
                let mut r = record.clone();
                r["messageId"] = (*id).into();
                r["body"] = body.clone().into();
                r
            })
            .collect();
        serde_json::from_value(json!({ "Records": records })).expect("an SQS event")
    }

    fn credit(id: &str, account: &str, amount: i64) -> String {
        json!({"specversion": "1.0", "type": "credit", "source": "/core-banking", "id": id,
               "tenantid": "bank-a", "data": {"account": account, "amount": amount}})
        .to_string()
    }

    fn balance(f: &OnMemory<SqsService>, account: &str) -> Option<i64> {
        let key = lambda_dedup::tenant_scoped("bank-a", account);
        match attribute(&f.store, "balances", ("account", &key), "balance")? {
            Value::N(n) => n.parse().ok(),
            _ => None,
        }
    }

    fn labels(outcomes: &[(String, Outcome)]) -> Vec<(String, &'static str)> {
        outcomes
            .iter()
            .map(|(id, o)| {
                let label = match o {
                    Outcome::Rejected { code, .. } => code.code(),
                    other => other.label(),
                };
                (id.clone(), label)
            })
            .collect()
    }

    /// S1, S5, S8, S2, S12: the ledger's event inside SNS's envelope is applied once; the
    /// producer's republish (a new SNS `MessageId`, a new SQS `messageId`) is a duplicate, since
    /// the identity is the CloudEvent's inside the `Message`; a `Message` that is not JSON, one
    /// without the CloudEvent `id`, and a body with no envelope at all (a raw CloudEvent) are
    /// rejected, each with its code, and reported failed for the DLQ.
    #[tokio::test]
    async fn the_envelope_is_opened_a_republish_is_a_duplicate_and_bad_input_dead_lettered() {
        let f = fanout();
        let no_id = json!({"specversion": "1.0", "type": "credit", "source": "/core-banking",
                           "tenantid": "bank-a", "data": {"account": "c-1", "amount": 1}});
        let event = sqs_event(&[
            ("q-1", notification("sns-1", &credit("evt-1", "c-1", 10))),
            ("q-2", notification("sns-2", &credit("evt-1", "c-1", 10))),
            ("q-3", notification("sns-3", "Hello, alice@example.com")),
            ("q-4", notification("sns-4", &no_id.to_string())),
            ("q-5", credit("evt-2", "c-1", 5)),
        ]);
        let (answer, outcomes) = with_outcomes(f.service.call_with(event)).await;
        let mut failed = lambda_dedup_runtime::testing::failed_ids(answer.expect("answered"));
        failed.sort();
        assert_eq!(failed, ["q-3", "q-4", "q-5"]);
        let mut got = labels(&outcomes);
        got.sort();
        assert_eq!(
            got,
            [
                ("q-1".to_owned(), "applied"),
                ("q-2".to_owned(), "duplicate"),
                ("q-3".to_owned(), "body_not_json"),
                ("q-4".to_owned(), "identity_missing"),
                ("q-5".to_owned(), "envelope_malformed"),
            ]
        );
        assert_eq!(balance(&f, "c-1"), Some(10), "credited once");
    }

    /// S1: the fanout's keys are its own consumer's: the same event reaching `ledger-projector`
    /// directly is another consumer's handling, never taken for this one's.
    #[test]
    fn its_keys_are_its_own_consumers() {
        let f = fanout();
        assert_eq!(f.key_spec.scope().consumer(), FUNCTION);
    }

    /// The template declares the envelope this code opens (`Metadata.LambdaDedupEnvelope`,
    /// which check-infra matches with the subscription's raw delivery).
    #[test]
    fn the_template_declares_the_envelope_this_code_opens() {
        let t = lambda_dedup_cli::template::parse(include_str!("../../../infra/template.yaml"))
            .expect("the template");
        let resources = t["Resources"].as_object().expect("resources");
        let this = resources
            .values()
            .find(|r| {
                r["Properties"]["CodeUri"]
                    .as_str()
                    .is_some_and(|u| u.ends_with(&format!("/{FUNCTION}")))
            })
            .expect("the function's resource");
        let declared = match ENVELOPE {
            Envelope::Sns => "sns",
            Envelope::EventBridge => "eventbridge",
            other => panic!("no template name for {other:?}"),
        };
        assert_eq!(this["Metadata"]["LambdaDedupEnvelope"], declared);
    }

    /// The template declares this function's key spec and flow for the operators' tool: the
    /// ones this code declares.
    #[test]
    fn the_template_declares_this_functions_key_spec_and_flow() {
        let template = include_str!("../../../infra/template.yaml");
        let entry = function_entry(template, Some(FUNCTION)).expect("the function's entry");
        assert_declared_key_spec(entry.key_spec.as_deref(), FUNCTION, configure);
        assert_eq!(entry.flow, Some(Flow::Transactional));
    }
}
