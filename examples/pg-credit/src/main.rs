//! An SQS credit on PostgreSQL, the counterpart of `sqs-credit`: an SQS-triggered Lambda whose
//! effect — adding `data.amount` to the balance of `data.account` in **your own SQL table** —
//! happens once per event, however often SQS delivers it. The credit is a parameterised
//! statement ([`SqlEffect`]) committed with the event's mark in one PostgreSQL transaction (a
//! batch in one transaction, a savepoint per event, so one bad event costs no other);
//! redeliveries and producer retries are duplicates; a message that is not a credit is failed,
//! for the queue's redrive policy to dead-letter.
//!
//! The runtime's builder (`lambda_dedup_runtime::Dedup`) writes DynamoDB effects, so this
//! function is written on the generic flows: [`Deduplicator<SqlEffect>`] and
//! [`run_batch_transactional`], with the runtime's settings and its SQS conversions.
//!
//! Environment: the settings of `lambda_dedup_runtime::settings` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE` — here the marks table in PostgreSQL, created from
//! [`PgStore::schema`] — and the queue's redelivery horizon, which the mark retention must cover
//! or the function refuses to start, S9), plus:
//!
//! - `DATABASE_URL`: the server, `postgresql://user:password@host:5432/db` (RDS Proxy's endpoint
//!   works as it is);
//! - `PG_CA_BUNDLE`: a PEM file of the certificate authorities to verify the server with (for
//!   RDS, Amazon's RDS bundle), or `PG_TLS=disabled` for a server on loopback; neither refuses
//!   the start;
//! - `BALANCES_TABLE`: your table, `(account text PRIMARY KEY, balance bigint NOT NULL)`.
//!
//! Late events (S10) are failed here, for the dead-letter queue (the builder's reconciliation
//! queue is not wired). The tests at the bottom run the handler on the PostgreSQL server named
//! by `DEDUP_POSTGRES_URL` (`cargo xtask test` starts one); without it they are skipped.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_dedup::{Derived, KeySpec};
use lambda_dedup_batch::{Deduplicator, HandlerError, Plan, run_batch_transactional};
use lambda_dedup_postgres::{PgStore, SqlEffect, Tls};
use lambda_dedup_runtime::{Env, Settings, SettingsError, messages, response};

/// The `data` of a credit event (CloudEvents JSON in the SQS body).
#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

/// The credit: one upsert of the balances table, committed with the event's mark. The
/// account is scoped by the event's tenant, so tenants stay apart in the data too (S1).
fn credit(balances: &str, e: &Derived) -> Result<Plan<SqlEffect>, HandlerError> {
    let credit: Credit = serde_json::from_value(HandlerError::data(e)?.clone()).map_err(|_| {
        HandlerError::Invalid("data must be {account: string, amount: integer}".into())
    })?;
    let account = lambda_dedup::tenant_scoped(&e.tenant, &credit.account);
    let upsert = SqlEffect::new(format!(
        "INSERT INTO {balances} (account, balance) VALUES ($1, $2) \
         ON CONFLICT (account) DO UPDATE SET balance = {balances}.balance + EXCLUDED.balance"
    ));
    Ok(Plan::from(vec![upsert.bind(account).bind(credit.amount)]))
}

/// The function: CloudEvents with the tenant in `tenantid`, marks and balances in PostgreSQL.
#[derive(Debug, Clone)]
struct Function {
    dedup: Deduplicator<SqlEffect>,
    /// The balances table, quoted.
    balances: String,
    max_concurrency: usize,
}

impl Function {
    /// Every setting checked at start.
    fn new(env: &Env) -> Result<Self, SettingsError> {
        let settings = Settings::read(env, "pg-credit")?;
        let url = env.required("DATABASE_URL")?;
        let store = PgStore::from_url(&url, tls(env)?, settings.retention)
            .map_err(|e| SettingsError::Refused(e.to_string()))?
            .with_table(settings.required_mark_table()?)
            .map_err(|e| SettingsError::Refused(e.to_string()))?
            .with_lease(settings.lease);
        let spec = KeySpec::cloudevents(settings.scope.clone(), "tenantid");
        Ok(Self {
            dedup: settings.deduplicator_on(spec, std::sync::Arc::new(store)),
            balances: identifier(env, "BALANCES_TABLE")?,
            max_concurrency: settings.max_concurrency,
        })
    }

    /// One SQS invocation: the batch in one transaction, the failures reported for
    /// redelivery (or the dead-letter queue).
    async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        let batch = messages(&event);
        let plan = |e: &Derived| credit(&self.balances, e);
        let report = run_batch_transactional(batch, self.max_concurrency, &self.dedup, plan).await;
        println!("{}", report.account.emf_line("lambda-dedup", "pg-credit"));
        response(&report)
    }
}

/// TLS as `PG_CA_BUNDLE` or `PG_TLS=disabled` say; neither is a refusal (no silent plain text).
fn tls(env: &Env) -> Result<Tls, SettingsError> {
    if let Some(path) = env.get("PG_CA_BUNDLE").filter(|p| !p.trim().is_empty()) {
        let pem = std::fs::read(&path).map_err(|_| SettingsError::Invalid {
            name: "PG_CA_BUNDLE".into(),
            value: path.clone(),
        })?;
        return Tls::with_pem_roots(&pem).map_err(|e| SettingsError::Refused(e.to_string()));
    }
    match env.get("PG_TLS").as_deref() {
        Some("disabled") => Ok(Tls::Disabled),
        _ => Err(SettingsError::Refused(
            "set PG_CA_BUNDLE (certificate authorities to verify the server) or PG_TLS=disabled \
             (a server on loopback)"
                .into(),
        )),
    }
}

/// The table named by `var`, quoted: letters, digits and `_`, optionally `schema.table` (it
/// goes into the statement's text, so nothing else is accepted).
fn identifier(env: &Env, var: &str) -> Result<String, SettingsError> {
    let name = env.required(var)?;
    let parts: Vec<&str> = name.split('.').collect();
    let valid = parts.len() <= 2
        && parts.iter().all(|p| {
            p.len() <= 63
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && p.bytes().next().is_some_and(|b| !b.is_ascii_digit())
        });
    if !valid {
        return Err(SettingsError::Invalid {
            name: var.into(),
            value: name,
        });
    }
    let quoted: Vec<String> = parts.iter().map(|p| format!("\"{p}\"")).collect();
    Ok(quoted.join("."))
}

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let function = Function::new(&Env::process())?;
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<SqsEvent>| {
            let function = function.clone();
            async move { Ok::<_, lambda_runtime::Error>(function.handle(event.payload).await) }
        },
    ))
    .await
}

#[cfg(test)]
mod tests;
