//! The function the tool works on, configured as the function configures itself: its `DEDUP_*`
//! variables from the environment over its template entry, its key spec and flow from
//! `--key-spec` and `--flow` or else the template's Metadata (see `lambda_dedup_cli::template`
//! for why they are declared there). The tool links no function's code: a function it knows
//! nothing of is as well served as the demo's, given its template or the two flags.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use lambda_dedup::KeySpec;
use lambda_dedup_cli::template::{self, Flow};
use lambda_dedup_config::{Env, Settings};
use lambda_dedup_engine::Deduplicator;

use crate::error::Error;

/// Which function, and where its configuration comes from (global options).
#[derive(Debug, Args)]
pub(crate) struct FunctionArgs {
    /// The function, as the template names it (the last part of its `CodeUri`): its default
    /// consumer name and the `Function` of its metrics. Required unless `--template` has
    /// exactly one function.
    #[arg(long, short = 'f', global = true)]
    pub(crate) function: Option<String>,
    /// The SAM template to read the function's variables, key spec and flow from (the
    /// environment wins over its variables, `--key-spec` and `--flow` over its Metadata).
    #[arg(long, global = true)]
    pub(crate) template: Option<PathBuf>,
    /// The function's flow: `leased` for functions that call an external API (S6, S16).
    /// Default: the template's `Metadata.LambdaDedupFlow`, else `transactional`.
    #[arg(long, global = true, value_enum)]
    pub(crate) flow: Option<Flow>,
    /// The function's key spec, `cloudevents:<tenant extension>[:<fingerprint pointer>,…]`.
    /// Default: the template's `Metadata.LambdaDedupKeySpec`; needed by explain and redrive.
    #[arg(long, global = true)]
    pub(crate) key_spec: Option<String>,
}

/// What the tool works with: the function's settings (read from its environment), the mark store, and
/// what it needs to build the function's deduplicator when a command asks for it.
pub(crate) struct Context {
    pub(crate) settings: Settings,
    pub(crate) store: lambda_dedup_dynamodb::DynamoStore,
    pub(crate) client: lambda_dedup_dynamodb::Client,
    /// Who the caller is, as AWS authenticated it (the audit of `forget`).
    sts: aws_sdk_sts::Client,
    pub(crate) json: bool,
    function: String,
    key_spec: Option<String>,
    flow: Flow,
}

impl Context {
    pub(crate) async fn new(f: &FunctionArgs, json: bool) -> Result<Self, Error> {
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        let mut declared = None;
        if let Some(path) = &f.template {
            let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
            let entry = template::function_entry(&text, f.function.as_deref())?;
            vars.extend(entry.variables.clone());
            declared = Some(entry);
        }
        let function = match (&f.function, &declared) {
            (Some(name), _) => name.clone(),
            (None, Some(entry)) => entry.name.clone(),
            (None, None) => return Err(Error::NoFunction),
        };
        vars.extend(std::env::vars());
        let env = Env::from_pairs(vars);
        let settings = Settings::read(&env, &function)?;
        let conf = lambda_dedup_aws::sdk_config(&settings.sdk_timeouts).await;
        let client = lambda_dedup_dynamodb::Client::from_conf(&conf);
        let sts = aws_sdk_sts::Client::new(&conf);
        let store = mark_store(&settings, client.clone())?;
        let key_spec = f
            .key_spec
            .clone()
            .or_else(|| declared.as_ref().and_then(|e| e.key_spec.clone()));
        let flow = f
            .flow
            .or_else(|| declared.as_ref().and_then(|e| e.flow))
            .unwrap_or_default();
        Ok(Self {
            settings,
            store,
            client,
            sts,
            json,
            function,
            key_spec,
            flow,
        })
    }

    /// The caller's ARN, as AWS authenticated the credentials the tool runs with (STS
    /// `GetCallerIdentity`, which needs no permission): what an audit item names.
    pub(crate) async fn caller(&self) -> Result<String, Error> {
        let out =
            self.sts.get_caller_identity().send().await.map_err(|e| {
                Error::Identity(aws_sdk_sts::error::DisplayErrorContext(e).to_string())
            })?;
        out.arn()
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| Error::Identity("no ARN in its answer".into()))
    }

    /// The function's deduplicator, as its `main` builds it: its key spec and flow, on the
    /// mark table. Only `explain` and `redrive` need one (and so a key spec).
    pub(crate) fn deduplicator(&self) -> Result<Deduplicator, Error> {
        let spec = key_spec(self.key_spec.as_deref(), &self.function, &self.settings)?;
        let store = std::sync::Arc::new(mark_store(&self.settings, self.client.clone())?);
        let s = &self.settings;
        let dedup = Deduplicator::with_store(spec, store)
            .with_cache_for(s.cache_size, s.cache_max_age)
            .with_duplicate_prefilter(s.prefilter_duplicates);
        Ok(match self.flow {
            Flow::Transactional => dedup,
            Flow::Leased => {
                let leased = dedup.with_provider_key_retention(s.provider_key_retention);
                (*leased).clone()
            }
        })
    }
}

/// The function's mark store, as its `main` builds it: the mark table (required here), the
/// settings' retention (S9), lease and clock skew.
fn mark_store(
    settings: &Settings,
    client: lambda_dedup_dynamodb::Client,
) -> Result<lambda_dedup_dynamodb::DynamoStore, Error> {
    let table = settings.required_mark_table()?.to_owned();
    Ok(
        lambda_dedup_dynamodb::DynamoStore::new(client, table, settings.retention)
            .with_lease(settings.lease)
            .with_clock_skew(settings.clock_skew),
    )
}

/// The function's key spec from its `--key-spec` text, with the settings' body limit and
/// event-time source applied (as the function's builder applies them).
fn key_spec(text: Option<&str>, function: &str, settings: &Settings) -> Result<KeySpec, Error> {
    let text = text.ok_or_else(|| Error::NoKeySpec(function.to_owned()))?;
    let spec = lambda_dedup_config::cloudevents_key_spec(text, settings.scope.clone())?;
    Ok(settings.key_spec(spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_dedup::Message;
    use serde_json::json;

    fn settings() -> Settings {
        Settings::read(
            &Env::from_pairs([("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", "m")]),
            "ledger-projector",
        )
        .expect("settings")
    }

    fn derived(spec: &KeySpec, amount: i64) -> lambda_dedup::Derived {
        let body = json!({"specversion": "1.0", "type": "credit", "source": "/s", "id": "e-1",
            "tenantid": "acme", "data": {"account": "a", "amount": amount}});
        spec.derive(&Message {
            message_id: "m".into(),
            body: body.to_string().into_bytes(),
            ..Message::default()
        })
        .expect("key")
    }

    /// The key spec is the text given (from `--key-spec` or the template), in the function's
    /// scope with its settings applied; the tool guesses none, and refuses a text that is not
    /// one.
    #[test]
    fn the_key_spec_is_the_declared_text_and_never_a_guess() {
        let s = settings();
        let spec = key_spec(
            Some("cloudevents:tenantid:/type,/data/account,/data/amount"),
            "ledger-projector",
            &s,
        )
        .expect("spec");
        assert!(
            derived(&spec, 5)
                .key
                .as_str()
                .starts_with("t#ledger-projector#")
        );
        assert_ne!(derived(&spec, 5).fingerprint, derived(&spec, 6).fingerprint);
        assert!(matches!(
            key_spec(None, "fine-notices", &s),
            Err(Error::NoKeySpec(f)) if f == "fine-notices"
        ));
        assert!(matches!(
            key_spec(Some("cloudevents:tenantid:type"), "x", &s),
            Err(Error::KeySpecText(_))
        ));
        assert!(matches!(
            key_spec(Some("attribute:x"), "x", &s),
            Err(Error::KeySpecText(_))
        ));
    }
}
