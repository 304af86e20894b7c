//! The local stack, read from `infra/template.yaml` by `local_lambda::plan`: its tables, queues,
//! Kinesis streams, each function's event source mappings and environment. A change to the
//! template changes the local stack; what the local stack sets differently is the short list of
//! [`LOCAL_PARAMETERS`], [`LOCAL_QUEUE_SECS`] and [`LOCAL_ENV`] below, each with its reason,
//! and the endpoints, which only exist at run time. Local names are the template's logical ids.

use local_lambda::plan::{Local, Plan};
use serde_json::Value;

use crate::Result;

/// Template parameters the local stack gives other values than their defaults.
pub(crate) const LOCAL_PARAMETERS: [(&str, &str); 3] = [
    // The namespace of the local keys (the end-to-end tests derive keys in it).
    ("Namespace", "demo"),
    // A day of mark retention, so that an event two days old is late (S10) in a test; the
    // horizon variables below keep it above the local horizon (S9).
    ("RetentionSeconds", "86400"),
    ("ReplayWindowSeconds", "3600"),
];

/// The local time scale of every queue: a visibility timeout of 2 s, so that what is reported
/// failed comes back within a demo, and an hour's retention (DLQs too).
pub(crate) const LOCAL_QUEUE_SECS: (u64, u64) = (2, 3600);

/// Function variables the local stack sets differently (where the function has the variable;
/// `*` marks one every function gets): the horizon variables at the local queues' time scale
/// (S9 wants them equal to the queue's settings) and shorter waits. The secrets are in moto's
/// Secrets Manager, named by their ARN parameters ([`LOCAL_WEBHOOK_SECRETS`],
/// [`LOCAL_FINES_CORRELATION_KEY`]), as in AWS.
pub(crate) const LOCAL_ENV: [(&str, &str); 13] = [
    ("DEDUP_VISIBILITY_TIMEOUT_SECONDS", "2"),
    ("DEDUP_QUEUE_RETENTION_SECONDS", "3600"),
    ("DEDUP_DLQ_RETENTION_SECONDS", "3600"),
    ("DEDUP_REPLAY_WINDOW_SECONDS", "3600"),
    // A short lease, so a takeover of a crashed claim happens within a test.
    ("*DEDUP_LEASE_SECONDS", "4"),
    // Every function: the default (5 s) must stay under the short lease above.
    ("*PROVIDER_TIMEOUT_MS", "1000"),
    // An hour keeps the S16 guard within reach of a test (a takeover of a claim two hours old).
    ("PROVIDER_KEY_RETENTION_SECONDS", "3600"),
    // A smaller limit, so the demo's oversized body stays small.
    ("WEBHOOK_MAX_BODY_BYTES", "65536"),
    // cargo lambda watch's Function URL front signs nothing, so there is no IAM principal:
    // orders-api's callers name themselves in a header, as a trusted front would.
    ("HTTP_CALLER_FROM", "header:x-caller-id"),
    // Said openly: nothing verifies that header locally (check-infra refuses it in a template,
    // which has no such variable: so set in every function, and read by orders-api alone).
    ("*HTTP_CALLER_FRONT", "unverified"),
    // Warm caches ask the mark table again after 5 s, so a mark forgotten on purpose
    // (`lambda-dedup forget`) is seen gone within a test's patience.
    ("*DEDUP_CACHE_SECONDS", "5"),
    ("*RUST_LOG", "info"),
    // The durable workflow's qualified ARN, built with `!Sub` from the stack's name: the local
    // stack runs neither durable-order function (`functions::NOT_RUN`), so any name will do.
    ("DURABLE_FUNCTION", "durable-order:live"),
];

/// Shards of a local on-demand Kinesis stream (a provisioned one has its `ShardCount`).
pub(crate) const LOCAL_ON_DEMAND_SHARDS: u32 = 2;

/// What the local stack sets differently from the template.
const LOCAL: Local<'static> = Local {
    parameters: &LOCAL_PARAMETERS,
    queue_secs: LOCAL_QUEUE_SECS,
    env: &LOCAL_ENV,
    on_demand_shards: LOCAL_ON_DEMAND_SHARDS,
};

/// The local stack `t` describes: its functions those the stack runs
/// (`functions::ALL`); the template's others (`functions::NOT_RUN`, keyed here by their crate)
/// get no trigger, their queues are created and stay empty.
pub(crate) fn plan(t: &Value) -> Result<Plan> {
    let mut plan = local_lambda::plan::plan(t, &LOCAL)?;
    plan.functions
        .retain(|name, _| crate::functions::ALL.contains(&name.as_str()));
    Ok(plan)
}

/// The text of the webhook receiver's local secret, which the local stack puts in the SQS
/// emulator's Secrets Manager (moto) and names by its ARN (`WebhookSecretArn`), as AWS would:
/// two Standard Webhooks secrets (`whsec_` and the base64 of the key), the current one and the
/// one being rotated out.
pub(crate) const LOCAL_WEBHOOK_SECRETS: &str =
    "whsec_bG9jYWwtd2ViaG9vay1rZXktMjAyNi0xMS1hY21l,whsec_bG9jYWwtd2ViaG9vay1rZXktMjAyNi0xMC1hY21l";

/// The text of fine-notices' local correlation key, which the local stack puts in moto's
/// Secrets Manager and names by its ARN (`FinesCorrelationKeyArn`), as AWS would: the function
/// reads it at init (`FINES_CORRELATION_KEY_ARN`).
pub(crate) const LOCAL_FINES_CORRELATION_KEY: &str = "local-correlation-secret";

/// The webhook receiver's local secrets ([`LOCAL_WEBHOOK_SECRETS`]): the current one and the one
/// being rotated out.
pub(crate) fn webhook_secrets() -> (&'static str, &'static str) {
    LOCAL_WEBHOOK_SECRETS.split_once(',').unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use local_lambda::plan::Source;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn template() -> Value {
        crate::infra::load(&crate::root().join("infra/template.yaml")).expect("template")
    }

    /// The local stack follows the template: a queue's maxReceiveCount, a function's variable,
    /// a mapping's batch size and a table's stream, each changed in a copy, change the plan.
    #[test]
    fn the_local_stack_follows_the_template() {
        let committed = plan(&template()).expect("plan");
        let queue = |p: &Plan, name: &str| {
            p.queues
                .iter()
                .find(|q| q.name == name)
                .cloned()
                .expect("queue")
        };
        assert_eq!(
            queue(&committed, "LedgerProjectorQueue").redrive,
            Some(("LedgerProjectorDLQ".into(), 5))
        );
        let mut t = template();
        t["Resources"]["LedgerProjectorQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] =
            3.into();
        t["Resources"]["LedgerProjector"]["Properties"]["Environment"]["Variables"]["BALANCES_TABLE"] =
            serde_json::json!({"Ref": "FinesTable"});
        t["Resources"]["IntentRelay"]["Properties"]["Events"]["Intents"]["Properties"]["BatchSize"] =
            7.into();
        t["Resources"]["InboxTable"]["Properties"]["StreamSpecification"]["StreamViewType"] =
            "KEYS_ONLY".into();
        let fines = &mut t["Resources"]["FinesTable"]["Properties"];
        fines["KeySchema"][0]["AttributeName"] = "notice_id".into();
        fines["AttributeDefinitions"][0]["AttributeName"] = "notice_id".into();
        let changed = plan(&t).expect("plan");
        let fines = changed.tables.iter().find(|t| t.name == "FinesTable");
        let key = fines.map(|t| &t.create["KeySchema"][0]["AttributeName"]);
        assert_eq!(key, Some(&"notice_id".into()), "the table's key follows");
        assert_eq!(
            queue(&changed, "LedgerProjectorQueue").redrive,
            Some(("LedgerProjectorDLQ".into(), 3))
        );
        let env = changed
            .env(
                "ledger-projector",
                |n| Some(format!("local-{n}")),
                &BTreeMap::new(),
            )
            .expect("env");
        assert!(env.contains(&("BALANCES_TABLE".into(), "local-FinesTable".into())));
        assert_eq!(
            changed.mapping("intent-relay").expect("mapping").batch_size,
            7
        );
        let inbox = changed.tables.iter().find(|t| t.name == "InboxTable");
        let view = inbox.map(|t| &t.create["StreamSpecification"]["StreamViewType"]);
        assert_eq!(view, Some(&"KEYS_ONLY".into()));
    }

    /// The envelope door follows the template: `ledger-fanout`'s trigger polls the queue the
    /// topic's subscription delivers to, in SNS's envelope (no raw delivery); raw delivery in a
    /// copy reaches the plan, and so does a subscription moved to another queue.
    #[test]
    fn the_sns_fanout_follows_the_template() {
        use local_lambda::plan::Subscription;
        let committed = plan(&template()).expect("plan");
        assert!(committed.topics.contains(&"LedgerFanoutTopic".to_owned()));
        let fanout = Subscription {
            topic: "LedgerFanoutTopic".into(),
            queue: "LedgerFanoutQueue".into(),
            raw: false,
        };
        assert_eq!(committed.subscriptions, std::slice::from_ref(&fanout));
        let sqs = committed.mapping("ledger-fanout").expect("mapping");
        assert_eq!(sqs.source, Source::Sqs("LedgerFanoutQueue".into()));
        assert!(sqs.partial);
        let queue = committed
            .queues
            .iter()
            .find(|q| q.name == "LedgerFanoutQueue");
        assert_eq!(
            queue.and_then(|q| q.redrive.clone()),
            Some(("LedgerFanoutDLQ".into(), 5))
        );
        let mut t = template();
        let sub = &mut t["Resources"]["LedgerFanoutSubscription"]["Properties"];
        sub["RawMessageDelivery"] = true.into();
        sub["Endpoint"] = serde_json::json!({"Fn::GetAtt": ["LedgerProjectorQueue", "Arn"]});
        let changed = plan(&t).expect("plan");
        assert_eq!(
            changed.subscriptions,
            [Subscription {
                queue: "LedgerProjectorQueue".into(),
                raw: true,
                ..fanout
            }]
        );
    }

    /// What the committed template gives the local stack: the mark table's TTL and stream, the
    /// DLQs before their queues, the mappings' settings, the secrets from the local table.
    #[test]
    fn the_committed_template_gives_the_local_stack() {
        let p = plan(&template()).expect("plan");
        // Triggers only for the functions the stack runs (a trigger of durable-order's
        // dispatcher would invoke a function nothing serves, and the stack would not start).
        let run: Vec<&str> = p.functions.keys().map(String::as_str).collect();
        let mut all = crate::functions::ALL.to_vec();
        all.sort_unstable();
        assert_eq!(run, all);
        let marks = p
            .tables
            .iter()
            .find(|t| t.name == "MarkTable")
            .expect("marks");
        assert_eq!(marks.create["KeySchema"][0]["AttributeName"], "pk");
        assert_eq!(marks.create["BillingMode"], "PAY_PER_REQUEST");
        assert_eq!(marks.create["StreamSpecification"]["StreamEnabled"], true);
        assert!(marks.create["PointInTimeRecoverySpecification"].is_null());
        assert_eq!(marks.ttl.as_deref(), Some("expires_at"));
        let view = &marks.create["StreamSpecification"]["StreamViewType"];
        assert_eq!(view, "OLD_IMAGE");
        let at = |n: &str| p.queues.iter().position(|q| q.name == n).expect("queue");
        assert!(at("LedgerProjectorDLQ") < at("LedgerProjectorQueue"));
        assert_eq!(p.streams, [("LedgerEvents".to_owned(), 2)]);
        let sqs = p.mapping("ledger-projector").expect("mapping");
        assert_eq!(sqs.source, Source::Sqs("LedgerProjectorQueue".into()));
        assert!(sqs.partial);
        assert_eq!((sqs.batch_size, sqs.window), (10, Duration::from_secs(1)));
        let kinesis = p.mapping("ledger-stream").expect("mapping");
        assert_eq!(kinesis.source, Source::Kinesis("LedgerEvents".into()));
        assert!(kinesis.max_retries.is_none());
        assert_eq!(kinesis.max_age, Some(Duration::from_secs(86_400)));
        assert_eq!(kinesis.on_failure.as_deref(), Some("LedgerStreamFailures"));
        let fines_key = "arn:aws:secretsmanager:us-east-1:123456789012:secret:fines-key-AbCdEf";
        let params = BTreeMap::from([
            ("PaymentsApiUrl", "http://provider".to_owned()),
            ("FinesCorrelationKeyArn", fines_key.to_owned()),
        ]);
        let env = p
            .env("payment-dispatcher", |n| Some(n.to_owned()), &params)
            .expect("env");
        for want in [
            ("PAYMENTS_API_URL", "http://provider"),
            ("DEDUP_NAMESPACE", "demo"),
            ("DEDUP_MARK_TABLE", "MarkTable"),
            ("DEDUP_RECONCILIATION_QUEUE_URL", "ReconciliationQueue"),
            ("DEDUP_MAX_RECEIVE_COUNT", "5"),
        ] {
            assert!(
                env.contains(&(want.0.into(), want.1.into())),
                "{want:?} in {env:?}"
            );
        }
        // S9 locally: each SQS function's horizon variables are its local queue's settings.
        for (name, f) in &p.functions {
            let Some(Source::Sqs(q)) = f.mappings.first().map(|m| &m.source) else {
                continue;
            };
            let q = p.queues.iter().find(|x| &x.name == q).expect("queue");
            let env = p.env(name, |n| Some(n.to_owned()), &params).expect("env");
            let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            assert_eq!(
                var("DEDUP_VISIBILITY_TIMEOUT_SECONDS"),
                Some(q.visibility_timeout.to_string())
            );
            assert_eq!(
                var("DEDUP_QUEUE_RETENTION_SECONDS"),
                Some(q.retention.to_string())
            );
            assert_eq!(
                var("DEDUP_MAX_RECEIVE_COUNT"),
                q.redrive.as_ref().map(|r| r.1.to_string())
            );
        }
        assert!(
            webhook_secrets().0.starts_with("whsec_") && webhook_secrets().1.starts_with("whsec_")
        );
        // fine-notices' correlation key: the secret's ARN, which the local stack creates in
        // moto, never the key in a variable.
        let fines = p
            .env("fine-notices", |n| Some(n.to_owned()), &params)
            .expect("env");
        assert!(fines.contains(&("FINES_CORRELATION_KEY_ARN".into(), fines_key.into())));
        assert!(
            fines.iter().all(|(k, _)| k != "FINES_CORRELATION_KEY"),
            "{fines:?}"
        );
        // A secret with no local value is refused, by name.
        let mut t = template();
        t["Resources"]["LedgerProjector"]["Properties"]["Environment"]["Variables"]["API_KEY"] =
            "{{resolve:ssm:/x}}".into();
        assert!(plan(&t).is_err_and(|e| e.contains("API_KEY")));
    }
}
