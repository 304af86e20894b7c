//! What `infra/template.yaml` (or any SAM template of lambda-dedup functions) says of a
//! function: its environment, its queues, and what the operators' tool must know of its code.
//!
//! The environment is the `Globals` variables, then the function's own. A literal value is
//! taken as it is; a `Ref` to a template parameter is its `Default`; any other intrinsic (a
//! table's or queue's `Ref`, a `GetAtt`) is known only once deployed, so it is left out and must
//! come from the environment (which wins over the template anyway: `AWS_ENDPOINT_URL*`,
//! `DEDUP_MARK_TABLE`, …).
//!
//! What the tool must know of the code is declared in the function's `Metadata`, beside
//! `LambdaDedupKind`: `LambdaDedupKeySpec`, its key spec as a `--key-spec` text
//! (`cloudevents:<tenant extension>[:<fingerprint pointer>,…]`, read by
//! `lambda_dedup_config::cloudevents_key_spec`), and `LambdaDedupFlow`, `transactional`
//! (the default) or `leased`. Metadata, not `Environment`: the function never reads them (its
//! `configure` is the truth, and a test in each function checks the template says the same), so
//! a variable would look like a setting that changes the function; and a variable of the same
//! name in every function would collide wherever the functions' variables are merged (the
//! local stack's `functions.env`).

use std::collections::BTreeMap;

use serde_json::Value;

/// Why a template gives no environment for the function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// The file could not be read or parsed.
    Unreadable(String),
    /// No `AWS::Serverless::Function` whose `CodeUri` ends in the function's name.
    NoSuchFunction(String),
    /// No function was named, and the template has not exactly one (their names).
    WhichFunction(Vec<String>),
    /// `Metadata.LambdaDedupFlow` is neither `transactional` nor `leased`.
    BadFlow {
        /// The function.
        function: String,
        /// What the template says.
        value: String,
    },
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::Unreadable(why) => write!(f, "template: {why}"),
            TemplateError::NoSuchFunction(name) => {
                write!(f, "template: no function whose CodeUri ends in `{name}`")
            }
            TemplateError::WhichFunction(names) if names.is_empty() => {
                write!(f, "template: no AWS::Serverless::Function in it")
            }
            TemplateError::WhichFunction(names) => write!(
                f,
                "template: {} functions ({}): say which with --function",
                names.len(),
                names.join(", ")
            ),
            TemplateError::BadFlow { function, value } => write!(
                f,
                "template: {function}: Metadata.LambdaDedupFlow {value:?} is neither transactional nor leased"
            ),
        }
    }
}

impl std::error::Error for TemplateError {}

/// How a function processes a message: which of the batch flows its `main` builds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Flow {
    /// Mark and effects commit in one transaction (the builder's `flow::transact`).
    #[default]
    Transactional,
    /// Claim, call an external API, complete (the builder's `flow::calls`; S6, S16).
    Leased,
}

/// What the template says of a function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionEntry {
    /// The function's name: the last part of its `CodeUri` (its crate's directory).
    pub name: String,
    /// Its key spec as a `--key-spec` text (`Metadata.LambdaDedupKeySpec`), if declared.
    pub key_spec: Option<String>,
    /// Its flow (`Metadata.LambdaDedupFlow`), if declared.
    pub flow: Option<Flow>,
    /// The variables the template resolves (see the module docs).
    pub variables: BTreeMap<String, String>,
    /// The variables only a deployment resolves (their names).
    pub unresolved: Vec<String>,
    /// The logical name of the function's SQS source queue, if it has one.
    pub source_queue: Option<String>,
    /// The logical name of that queue's dead-letter queue.
    pub dead_letter_queue: Option<String>,
}

/// The names of the template's functions (the last part of each `CodeUri`), sorted.
pub fn functions(yaml: &str) -> Result<Vec<String>, TemplateError> {
    let doc = parse(yaml).map_err(|e| TemplateError::Unreadable(e.to_string()))?;
    let mut names: Vec<String> = function_resources(&doc)?
        .map(|(name, _)| name.to_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// The entry of `function` in the template text `yaml`; with no `function`, of the template's
/// one function (a template of several must be told which: [`TemplateError::WhichFunction`]).
pub fn function_entry(yaml: &str, function: Option<&str>) -> Result<FunctionEntry, TemplateError> {
    let doc = parse(yaml).map_err(|e| TemplateError::Unreadable(e.to_string()))?;
    let params = &doc["Parameters"];
    let resources = doc["Resources"]
        .as_object()
        .ok_or_else(|| TemplateError::Unreadable("no Resources".into()))?;
    let (name, resource) = match function {
        Some(function) => function_resources(&doc)?
            .find(|(name, _)| *name == function)
            .ok_or_else(|| TemplateError::NoSuchFunction(function.to_owned()))?,
        None => {
            let all: Vec<_> = function_resources(&doc)?.collect();
            match all.as_slice() {
                [one] => *one,
                _ => {
                    let mut names: Vec<String> = all.iter().map(|(n, _)| (*n).to_owned()).collect();
                    names.sort();
                    return Err(TemplateError::WhichFunction(names));
                }
            }
        }
    };
    let metadata = &resource["Metadata"];
    let flow = match metadata["LambdaDedupFlow"].as_str() {
        None => None,
        Some("transactional") => Some(Flow::Transactional),
        Some("leased") => Some(Flow::Leased),
        Some(other) => {
            return Err(TemplateError::BadFlow {
                function: name.to_owned(),
                value: other.to_owned(),
            });
        }
    };
    let mut entry = FunctionEntry {
        name: name.to_owned(),
        key_spec: metadata["LambdaDedupKeySpec"].as_str().map(str::to_owned),
        flow,
        ..FunctionEntry::default()
    };
    for vars in [
        &doc["Globals"]["Function"]["Environment"]["Variables"],
        &resource["Properties"]["Environment"]["Variables"],
    ] {
        let Some(vars) = vars.as_object() else {
            continue;
        };
        for (k, v) in vars {
            let name = k.as_str();
            let resolved = match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => v["Ref"]
                    .as_str()
                    .and_then(|p| scalar(&params[p]["Default"])),
            };
            match resolved {
                Some(value) => {
                    entry.unresolved.retain(|n| n != name);
                    entry.variables.insert(name.to_owned(), value);
                }
                None => {
                    entry.variables.remove(name);
                    entry.unresolved.push(name.to_owned());
                }
            }
        }
    }
    if let Some(events) = resource["Properties"]["Events"].as_object() {
        entry.source_queue = events
            .values()
            .filter(|e| e["Type"].as_str() == Some("SQS"))
            .find_map(|e| e["Properties"]["Queue"]["Fn::GetAtt"][0].as_str())
            .map(str::to_owned);
    }
    entry.dead_letter_queue = entry.source_queue.as_ref().and_then(|q| {
        resources
            .iter()
            .find(|(k, _)| k.as_str() == q.as_str())
            .and_then(|(_, r)| {
                r["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0].as_str()
            })
            .map(str::to_owned)
    });
    Ok(entry)
}

/// The template's functions, each with its name: its binary's (`Metadata.BuildProperties.Binary`,
/// a crate of several), else the last part of its `CodeUri`.
fn function_resources(doc: &Value) -> Result<impl Iterator<Item = (&str, &Value)>, TemplateError> {
    let resources = doc["Resources"]
        .as_object()
        .ok_or_else(|| TemplateError::Unreadable("no Resources".into()))?;
    Ok(resources.values().filter_map(|r| {
        if r["Type"].as_str() != Some("AWS::Serverless::Function") {
            return None;
        }
        if let Some(binary) = r["Metadata"]["BuildProperties"]["Binary"].as_str() {
            return Some((binary, r));
        }
        let uri = r["Properties"]["CodeUri"].as_str()?.trim_end_matches('/');
        let name = uri.rsplit('/').next().filter(|n| !n.is_empty())?;
        Some((name, r))
    }))
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Why a template's text could not be read as a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text is not YAML (the parser's message).
    #[error("not YAML: {0}")]
    NotYaml(String),
    /// A YAML number JSON cannot hold (the converter's message).
    #[error("{0}")]
    Number(String),
    /// A mapping key that is not a string, number or boolean (the key, as YAML has it).
    #[error("a mapping key that is not a string: {0}")]
    KeyNotString(String),
    /// A tag that is not one of CloudFormation's short forms.
    #[error("unknown tag {0}")]
    UnknownTag(String),
    /// A `!GetAtt` whose text is not `Resource.Attribute`.
    #[error("!GetAtt {0}: expected Resource.Attribute")]
    GetAtt(String),
}

/// A template's text as JSON, each short-form tag replaced by its long form: `!Ref X` by
/// `{"Ref": "X"}`, `!GetAtt A.B` by `{"Fn::GetAtt": ["A", "B"]}`, `!Condition C` by
/// `{"Condition": "C"}`, and every other `!Fn` by `{"Fn::Fn": …}`.
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let yaml: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| ParseError::NotYaml(e.to_string()))?;
    long_form(yaml)
}

/// The short-form tags CloudFormation defines.
const SHORT_FORMS: [&str; 16] = [
    "Ref",
    "Condition",
    "GetAtt",
    "Sub",
    "Join",
    "If",
    "Equals",
    "Select",
    "FindInMap",
    "GetAZs",
    "ImportValue",
    "Split",
    "Base64",
    "Not",
    "And",
    "Or",
];

fn long_form(v: serde_yaml_ng::Value) -> Result<Value, ParseError> {
    use serde_yaml_ng::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(&n).map_err(|e| ParseError::Number(e.to_string()))?,
        Y::String(s) => Value::String(s),
        Y::Sequence(a) => Value::Array(
            a.into_iter()
                .map(long_form)
                .collect::<Result<_, ParseError>>()?,
        ),
        Y::Mapping(m) => {
            let mut o = serde_json::Map::new();
            for (k, v) in m {
                let k = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => return Err(ParseError::KeyNotString(format!("{other:?}"))),
                };
                o.insert(k, long_form(v)?);
            }
            Value::Object(o)
        }
        Y::Tagged(t) => {
            let tag = t.tag.to_string();
            let name = tag.trim_start_matches('!');
            if !SHORT_FORMS.contains(&name) {
                return Err(ParseError::UnknownTag(tag));
            }
            let inner = long_form(t.value)?;
            let (key, inner) = match (name, inner) {
                ("Ref" | "Condition", v) => (name.to_owned(), v),
                ("GetAtt", Value::String(s)) => {
                    let (res, attr) = s
                        .split_once('.')
                        .ok_or_else(|| ParseError::GetAtt(s.clone()))?;
                    ("Fn::GetAtt".to_owned(), serde_json::json!([res, attr]))
                }
                (_, v) => (format!("Fn::{name}"), v),
            };
            Value::Object(serde_json::Map::from_iter([(key, inner)]))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = include_str!("../../../infra/template.yaml");

    /// The project's own template: the ledger's entry gives its horizon variables, the
    /// namespace parameter's default, and names what only a deployment knows.
    #[test]
    fn the_ledger_entry_of_the_projects_template() {
        let e = function_entry(TEMPLATE, Some("ledger-projector")).expect("entry");
        assert_eq!(e.name, "ledger-projector");
        assert_eq!(
            e.variables
                .get("DEDUP_MAX_RECEIVE_COUNT")
                .map(String::as_str),
            Some("5")
        );
        assert!(e.variables.contains_key("DEDUP_NAMESPACE"), "{e:?}");
        assert!(
            e.unresolved.iter().any(|n| n == "DEDUP_MARK_TABLE"),
            "{e:?}"
        );
        assert_eq!(e.source_queue.as_deref(), Some("LedgerProjectorQueue"));
        assert_eq!(e.dead_letter_queue.as_deref(), Some("LedgerProjectorDLQ"));
        assert_eq!(
            function_entry(TEMPLATE, Some("nope")),
            Err(TemplateError::NoSuchFunction("nope".into()))
        );
    }

    /// What the tool must know of a function's code is in its Metadata: the key spec as a
    /// `--key-spec` text and the flow (transactional unless it says leased).
    #[test]
    fn key_spec_and_flow_come_from_the_functions_metadata() {
        let e = |f| function_entry(TEMPLATE, Some(f)).expect("entry");
        let payments = e("payment-dispatcher");
        assert_eq!(payments.flow, Some(Flow::Leased));
        assert!(
            payments
                .key_spec
                .is_some_and(|s| s.starts_with("cloudevents:tenantid:")),
        );
        assert_eq!(e("ledger-projector").flow, Some(Flow::Transactional));
        assert_eq!(e("mark-auditor").key_spec, None);
        let bad = TEMPLATE.replacen(
            "LambdaDedupFlow: \"leased\"",
            "LambdaDedupFlow: \"lease\"",
            1,
        );
        assert_eq!(
            function_entry(&bad, Some("payment-dispatcher")),
            Err(TemplateError::BadFlow {
                function: "payment-dispatcher".into(),
                value: "lease".into()
            })
        );
    }

    /// Without `--function`, a template of one function names it; one of several must be told
    /// which, and the error lists them.
    #[test]
    fn a_template_of_one_function_needs_no_function_name() {
        let one = r#"
Resources:
  Fn:
    Type: "AWS::Serverless::Function"
    Metadata:
      LambdaDedupKeySpec: "cloudevents:tenantid"
    Properties:
      CodeUri: "../functions/orders/"
"#;
        let e = function_entry(one, None).expect("the only one");
        assert_eq!(e.name, "orders");
        assert_eq!(e.key_spec.as_deref(), Some("cloudevents:tenantid"));
        assert_eq!(e.flow, None);
        let all = functions(TEMPLATE).expect("functions");
        assert!(all.len() > 1 && all.contains(&"ledger-projector".to_owned()));
        // A crate of two functions: each by its binary's name.
        assert!(all.contains(&"order-dispatcher".to_owned()), "{all:?}");
        assert!(!all.contains(&"durable-order".to_owned()), "{all:?}");
        assert_eq!(
            function_entry(TEMPLATE, Some("order-dispatcher")).map(|e| e.flow),
            Ok(Some(Flow::Leased))
        );
        assert_eq!(
            function_entry(TEMPLATE, None),
            Err(TemplateError::WhichFunction(all))
        );
    }
}
