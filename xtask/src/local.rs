//! The local stack, read from `infra/template.yaml`: its tables (key, TTL, stream), queues
//! (visibility timeout, retention, redrive policy and maxReceiveCount, FIFO), Kinesis streams,
//! each function's event source mappings (batch size, window, partial batch responses,
//! bisection, retries, on-failure destination) and environment. A change to the template
//! changes the local stack; what the local stack sets differently is the short list of
//! [`LOCAL_PARAMETERS`], [`LOCAL_QUEUE_SECS`] and [`LOCAL_ENV`] below, each with its reason,
//! and the endpoints, which only exist at run time. Local names are the template's logical ids.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::Result;
use crate::infra::{as_u64, ref_target};

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
/// (S9 wants them equal to the queue's settings), shorter waits, and local secrets for what
/// AWS resolves from SSM or Secrets Manager at deploy time.
pub(crate) const LOCAL_ENV: [(&str, &str); 12] = [
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
    ("FINES_CORRELATION_KEY", "local-correlation-secret"),
    (
        "WEBHOOK_SECRETS",
        "whsec_bG9jYWwtd2ViaG9vay1rZXktMjAyNi0xMS1hY21l,whsec_bG9jYWwtd2ViaG9vay1rZXktMjAyNi0xMC1hY21l",
    ),
    // Warm caches ask the mark table again after 5 s, so a mark forgotten on purpose
    // (`lambda-dedup forget`) is seen gone within a test's patience.
    ("*DEDUP_CACHE_SECONDS", "5"),
    ("*RUST_LOG", "info"),
];

/// Shards of a local on-demand Kinesis stream (a provisioned one has its `ShardCount`).
pub(crate) const LOCAL_ON_DEMAND_SHARDS: u32 = 2;

/// A DynamoDB table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub(crate) name: String,
    /// Its `CreateTable` request: the template's properties (keys and their types, billing,
    /// indexes, the stream), less those other calls set (TTL) or the emulator has no use for
    /// (point-in-time recovery, encryption, tags).
    pub(crate) create: Value,
    pub(crate) ttl: Option<String>,
}

/// The properties of a table that are `CreateTable`'s.
const CREATE_TABLE: [&str; 7] = [
    "AttributeDefinitions",
    "KeySchema",
    "BillingMode",
    "ProvisionedThroughput",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "StreamSpecification",
];

/// An SQS queue, at the local time scale.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Queue {
    pub(crate) name: String,
    pub(crate) visibility_timeout: u64,
    pub(crate) retention: u64,
    pub(crate) fifo: bool,
    /// The dead-letter queue's name and maxReceiveCount.
    pub(crate) redrive: Option<(String, u32)>,
}

/// Where a mapping reads from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Source {
    Sqs(String),
    DynamoDbStream(String),
    Kinesis(String),
}

/// An event source mapping.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mapping {
    pub(crate) source: Source,
    pub(crate) batch_size: usize,
    pub(crate) window: Duration,
    /// `FunctionResponseTypes: [ReportBatchItemFailures]`.
    pub(crate) partial: bool,
    /// `MaximumRetryAttempts` (`None`: `-1`, or unset).
    pub(crate) max_retries: Option<u32>,
    /// `MaximumRecordAgeInSeconds` (`None`: unset or `-1`).
    pub(crate) max_age: Option<Duration>,
    /// The on-failure destination queue.
    pub(crate) on_failure: Option<String>,
}

/// A value of a function's environment, before the local endpoints are known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EnvValue {
    Text(String),
    /// A `Ref` to a resource: its local name (a table, a stream) or URL (a queue).
    Ref(String),
}

/// A function: its environment (`Globals` under its own) and event source mappings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Function {
    pub(crate) env: Vec<(String, EnvValue)>,
    pub(crate) mappings: Vec<Mapping>,
}

/// Everything the local stack creates, by local name (the logical id); functions by crate.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Plan {
    pub(crate) tables: Vec<Table>,
    /// Dead-letter queues before the queues that redrive to them.
    pub(crate) queues: Vec<Queue>,
    /// Kinesis streams and their shard counts.
    pub(crate) streams: Vec<(String, u32)>,
    pub(crate) functions: BTreeMap<String, Function>,
}

/// The webhook receiver's local secrets (Standard Webhooks: `whsec_` and the base64 of the key),
/// as [`LOCAL_ENV`] sets them: the current one and the one being rotated out.
pub(crate) fn webhook_secrets() -> (&'static str, &'static str) {
    let secrets = local_env("WEBHOOK_SECRETS").and_then(|(v, _)| v.split_once(','));
    secrets.unwrap_or_default()
}

fn local_env(var: &str) -> Option<(&'static str, bool)> {
    LOCAL_ENV
        .iter()
        .find_map(|(k, v)| match k.strip_prefix('*') {
            Some(k) if k == var => Some((*v, true)),
            None if *k == var => Some((*v, false)),
            _ => None,
        })
}

/// The local stack `t` describes.
pub(crate) fn plan(t: &Value) -> Result<Plan> {
    let resources = t["Resources"].as_object().cloned().unwrap_or_default();
    let mut plan = Plan::default();
    let num = |v: &Value| as_u64(t, v);
    for (id, r) in &resources {
        let p = &r["Properties"];
        match r["Type"].as_str().unwrap_or_default() {
            "AWS::DynamoDB::Table" => {
                let mut create = serde_json::json!({ "TableName": id });
                for k in CREATE_TABLE.into_iter().filter(|k| !p[k].is_null()) {
                    create[k] = p[k].clone();
                }
                if p["StreamSpecification"]["StreamViewType"].is_string() {
                    create["StreamSpecification"]["StreamEnabled"] = true.into();
                }
                let ttl = &p["TimeToLiveSpecification"];
                plan.tables.push(Table {
                    name: id.clone(),
                    create,
                    ttl: (ttl["Enabled"] == true)
                        .then(|| ttl["AttributeName"].as_str().map(str::to_owned))
                        .flatten(),
                });
            }
            "AWS::SQS::Queue" => {
                let redrive = &p["RedrivePolicy"];
                let redrive = match ref_target(&redrive["deadLetterTargetArn"]) {
                    None => None,
                    Some(dlq) => Some((
                        dlq.to_owned(),
                        num(&redrive["maxReceiveCount"])
                            .and_then(|n| u32::try_from(n).ok())
                            .ok_or_else(|| format!("{id}: redrive without maxReceiveCount"))?,
                    )),
                };
                plan.queues.push(Queue {
                    name: id.clone(),
                    visibility_timeout: LOCAL_QUEUE_SECS.0,
                    retention: LOCAL_QUEUE_SECS.1,
                    fifo: p["FifoQueue"] == true || p["FifoQueue"] == "true",
                    redrive,
                });
            }
            "AWS::Kinesis::Stream" => {
                let shards = num(&p["ShardCount"]).unwrap_or(LOCAL_ON_DEMAND_SHARDS.into());
                plan.streams.push((
                    id.clone(),
                    u32::try_from(shards).map_err(|e| e.to_string())?,
                ));
            }
            "AWS::Serverless::Function" => {
                let name = p["CodeUri"]
                    .as_str()
                    .and_then(|u| u.rsplit('/').next())
                    .ok_or_else(|| format!("{id}: no CodeUri"))?;
                plan.functions.insert(name.to_owned(), function(t, id, r)?);
            }
            _ => {}
        }
    }
    // Dead-letter queues first: a redrive policy names an existing queue.
    plan.queues.sort_by_key(|q| q.redrive.is_some());
    Ok(plan)
}

fn function(t: &Value, id: &str, r: &Value) -> Result<Function> {
    let p = &r["Properties"];
    let mut vars = t["Globals"]["Function"]["Environment"]["Variables"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    vars.extend(
        p["Environment"]["Variables"]
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let mut env = Vec::new();
    for (k, v) in &vars {
        let value = if let Some((local, _)) = local_env(k) {
            EnvValue::Text(local.to_owned())
        } else if let Some(name) = v["Ref"].as_str() {
            match &t["Parameters"][name] {
                Value::Null => EnvValue::Ref(name.to_owned()),
                param => EnvValue::Text(parameter(name, param)?),
            }
        } else if let Some(n) = as_u64(t, v) {
            EnvValue::Text(n.to_string())
        } else if let Some(s) = v.as_str().filter(|s| !s.contains("{{resolve:")) {
            EnvValue::Text(s.to_owned())
        } else {
            return Err(format!(
                "{id}: {k} has no local value (a secret or an expression; add it to local::LOCAL_ENV)"
            ));
        };
        env.push((k.clone(), value));
    }
    for (k, (v, all)) in LOCAL_ENV
        .iter()
        .filter_map(|(k, _)| k.strip_prefix('*'))
        .filter_map(|k| Some((k, local_env(k)?)))
    {
        if all && !vars.contains_key(k) {
            env.push((k.to_owned(), EnvValue::Text(v.to_owned())));
        }
    }
    let mut mappings = Vec::new();
    for ev in p["Events"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, e)| e)
    {
        let ep = &ev["Properties"];
        let source = match ev["Type"].as_str() {
            Some("SQS") => ref_target(&ep["Queue"]).map(|q| Source::Sqs(q.to_owned())),
            Some("DynamoDB") => {
                ref_target(&ep["Stream"]).map(|s| Source::DynamoDbStream(s.to_owned()))
            }
            Some("Kinesis") => ref_target(&ep["Stream"]).map(|s| Source::Kinesis(s.to_owned())),
            _ => continue,
        };
        let source = source.ok_or_else(|| format!("{id}: an event without its source"))?;
        let default_batch = if matches!(source, Source::Sqs(_)) {
            10
        } else {
            100
        };
        let int = |k: &str| ep[k].as_i64();
        mappings.push(Mapping {
            source,
            batch_size: int("BatchSize").map_or(default_batch, |n| n as usize),
            window: Duration::from_secs(
                int("MaximumBatchingWindowInSeconds").unwrap_or(0).max(0) as u64
            ),
            partial: crate::infra::strings(&ep["FunctionResponseTypes"])
                .iter()
                .any(|s| s == "ReportBatchItemFailures"),
            max_retries: int("MaximumRetryAttempts").and_then(|n| u32::try_from(n).ok()),
            max_age: int("MaximumRecordAgeInSeconds")
                .and_then(|n| u64::try_from(n).ok())
                .map(Duration::from_secs),
            on_failure: ref_target(&ep["DestinationConfig"]["OnFailure"]["Destination"])
                .map(str::to_owned),
        });
    }
    Ok(Function { env, mappings })
}

/// A parameter's local value: [`LOCAL_PARAMETERS`], else its default.
fn parameter(name: &str, param: &Value) -> Result<String> {
    if let Some((_, v)) = LOCAL_PARAMETERS.iter().find(|(k, _)| *k == name) {
        return Ok((*v).to_owned());
    }
    match &param["Default"] {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Ok(format!("{{param:{name}}}")),
    }
}

impl Plan {
    /// The first event source mapping of `function` (its crate name).
    pub(crate) fn mapping(&self, function: &str) -> Option<&Mapping> {
        self.functions.get(function)?.mappings.first()
    }

    /// The resource a function's variable `var` names (a `Ref`), in the first function that has it.
    pub(crate) fn named(&self, var: &str) -> Option<&str> {
        self.functions.values().find_map(|f| {
            f.env.iter().find_map(|(k, v)| match v {
                EnvValue::Ref(target) if k == var => Some(target.as_str()),
                _ => None,
            })
        })
    }

    /// `function`'s environment, each `Ref` replaced through `resolve` (a local name to its
    /// URL or name), and a parameter without a default (`{param:Name}`) through `params`.
    pub(crate) fn env(
        &self,
        function: &str,
        resolve: impl Fn(&str) -> Option<String>,
        params: &BTreeMap<&str, String>,
    ) -> Result<Vec<(String, String)>> {
        let f = self
            .functions
            .get(function)
            .ok_or_else(|| format!("infra/template.yaml has no function {function}"))?;
        f.env
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    EnvValue::Ref(target) => resolve(target).ok_or_else(|| {
                        format!("{function}: {k} names {target}, which the local stack lacks")
                    })?,
                    EnvValue::Text(s) => {
                        match s.strip_prefix("{param:").and_then(|s| s.strip_suffix('}')) {
                            Some(p) => params.get(p).cloned().ok_or_else(|| {
                                format!("{function}: {k}: no local value for the parameter {p}")
                            })?,
                            None => s.clone(),
                        }
                    }
                };
                Ok((k.clone(), value))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// What the committed template gives the local stack: the mark table's TTL and stream, the
    /// DLQs before their queues, the mappings' settings, the secrets from the local table.
    #[test]
    fn the_committed_template_gives_the_local_stack() {
        let p = plan(&template()).expect("plan");
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
        let params = BTreeMap::from([("PaymentsApiUrl", "http://provider".to_owned())]);
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
        // A secret with no local value is refused, by name.
        let mut t = template();
        t["Resources"]["LedgerProjector"]["Properties"]["Environment"]["Variables"]["API_KEY"] =
            "{{resolve:ssm:/x}}".into();
        assert!(plan(&t).is_err_and(|e| e.contains("API_KEY")));
    }
}
