//! A function's environment as `infra/template.yaml` gives it: the `Globals` variables, then
//! the function's own. A literal value is taken as it is; a `Ref` to a template parameter is
//! its `Default`; any other intrinsic (a table's or queue's `Ref`, a `GetAtt`) is known only once
//! deployed, so it is left out and must come from the environment (which wins over the
//! template anyway: `AWS_ENDPOINT_URL*`, `DEDUP_MARK_TABLE`, …).

use std::collections::BTreeMap;

use serde_yaml_ng::Value;

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
    let doc: Value =
        serde_yaml_ng::from_str(yaml).map_err(|e| TemplateError::Unreadable(e.to_string()))?;
    let params = &doc["Parameters"];
    let resources = doc["Resources"]
        .as_mapping()
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
        let Some(vars) = vars.as_mapping() else {
            continue;
        };
        for (k, v) in vars {
            let Some(name) = k.as_str() else { continue };
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
    if let Some(events) = resource["Properties"]["Events"].as_mapping() {
        entry.source_queue = events
            .values()
            .filter(|e| e["Type"].as_str() == Some("SQS"))
            .find_map(|e| e["Properties"]["Queue"]["Fn::GetAtt"][0].as_str())
            .map(str::to_owned);
    }
    entry.dead_letter_queue = entry.source_queue.as_ref().and_then(|q| {
        resources
            .iter()
            .find(|(k, _)| k.as_str() == Some(q))
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
