//! The local stack a SAM / CloudFormation template describes, as data: its tables (key, TTL,
//! stream), queues (visibility timeout, retention, redrive policy and maxReceiveCount, FIFO),
//! Kinesis streams, SNS topics and their SQS subscriptions (raw message delivery or SNS's
//! envelope), each function's event source mappings (batch size, window, partial batch
//! responses, retries, maximum record age, on-failure destination) and environment
//! (`Globals` under the function's own). A change to the template changes the plan; what a local
//! stack sets differently is the caller's [`Local`], and the endpoints, which only exist at run
//! time. Local names are the template's logical ids; functions are named by the last part of
//! their `CodeUri`.
//!
//! The template is taken parsed (short-form intrinsics such as `!Ref` already in their long form).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::Result;

/// What a local stack sets differently from the template.
#[derive(Debug, Clone, Copy)]
pub struct Local<'a> {
    /// Template parameters given other values than their defaults.
    pub parameters: &'a [(&'a str, &'a str)],
    /// The visibility timeout and retention of every queue (dead-letter queues too), in seconds.
    pub queue_secs: (u64, u64),
    /// Function variables set to other values, where the function has the variable; a name
    /// starting with `*` is set in every function. A template value the local stack cannot have
    /// (a `{{resolve:…}}` secret, an expression) must be here.
    pub env: &'a [(&'a str, &'a str)],
    /// Shards of an on-demand Kinesis stream (a provisioned one has its `ShardCount`).
    pub on_demand_shards: u32,
}

impl Local<'_> {
    /// The local value of variable `var`, and whether every function gets it.
    pub fn var(&self, var: &str) -> Option<(&str, bool)> {
        self.env
            .iter()
            .find_map(|(k, v)| match k.strip_prefix('*') {
                Some(k) if k == var => Some((*v, true)),
                None if *k == var => Some((*v, false)),
                _ => None,
            })
    }
}

/// A DynamoDB table.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub name: String,
    /// Its `CreateTable` request: the template's properties (keys and their types, billing,
    /// indexes, the stream), less those other calls set (TTL) or the emulator has no use for
    /// (point-in-time recovery, encryption, tags).
    pub create: Value,
    pub ttl: Option<String>,
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
pub struct Queue {
    pub name: String,
    pub visibility_timeout: u64,
    pub retention: u64,
    pub fifo: bool,
    /// The dead-letter queue's name and maxReceiveCount.
    pub redrive: Option<(String, u32)>,
}

/// An SNS topic's subscription of a queue of the template.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    /// The topic's local name.
    pub topic: String,
    /// The queue's local name.
    pub queue: String,
    /// `RawMessageDelivery`: the body is the message itself, not SNS's envelope.
    pub raw: bool,
}

/// Where a mapping reads from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Sqs(String),
    DynamoDbStream(String),
    Kinesis(String),
}

/// An event source mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub source: Source,
    pub batch_size: usize,
    pub window: Duration,
    /// `FunctionResponseTypes: [ReportBatchItemFailures]`.
    pub partial: bool,
    /// `MaximumRetryAttempts` (`None`: `-1`, or unset).
    pub max_retries: Option<u32>,
    /// `MaximumRecordAgeInSeconds` (`None`: unset or `-1`).
    pub max_age: Option<Duration>,
    /// The on-failure destination queue.
    pub on_failure: Option<String>,
}

/// A value of a function's environment, before the local endpoints are known.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvValue {
    Text(String),
    /// A `Ref` to a resource: its local name (a table, a stream) or URL (a queue).
    Ref(String),
}

/// A function: its environment (`Globals` under its own) and event source mappings.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    pub env: Vec<(String, EnvValue)>,
    pub mappings: Vec<Mapping>,
}

/// Everything the local stack creates, by local name (the logical id); functions by crate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub tables: Vec<Table>,
    /// Dead-letter queues before the queues that redrive to them.
    pub queues: Vec<Queue>,
    /// Kinesis streams and their shard counts.
    pub streams: Vec<(String, u32)>,
    /// SNS topics.
    pub topics: Vec<String>,
    /// The topics' SQS subscriptions (other protocols have no local delivery).
    pub subscriptions: Vec<Subscription>,
    pub functions: BTreeMap<String, Function>,
}

/// The local stack the template `t` describes, with `local`'s settings.
pub fn plan(t: &Value, local: &Local<'_>) -> Result<Plan> {
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
                    visibility_timeout: local.queue_secs.0,
                    retention: local.queue_secs.1,
                    fifo: p["FifoQueue"] == true || p["FifoQueue"] == "true",
                    redrive,
                });
            }
            "AWS::Kinesis::Stream" => {
                let shards = num(&p["ShardCount"]).unwrap_or(local.on_demand_shards.into());
                plan.streams.push((
                    id.clone(),
                    u32::try_from(shards).map_err(|e| e.to_string())?,
                ));
            }
            "AWS::SNS::Topic" => plan.topics.push(id.clone()),
            "AWS::SNS::Subscription" if p["Protocol"] == "sqs" => {
                let (Some(topic), Some(queue)) =
                    (ref_target(&p["TopicArn"]), ref_target(&p["Endpoint"]))
                else {
                    return Err(format!("{id}: a subscription without its topic or queue"));
                };
                plan.subscriptions.push(Subscription {
                    topic: topic.to_owned(),
                    queue: queue.to_owned(),
                    raw: p["RawMessageDelivery"] == true || p["RawMessageDelivery"] == "true",
                });
            }
            "AWS::Serverless::Function" => {
                let name = p["CodeUri"]
                    .as_str()
                    .and_then(|u| u.rsplit('/').next())
                    .ok_or_else(|| format!("{id}: no CodeUri"))?;
                plan.functions
                    .insert(name.to_owned(), function(t, id, r, local)?);
            }
            _ => {}
        }
    }
    // Dead-letter queues first: a redrive policy names an existing queue.
    plan.queues.sort_by_key(|q| q.redrive.is_some());
    for s in &plan.subscriptions {
        if !plan.topics.contains(&s.topic) || !plan.queues.iter().any(|q| q.name == s.queue) {
            return Err(format!(
                "a subscription of {} to {}: not a topic and a queue of the template",
                s.queue, s.topic
            ));
        }
    }
    Ok(plan)
}

fn function(t: &Value, id: &str, r: &Value, local: &Local<'_>) -> Result<Function> {
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
        let value = if let Some((value, _)) = local.var(k) {
            EnvValue::Text(value.to_owned())
        } else if let Some(name) = v["Ref"].as_str() {
            match &t["Parameters"][name] {
                Value::Null => EnvValue::Ref(name.to_owned()),
                param => EnvValue::Text(parameter(name, param, local)),
            }
        } else if let Some(n) = as_u64(t, v) {
            EnvValue::Text(n.to_string())
        } else if let Some(s) = v.as_str().filter(|s| !s.contains("{{resolve:")) {
            EnvValue::Text(s.to_owned())
        } else {
            return Err(format!(
                "{id}: {k} has no local value (a secret or an expression; give it a local value)"
            ));
        };
        env.push((k.clone(), value));
    }
    for (k, v) in local
        .env
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix('*')?, v)))
    {
        if !vars.contains_key(k) {
            env.push((k.to_owned(), EnvValue::Text((*v).to_owned())));
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
            partial: strings(&ep["FunctionResponseTypes"])
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

/// A parameter's local value: [`Local::parameters`], else its default, else a placeholder
/// (`{param:Name}`) that [`Plan::env`] fills in.
fn parameter(name: &str, param: &Value, local: &Local<'_>) -> String {
    if let Some((_, v)) = local.parameters.iter().find(|(k, _)| *k == name) {
        return (*v).to_owned();
    }
    match &param["Default"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => format!("{{param:{name}}}"),
    }
}

impl Plan {
    /// The first event source mapping of `function` (its crate name).
    pub fn mapping(&self, function: &str) -> Option<&Mapping> {
        self.functions.get(function)?.mappings.first()
    }

    /// The resource a function's variable `var` names (a `Ref`), in the first function that has it.
    pub fn named(&self, var: &str) -> Option<&str> {
        self.functions.values().find_map(|f| {
            f.env.iter().find_map(|(k, v)| match v {
                EnvValue::Ref(target) if k == var => Some(target.as_str()),
                _ => None,
            })
        })
    }

    /// `function`'s environment, each `Ref` replaced through `resolve` (a local name to its
    /// URL or name), and a parameter without a default (`{param:Name}`) through `params`.
    pub fn env(
        &self,
        function: &str,
        resolve: impl Fn(&str) -> Option<String>,
        params: &BTreeMap<&str, String>,
    ) -> Result<Vec<(String, String)>> {
        let f = self
            .functions
            .get(function)
            .ok_or_else(|| format!("the template has no function {function}"))?;
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

/// A string or a list of strings.
pub fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The logical id a `Ref` or `Fn::GetAtt` points to.
pub fn ref_target(v: &Value) -> Option<&str> {
    v["Ref"]
        .as_str()
        .or_else(|| v["Fn::GetAtt"][0].as_str())
        .or_else(|| v["Fn::GetAtt"].as_str().and_then(|s| s.split('.').next()))
}

/// A number, a numeric string, or a `Ref` to a parameter of template `t` with a numeric default.
pub fn as_u64(t: &Value, v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => {
            let default = &t["Parameters"][v["Ref"].as_str()?]["Default"];
            (!default.is_null()).then(|| as_u64(t, default)).flatten()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LOCAL: Local<'static> = Local {
        parameters: &[("Stage", "local")],
        queue_secs: (2, 3600),
        env: &[("API_KEY", "local-key"), ("*RUST_LOG", "info")],
        on_demand_shards: 2,
    };

    /// A template of two functions: one on a queue with a dead-letter queue, one on a table's
    /// stream and one on a Kinesis stream.
    fn template() -> Value {
        json!({
            "Parameters": {
                "Stage": {"Type": "String", "Default": "prod"},
                "Receives": {"Type": "Number", "Default": 4},
                "UpstreamUrl": {"Type": "String"},
            },
            "Globals": {"Function": {"Environment": {"Variables": {
                "STAGE": {"Ref": "Stage"}, "LIMIT": "7",
            }}}},
            "Resources": {
                "Jobs": {"Type": "AWS::SQS::Queue", "Properties": {
                    "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["JobsDLQ", "Arn"]},
                                      "maxReceiveCount": {"Ref": "Receives"}},
                }},
                "JobsDLQ": {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": "true"}},
                "Orders": {"Type": "AWS::SNS::Topic", "Properties": {}},
                "OrdersToJobs": {"Type": "AWS::SNS::Subscription", "Properties": {
                    "TopicArn": {"Ref": "Orders"}, "Protocol": "sqs",
                    "Endpoint": {"Fn::GetAtt": ["Jobs", "Arn"]}, "RawMessageDelivery": false,
                }},
                "OrdersByMail": {"Type": "AWS::SNS::Subscription", "Properties": {
                    "TopicArn": {"Ref": "Orders"}, "Protocol": "email", "Endpoint": "a@example.com",
                }},
                "Items": {"Type": "AWS::DynamoDB::Table", "Properties": {
                    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                    "BillingMode": "PAY_PER_REQUEST",
                    "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
                    "TimeToLiveSpecification": {"AttributeName": "expires", "Enabled": true},
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": true},
                }},
                "Events": {"Type": "AWS::Kinesis::Stream", "Properties": {
                    "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
                }},
                "Worker": {"Type": "AWS::Serverless::Function", "Properties": {
                    "CodeUri": "functions/worker",
                    "Environment": {"Variables": {
                        "ITEMS": {"Ref": "Items"}, "LIMIT": 9, "API_KEY": "{{resolve:ssm:/k}}",
                        "UPSTREAM": {"Ref": "UpstreamUrl"},
                    }},
                    "Events": {"Jobs": {"Type": "SQS", "Properties": {
                        "Queue": {"Fn::GetAtt": ["Jobs", "Arn"]},
                        "MaximumBatchingWindowInSeconds": 1,
                        "FunctionResponseTypes": ["ReportBatchItemFailures"],
                    }}},
                }},
                "Reader": {"Type": "AWS::Serverless::Function", "Properties": {
                    "CodeUri": "functions/reader",
                    "Events": {
                        "Changes": {"Type": "DynamoDB", "Properties": {
                            "Stream": {"Fn::GetAtt": ["Items", "StreamArn"]}, "BatchSize": 5,
                            "MaximumRetryAttempts": -1, "MaximumRecordAgeInSeconds": 60,
                            "DestinationConfig": {"OnFailure": {"Destination":
                                {"Fn::GetAtt": ["JobsDLQ", "Arn"]}}},
                        }},
                        "Ignored": {"Type": "Schedule", "Properties": {}},
                    },
                }},
            },
        })
    }

    /// Tables, queues and streams as the template declares them, at the local time scale: the
    /// table's `CreateTable` request (its stream on, what `CreateTable` has no use for left
    /// out), its TTL; the dead-letter queue first, the redrive count from a parameter's
    /// default; an on-demand Kinesis stream with the local shard count.
    #[test]
    fn resources_follow_the_template() {
        let p = plan(&template(), &LOCAL).expect("plan");
        let items = &p.tables[0];
        assert_eq!(items.name, "Items");
        assert_eq!(items.create["TableName"], "Items");
        assert_eq!(items.create["StreamSpecification"]["StreamEnabled"], true);
        assert!(items.create["PointInTimeRecoverySpecification"].is_null());
        assert!(items.create["TimeToLiveSpecification"].is_null());
        assert_eq!(items.ttl.as_deref(), Some("expires"));
        let names: Vec<&str> = p.queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["JobsDLQ", "Jobs"]);
        assert!(p.queues[0].fifo && !p.queues[1].fifo);
        assert_eq!(p.queues[1].redrive, Some(("JobsDLQ".into(), 4)));
        assert_eq!(
            (p.queues[1].visibility_timeout, p.queues[1].retention),
            (2, 3600)
        );
        assert_eq!(p.streams, [("Events".to_owned(), 2)]);
        assert_eq!(p.topics, ["Orders"]);
        assert_eq!(
            p.subscriptions,
            [Subscription {
                topic: "Orders".into(),
                queue: "Jobs".into(),
                raw: false
            }],
            "the SQS subscription, with SNS's envelope; the e-mail one has no local delivery"
        );
    }

    /// A subscription follows the template: raw delivery when it says so (either form), and
    /// one whose queue is not a queue of the template is refused, by name.
    #[test]
    fn subscriptions_follow_the_template() {
        let mut t = template();
        t["Resources"]["OrdersToJobs"]["Properties"]["RawMessageDelivery"] = "true".into();
        let p = plan(&t, &LOCAL).expect("plan");
        assert!(p.subscriptions[0].raw);
        t["Resources"]["OrdersToJobs"]["Properties"]["Endpoint"] =
            json!({"Fn::GetAtt": ["Nowhere", "Arn"]});
        assert!(plan(&t, &LOCAL).is_err_and(|e| e.contains("Nowhere") && e.contains("Orders")));
    }

    /// Each function's mappings with the defaults Lambda applies, and its environment:
    /// `Globals` under its own, a `Ref` to a resource resolved at run time, a parameter's local
    /// value or default, one without a default filled in by the caller, the local values.
    #[test]
    fn functions_follow_the_template() {
        let p = plan(&template(), &LOCAL).expect("plan");
        let sqs = p.mapping("worker").expect("worker's mapping");
        assert_eq!(sqs.source, Source::Sqs("Jobs".into()));
        assert_eq!((sqs.batch_size, sqs.window), (10, Duration::from_secs(1)));
        assert!(sqs.partial);
        let stream = p.mapping("reader").expect("reader's mapping");
        assert_eq!(stream.source, Source::DynamoDbStream("Items".into()));
        assert_eq!(
            p.functions["reader"].mappings.len(),
            1,
            "a schedule is no mapping"
        );
        assert_eq!((stream.batch_size, stream.partial), (5, false));
        assert_eq!(stream.max_retries, None);
        assert_eq!(stream.max_age, Some(Duration::from_secs(60)));
        assert_eq!(stream.on_failure.as_deref(), Some("JobsDLQ"));
        assert_eq!(p.named("ITEMS"), Some("Items"));
        let params = BTreeMap::from([("UpstreamUrl", "http://upstream".to_owned())]);
        let env = p
            .env("worker", |id| Some(format!("local-{id}")), &params)
            .expect("env");
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(var("ITEMS"), Some("local-Items"));
        assert_eq!(var("LIMIT"), Some("9"), "the function's own over Globals");
        assert_eq!(var("STAGE"), Some("local"));
        assert_eq!(var("API_KEY"), Some("local-key"));
        assert_eq!(var("UPSTREAM"), Some("http://upstream"));
        assert_eq!(
            var("RUST_LOG"),
            Some("info"),
            "a `*` variable reaches every function"
        );
        assert!(
            p.env("worker", |_| None, &params)
                .is_err_and(|e| e.contains("Items"))
        );
        assert!(
            (p.env("worker", |id| Some(id.to_owned()), &BTreeMap::new()))
                .is_err_and(|e| e.contains("UpstreamUrl"))
        );
        assert!(p.env("nobody", |_| None, &params).is_err());
    }

    /// A secret (or any value) the local stack has no value for is refused, by name.
    #[test]
    fn a_secret_without_a_local_value_is_refused() {
        let local = Local { env: &[], ..LOCAL };
        let refused = plan(&template(), &local);
        assert!(refused.is_err_and(|e| e.contains("API_KEY")));
    }

    #[test]
    fn references_and_numbers_read_both_forms() {
        let t = template();
        assert_eq!(ref_target(&json!({"Ref": "A"})), Some("A"));
        assert_eq!(ref_target(&json!({"Fn::GetAtt": ["B", "Arn"]})), Some("B"));
        assert_eq!(ref_target(&json!({"Fn::GetAtt": "C.Arn"})), Some("C"));
        assert_eq!(ref_target(&json!("D")), None);
        assert_eq!(as_u64(&t, &json!(3)), Some(3));
        assert_eq!(as_u64(&t, &json!("5")), Some(5));
        assert_eq!(as_u64(&t, &json!({"Ref": "Receives"})), Some(4));
        assert_eq!(as_u64(&t, &json!({"Ref": "UpstreamUrl"})), None);
        assert_eq!(strings(&json!(["a", "b"])), ["a", "b"]);
        assert_eq!(strings(&json!("a")), ["a"]);
    }
}
