//! A function's environment as `infra/template.yaml` gives it: the `Globals` variables, then
//! the function's own. A literal value is taken as it is; a `Ref` to a template parameter is
//! its `Default`; any other intrinsic (a table's or queue's `Ref`, a `GetAtt`) is known only once
//! deployed, so it is left out and must come from the environment (which wins over the
//! template anyway: `AWS_ENDPOINT_URL*`, `DEDUP_MARK_TABLE`, …).

use std::collections::BTreeMap;

use serde_json::Value;

/// Why a template gives no environment for the function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// The file could not be read or parsed.
    Unreadable(String),
    /// No `AWS::Serverless::Function` whose `CodeUri` ends in the function's name.
    NoSuchFunction(String),
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::Unreadable(why) => write!(f, "template: {why}"),
            TemplateError::NoSuchFunction(name) => {
                write!(f, "template: no function whose CodeUri ends in `{name}`")
            }
        }
    }
}

impl std::error::Error for TemplateError {}

/// What the template says of a function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionEntry {
    /// The variables the template resolves (see the module docs).
    pub variables: BTreeMap<String, String>,
    /// The variables only a deployment resolves (their names).
    pub unresolved: Vec<String>,
    /// The logical name of the function's SQS source queue, if it has one.
    pub source_queue: Option<String>,
    /// The logical name of that queue's dead-letter queue.
    pub dead_letter_queue: Option<String>,
}

/// The entry of `function` in the template text `yaml`.
pub fn function_entry(yaml: &str, function: &str) -> Result<FunctionEntry, TemplateError> {
    let doc = parse(yaml).map_err(TemplateError::Unreadable)?;
    let params = &doc["Parameters"];
    let resources = doc["Resources"]
        .as_object()
        .ok_or_else(|| TemplateError::Unreadable("no Resources".into()))?;
    let (_, resource) = resources
        .iter()
        .find(|(_, r)| {
            r["Type"].as_str() == Some("AWS::Serverless::Function")
                && r["Properties"]["CodeUri"]
                    .as_str()
                    .is_some_and(|u| u.trim_end_matches('/').ends_with(&format!("/{function}")))
        })
        .ok_or_else(|| TemplateError::NoSuchFunction(function.to_owned()))?;
    let mut entry = FunctionEntry::default();
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

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A template's text as JSON, each short-form tag replaced by its long form: `!Ref X` by
/// `{"Ref": "X"}`, `!GetAtt A.B` by `{"Fn::GetAtt": ["A", "B"]}`, `!Condition C` by
/// `{"Condition": "C"}`, and every other `!Fn` by `{"Fn::Fn": …}`.
pub fn parse(text: &str) -> Result<Value, String> {
    let yaml: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
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

fn long_form(v: serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(&n).map_err(|e| e.to_string())?,
        Y::String(s) => Value::String(s),
        Y::Sequence(a) => Value::Array(
            a.into_iter()
                .map(long_form)
                .collect::<Result<_, String>>()?,
        ),
        Y::Mapping(m) => {
            let mut o = serde_json::Map::new();
            for (k, v) in m {
                let k = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => return Err(format!("a mapping key that is not a string: {other:?}")),
                };
                o.insert(k, long_form(v)?);
            }
            Value::Object(o)
        }
        Y::Tagged(t) => {
            let tag = t.tag.to_string();
            let name = tag.trim_start_matches('!');
            if !SHORT_FORMS.contains(&name) {
                return Err(format!("unknown tag {tag}"));
            }
            let inner = long_form(t.value)?;
            let (key, inner) = match (name, inner) {
                ("Ref" | "Condition", v) => (name.to_owned(), v),
                ("GetAtt", Value::String(s)) => {
                    let (res, attr) = s
                        .split_once('.')
                        .ok_or_else(|| format!("!GetAtt {s}: expected Resource.Attribute"))?;
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

    /// The project's own template: the ledger's entry gives its horizon variables, the
    /// namespace parameter's default, and names what only a deployment knows.
    #[test]
    fn the_ledger_entry_of_the_projects_template() {
        let yaml = include_str!("../../../infra/template.yaml");
        let e = function_entry(yaml, "ledger-projector").expect("entry");
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
            function_entry(yaml, "nope"),
            Err(TemplateError::NoSuchFunction("nope".into()))
        );
    }
}
