//! `cargo xtask check-infra`: refuses a deployment template that breaks what the functions rely
//! on. The template must use long-form intrinsics (`Ref:`, `Fn::GetAtt:`) so it parses as plain
//! YAML. Checked, per function and queue:
//!
//! - S9: mark retention > queue message retention + maxReceiveCount × visibility timeout + replay
//!   window, and the functions' `DEDUP_*` horizon variables equal the queue's real settings (the
//!   functions check the same inequality at start, on those variables);
//! - the mark table has TTL on `expires_at`, partition key `pk`, and a stream with old images;
//! - every SQS and stream trigger has `ReportBatchItemFailures`; every queue has a redrive policy
//!   to a DLQ; a stream trigger has an on-failure destination (nothing dropped);
//! - visibility timeout ≥ 6 × function timeout;
//! - arm64, `provided.al2023`, `rust-cargolambda`, JSON logging;
//! - least privilege: an explicit role per function, no SAM policy templates, no `Resource: "*"`
//!   and no wildcard actions for DynamoDB or SQS;
//! - alarms: each DLQ's depth, and each SQS function's conflicts.

use std::path::Path;

use serde_json::Value;

use crate::Result;

/// Loads a template.
pub(crate) fn load(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_yaml_ng::from_str(&text).map_err(|e| {
        format!(
            "{}: not plain YAML ({e}); write intrinsics in long form (`Ref:`, `Fn::GetAtt:`), not as `!Ref` tags",
            path.display()
        )
    })
}

/// Everything wrong with `t`; empty when it is sound.
pub(crate) fn check(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let resources = t["Resources"].as_object().cloned().unwrap_or_default();
    let global = &t["Globals"]["Function"];

    // The mark table: the resource DEDUP_MARK_TABLE refers to.
    let mark_table = ref_target(&global["Environment"]["Variables"]["DEDUP_MARK_TABLE"]);
    match mark_table.and_then(|id| resources.get(id).map(|r| (id, r))) {
        None => {
            problems.push("Globals: DEDUP_MARK_TABLE must reference the mark table resource".into())
        }
        Some((id, table)) => {
            let p = &table["Properties"];
            let ttl = &p["TimeToLiveSpecification"];
            if ttl["Enabled"] != Value::Bool(true) || ttl["AttributeName"] != "expires_at" {
                problems.push(format!(
                    "{id}: the mark table needs TTL enabled on `expires_at` (S9)"
                ));
            }
            let key = p["KeySchema"].as_array().and_then(|k| k.first());
            if key.map(|k| (&k["AttributeName"], &k["KeyType"]))
                != Some((&Value::from("pk"), &Value::from("HASH")))
            {
                problems.push(format!("{id}: the mark table's partition key must be `pk`"));
            }
            let view = p["StreamSpecification"]["StreamViewType"].as_str();
            if !matches!(view, Some("OLD_IMAGE" | "NEW_AND_OLD_IMAGES")) {
                problems.push(format!("{id}: the mark table needs a stream with old images, so TTL purges can be counted (S14)"));
            }
            // S4 across Regions: with eventually consistent replication, a claim in one Region
            // does not stop the same claim in another (each conditional write sees only its own
            // replica), so two Regions could both apply one event.
            let replicas = p["Replicas"].as_array().map_or(0, Vec::len);
            if table["Type"] == "AWS::DynamoDB::GlobalTable"
                && replicas > 1
                && p["MultiRegionConsistency"] != "STRONG"
            {
                problems.push(format!(
                    "{id}: a mark table replicated to {replicas} Regions must use \
                     MultiRegionConsistency: STRONG; with eventual consistency two Regions can \
                     both claim one event (S4)"
                ));
            }
        }
    }

    for (id, r) in &resources {
        if r["Type"] != "AWS::Serverless::Function" {
            continue;
        }
        let p = &r["Properties"];
        let prop = |k: &str| {
            if p[k].is_null() {
                global[k].clone()
            } else {
                p[k].clone()
            }
        };
        let crate_name = p["CodeUri"]
            .as_str()
            .and_then(|u| u.rsplit('/').next())
            .unwrap_or(id);
        if r["Metadata"]["BuildMethod"] != "rust-cargolambda" {
            problems.push(format!(
                "{id}: Metadata.BuildMethod must be rust-cargolambda"
            ));
        }
        if prop("Runtime") != "provided.al2023" {
            problems.push(format!("{id}: Runtime must be provided.al2023"));
        }
        if !prop("Architectures")
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "arm64"))
        {
            problems.push(format!("{id}: Architectures must be [arm64]"));
        }
        let log_format = p["LoggingConfig"]["LogFormat"]
            .as_str()
            .or(global["LoggingConfig"]["LogFormat"].as_str());
        if log_format != Some("JSON") {
            problems.push(format!("{id}: LoggingConfig.LogFormat must be JSON"));
        }
        let timeout = as_u64(t, &prop("Timeout")).unwrap_or(3);
        let env = |k: &str| {
            let v = &p["Environment"]["Variables"][k];
            if v.is_null() {
                global["Environment"]["Variables"][k].clone()
            } else {
                v.clone()
            }
        };
        for required in ["DEDUP_NAMESPACE", "DEDUP_MARK_TABLE"] {
            if env(required).is_null() {
                problems.push(format!("{id}: environment variable {required} is missing"));
            }
        }

        // Least privilege.
        if !p["Policies"].is_null() {
            problems.push(format!("{id}: use an explicit role, not SAM `Policies` (SAM's SQS policy template grants `*`)"));
        }
        let role = ref_target(&p["Role"]).and_then(|rid| resources.get(rid).map(|r| (rid, r)));
        let statements: Vec<Value> = match role {
            Some((_, role)) if role["Type"] == "AWS::IAM::Role" => role["Properties"]["Policies"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|pol| {
                    pol["PolicyDocument"]["Statement"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .collect(),
            _ => {
                problems.push(format!(
                    "{id}: needs an explicit role (an AWS::IAM::Role in this template)"
                ));
                Vec::new()
            }
        };
        for s in &statements {
            let actions = strings(&s["Action"]);
            let data = actions
                .iter()
                .any(|a| a.starts_with("dynamodb:") || a.starts_with("sqs:"));
            if data && strings(&s["Resource"]).iter().any(|r| r.contains('*')) {
                problems.push(format!(
                    "{id}: role grants {actions:?} on Resource \"*\"; name the table or queue"
                ));
            }
            if actions
                .iter()
                .any(|a| (a.starts_with("dynamodb:") || a.starts_with("sqs:")) && a.contains('*'))
            {
                problems.push(format!("{id}: role grants wildcard actions {actions:?}"));
            }
        }
        let grants = |action: &str, target: &str| {
            statements.iter().any(|s| {
                strings(&s["Action"]).iter().any(|a| a == action)
                    && refs(&s["Resource"]).iter().any(|r| r == target)
            })
        };

        for (name, ev) in p["Events"].as_object().into_iter().flatten() {
            let ep = &ev["Properties"];
            let partial = strings(&ep["FunctionResponseTypes"])
                .iter()
                .any(|x| x == "ReportBatchItemFailures");
            match ev["Type"].as_str() {
                Some("SQS") => {
                    if !partial {
                        problems.push(format!("{id}.{name}: FunctionResponseTypes must include ReportBatchItemFailures, or one failure redelivers the whole batch"));
                    }
                    let Some(qid) = ref_target(&ep["Queue"]) else {
                        problems.push(format!(
                            "{id}.{name}: the queue must be a resource of this template"
                        ));
                        continue;
                    };
                    let q = &resources
                        .get(qid)
                        .map(|q| q["Properties"].clone())
                        .unwrap_or_default();
                    let visibility = as_u64(t, &q["VisibilityTimeout"]).unwrap_or(30);
                    let retention = as_u64(t, &q["MessageRetentionPeriod"]).unwrap_or(345_600);
                    if visibility < 6 * timeout {
                        problems.push(format!("{qid}: visibility timeout {visibility}s is under 6 x the function timeout ({timeout}s)"));
                    }
                    if env("DEDUP_RECONCILIATION_QUEUE_URL").is_null() {
                        problems.push(format!("{id}: environment variable DEDUP_RECONCILIATION_QUEUE_URL is missing (late events, S10)"));
                    }
                    let redrive = &q["RedrivePolicy"];
                    let receives = as_u64(t, &redrive["maxReceiveCount"]);
                    let dlq = ref_target(&redrive["deadLetterTargetArn"]);
                    if receives.is_none() || dlq.is_none() {
                        problems.push(format!("{qid}: needs a RedrivePolicy to a dead-letter queue of this template (rejected and conflicting messages end there)"));
                    }
                    let receives = receives.unwrap_or(0);
                    let mark_retention =
                        as_u64(t, &env("DEDUP_RETENTION_SECONDS")).unwrap_or(30 * 86_400);
                    let replay =
                        as_u64(t, &env("DEDUP_REPLAY_WINDOW_SECONDS")).unwrap_or(3 * 86_400);
                    // A message may wait in the DLQ for its retention and be redriven (S9).
                    let dlq_retention = dlq
                        .and_then(|d| resources.get(d))
                        .and_then(|d| as_u64(t, &d["Properties"]["MessageRetentionPeriod"]))
                        .unwrap_or(345_600);
                    let horizon = retention + 2 * receives * visibility + dlq_retention + replay;
                    if mark_retention <= horizon {
                        problems.push(format!(
                            "{id}: mark retention {mark_retention}s does not exceed the redelivery horizon {horizon}s \
                             of {qid} (retention {retention}s + 2 x {receives} x {visibility}s + DLQ retention \
                             {dlq_retention}s + replay window {replay}s) (S9)"
                        ));
                    }
                    for (var, actual) in [
                        ("DEDUP_QUEUE_RETENTION_SECONDS", retention),
                        ("DEDUP_MAX_RECEIVE_COUNT", receives),
                        ("DEDUP_VISIBILITY_TIMEOUT_SECONDS", visibility),
                        ("DEDUP_DLQ_RETENTION_SECONDS", dlq_retention),
                    ] {
                        if as_u64(t, &env(var)) != Some(actual) {
                            problems.push(format!("{id}: {var} must equal {qid}'s setting ({actual}), or the function checks retention against the wrong horizon"));
                        }
                    }
                    for action in [
                        "sqs:ReceiveMessage",
                        "sqs:DeleteMessage",
                        "sqs:GetQueueAttributes",
                    ] {
                        if !grants(action, qid) {
                            problems.push(format!("{id}: role must grant {action} on {qid}"));
                        }
                    }
                    if let Some(dlq) = dlq
                        && !has_alarm(&resources, |a| {
                            a["Namespace"] == "AWS/SQS"
                                && refs(&a["Dimensions"]).iter().any(|r| r == dlq)
                        })
                    {
                        problems.push(format!("{dlq}: needs an alarm on its depth (ApproximateNumberOfMessagesVisible > 0)"));
                    }
                    if !has_alarm(&resources, |a| {
                        a["Namespace"] == "lambda-dedup"
                            && a["MetricName"] == "Conflict"
                            && a["Dimensions"]
                                .as_array()
                                .is_some_and(|d| d.iter().any(|d| d["Value"] == crate_name))
                    }) {
                        problems.push(format!("{id}: needs an alarm on its Conflict metric (S11)"));
                    }
                }
                Some("DynamoDB") => {
                    if !partial {
                        problems.push(format!("{id}.{name}: FunctionResponseTypes must include ReportBatchItemFailures"));
                    }
                    if ep["DestinationConfig"]["OnFailure"].is_null() {
                        problems.push(format!("{id}.{name}: a stream trigger needs DestinationConfig.OnFailure, or records it gives up on are lost"));
                    }
                    stream_trigger_never_stalls(&mut problems, &format!("{id}.{name}"), ep);
                    if !env("INTENTS_TABLE").is_null() {
                        relay_redrives_what_the_stream_gives_up(
                            &mut problems,
                            id,
                            p,
                            &resources,
                            crate_name,
                        );
                    }
                }
                _ => {}
            }
        }
    }
    problems
}

/// S12, S15: a shard never stalls on one record: a failing batch is bisected down to the
/// record that fails, and a record is given up (to the OnFailure destination) once older than a
/// bound within the stream's 24-hour retention.
fn stream_trigger_never_stalls(problems: &mut Vec<String>, at: &str, ep: &Value) {
    if ep["BisectBatchOnFunctionError"] != Value::Bool(true) {
        problems.push(format!(
            "{at}: BisectBatchOnFunctionError must be true, so one record that keeps failing cannot stall its shard"
        ));
    }
    match ep["MaximumRecordAgeInSeconds"].as_u64() {
        Some(age) if (60..=86_400).contains(&age) => {}
        _ => problems.push(format!(
            "{at}: MaximumRecordAgeInSeconds must be set (60..=86400), so a shard moves on from a record it cannot process"
        )),
    }
}

/// S7: a relay of intents re-drives what its stream gave up: a scheduled sweep, and an alarm on
/// the age of the oldest pending intent, so nothing stays PENDING silently.
fn relay_redrives_what_the_stream_gives_up(
    problems: &mut Vec<String>,
    id: &str,
    p: &Value,
    resources: &serde_json::Map<String, Value>,
    crate_name: &str,
) {
    let scheduled = p["Events"]
        .as_object()
        .into_iter()
        .flatten()
        .any(|(_, ev)| ev["Type"] == "Schedule");
    if !scheduled {
        problems.push(format!(
            "{id}: needs a Schedule event for its sweep, which re-drives intents left PENDING when the stream gives their records up"
        ));
    }
    let alarmed = has_alarm(resources, |a| {
        a["MetricName"] == "OldestPendingSeconds"
            && a["Dimensions"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["Value"] == crate_name))
    });
    if !alarmed {
        problems.push(format!(
            "{id}: needs an alarm on OldestPendingSeconds, so an intent left PENDING is noticed"
        ));
    }
}

fn has_alarm(resources: &serde_json::Map<String, Value>, pred: impl Fn(&Value) -> bool) -> bool {
    resources
        .values()
        .any(|r| r["Type"] == "AWS::CloudWatch::Alarm" && pred(&r["Properties"]))
}

/// A string or a list of strings.
fn strings(v: &Value) -> Vec<String> {
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
fn ref_target(v: &Value) -> Option<&str> {
    v["Ref"]
        .as_str()
        .or_else(|| {
            v["Fn::GetAtt"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(|x| x.as_str())
        })
        .or_else(|| v["Fn::GetAtt"].as_str().and_then(|s| s.split('.').next()))
}

/// Every logical id referenced anywhere inside `v`.
fn refs(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(t) = ref_target(v) {
        out.push(t.to_owned());
    }
    match v {
        Value::Array(a) => a.iter().for_each(|x| out.extend(refs(x))),
        Value::Object(o) => o.values().for_each(|x| out.extend(refs(x))),
        _ => {}
    }
    out
}

/// A number, a numeric string, or a `Ref` to a parameter with a numeric default.
fn as_u64(t: &Value, v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => {
            let name = v["Ref"].as_str()?;
            let default = &t["Parameters"][name]["Default"];
            if default.is_null() {
                None
            } else {
                as_u64(t, default)
            }
        }
    }
}

/// `cargo xtask check-infra`: the checks above, then `cfn-lint`.
pub(crate) fn run(root: &Path) -> Result<()> {
    let path = root.join("infra").join("template.yaml");
    let t = load(&path)?;
    let problems = check(&t);
    if !problems.is_empty() {
        return Err(format!(
            "infra/template.yaml breaks {} invariant(s):\n  - {}",
            problems.len(),
            problems.join("\n  - ")
        ));
    }
    println!("xtask: check-infra: infra/template.yaml keeps every guarded invariant");
    let bin = crate::tools::ensure(root)?;
    let status = std::process::Command::new(bin.join("cfn-lint"))
        .arg(&path)
        .status()
        .map_err(|e| format!("cfn-lint: {e}"))?;
    if !status.success() {
        return Err("cfn-lint found problems in infra/template.yaml".into());
    }
    println!("xtask: check-infra: cfn-lint clean");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Value {
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/template.yaml"))
            .expect("template")
    }

    fn broken(edit: impl FnOnce(&mut Value), expect: &str) {
        let mut t = template();
        edit(&mut t);
        let problems = check(&t);
        assert!(
            problems.iter().any(|p| p.contains(expect)),
            "expected a problem mentioning {expect:?}, got {problems:#?}"
        );
    }

    fn res<'a>(t: &'a mut Value, id: &str) -> &'a mut Value {
        &mut t["Resources"][id]["Properties"]
    }

    #[test]
    fn the_committed_template_keeps_every_invariant() {
        assert_eq!(check(&template()), Vec::<String>::new());
    }

    #[test]
    fn s9_retention_below_the_horizon_is_refused() {
        broken(
            |t| t["Parameters"]["RetentionSeconds"]["Default"] = 86_400.into(),
            "does not exceed the redelivery horizon",
        );
        broken(
            |t| t["Parameters"]["ReplayWindowSeconds"]["Default"] = 2_000_000.into(),
            "does not exceed the redelivery horizon",
        );
        broken(
            |t| res(t, "LedgerProjectorQueue")["MessageRetentionPeriod"] = 1_209_600.into(),
            "does not exceed the redelivery horizon",
        );
        // A redrive from the DLQ days later is part of the horizon: the old 14-day retention
        // does not cover 14 days in the DLQ on top of the queue's 4 and the replay window.
        broken(
            |t| t["Parameters"]["RetentionSeconds"]["Default"] = 1_209_600.into(),
            "DLQ retention",
        );
    }

    #[test]
    fn s9_the_dlq_retention_variable_must_match_the_dlq() {
        broken(
            |t| res(t, "LedgerProjectorDLQ")["MessageRetentionPeriod"] = 345_600.into(),
            "DEDUP_DLQ_RETENTION_SECONDS must equal",
        );
    }

    #[test]
    fn s9_function_horizon_variables_must_match_the_queue() {
        broken(
            |t| {
                t["Globals"]["Function"]["Environment"]["Variables"]["DEDUP_MAX_RECEIVE_COUNT"] =
                    "3".into()
            },
            "DEDUP_MAX_RECEIVE_COUNT must equal",
        );
        broken(
            |t| res(t, "FineNoticesQueue")["VisibilityTimeout"] = 240.into(),
            "DEDUP_VISIBILITY_TIMEOUT_SECONDS must equal",
        );
    }

    #[test]
    fn mark_table_needs_ttl_key_and_stream() {
        broken(
            |t| res(t, "MarkTable")["TimeToLiveSpecification"]["AttributeName"] = "ttl".into(),
            "TTL enabled on `expires_at`",
        );
        broken(
            |t| res(t, "MarkTable")["TimeToLiveSpecification"] = Value::Null,
            "TTL enabled",
        );
        broken(
            |t| res(t, "MarkTable")["StreamSpecification"] = Value::Null,
            "stream with old images",
        );
        broken(
            |t| res(t, "MarkTable")["StreamSpecification"]["StreamViewType"] = "KEYS_ONLY".into(),
            "stream with old images",
        );
    }

    /// S4: a mark table replicated as an eventually consistent global table is refused;
    /// strongly consistent multi-Region replication is allowed.
    #[test]
    fn an_eventually_consistent_global_mark_table_is_refused() {
        let global = |t: &mut Value, consistency: Option<&str>| {
            let table = &mut t["Resources"]["MarkTable"];
            table["Type"] = "AWS::DynamoDB::GlobalTable".into();
            table["Properties"]["Replicas"] =
                serde_json::json!([{"Region": "eu-west-1"}, {"Region": "eu-west-3"}]);
            if let Some(c) = consistency {
                table["Properties"]["MultiRegionConsistency"] = c.into();
            }
        };
        broken(|t| global(t, None), "MultiRegionConsistency: STRONG");
        broken(
            |t| global(t, Some("EVENTUAL")),
            "MultiRegionConsistency: STRONG",
        );
        let mut t = template();
        global(&mut t, Some("STRONG"));
        assert_eq!(check(&t), Vec::<String>::new());
    }

    #[test]
    fn triggers_need_partial_batch_responses_and_dead_letters() {
        broken(
            |t| {
                res(t, "LedgerProjector")["Events"]["Queue"]["Properties"]["FunctionResponseTypes"] =
                    Value::Null
            },
            "ReportBatchItemFailures",
        );
        broken(
            |t| {
                res(t, "IntentRelay")["Events"]["Intents"]["Properties"]["FunctionResponseTypes"] =
                    Value::Null
            },
            "ReportBatchItemFailures",
        );
        broken(
            |t| res(t, "PaymentDispatcherQueue")["RedrivePolicy"] = Value::Null,
            "RedrivePolicy",
        );
        broken(
            |t| {
                res(t, "FineNotices")["Environment"]["Variables"]["DEDUP_RECONCILIATION_QUEUE_URL"] =
                    Value::Null
            },
            "DEDUP_RECONCILIATION_QUEUE_URL",
        );
        broken(
            |t| {
                res(t, "IntentRelay")["Events"]["Intents"]["Properties"]["DestinationConfig"] =
                    Value::Null
            },
            "OnFailure",
        );
    }

    /// S12, S15: a stream trigger must bisect failing batches and give up records past an age,
    /// and the intent relay must sweep and alarm on what is left pending.
    #[test]
    fn stream_triggers_never_stall_and_the_relay_redrives() {
        broken(
            |t| {
                res(t, "IntentRelay")["Events"]["Intents"]["Properties"]["BisectBatchOnFunctionError"] =
                    false.into()
            },
            "BisectBatchOnFunctionError must be true",
        );
        broken(
            |t| {
                res(t, "MarkAuditor")["Events"]
                    .as_object_mut()
                    .and_then(|e| e.values_mut().next())
                    .expect("a trigger")["Properties"]["MaximumRecordAgeInSeconds"] = Value::Null
            },
            "MaximumRecordAgeInSeconds must be set",
        );
        broken(
            |t| {
                res(t, "IntentRelay")["Events"]
                    .as_object_mut()
                    .expect("events")
                    .remove("Sweep");
            },
            "needs a Schedule event",
        );
        broken(
            |t| {
                t["Resources"]
                    .as_object_mut()
                    .expect("resources")
                    .remove("IntentRelayOldestPendingAlarm");
            },
            "OldestPendingSeconds",
        );
    }

    #[test]
    fn visibility_timeout_must_cover_six_function_timeouts() {
        broken(
            |t| t["Globals"]["Function"]["Timeout"] = 60.into(),
            "under 6 x the function timeout",
        );
    }

    #[test]
    fn least_privilege_is_enforced() {
        broken(
            |t| {
                res(t, "LedgerProjectorRole")["Policies"][0]["PolicyDocument"]["Statement"][0]["Resource"] =
                    "*".into()
            },
            "Resource \"*\"",
        );
        broken(
            |t| {
                res(t, "FineNoticesRole")["Policies"][0]["PolicyDocument"]["Statement"][0]["Action"] =
                    "dynamodb:*".into()
            },
            "wildcard actions",
        );
        broken(
            |t| {
                let p = res(t, "PaymentDispatcher");
                p["Role"] = Value::Null;
                p["Policies"] = serde_json::json!([{"SQSPollerPolicy": {"QueueName": "x"}}]);
            },
            "explicit role",
        );
        broken(
            |t| {
                let stmts = &mut res(t, "LedgerProjectorRole")["Policies"][0]["PolicyDocument"]["Statement"];
                if let Some(a) = stmts.as_array_mut() {
                    a.retain(|s| s["Sid"] != "OwnQueue");
                }
            },
            "role must grant sqs:ReceiveMessage",
        );
    }

    #[test]
    fn runtime_architecture_and_logging_are_enforced() {
        broken(
            |t| t["Globals"]["Function"]["Architectures"] = serde_json::json!(["x86_64"]),
            "arm64",
        );
        broken(
            |t| res(t, "FineNotices")["LoggingConfig"]["LogFormat"] = "Text".into(),
            "JSON",
        );
        broken(
            |t| t["Globals"]["Function"]["Runtime"] = "provided.al2".into(),
            "provided.al2023",
        );
        broken(
            |t| t["Resources"]["IntentRelay"]["Metadata"] = Value::Null,
            "rust-cargolambda",
        );
    }

    #[test]
    fn alarms_are_required() {
        broken(
            |t| {
                t["Resources"]
                    .as_object_mut()
                    .map(|r| r.remove("LedgerProjectorDLQAlarm"));
            },
            "alarm on its depth",
        );
        broken(
            |t| {
                t["Resources"]
                    .as_object_mut()
                    .map(|r| r.remove("PaymentDispatcherConflictAlarm"));
            },
            "Conflict metric",
        );
    }

    #[test]
    fn short_form_tags_get_a_clear_message() {
        let dir = std::env::temp_dir().join(format!("check-infra-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("t.yaml");
        std::fs::write(
            &p,
            "Resources:\n  A:\n    Properties:\n      Queue: !GetAtt Q.Arn\n",
        )
        .expect("write");
        let err = load(&p).expect_err("tags are refused");
        assert!(err.contains("long form"), "{err}");
    }
}
