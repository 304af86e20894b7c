//! `cargo xtask check-infra`: refuses a deployment template that breaks what the functions rely
//! on. Short-form intrinsics (`!Ref`, `!GetAtt`, …) are read as their long form
//! (`lambda_dedup_cli::template`). Two halves, one verdict:
//!
//! - every rule a rule language can state is in `infra/rules/*.guard`, run by `cfn-guard` (the
//!   command a user's own pipeline runs, [`guard_rules`]), the joins across resources included
//!   (each DLQ and parking queue and its depth alarm, the Conflict and OldestPendingSeconds
//!   alarms, the grants a trigger and a parking queue need, the forwarded stream's new images);
//! - what needs arithmetic stays here ([`check`]; cfn-guard compares values, it cannot add or
//!   multiply them, nor fall back from a function's property to `Globals` and a parameter's
//!   default): S9, mark retention > queue retention + 2 × maxReceiveCount × visibility timeout +
//!   DLQ retention + replay window, and the `DEDUP_*` horizon variables equal to the queue's
//!   settings; visibility ≥ 6 × the function timeout; and least privilege against a full test
//!   run's recorded calls ([`privileges`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use lambda_dedup_config as settings;
use local_lambda::plan::{as_u64, ref_target, strings};
use serde_json::Value;

use crate::Result;

/// Loads a template, short-form intrinsics (`!Ref`, `!GetAtt`, `!Sub`…) read as their long form.
pub(crate) fn load(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    lambda_dedup_cli::template::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// What needs computing, wrong in `t`; empty when it is sound. The other rules are cfn-guard's.
pub(crate) fn check(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    problems.extend(leading_keys(t));
    problems.extend(forwarded_queue_senders(t));
    problems.extend(substituted_wildcards(t));
    problems.extend(service_senders_bound(t));
    problems.extend(secrets_by_arn(t));
    problems.extend(crate::fanout::check(t));
    problems.extend(durable(t));
    for f in functions(t) {
        // One deadline margin: a relay's `{ROLE}_DEADLINE_MARGIN_MS` was its record budget
        // under a margin's name, and refuses the start (`lambda_dedup_config`).
        for (var, _) in f.environment(t) {
            if let Some(role) = var
                .strip_suffix("_DEADLINE_MARGIN_MS")
                .filter(|_| var != settings::MARGIN_VAR)
            {
                problems.push(format!(
                    "{}: {var} is no longer read (the function would not start): the time one \
                     record needs is {role}_RECORD_BUDGET_MS, the time kept before the deadline \
                     {}",
                    f.id,
                    settings::MARGIN_VAR
                ));
            }
        }
        for ev in f.p["Events"]
            .as_object()
            .into_iter()
            .flat_map(|e| e.values())
        {
            // A queue that is not a resource of this template: `infra/rules/triggers.guard`.
            let Some(qid) = ref_target(&ev["Properties"]["Queue"]).filter(|_| ev["Type"] == "SQS")
            else {
                continue;
            };
            let q = &t["Resources"][qid]["Properties"];
            let num = |v: &Value, default: u64| as_u64(t, v).unwrap_or(default);
            let (visibility, retention) = (
                num(&q["VisibilityTimeout"], 30),
                num(&q["MessageRetentionPeriod"], 345_600),
            );
            let receives = num(&q["RedrivePolicy"]["maxReceiveCount"], 0);
            // A message may wait in the DLQ for its retention and be redriven (S9).
            let dlq_retention =
                ref_target(&q["RedrivePolicy"]["deadLetterTargetArn"]).map_or(345_600, |d| {
                    num(
                        &t["Resources"][d]["Properties"]["MessageRetentionPeriod"],
                        345_600,
                    )
                });
            // AWS's rule for SQS triggers: visibility timeout at least 6 × the function timeout.
            let timeout = f.timeout;
            if visibility < 6 * timeout {
                problems.push(format!(
                    "{qid}: visibility timeout {visibility}s is under 6 x the function timeout ({timeout}s)"
                ));
            }
            // S9, by the function's own settings reader: with the queue's real horizon, would
            // the function start? (Its retention, replay window, lease and timeouts as it reads
            // them, defaults included: nothing restated here.)
            let horizon = [
                (settings::QUEUE_RETENTION_VAR, retention),
                (settings::MAX_RECEIVE_COUNT_VAR, receives),
                (settings::VISIBILITY_TIMEOUT_VAR, visibility),
                (settings::DLQ_RETENTION_VAR, dlq_retention),
            ];
            let mut env = f.environment(t);
            env.extend(horizon.map(|(k, v)| (k.to_owned(), v.to_string())));
            if let Err(e) = settings::Settings::read(&settings::Env::from_pairs(env), f.crate_name)
            {
                problems.push(format!(
                    "{}: with {qid}'s redelivery horizon (retention {retention}s + 2 x {receives} x \
                     {visibility}s + DLQ retention {dlq_retention}s) the function would not start: {e}",
                    f.id
                ));
            }
            // S9: the functions check retention at start against their `DEDUP_*` horizon
            // variables, so those must be the queue's real settings.
            for (var, actual) in horizon {
                if as_u64(t, &f.env(var)) != Some(actual) {
                    problems.push(format!("{}: {var} must equal {qid}'s setting ({actual}), or the function checks retention against the wrong horizon", f.id));
                }
            }
        }
    }
    problems
}

/// Lambda durable functions (S9 as extended, S16): a function's `DurableConfig` and the
/// `DURABLE_*` variables its settings are read from are the same values (the same parameter or
/// literal, so no deployment's parameters set them apart), the function would start with them
/// (the marks' retention above the execution timeout: a step's mark outlives every replay),
/// and a dispatcher (`DURABLE_FUNCTION` naming it) reads the same values, and starts with them.
fn durable(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let all = functions(t);
    let vars = [
        ("ExecutionTimeout", settings::DURABLE_TIMEOUT_VAR),
        ("RetentionPeriodInDays", settings::DURABLE_RETENTION_VAR),
    ];
    for f in all.iter().filter(|f| !f.p["DurableConfig"].is_null()) {
        let config = &f.p["DurableConfig"];
        for (property, var) in vars {
            if f.env(var) != config[property] {
                problems.push(format!(
                    "{}: {var} must be DurableConfig.{property} itself (the same parameter), or \
                     the step guard checks its marks' retention against another execution timeout",
                    f.id
                ));
            }
        }
        // Whoever starts it: the dispatchers naming this function.
        let name = &f.p["FunctionName"];
        let starters = all.iter().filter(|d| {
            let target = d.env("DURABLE_FUNCTION");
            !name.is_null() && refs_name(&target, name) || refs(&target).iter().any(|r| r == f.id)
        });
        for d in std::iter::once(f).chain(starters) {
            if d.id != f.id {
                for (property, var) in vars {
                    if d.env(var) != config[property] {
                        problems.push(format!(
                            "{}: {var} must be {}'s DurableConfig.{property} (the same \
                             parameter): the dispatcher's S16 check reads it",
                            d.id, f.id
                        ));
                    }
                }
            }
            let env = settings::Env::from_pairs(d.environment(t));
            let started = settings::Settings::read(&env, d.crate_name)
                .and_then(|s| settings::DurableConfig::read(&env, &s));
            if let Err(e) = started {
                problems.push(format!(
                    "{}: with {}'s DurableConfig the function would not start: {e}",
                    d.id, f.id
                ));
            }
        }
    }
    problems
}

/// Whether `target` (a `DURABLE_FUNCTION` value) names the function called `name` (its
/// `FunctionName`, a `!Sub` text): the `!Sub` text with a qualifier after the name.
fn refs_name(target: &Value, name: &Value) -> bool {
    let text = |v: &Value| v["Fn::Sub"].as_str().or(v.as_str()).map(str::to_owned);
    match (text(target), text(name)) {
        (Some(target), Some(name)) => target
            .rsplit_once(':')
            .is_some_and(|(unqualified, _)| unqualified.ends_with(&format!("function:{name}"))),
        _ => false,
    }
}

/// What is wrong in `t`, the template of functions on Lambda Managed Instances
/// (`infra/managed-instances.yaml`); empty when it is sound: a capacity provider, every function
/// on it (`CapacityProviderConfig` naming it) with the 2 GiB an execution environment needs at
/// least, and each function's variables (parameter defaults for the queue's settings) accepted by
/// its own settings reader, so it starts (S9).
pub(crate) fn check_managed_instances(t: &Value) -> Vec<String> {
    let mut problems = leading_keys(t);
    let providers: Vec<&String> = of_type(t, "AWS::Serverless::CapacityProvider")
        .map(|(id, _)| id)
        .collect();
    if providers.is_empty() {
        problems.push("no AWS::Serverless::CapacityProvider to run the functions on".to_owned());
    }
    let fs = functions(t);
    if fs.is_empty() {
        problems.push("no function".to_owned());
    }
    for f in fs {
        let on = ref_target(&f.p["CapacityProviderConfig"]["Arn"]);
        if !on.is_some_and(|id| providers.iter().any(|p| *p == id)) {
            problems.push(format!(
                "{}: CapacityProviderConfig.Arn names none of the template's capacity providers",
                f.id
            ));
        }
        let memory = if f.p["MemorySize"].is_null() {
            &f.global["MemorySize"]
        } else {
            &f.p["MemorySize"]
        };
        if as_u64(t, memory).unwrap_or(128) < 2048 {
            problems.push(format!(
                "{}: MemorySize under 2048 MB, below what a managed execution environment needs",
                f.id
            ));
        }
        let env = f.environment(t);
        if let Err(e) = settings::Settings::read(&settings::Env::from_pairs(env), f.crate_name) {
            problems.push(format!("{}: the function would not start: {e}", f.id));
        }
    }
    problems
}

/// One function of the template: its properties, with `Globals` filling what it leaves out, and
/// the statements of its role (none without an explicit role: `infra/rules/functions.guard`
/// refuses that).
struct Function<'a> {
    id: &'a str,
    p: &'a Value,
    global: &'a Value,
    crate_name: &'a str,
    timeout: u64,
    statements: Vec<&'a Value>,
}

/// The resources of `t` of the type `ty`, with their ids.
fn of_type<'a>(t: &'a Value, ty: &'a str) -> impl Iterator<Item = (&'a String, &'a Value)> {
    let resources = t["Resources"].as_object().into_iter().flatten();
    resources.filter(move |(_, r)| r["Type"] == ty)
}

/// Whether `statement`'s actions include sending to a queue.
fn sends(statement: &Value) -> bool {
    strings(&statement["Action"])
        .iter()
        .any(|a| a == "sqs:SendMessage" || a == "sqs:*")
}

/// The template's functions.
fn functions(t: &Value) -> Vec<Function<'_>> {
    let global = &t["Globals"]["Function"];
    of_type(t, "AWS::Serverless::Function")
        .map(|(id, r)| {
            let p = &r["Properties"];
            let role = ref_target(&p["Role"]).map(|rid| &t["Resources"][rid]);
            let statements = role
                .filter(|role| role["Type"] == "AWS::IAM::Role")
                .and_then(|role| role["Properties"]["Policies"].as_array())
                .into_iter()
                .flatten()
                .filter_map(|pol| pol["PolicyDocument"]["Statement"].as_array())
                .flatten()
                .collect();
            let timeout = if p["Timeout"].is_null() {
                &global["Timeout"]
            } else {
                &p["Timeout"]
            };
            Function {
                id,
                p,
                global,
                // A crate's binary of its own (`BuildProperties.Binary`, as cargo-lambda
                // builds it), else the crate's.
                crate_name: r["Metadata"]["BuildProperties"]["Binary"]
                    .as_str()
                    .or_else(|| p["CodeUri"].as_str().and_then(|u| u.rsplit('/').next()))
                    .unwrap_or(id),
                timeout: as_u64(t, timeout).unwrap_or(3),
                statements,
            }
        })
        .collect()
}

impl Function<'_> {
    /// The function's variables as the template gives them (`Globals` first): a parameter's
    /// default for its `Ref`, a resource's logical id for its; other intrinsics as their name.
    fn environment(&self, t: &Value) -> Vec<(String, String)> {
        let vars = |v: &Value| v["Environment"]["Variables"].as_object().cloned();
        let mut all: BTreeMap<String, Value> = BTreeMap::new();
        all.extend(vars(self.global).into_iter().flatten());
        all.extend(vars(self.p).into_iter().flatten());
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => match ref_target(other) {
                Some(id) => match &t["Parameters"][id]["Default"] {
                    Value::Null => id.to_owned(),
                    Value::String(s) => s.clone(),
                    d => d.to_string(),
                },
                None => other.to_string(),
            },
        };
        all.iter().map(|(k, v)| (k.clone(), text(v))).collect()
    }

    /// An environment variable, or the `Globals` one.
    fn env(&self, k: &str) -> Value {
        let v = &self.p["Environment"]["Variables"][k];
        if v.is_null() {
            self.global["Environment"]["Variables"][k].clone()
        } else {
            v.clone()
        }
    }

    /// Whether the role grants `action` on the resource `target`.
    fn grants(&self, action: &str, target: &str) -> bool {
        self.statements.iter().any(|s| {
            strings(&s["Action"]).iter().any(|a| a == action)
                && refs(&s["Resource"]).iter().any(|r| r == target)
        })
    }
}

/// Stream actions: they read a table's stream, carry no item key, and take no
/// `dynamodb:LeadingKeys` condition.
const STREAM_ACTIONS: [&str; 4] = [
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
];

/// The condition key that scopes a grant to the items whose partition key matches it.
const LEADING_KEYS: &str = "dynamodb:LeadingKeys";

impl Function<'_> {
    /// The tables whose items are this function's marks: the mark table (`DEDUP_MARK_TABLE`)
    /// and, for a webhook receiver, its inbox (`INBOX_TABLE`: the inbox item is the mark).
    fn mark_tables(&self, t: &Value) -> Vec<String> {
        let webhook = t["Resources"][self.id]["Metadata"]["LambdaDedupKind"] == "webhook";
        let mut vars = vec![settings::MARK_TABLE_VAR];
        if webhook {
            vars.push("INBOX_TABLE");
        }
        vars.into_iter()
            .filter_map(|v| ref_target(&self.env(v)).map(str::to_owned))
            .collect()
    }

    /// The inbox a relay of it serves (the inbox forwarder: `INBOX_TABLE`, not a webhook
    /// receiver), with the keys of the receiver that writes it (`${Namespace}#<consumer>#*`).
    fn served_inbox(&self, t: &Value) -> Option<(String, Option<String>)> {
        if t["Resources"][self.id]["Metadata"]["LambdaDedupKind"] == "webhook" {
            return None;
        }
        let table = ref_target(&self.env("INBOX_TABLE"))?.to_owned();
        let writer = functions(t).into_iter().find(|w| {
            t["Resources"][w.id]["Metadata"]["LambdaDedupKind"] == "webhook"
                && ref_target(&w.env("INBOX_TABLE")) == Some(table.as_str())
        });
        Some((table, writer.and_then(|w| w.own_keys())))
    }

    /// The consumer in the function's keys: `DEDUP_CONSUMER`, or the function's name.
    fn consumer(&self) -> String {
        match self.env("DEDUP_CONSUMER") {
            Value::String(s) => s,
            _ => self.crate_name.to_owned(),
        }
    }

    /// The `dynamodb:LeadingKeys` pattern its mark-table grants must carry, as the template
    /// spells it: `${Namespace}#<consumer>#*` (the key format of `lambda_dedup::DedupKey`);
    /// `None` without a `DEDUP_NAMESPACE` (refused as such: the function would not start).
    fn own_keys(&self) -> Option<String> {
        let namespace = match self.env("DEDUP_NAMESPACE") {
            Value::Null => return None,
            Value::String(s) => s,
            v => ref_target(&v).map_or_else(|| v.to_string(), |p| format!("${{{p}}}")),
        };
        Some(format!("{namespace}#{}#*", self.consumer()))
    }

    /// The statements granting item actions (not stream reads) on the table `target`: its
    /// `!GetAtt`, or an ARN `!Sub` naming it (`table/${MarkTable}`, a table given as a
    /// parameter).
    fn item_grants<'s>(&'s self, target: &'s str) -> impl Iterator<Item = &'s Value> + 's {
        let named = move |r: &Value| {
            let sub = r["Fn::Sub"].as_str().unwrap_or_default();
            sub.contains(&format!("table/${{{target}}}")) || refs(r).iter().any(|id| id == target)
        };
        self.statements.iter().copied().filter(move |s| {
            let resources = match &s["Resource"] {
                Value::Array(a) => a.iter().collect(),
                r => vec![r],
            };
            strings(&s["Action"])
                .iter()
                .any(|a| a.starts_with("dynamodb:") && !STREAM_ACTIONS.contains(&a.as_str()))
                && resources.into_iter().any(named)
        })
    }
}

/// A statement's `ForAllValues:StringLike` `dynamodb:LeadingKeys` patterns as the template
/// spells them (a `!Sub` as its text); `None` without that condition.
fn leading_key_patterns(statement: &Value) -> Option<Vec<String>> {
    let v = &statement["Condition"]["ForAllValues:StringLike"][LEADING_KEYS];
    let list = match v {
        Value::Array(a) => a.clone(),
        Value::Null => return None,
        x => vec![x.clone()],
    };
    Some(
        list.iter()
            .map(|p| match p {
                Value::String(s) => s.clone(),
                other => other["Fn::Sub"]
                    .as_str()
                    .map_or_else(|| other.to_string(), str::to_owned),
            })
            .collect(),
    )
}

/// S1 (tenant and consumer separation), in the roles: every grant on a function's mark table
/// carries a `ForAllValues:StringLike` `dynamodb:LeadingKeys` condition naming exactly its own
/// consumer's keys (`${Namespace}#<consumer>#*`), so one consumer's role cannot overwrite,
/// release or read another's marks in the shared table. (`infra/rules/roles.guard` refuses a
/// mark-table grant without the condition; this also checks whose keys it names.)
fn leading_keys(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for f in functions(t) {
        let own = f.own_keys();
        let scope = own.as_deref().unwrap_or("namespace#consumer#*");
        for table in f.mark_tables(t) {
            for st in f.item_grants(&table) {
                let sid = st["Sid"].as_str().unwrap_or("a statement");
                match leading_key_patterns(st) {
                    None => problems.push(format!(
                        "{}: its role's {sid} grant on {table} has no ForAllValues:StringLike \
                         {LEADING_KEYS} condition: it could write any consumer's marks (S1); \
                         scope it to {scope}",
                        f.id
                    )),
                    Some(patterns) if !own_only(own.as_deref(), &patterns) => {
                        problems.push(format!(
                        "{}: its role's {sid} grant on {table} is scoped to {patterns:?}, not to \
                         its own consumer's keys {scope} (S1)",
                        f.id
                    ))
                    }
                    Some(_) => {}
                }
            }
        }
        // The forwarder's grants on the inbox it serves: its item writes scoped to the
        // receiver's keys; a Scan alone names no key, and no condition could bound it.
        if let Some((table, writer)) = f.served_inbox(t) {
            let scope = writer.as_deref().unwrap_or("namespace#consumer#*");
            for st in f.item_grants(&table) {
                if strings(&st["Action"]).iter().all(|a| a == "dynamodb:Scan") {
                    continue;
                }
                let sid = st["Sid"].as_str().unwrap_or("a statement");
                match leading_key_patterns(st) {
                    Some(patterns) if own_only(writer.as_deref(), &patterns) => {}
                    _ => problems.push(format!(
                        "{}: its role's {sid} grant on {table} must be scoped by a \
                         ForAllValues:StringLike {LEADING_KEYS} condition to the receiver's keys \
                         {scope} (only a Scan alone is not)",
                        f.id
                    )),
                }
            }
        }
    }
    problems
}

/// Whether `patterns` name exactly one pattern, `own` (any one pattern when `own` is unknown).
fn own_only(own: Option<&str>, patterns: &[String]) -> bool {
    match patterns {
        [one] => own.is_none_or(|own| own == one),
        _ => false,
    }
}

/// Whether `value` matches the IAM `StringLike` pattern `pattern` (`*` any run of characters,
/// `?` one character).
fn string_like(pattern: &str, value: &str) -> bool {
    let (p, v): (Vec<char>, Vec<char>) = (pattern.chars().collect(), value.chars().collect());
    // Classic glob matching with one backtrack point.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < v.len() {
        if i < p.len() && (p[i] == '?' || p[i] == v[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// Issue 42: a queue an inbox forwarder sends webhook events to (`FORWARD_QUEUE_URL`) names who
/// may send to it: its policy denies `sqs:SendMessage` to every principal whose ARN is not one
/// named (`aws:PrincipalArn`), the forwarder's role among them. Otherwise any principal of the
/// account could put a message on it naming any tenant, and the consumer, which trusts the
/// queue's producers with the tenant, would apply it. (A join through `Fn::If` and `Fn::Split`,
/// which cfn-guard does not evaluate: here.)
fn forwarded_queue_senders(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for f in functions(t) {
        let url = f.env("FORWARD_QUEUE_URL");
        let Some(queue) = ref_target(&url) else {
            continue;
        };
        let Some(role) = ref_target(&f.p["Role"]) else {
            continue;
        };
        let denies_others = of_type(t, "AWS::SQS::QueuePolicy")
            .filter(|(_, r)| refs(&r["Properties"]["Queues"]).iter().any(|q| q == queue))
            .filter_map(|(_, r)| r["Properties"]["PolicyDocument"]["Statement"].as_array())
            .flatten()
            .any(|st| {
                st["Effect"] == "Deny"
                    && st["Principal"] == "*"
                    && sends(st)
                    && refs(&st["Condition"]["ArnNotEquals"]["aws:PrincipalArn"])
                        .iter()
                        .any(|r| r == role)
            });
        if !denies_others {
            problems.push(format!(
                "{queue}: {} forwards verified webhook senders to it, so its queue policy must \
                 deny sqs:SendMessage to every principal but the named senders \
                 (ArnNotEquals aws:PrincipalArn, {role} among them): otherwise anyone may name a \
                 tenant on it",
                f.id
            ));
        }
    }
    problems
}

/// The variables that would hold a secret itself, each with the variable that names its
/// Secrets Manager secret instead (read at init by the function).
const SECRET_VARS: [(&str, &str); 2] = [
    ("FINES_CORRELATION_KEY", "FINES_CORRELATION_KEY_ARN"),
    ("WEBHOOK_SECRETS", "WEBHOOK_SECRETS_ARN"),
];

/// No secret in a function's configuration: a secret's own variable (a value, or a `resolve`
/// copied in at deploy time, readable with `lambda:GetFunctionConfiguration`) is refused, and
/// the variable naming its secret is a `Ref` to the ARN parameter, which the role may read.
fn secrets_by_arn(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for f in functions(t) {
        for (plain, arn) in SECRET_VARS {
            if !f.env(plain).is_null() {
                problems.push(format!(
                    "{}: {plain} puts the secret in the function's configuration (readable with \
                     lambda:GetFunctionConfiguration): name its Secrets Manager secret in {arn}, \
                     read at init",
                    f.id
                ));
            }
            let named = f.env(arn);
            if named.is_null() {
                continue;
            }
            match ref_target(&named).filter(|p| t["Parameters"][*p].is_object()) {
                Some(p) if f.grants("secretsmanager:GetSecretValue", p) => {}
                Some(p) => problems.push(format!(
                    "{}: its role must grant secretsmanager:GetSecretValue on {p}, the secret \
                     {arn} names",
                    f.id
                )),
                None => problems.push(format!(
                    "{}: {arn} must be a Ref to the secret's ARN parameter",
                    f.id
                )),
            }
        }
    }
    problems
}

/// Grants of DynamoDB or SQS actions whose `Resource` is written with an intrinsic (`!Sub`,
/// `!Join`, `!If`) holding a wildcard: `infra/rules/roles.guard`'s `no_wildcards_on_data`
/// compares strings, and a `!Sub "arn:...:table/*"` is an object to it.
fn substituted_wildcards(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (id, r) in of_type(t, "AWS::IAM::Role") {
        let policies = r["Properties"]["Policies"].as_array().into_iter().flatten();
        for statement in policies.flat_map(|p| statements_of(&p["PolicyDocument"]["Statement"])) {
            let data = strings(&statement["Action"])
                .iter()
                .any(|a| a.starts_with("dynamodb:") || a.starts_with("sqs:"));
            if data && !statement["Resource"].is_string() && wildcard_in(&statement["Resource"]) {
                problems.push(format!(
                    "{id}: role grants DynamoDB or SQS actions on a Resource whose Fn::Sub (or \
                     Fn::Join) holds a wildcard; name the table or queue"
                ));
            }
        }
    }
    problems
}

/// Issue 42: a queue policy letting an AWS service send (`s3.amazonaws.com` for S3 → SQS
/// notifications, SNS, EventBridge) binds it to the one source it stands for: an
/// `aws:SourceArn` condition without a wildcard, and for S3, whose bucket ARNs name no
/// account, `aws:SourceAccount` too. Otherwise any bucket, topic or rule, in any account, could
/// put a forged notification on the queue (an S3 sequencer of S3's own width pins its object).
fn service_senders_bound(t: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (id, r) in of_type(t, "AWS::SQS::QueuePolicy") {
        let document = &r["Properties"]["PolicyDocument"]["Statement"];
        for statement in statements_of(document) {
            let services = strings(&statement["Principal"]["Service"]);
            if statement["Effect"] != "Allow" || !sends(statement) || services.is_empty() {
                continue;
            }
            let condition = &statement["Condition"];
            let source_arn = ["ArnEquals", "ArnLike", "StringEquals", "StringLike"]
                .iter()
                .map(|op| &condition[*op]["aws:SourceArn"])
                .find(|v| !v.is_null());
            match source_arn {
                None => problems.push(format!(
                    "{id}: lets {} sqs:SendMessage without an aws:SourceArn condition: any \
                     bucket, topic or rule of any account could send",
                    services.join(", ")
                )),
                Some(v) if wildcard_in(v) => problems.push(format!(
                    "{id}: lets {} sqs:SendMessage on an aws:SourceArn with a wildcard: name \
                     the one source",
                    services.join(", ")
                )),
                Some(_) => {}
            }
            let account = condition["StringEquals"]["aws:SourceAccount"].is_null()
                && condition["ArnEquals"]["aws:SourceAccount"].is_null();
            if services.iter().any(|s| s == "s3.amazonaws.com") && account {
                problems.push(format!(
                    "{id}: lets s3.amazonaws.com sqs:SendMessage without an aws:SourceAccount \
                     condition: a bucket's ARN names no account, so a bucket of that name in \
                     another account could send"
                ));
            }
        }
    }
    problems
}

/// A statement list, or the one statement written bare.
fn statements_of(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(_) => vec![v],
        _ => Vec::new(),
    }
}

/// Whether the text `v` makes holds a `*` of its own: a literal, or a `Fn::Sub` template
/// outside its `${..}` placeholders (which name values, never patterns).
fn wildcard_in(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('*'),
        Value::Array(a) => a.iter().any(wildcard_in),
        Value::Object(o) => o.iter().any(|(k, x)| match (k.as_str(), x) {
            ("Fn::Sub", Value::String(s)) => without_placeholders(s).contains('*'),
            ("Fn::Sub", Value::Array(a)) => {
                let template = a.first().and_then(Value::as_str).unwrap_or_default();
                without_placeholders(template).contains('*') || a.iter().skip(1).any(wildcard_in)
            }
            ("Ref" | "Fn::GetAtt" | "Condition", _) => false,
            _ => wildcard_in(x),
        }),
        _ => false,
    }
}

/// `template` with each `${..}` removed.
fn without_placeholders(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        match rest[start..].find('}') {
            Some(end) => rest = &rest[start + end + 1..],
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every logical id referenced anywhere inside `v`.
fn refs(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = ref_target(v).map(str::to_owned).into_iter().collect();
    match v {
        Value::Array(a) => a.iter().for_each(|x| out.extend(refs(x))),
        Value::Object(o) => o.values().for_each(|x| out.extend(refs(x))),
        _ => {}
    }
    out
}

/// What each function called in a recorded run: function → IAM action → local table or queue
/// names (from the metering proxies `cargo xtask` puts in front of each function).
pub(crate) type Calls = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The partition keys each function's requests named on its mark tables in a recorded run:
/// function → local table name → partition key values (from the same metering proxies, which
/// read each request's `Key`, `Item` or transaction items).
pub(crate) type Keys = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Actions a role needs for Lambda's event source mapping, not for the function's own code: the
/// trigger's queue, the stream, the stream's on-failure destination.
const TRIGGER_ACTIONS: [&str; 7] = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
];

/// The template's functions by the binary each deploys (`BuildProperties.Binary`, else its
/// `CodeUri`'s crate): the zips `cargo xtask package` must make.
pub(crate) fn binaries(t: &Value) -> BTreeSet<String> {
    functions(t)
        .iter()
        .map(|f| f.crate_name.to_owned())
        .collect()
}

/// Each function's `Timeout` (its own or the `Globals` one; Lambda's 3 s when neither says), by
/// crate name: the local runtime ends an invocation there, as Lambda does.
pub(crate) fn timeouts(t: &Value) -> BTreeMap<String, std::time::Duration> {
    functions(t)
        .iter()
        .map(|f| {
            let timeout = std::time::Duration::from_secs(f.timeout);
            (f.crate_name.to_owned(), timeout)
        })
        .collect()
}

/// Least privilege, proven: every call a function made in the recorded run (`calls`, with the
/// local environment `env` that named its tables and queues) is granted by its role in the
/// template (the first list: calls not granted, or not matched to the template), and every
/// DynamoDB or SQS action its role grants was called (the second: grants never called) — except
/// what Lambda's event source mapping uses on the function's behalf (its trigger's queue or
/// stream, a stream's on-failure destination).
///
/// And S1 in the recorded run: every partition key a function's requests named on its mark
/// table (`keys`) matches the `dynamodb:LeadingKeys` patterns of its role's grants there (the
/// template's parameters as the local stack set them), and a function that called its mark
/// table has its keys recorded.
pub(crate) fn privileges(
    t: &Value,
    calls: &Calls,
    keys: &Keys,
    env: &[(String, String)],
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut unused = Vec::new();
    let functions = functions(t);
    for (function, called) in calls {
        if !called.is_empty() && !functions.iter().any(|f| f.crate_name == function) {
            problems.push(format!(
                "{function}: called {} action(s) but has no function (and role) in the template",
                called.len()
            ));
        }
    }
    for f in &functions {
        let id = f.id;
        if crate::functions::NOT_RUN.contains(&f.crate_name) {
            continue; // said in `functions::NOT_RUN`: nothing recorded to compare with
        }
        let Some(called) = calls.get(f.crate_name) else {
            problems.push(format!(
                "{id}: no recorded calls for {} (was it run?)",
                f.crate_name
            ));
            continue;
        };
        // Local table and queue names → the template's logical ids, through the environment
        // variables that name them in both places.
        let mut logical: BTreeMap<String, String> = BTreeMap::new();
        for (var, value) in env {
            if let Some(target) = ref_target(&f.env(var)) {
                let local = value.rsplit('/').next().unwrap_or(value);
                logical.insert(local.to_owned(), target.to_owned());
            }
        }
        let mut used: BTreeSet<(String, String)> = BTreeSet::new();
        for (action, names) in called {
            for name in names {
                let Some(target) = logical.get(name) else {
                    problems.push(format!(
                        "{id}: called {action} on `{name}`, which no environment variable of its template names"
                    ));
                    continue;
                };
                if !f.grants(action, target) {
                    problems.push(format!(
                        "{id}: called {action} on {target}, which its role does not grant"
                    ));
                }
                used.insert((action.clone(), target.clone()));
            }
        }
        // S1: the keys it named on its mark tables are its own consumer's.
        let params: BTreeMap<String, &str> = env
            .iter()
            .filter_map(|(var, value)| {
                let p = ref_target(&f.env(var))?.to_owned();
                t["Parameters"].get(&p)?;
                Some((p, value.as_str()))
            })
            .collect();
        let served = f.served_inbox(t).map(|(table, _)| table);
        for table in f.mark_tables(t).into_iter().chain(served) {
            if !used.iter().any(|(_, target)| *target == table) {
                continue;
            }
            let recorded: BTreeSet<&String> = logical
                .iter()
                .filter(|(_, target)| **target == table)
                .filter_map(|(local, _)| keys.get(f.crate_name)?.get(local))
                .flatten()
                .collect();
            if recorded.is_empty() {
                problems.push(format!(
                    "{id}: called {table} but no partition key of its requests was recorded (S1 \
                     unproven; a record from before keys were recorded? re-run cargo xtask test)"
                ));
            }
            for st in f.item_grants(&table) {
                let Some(patterns) = leading_key_patterns(st) else {
                    continue; // refused by `check` (and infra/rules/roles.guard)
                };
                let patterns: Vec<String> = patterns
                    .iter()
                    .map(|p| {
                        params.iter().fold(p.clone(), |p, (name, value)| {
                            p.replace(&format!("${{{name}}}"), value)
                        })
                    })
                    .collect();
                for key in &recorded {
                    if !patterns.iter().any(|p| string_like(p, key)) {
                        problems.push(format!(
                            "{id}: named the key `{key}` on {table}, outside its role's \
                             {LEADING_KEYS} {patterns:?} (S1: another consumer's marks)"
                        ));
                    }
                }
            }
        }
        let on_failure: Vec<String> = f.p["Events"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(_, ev)| refs(&ev["Properties"]["DestinationConfig"]))
            .collect();
        for st in &f.statements {
            for action in strings(&st["Action"]) {
                if !(action.starts_with("dynamodb:") || action.starts_with("sqs:"))
                    || TRIGGER_ACTIONS.contains(&action.as_str())
                {
                    continue;
                }
                for target in refs(&st["Resource"]) {
                    let for_the_trigger =
                        action == "sqs:SendMessage" && on_failure.contains(&target);
                    if !for_the_trigger && !used.contains(&(action.clone(), target.clone())) {
                        unused.push(format!(
                            "{id}: its role grants {action} on {target}, which it never called in the recorded run"
                        ));
                    }
                }
            }
        }
    }
    (problems, unused)
}

/// The rules of `infra/rules` that `managed-instances.yaml` keeps too (the others describe the
/// main stack's queues, triggers and tables, which it does not have).
const MANAGED_RULES: &str = "encryption.guard";

/// `cargo xtask check-infra`: the checks above and the rules of `infra/rules`, then `cfn-lint`.
/// `recorded`: also compare the roles with the full test run's record ([`FULL_RUN_RECORD`],
/// written only at the end of a full `cargo xtask test`), when there is one.
/// `cargo xtask test` passes `false`: it records a fresh run and compares at its end.
pub(crate) fn run(root: &Path, recorded: bool) -> Result<()> {
    let path = root.join("infra").join("template.yaml");
    let t = load(&path)?;
    let rules = root.join("infra").join("rules");
    let mut problems = check(&t);
    if !rules.is_dir() {
        // No rules to run: say so among the problems (cfn-guard is not installed for nothing).
        problems.push(format!(
            "{} is missing: the template's cfn-guard rules were not run",
            rules.display()
        ));
    }
    verified(root, &path, problems, &rules)?;
    println!(
        "xtask: check-infra: infra/template.yaml keeps every guarded invariant (the rules of infra/rules, run by cfn-guard {}, and the computed ones), and cfn-lint is clean",
        crate::tools::CFN_GUARD
    );
    let managed = root.join("infra").join("managed-instances.yaml");
    // The encryption rules hold there too (its KMS option reaches its log group and role).
    let problems = check_managed_instances(&load(&managed)?);
    verified(root, &managed, problems, &rules.join(MANAGED_RULES))?;
    println!(
        "xtask: check-infra: infra/managed-instances.yaml puts its functions on a capacity provider, each starts with its variables, and cfn-lint is clean"
    );
    if recorded {
        recorded_privileges(root, &t)?;
    }
    Ok(())
}

/// The template `path` refused for `problems` (what [`check`] computed) or what the cfn-guard
/// rules `rules` (when they are there) or cfn-lint find in it.
fn verified(root: &Path, path: &Path, mut problems: Vec<String>, rules: &Path) -> Result<()> {
    if rules.exists() {
        let guard = crate::tools::installed(root, "cfn-guard", crate::tools::CFN_GUARD)?;
        problems.extend(guard_rules(&guard, rules, path)?);
    }
    if !problems.is_empty() {
        return Err(format!(
            "{} breaks {} invariant(s):\n  - {}",
            path.display(),
            problems.len(),
            problems.join("\n  - ")
        ));
    }
    let bin = crate::tools::ensure(root)?;
    let status = std::process::Command::new(bin.join("cfn-lint"))
        .arg(path)
        .status()
        .map_err(|e| format!("cfn-lint: {e}"))?;
    if !status.success() {
        return Err(format!("cfn-lint found problems in {}", path.display()));
    }
    Ok(())
}

/// The rules of `rules` (`infra/rules/*.guard`), run by the `cfn-guard` binary `guard` on the
/// template file `data`, exactly as a user's pipeline runs them: each failure as
/// `Resource[.Event]: message`, none when every rule holds.
pub(crate) fn guard_rules(guard: &Path, rules: &Path, data: &Path) -> Result<Vec<String>> {
    let out = std::process::Command::new(guard)
        .arg("validate")
        .arg("-r")
        .arg(rules)
        .arg("-d")
        .arg(data)
        .args(["-o", "json", "-S", "none"])
        .output()
        .map_err(|e| format!("cfn-guard: {e}"))?;
    // 0: every rule holds; 19: some rule failed; anything else: the rules or the data are bad.
    if !matches!(out.status.code(), Some(0 | 19)) {
        return Err(format!(
            "cfn-guard validate -r {} -d {} failed ({}): {}{}",
            rules.display(),
            data.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut problems = Vec::new();
    for report in serde_json::Deserializer::from_slice(&out.stdout).into_iter::<Value>() {
        let report = report.map_err(|e| format!("cfn-guard's report: {e}"))?;
        for failed in report["not_compliant"].as_array().into_iter().flatten() {
            guard_failures(failed, &mut problems);
        }
    }
    if problems.is_empty() && out.status.code() == Some(19) {
        problems.push(format!(
            "cfn-guard: a rule of {} failed: {}",
            rules.display(),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(problems)
}

/// Each clause of a cfn-guard report that failed with a message of ours, as
/// `Resource[.Event]: message` (the resource and event from the path of the value it checked).
fn guard_failures(v: &Value, out: &mut Vec<String>) {
    /// The first path checked; a key bound from `Resources` (`Resources[ id | … ]`) has the
    /// resource's id as its value.
    fn first_path(v: &Value) -> Option<String> {
        match v {
            Value::Object(o) => match o.get("path").and_then(Value::as_str) {
                Some("/Resources") => o["value"].as_str().map(|id| format!("/Resources/{id}")),
                Some(p) if !p.is_empty() => Some(p.to_owned()),
                _ => o.values().find_map(first_path),
            },
            Value::Array(a) => a.iter().find_map(first_path),
            _ => None,
        }
    }
    match v {
        Value::Object(o) => {
            if let Some(msg) = o
                .get("messages")
                .and_then(|m| m["custom_message"].as_str())
                .filter(|m| !m.trim().is_empty())
            {
                let path = first_path(v).unwrap_or_default();
                let path: Vec<&str> = path.split('/').collect();
                let at = match path.as_slice() {
                    ["", "Resources", id, "Properties", "Events", ev, rest @ ..]
                        if rest.first() != Some(&"Type") =>
                    {
                        format!("{id}.{ev}")
                    }
                    ["", "Resources", id, ..] | ["", id, ..] => (*id).to_owned(),
                    _ => "template".to_owned(),
                };
                let problem = format!("{at}: {}", msg.trim());
                if !out.contains(&problem) {
                    out.push(problem);
                }
            }
            o.values().for_each(|x| guard_failures(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| guard_failures(x, out)),
        _ => {}
    }
}

/// Where the full test run's calls are kept, under the checkout. Only a full `cargo xtask test`
/// (every end-to-end test and the chaos runs) exercises every grant, so only its record can show
/// a grant is unused; a partial run (the demo, `cargo xtask test -p …`) writes
/// `.cache/logs/calls.json` for reading, and never this.
pub(crate) const FULL_RUN_RECORD: &str = ".cache/least-privilege/full-test-run.json";

/// The full test run's record: what each function called, and the local environment that names
/// the tables and queues it called them on.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Record {
    /// Which run: always the full `cargo xtask test`.
    pub(crate) run: String,
    /// When it ended (RFC 3339, UTC).
    pub(crate) recorded_at: String,
    pub(crate) calls: Calls,
    /// The partition keys named on the mark tables (absent in a record from before they were
    /// recorded: S1 is then reported unproven).
    #[serde(default)]
    pub(crate) keys: Keys,
    pub(crate) env: Vec<(String, String)>,
}

impl Record {
    pub(crate) fn new(calls: Calls, keys: Keys, env: Vec<(String, String)>) -> Self {
        Self {
            run: "cargo xtask test (the full suite and the chaos runs)".into(),
            recorded_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            calls,
            keys,
            env,
        }
    }

    pub(crate) fn save(&self, root: &Path) -> Result<()> {
        let path = root.join(FULL_RUN_RECORD);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The record of `root`, `None` when no full test run was recorded there.
    pub(crate) fn load(root: &Path) -> Result<Option<Self>> {
        let path = root.join(FULL_RUN_RECORD);
        match std::fs::read_to_string(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("{FULL_RUN_RECORD}: {e}")),
        }
    }
}

/// Least privilege against the full test run's record, if there is one; says which run it
/// compares with. Without one it says so and compares nothing: a partial run's calls (the demo's)
/// would show grants its paths never reach as unused.
fn recorded_privileges(root: &Path, t: &Value) -> Result<()> {
    let Some(record) = Record::load(root)? else {
        println!(
            "xtask: check-infra: least privilege not compared: no full test run recorded ({FULL_RUN_RECORD}; a full `cargo xtask test` writes it, partial runs and the demo do not)"
        );
        return Ok(());
    };
    let which = format!(
        "{} recorded at {} ({FULL_RUN_RECORD})",
        record.run, record.recorded_at
    );
    println!("xtask: check-infra: comparing the roles with {which}");
    let (mut problems, unused) = privileges(t, &record.calls, &record.keys, &record.env);
    problems.extend(unused);
    if problems.is_empty() {
        println!(
            "xtask: check-infra: every role grants exactly what its function called in that run"
        );
        Ok(())
    } else {
        Err(format!(
            "the roles and {which} disagree (re-run cargo xtask test after changing either):\n  - {}",
            problems.join("\n  - ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both of [`super::privileges`]' lists, as `check-infra` reports them, with the keys of
    /// a run whose marks were all its own ([`own_keys`]).
    fn privileges(t: &Value, calls: &Calls, env: &[(String, String)]) -> Vec<String> {
        privileges_with(t, calls, &own_keys(), env)
    }

    fn privileges_with(
        t: &Value,
        calls: &Calls,
        keys: &Keys,
        env: &[(String, String)],
    ) -> Vec<String> {
        let (mut problems, unused) = super::privileges(t, calls, keys, env);
        problems.extend(unused);
        problems
    }

    /// The mark keys `ledger` named on `local-marks`.
    fn keys(names: &[&str]) -> Keys {
        let names = names.iter().map(|k| (*k).to_owned()).collect();
        BTreeMap::from([(
            "ledger".to_owned(),
            BTreeMap::from([("local-marks".to_owned(), names)]),
        )])
    }

    /// Keys of the small template's consumer, in the local namespace.
    fn own_keys() -> Keys {
        keys(&["local#ledger#00ff", "local#ledger#abcd"])
    }

    use lambda_dedup_cli::template::parse;

    /// One function with a role, a mark table, an effect table and its trigger queue.
    fn small() -> Value {
        serde_json::json!({
            "Parameters": {"Namespace": {"Type": "String", "Default": "prod"}},
            "Globals": {"Function": {"Environment": {"Variables": {
                "DEDUP_NAMESPACE": {"Ref": "Namespace"},
                "DEDUP_MARK_TABLE": {"Ref": "Marks"}}}}},
            "Resources": {
                "Marks": {"Type": "AWS::DynamoDB::Table"},
                "Balances": {"Type": "AWS::DynamoDB::Table"},
                "Queue": {"Type": "AWS::SQS::Queue"},
                "Role": {"Type": "AWS::IAM::Role", "Properties": {"Policies": [{"PolicyDocument": {"Statement": [
                    {"Sid": "MarkTable", "Action": ["dynamodb:PutItem"], "Resource": {"Fn::GetAtt": ["Marks", "Arn"]},
                     "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [
                         {"Fn::Sub": "${Namespace}#ledger#*"}]}}},
                    {"Action": ["dynamodb:UpdateItem"], "Resource": {"Fn::GetAtt": ["Balances", "Arn"]}},
                    {"Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage"], "Resource": {"Fn::GetAtt": ["Queue", "Arn"]}}
                ]}}]}},
                "Fn": {"Type": "AWS::Serverless::Function", "Properties": {
                    "CodeUri": "../functions/ledger", "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                    "Environment": {"Variables": {"BALANCES_TABLE": {"Ref": "Balances"}}}}}
            }
        })
    }

    /// The managed-instances template as shipped is sound; moved off the capacity provider,
    /// below 2 GiB, with a retention under the queue's horizon (S9) or without a variable its
    /// function needs, it is refused.
    #[test]
    fn the_managed_instances_template_is_checked() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let t = load(&root.join("infra").join("managed-instances.yaml")).expect("template");
        assert_eq!(check_managed_instances(&t), Vec::<String>::new());
        let broken = |change: &dyn Fn(&mut Value)| {
            let mut t = t.clone();
            change(&mut t["Resources"]["LedgerProjector"]["Properties"]);
            check_managed_instances(&t)
        };
        let off = broken(&|p| p["CapacityProviderConfig"] = Value::Null);
        assert!(off[0].contains("capacity provider"), "{off:?}");
        let small = broken(&|p| p["MemorySize"] = 128.into());
        assert!(small[0].contains("2048"), "{small:?}");
        let short =
            broken(&|p| p["Environment"]["Variables"]["DEDUP_RETENTION_SECONDS"] = 60.into());
        assert!(short[0].contains("would not start"), "{short:?}");
        let unset = broken(&|p| {
            p["Environment"]["Variables"]
                .as_object_mut()
                .expect("variables")
                .remove("DEDUP_NAMESPACE");
        });
        assert!(unset[0].contains("would not start"), "{unset:?}");
        // S1: its mark-table grant (an ARN `!Sub` of the table parameter) is scoped too.
        let unscoped = {
            let mut t = t.clone();
            statement(&mut t, "LedgerProjectorRole", "MarkTable")["Condition"] = Value::Null;
            check_managed_instances(&t)
        };
        assert!(
            unscoped[0].contains("has no ForAllValues:StringLike"),
            "{unscoped:?}"
        );
    }

    fn calls(pairs: &[(&str, &str)]) -> Calls {
        let mut actions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (action, name) in pairs {
            actions
                .entry((*action).to_owned())
                .or_default()
                .insert((*name).to_owned());
        }
        BTreeMap::from([("ledger".to_owned(), actions)])
    }

    /// The calls of the small template's consumer that use each of its grants and no more.
    const EXACT_CALLS: &[(&str, &str)] = &[
        ("dynamodb:PutItem", "local-marks"),
        ("dynamodb:UpdateItem", "local-balances"),
    ];

    fn exact_calls() -> Calls {
        calls(EXACT_CALLS)
    }

    fn local_env() -> Vec<(String, String)> {
        vec![
            ("DEDUP_NAMESPACE".into(), "local".into()),
            ("DEDUP_MARK_TABLE".into(), "local-marks".into()),
            ("BALANCES_TABLE".into(), "local-balances".into()),
        ]
    }

    #[test]
    fn least_privilege_is_proven_both_ways_against_the_recorded_calls() {
        let t = small();
        let exact = exact_calls();
        assert_eq!(privileges(&t, &exact, &local_env()), Vec::<String>::new());
        // A call the role does not grant: production would fail every message.
        let more = calls(&[EXACT_CALLS, &[("dynamodb:GetItem", "local-marks")]].concat());
        let problems = privileges(&t, &more, &local_env());
        assert_mentions_all(&problems, &["dynamodb:GetItem", "does not grant"]);
        // A function that called something and has no role at all in the template.
        let mut ghost = exact.clone();
        ghost.insert(
            "ghost".into(),
            calls(&[("sqs:SendMessage", "q")])["ledger"].clone(),
        );
        let problems = privileges(&t, &ghost, &local_env());
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("ghost:") && p.contains("no function")),
            "{problems:?}"
        );
        // A grant never used: more privilege than the code needs.
        let fewer = calls(&[("dynamodb:PutItem", "local-marks")]);
        let problems = privileges(&t, &fewer, &local_env());
        assert_mentions_all(&problems, &["dynamodb:UpdateItem", "never called"]);
        // A table no environment variable names cannot be matched to the template.
        let stray = calls(&[EXACT_CALLS, &[("dynamodb:PutItem", "somewhere-else")]].concat());
        assert!(!privileges(&t, &stray, &local_env()).is_empty());
    }

    /// The functions the local stack does not run (`functions::NOT_RUN`, by their binary's name)
    /// have no recorded calls and are not compared; any other function without them is refused.
    #[test]
    fn functions_the_stack_does_not_run_are_not_compared() {
        let with_binary = |binary: &str| {
            let mut t = small();
            t["Resources"]["Durable"] = serde_json::json!({
                "Type": "AWS::Serverless::Function",
                "Metadata": {"BuildProperties": {"Binary": binary}},
                "Properties": {"CodeUri": "../examples/durable-order",
                               "Role": {"Fn::GetAtt": ["Role", "Arn"]}}});
            t
        };
        let t = with_binary(crate::functions::NOT_RUN[0]);
        assert_eq!(
            privileges(&t, &exact_calls(), &local_env()),
            Vec::<String>::new()
        );
        let t = with_binary("durable-other");
        let problems = privileges(&t, &exact_calls(), &local_env());
        assert_mentions_all(
            &problems,
            &["Durable:", "no recorded calls for durable-other"],
        );
    }

    /// S1, proven on the recorded run: a key outside the role's `dynamodb:LeadingKeys` (another
    /// consumer's mark, another namespace's) fails the comparison, and so does a run that
    /// called the mark table with no keys recorded (S1 unproven).
    #[test]
    fn recorded_mark_keys_must_match_the_roles_leading_keys() {
        let t = small();
        let exact = exact_calls();
        assert_eq!(privileges(&t, &exact, &local_env()), Vec::<String>::new());
        for stray in [
            "local#payments#00ff",
            "prod#ledger#00ff",
            "local#ledger-call#00ff",
        ] {
            let problems = privileges_with(
                &t,
                &exact,
                &keys(&["local#ledger#abcd", stray]),
                &local_env(),
            );
            assert!(
                problems.len() == 1
                    && problems[0].contains(stray)
                    && problems[0].contains("outside its role's dynamodb:LeadingKeys"),
                "{stray}: {problems:?}"
            );
        }
        let problems = privileges_with(&t, &exact, &Keys::new(), &local_env());
        assert_mentions(&problems, "no partition key");
    }

    /// S1, in the template: a mark-table grant without the condition, or scoped to another
    /// consumer's keys, is refused (the computed check; roles.guard refuses the first too).
    #[test]
    fn mark_table_grants_need_their_own_consumers_leading_keys() {
        let mut t = small();
        assert_eq!(leading_keys(&t), Vec::<String>::new());
        let st = &mut t["Resources"]["Role"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            [0];
        st["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] =
            serde_json::json!([{"Fn::Sub": "${Namespace}#payments#*"}]);
        let problems = leading_keys(&t);
        assert!(
            problems[0].contains("not to its own consumer's keys"),
            "{problems:?}"
        );
        let st = &mut t["Resources"]["Role"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            [0];
        st.as_object_mut().expect("statement").remove("Condition");
        let problems = leading_keys(&t);
        assert!(
            problems[0].contains("has no ForAllValues:StringLike"),
            "{problems:?}"
        );
    }

    #[test]
    fn string_like_matches_as_iam_does() {
        assert!(string_like("prod#a#*", "prod#a#ff"));
        assert!(string_like("prod#a#*", "prod#a#"));
        assert!(!string_like("prod#a#*", "prod#ab#ff"));
        assert!(!string_like("prod#a#*", "xprod#a#ff"));
        assert!(string_like("p?od#*#x", "prod#anything#x"));
        assert!(!string_like("prod", "prod#"));
    }

    /// After a partial run (the demo writes `.cache/logs/calls.json`, with only its own paths'
    /// calls), `check-infra` does not fail on grants that run never reached: it compares only
    /// with the full test run's record, says which, and says so when there is none.
    #[test]
    fn least_privilege_compares_only_with_the_full_test_run() {
        let root = std::env::temp_dir().join(format!("check-infra-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let logs = root.join(".cache/logs");
        std::fs::create_dir_all(&logs).expect("dir");
        let t = small();
        // What the demo leaves: a run that called PutItem only (UpdateItem unused by it).
        let partial = calls(&[("dynamodb:PutItem", "local-marks")]);
        std::fs::write(
            logs.join("calls.json"),
            serde_json::to_string(&partial).expect("json"),
        )
        .expect("write");
        let env: String = local_env()
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        std::fs::write(logs.join("functions.env"), env).expect("write");
        assert_eq!(recorded_privileges(&root, &t), Ok(()));

        // The full run's record is what it compares with, and a mismatch names that run.
        Record::new(partial, own_keys(), local_env())
            .save(&root)
            .expect("save");
        let err = recorded_privileges(&root, &t).expect_err("UpdateItem was never called");
        assert!(
            err.contains("full suite") && err.contains("recorded at") && err.contains("UpdateItem"),
            "{err}"
        );
        let exact = exact_calls();
        Record::new(exact, own_keys(), local_env())
            .save(&root)
            .expect("save");
        assert_eq!(recorded_privileges(&root, &t), Ok(()));
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The local runtime's timeouts are the template's: the function's own, else `Globals`.
    #[test]
    fn each_function_has_the_template_timeout() {
        let t = template();
        let timeouts = timeouts(&t);
        for f in crate::functions::ALL {
            assert!(timeouts.contains_key(f), "{f}: {timeouts:?}");
        }
        assert_eq!(
            timeouts["webhook-receiver"],
            std::time::Duration::from_secs(10)
        );
        assert_eq!(
            timeouts["ledger-projector"],
            std::time::Duration::from_secs(30)
        );
    }

    fn template() -> Value {
        load(&crate::root().join("infra/template.yaml")).expect("template")
    }

    /// What `cargo xtask check-infra` says of `t`: the Rust checks and the rules of
    /// `infra/rules`, run by cfn-guard on a copy of `t` (`None` when cfn-guard is not installed:
    /// `cargo xtask test` and `check-infra` install it first).
    fn all_problems(t: &Value) -> Option<Vec<String>> {
        let root = crate::root();
        let guard = root.join(".cache/cfn-guard/bin/cfn-guard");
        if !guard.is_file() {
            println!(
                "cfn-guard is not installed (cargo xtask check-infra installs it): rules of infra/rules not run"
            );
            return None;
        }
        let n = COPIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let data =
            std::env::temp_dir().join(format!("check-infra-{}-{n}.json", std::process::id()));
        // The edits below remove a key by setting it to null, as `check` reads it.
        fn without_nulls(v: &Value) -> Value {
            match v {
                Value::Object(o) => Value::Object(
                    o.iter()
                        .filter(|(_, x)| !x.is_null())
                        .map(|(k, x)| (k.clone(), without_nulls(x)))
                        .collect(),
                ),
                Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
                x => x.clone(),
            }
        }
        std::fs::write(&data, without_nulls(t).to_string()).expect("write the copy");
        let mut problems = check(t);
        problems
            .extend(guard_rules(&guard, &root.join("infra/rules"), &data).expect("cfn-guard runs"));
        let _ = std::fs::remove_file(&data);
        Some(problems)
    }

    static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// The managed-instances template takes the main template's KMS option, and the encryption
    /// rules hold on it: its log group's key and its role's KMS grant under `UseKms`; without
    /// either (or without the condition), cfn-guard refuses it.
    #[test]
    fn the_managed_instances_template_takes_the_kms_option() {
        let root = crate::root();
        let guard = root.join(".cache/cfn-guard/bin/cfn-guard");
        if !guard.is_file() {
            println!("cfn-guard is not installed (cargo xtask check-infra installs it)");
            return;
        }
        let t = load(&root.join("infra").join("managed-instances.yaml")).expect("template");
        assert!(t["Parameters"]["KmsKeyArn"].is_object() && t["Conditions"]["UseKms"].is_object());
        let problems = |t: &Value| {
            let n = COPIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let data =
                std::env::temp_dir().join(format!("managed-{}-{n}.json", std::process::id()));
            std::fs::write(&data, t.to_string()).expect("write the copy");
            let p = guard_rules(&guard, &root.join("infra/rules").join(MANAGED_RULES), &data)
                .expect("cfn-guard runs");
            let _ = std::fs::remove_file(&data);
            p
        };
        assert_eq!(problems(&t), Vec::<String>::new());
        let mut no_key = t.clone();
        no_key["Resources"]["LedgerProjectorLogs"]["Properties"]
            .as_object_mut()
            .expect("log group")
            .remove("KmsKeyId");
        assert_mentions(&problems(&no_key), "log group needs KmsKeyId");
        let mut no_grant = t.clone();
        no_grant["Resources"]["LedgerProjectorRole"]["Properties"]["Policies"][0]["PolicyDocument"]
            ["Statement"]
            .as_array_mut()
            .expect("statements")
            .remove(0);
        assert_mentions(&problems(&no_grant), "kms:Decrypt");
    }

    fn broken(edit: impl FnOnce(&mut Value), expect: &str) {
        let mut t = template();
        edit(&mut t);
        let Some(problems) = all_problems(&t) else {
            return;
        };
        assert_mentions(&problems, expect);
    }

    /// One of `problems` mentions `expect` (else they are the failure).
    fn assert_mentions(problems: &[String], expect: &str) {
        assert_mentions_all(problems, &[expect]);
    }

    /// One of `problems` mentions each of `all` (else they are the failure).
    fn assert_mentions_all(problems: &[String], all: &[&str]) {
        assert!(
            problems.iter().any(|p| all.iter().all(|m| p.contains(m))),
            "expected a problem mentioning {all:?}, got {problems:#?}"
        );
    }

    /// Each `(place, value, problem)`: the committed template with `value` at `place` (see
    /// [`at`]; `Value::Null` removes, as `check` reads it) is refused with a problem mentioning
    /// `problem`, each change alone.
    fn refuses(cases: &[(&str, Value, &str)]) {
        for (place, value, expect) in cases {
            broken(|t| *at(t, place) = value.clone(), expect);
        }
    }

    /// The place `path` names in `t`, made if missing: `/A/B` from the template's top, `Id/A/B`
    /// below the properties of the resource `Id`; a number indexes an array.
    fn at<'a>(t: &'a mut Value, path: &str) -> &'a mut Value {
        let (mut v, keys) = match path.strip_prefix('/') {
            Some(keys) => (t, keys),
            None => {
                let (id, keys) = path.split_once('/').unwrap_or((path, ""));
                (res(t, id), keys)
            }
        };
        for key in keys.split('/').filter(|k| !k.is_empty()) {
            v = match key.parse::<usize>() {
                Ok(i) if v.is_array() => &mut v[i],
                _ => &mut v[key],
            };
        }
        v
    }

    fn res<'a>(t: &'a mut Value, id: &str) -> &'a mut Value {
        &mut t["Resources"][id]["Properties"]
    }

    /// The statements of the first inline policy of the role `role`.
    fn statements<'a>(t: &'a mut Value, role: &str) -> &'a mut Value {
        &mut res(t, role)["Policies"][0]["PolicyDocument"]["Statement"]
    }

    /// The statement `sid` in the first inline policy of the role `role`.
    fn statement<'a>(t: &'a mut Value, role: &str, sid: &str) -> &'a mut Value {
        let all = statements(t, role).as_array_mut().expect("statements");
        let found = all.iter_mut().find(|s| s["Sid"] == sid);
        found.unwrap_or_else(|| panic!("{role} has no statement {sid}"))
    }

    /// Removes the resource `id` from the template.
    fn remove_resource(t: &mut Value, id: &str) {
        t["Resources"]
            .as_object_mut()
            .expect("resources")
            .remove(id);
    }

    /// Removes the event source `event` of the function `function`.
    fn remove_event(t: &mut Value, function: &str, event: &str) {
        res(t, function)["Events"]
            .as_object_mut()
            .expect("events")
            .remove(event);
    }

    /// Removes the statement `sid` from the role `role`'s first inline policy.
    fn drop_statement(t: &mut Value, role: &str, sid: &str) {
        if let Some(a) = statements(t, role).as_array_mut() {
            a.retain(|s| s["Sid"] != sid);
        }
    }

    #[test]
    fn an_s3_notification_queue_policy_is_bound_to_its_bucket_and_account() {
        let mut t = template();
        assert_eq!(service_senders_bound(&t), Vec::<String>::new());
        let statement = |condition: Value| {
            serde_json::json!({"Effect": "Allow",
                "Principal": {"Service": "s3.amazonaws.com"},
                "Action": "sqs:SendMessage", "Resource": {"Fn::GetAtt": ["LedgerFanoutQueue", "Arn"]},
                "Condition": condition})
        };
        let with = |t: &mut Value, condition: Value| {
            t["Resources"]["LedgerFanoutQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
                [0] = statement(condition);
            service_senders_bound(t)
        };
        let bucket = serde_json::json!({"Fn::Sub": "arn:${AWS::Partition}:s3:::catalog-uploads"});
        let none = with(&mut t, serde_json::json!({}));
        assert_mentions(&none, "without an aws:SourceArn");
        let no_account = with(
            &mut t,
            serde_json::json!({"ArnEquals": {"aws:SourceArn": bucket}}),
        );
        assert_mentions(&no_account, "aws:SourceAccount");
        let any_bucket = with(
            &mut t,
            serde_json::json!({"ArnLike": {"aws:SourceArn": "arn:aws:s3:::*"},
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}),
        );
        assert_mentions(&any_bucket, "wildcard");
        let bound = with(
            &mut t,
            serde_json::json!({"ArnEquals": {"aws:SourceArn": bucket},
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}),
        );
        assert_eq!(bound, Vec::<String>::new());
    }

    #[test]
    fn the_committed_template_keeps_every_invariant() {
        assert_eq!(check(&template()), Vec::<String>::new());
        if let Some(problems) = all_problems(&template()) {
            assert_eq!(problems, Vec::<String>::new());
            // And as a user's pipeline runs it: on the YAML itself, short-form tags and all.
            let root = crate::root();
            let on_yaml = guard_rules(
                &root.join(".cache/cfn-guard/bin/cfn-guard"),
                &root.join("infra/rules"),
                &root.join("infra/template.yaml"),
            );
            assert_eq!(on_yaml, Ok(Vec::new()));
        }
    }

    /// The joins across resources read short-form `!GetAtt Id.Attr` (a string to cfn-guard) as
    /// they read the long form: the YAML itself, broken where it uses the short form, fails them.
    #[test]
    fn the_joins_read_short_form_references() {
        let root = crate::root();
        let guard = root.join(".cache/cfn-guard/bin/cfn-guard");
        if !guard.is_file() {
            return;
        }
        let yaml = std::fs::read_to_string(root.join("infra/template.yaml")).expect("template");
        for (short_form, expect) in [
            // The ledger's DLQ alarm: `Value: !GetAtt "LedgerProjectorDLQ.QueueName"`.
            (
                "Value: !GetAtt \"LedgerProjectorDLQ.QueueName\"",
                "LedgerProjectorQueue: its dead-letter queue needs an alarm on its depth",
            ),
            // The ledger's role on its queue: `Resource: !GetAtt "LedgerProjectorQueue.Arn"`.
            (
                "Resource: !GetAtt \"LedgerProjectorQueue.Arn\"",
                "LedgerProjector.Queue: role must grant sqs:ReceiveMessage on its trigger's queue",
            ),
        ] {
            assert!(yaml.contains(short_form), "{short_form}");
            let broken = yaml.replace(short_form, &short_form.replace("LedgerProjector", "Other"));
            let data = std::env::temp_dir().join(format!(
                "check-infra-short-{}-{}.yaml",
                std::process::id(),
                COPIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            ));
            std::fs::write(&data, broken).expect("write");
            let problems = guard_rules(&guard, &root.join("infra/rules"), &data).expect("runs");
            let _ = std::fs::remove_file(&data);
            assert!(
                problems.iter().any(|p| p.contains(expect)),
                "{expect}: {problems:#?}"
            );
        }
    }

    #[test]
    fn s9_retention_below_the_horizon_is_refused() {
        refuses(&[
            (
                "/Parameters/RetentionSeconds/Default",
                86_400.into(),
                "does not exceed the redelivery horizon",
            ),
            (
                "/Parameters/ReplayWindowSeconds/Default",
                2_000_000.into(),
                "does not exceed the redelivery horizon",
            ),
            (
                "LedgerProjectorQueue/MessageRetentionPeriod",
                1_209_600.into(),
                "does not exceed the redelivery horizon",
            ),
            // A redrive from the DLQ days later is part of the horizon: the old 14-day retention
            // does not cover 14 days in the DLQ on top of the queue's 4 and the replay window.
            (
                "/Parameters/RetentionSeconds/Default",
                1_209_600.into(),
                "DLQ retention",
            ),
        ]);
    }

    #[test]
    fn s9_the_dlq_retention_variable_must_match_the_dlq() {
        refuses(&[(
            "LedgerProjectorDLQ/MessageRetentionPeriod",
            345_600.into(),
            "DEDUP_DLQ_RETENTION_SECONDS must equal",
        )]);
    }

    #[test]
    fn s9_function_horizon_variables_must_match_the_queue() {
        refuses(&[
            (
                "/Globals/Function/Environment/Variables/DEDUP_MAX_RECEIVE_COUNT",
                "3".into(),
                "DEDUP_MAX_RECEIVE_COUNT must equal",
            ),
            (
                "FineNoticesQueue/VisibilityTimeout",
                240.into(),
                "DEDUP_VISIBILITY_TIMEOUT_SECONDS must equal",
            ),
        ]);
    }

    /// A durable function's `DurableConfig` and the variables its step guard and its dispatcher
    /// read are one setting each (S9, S16): set apart, or with a mark retention not above the
    /// execution timeout, or a dispatcher's key retention past what Lambda keeps, the template
    /// is refused (computed here, whether or not cfn-guard is installed).
    #[test]
    fn durable_config_and_its_variables_are_one_setting() {
        let refused = |place: &str, value: Value, expect: &[&str]| {
            let mut t = template();
            assert!(
                !check(&t).iter().any(|p| p.contains("Durable")),
                "{:?}",
                check(&t)
            );
            *at(&mut t, place) = value;
            assert_mentions_all(&check(&t), expect);
        };
        refused(
            "DurableOrder/Environment/Variables/DURABLE_EXECUTION_TIMEOUT_SECONDS",
            "3600".into(),
            &[
                "DurableOrder: DURABLE_EXECUTION_TIMEOUT_SECONDS must be DurableConfig.ExecutionTimeout",
            ],
        );
        refused(
            "DurableOrder/DurableConfig/RetentionPeriodInDays",
            7.into(),
            &["DurableOrder: DURABLE_RETENTION_DAYS must be DurableConfig.RetentionPeriodInDays"],
        );
        refused(
            "OrderDispatcher/Environment/Variables/DURABLE_RETENTION_DAYS",
            "14".into(),
            &["OrderDispatcher: DURABLE_RETENTION_DAYS must be DurableOrder's DurableConfig"],
        );
        // S9: the marks' retention (the parameter's default, 30 days) not above the timeout.
        refused(
            "/Parameters/DurableExecutionTimeoutSeconds/Default",
            2_592_000.into(),
            &[
                "DurableOrder: with DurableOrder's DurableConfig the function would not start",
                "DEDUP_RETENTION_SECONDS",
            ],
        );
        // S16: the dispatcher's key retention past the history's retention plus the timeout.
        refused(
            "OrderDispatcher/Environment/Variables/PROVIDER_KEY_RETENTION_SECONDS",
            "2592000".into(),
            &[
                "OrderDispatcher: with DurableOrder's DurableConfig the function would not start",
                "PROVIDER_KEY_RETENTION_SECONDS",
            ],
        );
    }

    /// `infra/rules/durable.guard`: a durable function has its `DurableConfig`, its variables
    /// and an alias; a function with a `DurableConfig` is declared durable.
    #[test]
    fn durable_functions_are_declared_and_configured() {
        broken(
            |t| *at(t, "DurableOrder/DurableConfig/ExecutionTimeout") = Value::Null,
            "DurableConfig.ExecutionTimeout",
        );
        broken(
            |t| *at(t, "DurableOrder/AutoPublishAlias") = Value::Null,
            "needs AutoPublishAlias",
        );
        broken(
            |t| {
                *at(t, "OrderDispatcher/DurableConfig") =
                    serde_json::json!({"ExecutionTimeout": 60});
            },
            "must be LambdaDedupKind durable",
        );
    }

    /// The template's environment is read by the functions' own settings reader: what would
    /// refuse their start (a lease not longer than the provider timeout, a bad number) fails
    /// check-infra, not the first deploy.
    #[test]
    fn a_function_environment_its_settings_refuse_fails_the_check() {
        refuses(&[
            (
                "/Globals/Function/Environment/Variables/DEDUP_LEASE_SECONDS",
                "2".into(),
                "DEDUP_LEASE_SECONDS (2s) must be longer than PROVIDER_TIMEOUT_MS",
            ),
            (
                "PaymentDispatcher/Environment/Variables/DEDUP_MAX_CONCURRENCY",
                "ten".into(),
                "PaymentDispatcher: with PaymentDispatcherQueue's redelivery horizon",
            ),
        ]);
    }

    /// One deadline margin: a relay's former `RELAY_DEADLINE_MARGIN_MS` (its record budget
    /// under a margin's name) in the template fails the check, naming the budget's variable,
    /// rather than a function's start.
    #[test]
    fn a_relays_former_margin_variable_fails_the_check() {
        broken(
            |t| {
                res(t, "IntentRelay")["Environment"]["Variables"]["RELAY_DEADLINE_MARGIN_MS"] =
                    "2000".into()
            },
            "IntentRelay: RELAY_DEADLINE_MARGIN_MS is no longer read (the function would not start): \
             the time one record needs is RELAY_RECORD_BUDGET_MS",
        );
    }

    #[test]
    fn mark_table_needs_ttl_key_and_stream() {
        refuses(&[
            (
                "MarkTable/TimeToLiveSpecification/AttributeName",
                "ttl".into(),
                "TTL enabled on `expires_at`",
            ),
            (
                "MarkTable/TimeToLiveSpecification",
                Value::Null,
                "TTL enabled",
            ),
            (
                "MarkTable/StreamSpecification",
                Value::Null,
                "stream with old images",
            ),
            (
                "MarkTable/StreamSpecification/StreamViewType",
                "KEYS_ONLY".into(),
                "stream with old images",
            ),
        ]);
    }

    /// S4: a mark table replicated as an eventually consistent global table is refused;
    /// strongly consistent multi-Region replication is allowed.
    /// The rules with no test of their own before they moved to `infra/rules`.
    #[test]
    fn the_settings_role_and_mark_key_rules_refuse_a_broken_copy() {
        refuses(&[
            (
                "/Globals/Function/Environment/Variables/DEDUP_NAMESPACE",
                Value::Null,
                "DEDUP_NAMESPACE is missing",
            ),
            (
                "/Globals/Function/Environment/Variables/DEDUP_MARK_TABLE",
                "marks".into(),
                "DEDUP_MARK_TABLE must reference the mark table resource",
            ),
            (
                "FineNotices/Policies",
                serde_json::json!(["SQSPollerPolicy"]),
                "FineNotices: use an explicit role, not SAM `Policies`",
            ),
            (
                "MarkTable/KeySchema/0/AttributeName",
                "id".into(),
                "MarkTable: the mark table's partition key must be `pk`",
            ),
        ]);
    }

    /// The mark and inbox tables cannot be deleted by a stack update or a slip (every event
    /// forgotten at once), and the inbox's raw bodies expire by TTL.
    #[test]
    fn the_mark_and_inbox_tables_are_protected_and_the_inbox_expires() {
        refuses(&[
            (
                "MarkTable/DeletionProtectionEnabled",
                Value::Null,
                "the mark table needs DeletionProtectionEnabled",
            ),
            (
                "InboxTable/DeletionProtectionEnabled",
                false.into(),
                "an inbox table needs DeletionProtectionEnabled",
            ),
            (
                "InboxTable/TimeToLiveSpecification",
                Value::Null,
                "an inbox table needs TTL enabled on `expires_at`",
            ),
            (
                "InboxTable/TimeToLiveSpecification/AttributeName",
                "ttl".into(),
                "an inbox table needs TTL enabled on `expires_at`",
            ),
        ]);
    }

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
        refuses(&[
            (
                "LedgerProjector/Events/Queue/Properties/FunctionResponseTypes",
                Value::Null,
                "ReportBatchItemFailures",
            ),
            (
                "IntentRelay/Events/Intents/Properties/FunctionResponseTypes",
                Value::Null,
                "ReportBatchItemFailures",
            ),
            (
                "PaymentDispatcherQueue/RedrivePolicy",
                Value::Null,
                "RedrivePolicy",
            ),
            (
                "FineNotices/Environment/Variables/DEDUP_RECONCILIATION_QUEUE_URL",
                Value::Null,
                "DEDUP_RECONCILIATION_QUEUE_URL",
            ),
            (
                "IntentRelay/Events/Intents/Properties/DestinationConfig",
                Value::Null,
                "OnFailure",
            ),
        ]);
    }

    /// The joins refuse a reference to something that is not a queue of this template: a
    /// trigger on a queue given by ARN, a DLQ that is a topic.
    #[test]
    fn trigger_queues_and_their_dlqs_are_queues_of_this_template() {
        refuses(&[
            (
                "LedgerProjector/Events/Queue/Properties/Queue",
                "arn:aws:sqs:eu-west-1:123456789012:elsewhere".into(),
                "LedgerProjector.Queue: the queue must be a resource of this template",
            ),
            (
                "FineNoticesQueue/RedrivePolicy/deadLetterTargetArn",
                serde_json::json!({"Fn::GetAtt": ["AlarmTopic", "TopicArn"]}),
                "needs a RedrivePolicy to a dead-letter queue of this template",
            ),
        ]);
    }

    /// S12, S15: a stream trigger must bisect failing batches and give up records past an age,
    /// and the intent relay must sweep and alarm on what is left pending.
    #[test]
    fn stream_triggers_never_stall_and_the_relay_redrives() {
        refuses(&[(
            "IntentRelay/Events/Intents/Properties/BisectBatchOnFunctionError",
            false.into(),
            "BisectBatchOnFunctionError must be true",
        )]);
        broken(
            |t| {
                res(t, "MarkAuditor")["Events"]
                    .as_object_mut()
                    .and_then(|e| e.values_mut().next())
                    .expect("a trigger")["Properties"]["MaximumRecordAgeInSeconds"] = Value::Null
            },
            "MaximumRecordAgeInSeconds must be set",
        );
        sweeps_and_alarms("IntentRelay");
    }

    #[test]
    fn the_webhook_and_kinesis_doors_are_guarded() {
        refuses(&[
            (
                "WebhookReceiver/ReservedConcurrentExecutions",
                Value::Null,
                "ReservedConcurrentExecutions",
            ),
            (
                "WebhookReceiver/Environment/Variables/WEBHOOK_SECRETS",
                "a-secret-in-the-template".into(),
                "must verify signatures",
            ),
        ]);
        // The secret resolved into the function's configuration at deploy time (readable with
        // lambda:GetFunctionConfiguration, rotated only by a deploy) is refused too.
        broken(
            |t| {
                let vars = &mut res(t, "WebhookReceiver")["Environment"]["Variables"];
                vars["WEBHOOK_SECRETS"] = serde_json::json!({
                    "Fn::Sub": "{{resolve:secretsmanager:${WebhookSecretArn}:SecretString}}"
                });
                vars["WEBHOOK_SECRETS_ARN"] = Value::Null;
            },
            "WEBHOOK_SECRETS_ARN must name the Secrets Manager secret",
        );
        let secret = |t: &mut Value, key: &str, value: Value| {
            statement(t, "WebhookReceiverRole", "WebhookSecret")[key] = value;
        };
        broken(
            |t| secret(t, "Resource", "*".into()),
            "names its one secret",
        );
        let two = serde_json::json!([
            "secretsmanager:GetSecretValue",
            "secretsmanager:PutSecretValue"
        ]);
        broken(|t| secret(t, "Action", two), "other than GetSecretValue");
        refuses(&[
            (
                "InboxTable/StreamSpecification/StreamViewType",
                "KEYS_ONLY".into(),
                "must carry new images",
            ),
            (
                "LedgerStream/Events/Stream/Properties/DestinationConfig",
                Value::Null,
                "DestinationConfig.OnFailure",
            ),
            (
                "LedgerStream/Events/Stream/Properties/BisectBatchOnFunctionError",
                false.into(),
                "BisectBatchOnFunctionError",
            ),
        ]);
        sweeps_and_alarms("InboxForwarder");
        refuses(&[
            // What a function is, it declares; a relay's rules follow the declaration.
            (
                "/Resources/IntentRelay/Metadata/LambdaDedupKind",
                Value::Null,
                "IntentRelay: Metadata.LambdaDedupKind must say what the function is",
            ),
            (
                "/Resources/LedgerProjector/Metadata/LambdaDedupKind",
                "relay".into(),
                "LedgerProjector: needs a Schedule event",
            ),
        ]);
        // S1 at the HTTP door: an http function names the caller its keys are scoped by.
        broken(
            |t| {
                let vars = &mut res(t, "OrdersApi")["Environment"]["Variables"];
                vars.as_object_mut().map(|v| v.remove("HTTP_CALLER_FROM"));
            },
            "OrdersApi: an http function must name its caller",
        );
    }

    /// Issue 42: `HTTP_CALLER_FROM=header:<name>` trusts a header only behind a front that
    /// verifies it: refused behind a Function URL with `AuthType: NONE`, on an API route without
    /// an authorizer, without `HTTP_CALLER_FRONT` or with `unverified`; behind the template's
    /// signed (`AWS_IAM`) Function URL with `HTTP_CALLER_FRONT=iam` it is sound.
    #[test]
    fn http_header_caller_needs_a_verifying_front() {
        let header = |t: &mut Value, front: Option<&str>| {
            let vars = &mut res(t, "OrdersApi")["Environment"]["Variables"];
            vars["HTTP_CALLER_FROM"] = "header:x-caller".into();
            if let Some(front) = front {
                vars["HTTP_CALLER_FRONT"] = front.into();
            }
        };
        let mut sound = template();
        header(&mut sound, Some("iam"));
        if let Some(problems) = all_problems(&sound) {
            assert!(problems.is_empty(), "{problems:#?}");
        }
        broken(
            |t| header(t, None),
            "HTTP_CALLER_FROM=header:<name> needs HTTP_CALLER_FRONT",
        );
        broken(
            |t| header(t, Some("unverified")),
            "HTTP_CALLER_FROM=header:<name> needs HTTP_CALLER_FRONT",
        );
        broken(
            |t| {
                header(t, Some("iam"));
                res(t, "OrdersApi")["FunctionUrlConfig"]["AuthType"] = "NONE".into();
            },
            "behind a Function URL with AuthType NONE",
        );
        broken(
            |t| {
                header(t, Some("authorizer"));
                res(t, "OrdersApi")["Events"] = serde_json::json!({
                    "Post": { "Type": "HttpApi", "Properties": { "Path": "/orders", "Method": "POST" } }
                });
            },
            "on an API route without an authorizer",
        );
        broken(
            |t| {
                header(t, Some("authorizer"));
                res(t, "OrdersApi")["Events"] = serde_json::json!({
                    "Post": { "Type": "Api", "Properties": { "Path": "/orders", "Method": "POST",
                        "Auth": { "Authorizer": "NONE" } } }
                });
            },
            "on an API route without an authorizer",
        );
    }

    /// S13, S15: a stream trigger whose retries a transient outage can use up is refused (the
    /// old `MaximumRetryAttempts: 2` of ledger-stream, the 10000 of the others); each stream
    /// function's lag is alarmed; a Kinesis function parks in a queue of its own, granted and
    /// alarmed.
    #[test]
    fn stream_retries_outlast_an_outage_and_kinesis_records_are_parked() {
        refuses(&[
            (
                "LedgerStream/Events/Stream/Properties/MaximumRetryAttempts",
                2.into(),
                "LedgerStream.Stream: MaximumRetryAttempts must be -1",
            ),
            (
                "IntentRelay/Events/Intents/Properties/MaximumRetryAttempts",
                10_000.into(),
                "IntentRelay.Intents: MaximumRetryAttempts must be -1",
            ),
            (
                "InboxForwarder/Events/Inbox/Properties/MaximumRetryAttempts",
                Value::Null,
                "InboxForwarder.Inbox: MaximumRetryAttempts must be -1",
            ),
        ]);
        for f in [
            "LedgerStream",
            "MarkAuditor",
            "IntentRelay",
            "InboxForwarder",
        ] {
            broken(
                |t| remove_resource(t, &format!("{f}IteratorAgeAlarm")),
                &format!("{f}: needs an alarm on its IteratorAge"),
            );
        }
        refuses(&[(
            "LedgerStream/Environment/Variables/DEDUP_PARKING_QUEUE_URL",
            Value::Null,
            "LedgerStream: a Kinesis function needs DEDUP_PARKING_QUEUE_URL",
        )]);
        broken(
            |t| remove_resource(t, "LedgerStreamParkingAlarm"),
            "LedgerStream: a parking queue needs an alarm on its depth",
        );
        broken(
            |t| drop_statement(t, "LedgerStreamRole", "Parking"),
            "must grant sqs:SendMessage on its parking queue",
        );
    }

    #[test]
    fn visibility_timeout_must_cover_six_function_timeouts() {
        refuses(&[(
            "/Globals/Function/Timeout",
            60.into(),
            "under 6 x the function timeout",
        )]);
    }

    /// S1: each consumer's role is scoped to its own keys in the shipped template; a role that
    /// loses its condition, or names another consumer's keys, is refused (the webhook
    /// receiver's inbox items are its marks).
    /// 36.7: forget's audit items are kept where no function role can write: every
    /// `dynamodb:LeadingKeys` pattern of every role covers its own marks and none of their
    /// audit items (`lambda_dedup_dynamodb::AUDIT_PREFIX`), so a function can neither forge nor
    /// rewrite the record of a forgotten mark.
    #[test]
    fn forget_audit_items_are_outside_every_function_roles_leading_keys() {
        let t = template();
        let mut seen = 0;
        for f in functions(&t) {
            let consumer = f.consumer();
            for st in &f.statements {
                for pattern in leading_key_patterns(st).unwrap_or_default() {
                    let pattern = pattern.replace("${Namespace}", "prod");
                    let mark = format!("prod#{consumer}#00ff");
                    let audit = format!(
                        "{}{mark}#forgotten#1800000000000",
                        lambda_dedup_dynamodb::AUDIT_PREFIX
                    );
                    if string_like(&pattern, &mark) {
                        seen += 1;
                    }
                    assert!(
                        !string_like(&pattern, &audit),
                        "{}: {pattern} covers the audit item {audit}",
                        f.id
                    );
                }
            }
        }
        assert!(
            seen >= 5,
            "every marking function's own grant was checked ({seen})"
        );
    }

    /// The forwarder's item writes on the inbox are scoped to webhook-receiver's keys; its
    /// sweep's Scan alone is not (a Scan names no key). Unscoped, or scoped to its own keys
    /// (which no inbox item has), or with the Scan folded back into the write grant: refused.
    #[test]
    fn the_forwarders_inbox_writes_are_scoped_to_the_receivers_keys() {
        assert_eq!(leading_keys(&template()), Vec::<String>::new());
        fn inbox(t: &mut Value) -> &mut Value {
            statement(t, "InboxForwarderRole", "InboxItems")
        }
        let cases: [(&str, Change<'_>); 3] = [
            ("unscoped", &|t| inbox(t)["Condition"] = Value::Null),
            ("its own keys", &|t| {
                inbox(t)["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] =
                    serde_json::json!([{"Fn::Sub": "${Namespace}#inbox-forwarder#*"}]);
            }),
            ("the Scan with the write, unscoped", &|t| {
                let st = inbox(t);
                st["Action"] = serde_json::json!(["dynamodb:UpdateItem", "dynamodb:Scan"]);
                st["Condition"] = Value::Null;
            }),
        ];
        each_refused(
            leading_keys,
            &cases,
            &["InboxForwarder", "the receiver's keys"],
        );
    }

    /// Issue 42: the ledger's queue, which inbox-forwarder feeds, denies every sender but the
    /// named ones (the forwarder's role among them); without its policy, with the policy's
    /// deny turned into an allow, or with the forwarder's role left out, the check refuses it.
    #[test]
    fn the_forwarders_queue_names_who_may_send() {
        assert_eq!(forwarded_queue_senders(&template()), Vec::<String>::new());
        let statement = |t: &mut Value| -> Value {
            res(t, "LedgerProjectorQueuePolicy")["PolicyDocument"]["Statement"][0].clone()
        };
        let cases: [(&str, Change<'_>); 3] = [
            ("no policy", &|t| {
                remove_resource(t, "LedgerProjectorQueuePolicy")
            }),
            ("an allow", &|t| {
                let mut st = statement(t);
                st["Effect"] = "Allow".into();
                res(t, "LedgerProjectorQueuePolicy")["PolicyDocument"]["Statement"] =
                    serde_json::json!([st]);
            }),
            ("without the forwarder", &|t| {
                let mut st = statement(t);
                st["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] =
                    serde_json::json!([{"Ref": "LedgerProducerArns"}]);
                res(t, "LedgerProjectorQueuePolicy")["PolicyDocument"]["Statement"] =
                    serde_json::json!([st]);
            }),
        ];
        each_refused(
            forwarded_queue_senders,
            &cases,
            &["LedgerProjectorQueue", "InboxForwarderRole"],
        );
    }

    /// The relay `f` is refused without its sweep's schedule, or without the alarm on what it
    /// leaves pending.
    fn sweeps_and_alarms(f: &str) {
        broken(
            |t| remove_event(t, f, "Sweep"),
            &format!("{f}: needs a Schedule event"),
        );
        broken(
            |t| remove_resource(t, &format!("{f}OldestPendingAlarm")),
            &format!("{f}: needs an alarm on OldestPendingSeconds"),
        );
    }

    /// A change to the template, for a table of cases.
    type Change<'a> = &'a dyn Fn(&mut Value);

    /// Each case's change, made alone to the committed template, makes `check` report a problem
    /// mentioning every one of `mentions`.
    fn each_refused(
        check: fn(&Value) -> Vec<String>,
        cases: &[(&str, Change<'_>)],
        mentions: &[&str],
    ) {
        for (what, change) in cases {
            let mut t = template();
            change(&mut t);
            let problems = check(&t);
            assert!(
                problems
                    .iter()
                    .any(|p| mentions.iter().all(|m| p.contains(m))),
                "{what}: {problems:?}"
            );
        }
    }

    #[test]
    fn each_mark_grant_is_scoped_to_its_consumer() {
        for (role, sid) in [
            ("LedgerProjectorRole", "MarkTable"),
            ("FineNoticesRole", "MarkTable"),
            ("PaymentDispatcherRole", "MarkTable"),
            ("LedgerStreamRole", "MarkTable"),
            ("WebhookReceiverRole", "InboxTable"),
        ] {
            let mut t = template();
            statement(&mut t, role, sid)["Condition"] = Value::Null;
            assert_mentions(&check(&t), "has no ForAllValues:StringLike");
        }
        broken(
            |t| statement(t, "LedgerStreamRole", "MarkTable")["Condition"] = Value::Null,
            "S1: a grant on the mark table needs a ForAllValues:StringLike",
        );
        broken(
            |t| {
                let st = statement(t, "FineNoticesRole", "MarkTable");
                st["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] =
                    serde_json::json!([{"Fn::Sub": "${Namespace}#*"}]);
            },
            "not to its own consumer's keys",
        );
    }

    /// Encryption at rest either way, and the customer-managed key option (`KmsKeyArn`)
    /// reaching every table, queue, log group and role: a copy that loses any of it is refused.
    #[test]
    fn every_table_and_queue_is_encrypted_and_takes_the_kms_option() {
        refuses(&[
            (
                "MarkTable/SSESpecification",
                Value::Null,
                "a table needs SSESpecification",
            ),
            (
                "FinesTable/SSESpecification/KMSMasterKeyId",
                Value::Null,
                "a table's SSESpecification needs KMSMasterKeyId",
            ),
        ]);
        broken(
            |t| {
                let q = res(t, "LedgerProjectorQueue");
                q["SqsManagedSseEnabled"] = false.into();
                q["KmsMasterKeyId"] = Value::Null;
            },
            "a queue's SqsManagedSseEnabled must be true when no customer-managed key is given",
        );
        refuses(&[
            (
                "RelayFailures/KmsMasterKeyId",
                Value::Null,
                "needs KmsMasterKeyId under the same condition",
            ),
            (
                "ReconciliationQueue/SqsManagedSseEnabled",
                Value::Null,
                "a queue needs SqsManagedSseEnabled",
            ),
            (
                "LedgerProjectorLogs/KmsKeyId",
                Value::Null,
                "a log group needs KmsKeyId",
            ),
        ]);
        broken(
            |t| {
                statements(t, "PaymentDispatcherRole")
                    .as_array_mut()
                    .expect("statements")
                    .retain(|st| st.get("Fn::If").is_none());
            },
            "a function's role needs kms:Decrypt and kms:GenerateDataKey",
        );
    }

    #[test]
    fn least_privilege_is_enforced() {
        broken(
            |t| statements(t, "LedgerProjectorRole")[1]["Resource"] = "*".into(),
            "Resource \"*\"",
        );
        broken(
            |t| statements(t, "FineNoticesRole")[1]["Action"] = "dynamodb:*".into(),
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
            |t| drop_statement(t, "LedgerProjectorRole", "OwnQueue"),
            "role must grant sqs:ReceiveMessage",
        );
    }

    /// Issue 42: fine-notices' correlation key is read at init from the Secrets Manager secret
    /// `FINES_CORRELATION_KEY_ARN` names (a Ref to its parameter, which its role may read),
    /// never resolved into a plain variable of its configuration; a copy that resolves it
    /// again, or names the secret without the grant, is refused.
    #[test]
    fn fines_correlation_key_is_read_by_arn_never_a_plain_variable() {
        let secret_problems = |t: &Value| -> Vec<String> {
            check(t)
                .into_iter()
                .filter(|p| p.contains("FINES_CORRELATION_KEY") || p.contains("secretsmanager"))
                .collect()
        };
        let t = template();
        assert_eq!(secret_problems(&t), Vec::<String>::new());
        assert_eq!(
            res(&mut template(), "FineNotices")["Environment"]["Variables"]["FINES_CORRELATION_KEY_ARN"],
            serde_json::json!({"Ref": "FinesCorrelationKeyArn"})
        );
        let mut resolved = template();
        let vars = &mut res(&mut resolved, "FineNotices")["Environment"]["Variables"];
        vars["FINES_CORRELATION_KEY"] =
            "{{resolve:ssm:/lambda-dedup/fines-correlation-key}}".into();
        vars.as_object_mut()
            .expect("variables")
            .remove("FINES_CORRELATION_KEY_ARN");
        assert!(
            secret_problems(&resolved)
                .iter()
                .any(|p| p.starts_with("FineNotices: FINES_CORRELATION_KEY puts the secret")),
            "{:?}",
            secret_problems(&resolved)
        );
        let mut ungranted = template();
        drop_statement(&mut ungranted, "FineNoticesRole", "FinesCorrelationKey");
        assert_mentions(
            &secret_problems(&ungranted),
            "must grant secretsmanager:GetSecretValue",
        );
    }

    /// Issue 42: a `!Sub` (or `!Join`) resource holding a wildcard passes the guard rule's
    /// string match, so the check refuses it, in a template fragment and in the shipped
    /// template; a `!Sub` naming one table by its placeholders is not a wildcard.
    #[test]
    fn a_sub_wildcard_on_data_is_refused() {
        let refused = |t: &Value| {
            check(t)
                .iter()
                .any(|p| p.contains("Role: role grants") && p.contains("wildcard"))
        };
        let fragment = |resource: Value| {
            let mut t = small();
            t["Resources"]["Role"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"][1]
                ["Resource"] = resource;
            t
        };
        let sub = parse(
            r#"!Sub "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/*""#,
        )
        .expect("fragment");
        assert!(refused(&fragment(sub)));
        let listed = serde_json::json!([{"Fn::Sub": ["arn:aws:sqs:${R}:${A}:*", {"R": "x"}]}]);
        assert!(refused(&fragment(listed)));
        let joined = serde_json::json!({"Fn::Join": ["", ["arn:aws:dynamodb:", {"Ref": "AWS::Region"}, ":1:table/*"]]});
        assert!(refused(&fragment(joined)));
        let named = serde_json::json!({"Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${Balances}"});
        assert!(!refused(&fragment(named)));
        assert!(!refused(&small()));

        let mut t = template();
        statements(&mut t, "LedgerProjectorRole")[1]["Resource"] = serde_json::json!(
            {"Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/*"}
        );
        assert!(
            check(&t)
                .iter()
                .any(|p| p.starts_with("LedgerProjectorRole:") && p.contains("wildcard")),
            "{:?}",
            check(&t)
        );
    }

    #[test]
    fn runtime_architecture_and_logging_are_enforced() {
        refuses(&[
            (
                "/Globals/Function/Architectures",
                serde_json::json!(["x86_64"]),
                "arm64",
            ),
            ("FineNotices/LoggingConfig/LogFormat", "Text".into(), "JSON"),
            (
                "/Globals/Function/Runtime",
                "provided.al2".into(),
                "provided.al2023",
            ),
            (
                "/Resources/IntentRelay/Metadata",
                Value::Null,
                "rust-cargolambda",
            ),
        ]);
    }

    #[test]
    fn alarms_are_required() {
        broken(
            |t| remove_resource(t, "LedgerProjectorDLQAlarm"),
            "alarm on its depth",
        );
        broken(
            |t| remove_resource(t, "PaymentDispatcherConflictAlarm"),
            "Conflict metric",
        );
    }

    /// Every short-form tag reads as its long form (issue 24: the parser refused `!Ref`).
    #[test]
    fn short_form_tags_read_as_the_long_form() {
        let short = parse(
            r#"
A: !Ref Queue
B: !GetAtt Queue.Arn
C: !GetAtt [Queue, Arn]
D: !Sub "arn:${AWS::Partition}:sqs:${Queue}"
E: !Join ["", [a, !Ref Queue]]
F: !If [IsProd, 1, !Ref "AWS::NoValue"]
G: !Equals [!Ref Env, prod]
H: !Select [0, !GetAZs ""]
I: !FindInMap [Map, !Ref "AWS::Region", Key]
J: !ImportValue Shared-Queue
K: !Split [",", !ImportValue List]
L: !Base64 text
M: !Not [!Condition IsProd]
N: !And [!Condition IsProd, !Or [!Condition X, !Condition Y]]
O: !GetAtt Table.StreamSpecification.StreamArn
"#,
        )
        .expect("short form parses");
        let long = serde_json::json!({
            "A": {"Ref": "Queue"},
            "B": {"Fn::GetAtt": ["Queue", "Arn"]},
            "C": {"Fn::GetAtt": ["Queue", "Arn"]},
            "D": {"Fn::Sub": "arn:${AWS::Partition}:sqs:${Queue}"},
            "E": {"Fn::Join": ["", ["a", {"Ref": "Queue"}]]},
            "F": {"Fn::If": ["IsProd", 1, {"Ref": "AWS::NoValue"}]},
            "G": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
            "H": {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
            "I": {"Fn::FindInMap": ["Map", {"Ref": "AWS::Region"}, "Key"]},
            "J": {"Fn::ImportValue": "Shared-Queue"},
            "K": {"Fn::Split": [",", {"Fn::ImportValue": "List"}]},
            "L": {"Fn::Base64": "text"},
            "M": {"Fn::Not": [{"Condition": "IsProd"}]},
            "N": {"Fn::And": [{"Condition": "IsProd"}, {"Fn::Or": [{"Condition": "X"}, {"Condition": "Y"}]}]},
            "O": {"Fn::GetAtt": ["Table", "StreamSpecification.StreamArn"]},
        });
        assert_eq!(short, long);
        assert!(parse("A: !Nope x\n").is_err_and(|e| e.to_string().contains("!Nope")));
    }
}
