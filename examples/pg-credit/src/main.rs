//! Run with `cargo xtask test -p example-pg-credit` (the tests on the memory store and on the
//! PostgreSQL server xtask starts; plain `cargo test -p example-pg-credit` skips the server's);
//! in Lambda, `cargo lambda build --release -p example-pg-credit` and deploy it with the
//! environment below.
//!
//! An SQS credit on PostgreSQL, the counterpart of `sqs-credit`: an SQS-triggered Lambda whose
//! effect — adding `data.amount` to the balance of `data.account` in **your own SQL table** —
//! happens once per event, however often SQS delivers it. The credit is a parameterised
//! statement ([`SqlEffect`]) committed with the event's mark in one PostgreSQL transaction (a
//! batch in one transaction, a savepoint per event, so one bad event costs no other);
//! redeliveries and producer retries are duplicates; a message that is not a credit is failed,
//! for the queue's redrive policy to dead-letter. The same builder as on DynamoDB, so every
//! guard is there: the retention checked against the redelivery horizon at start (S9), the
//! deadline cutoff, late events to `DEDUP_RECONCILIATION_QUEUE_URL` (S10), the EMF account.
//!
//! Environment: the settings of `lambda_dedup_config` (`DEDUP_NAMESPACE`,
//! `DEDUP_MARK_TABLE` — here the marks table in PostgreSQL, created from
//! `PgStore::schema` — and the queue's redelivery horizon), those of `Dedup::postgres`
//! (`DATABASE_URL`; `PG_CA_BUNDLE`, or `PG_TLS=disabled` for a server on loopback), and
//! `BALANCES_TABLE`: your table, `(account text PRIMARY KEY, balance bigint NOT NULL)`.
//!
//! The tests run the same service on the memory store (the statements recorded) and on a
//! PostgreSQL server the test kit starts (`lambda_dedup_testkit::postgres`).

use lambda_dedup_postgres::{SqlEffect, identifier};
use lambda_dedup_runtime::flow::transact;
use lambda_dedup_runtime::{Dedup, Event, SqsService, Tenant, store::Store};
use lambda_runtime::Error;

/// The `data` of a credit event (CloudEvents JSON in the SQS body).
#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

/// The credit: `{t}` is your balances table, quoted by `identifier`.
const UPSERT: &str = "INSERT INTO {t} (account, balance) VALUES ($1, $2) \
    ON CONFLICT (account) DO UPDATE SET balance = {t}.balance + EXCLUDED.balance";

/// CloudEvents with the tenant in `tenantid`; one upsert per event, committed with its mark (a
/// batch in one transaction). `main` runs it on PostgreSQL, the tests on memory too.
fn service(dedup: Dedup<Store<SqlEffect>>) -> Result<SqsService, Error> {
    let table = identifier(&dedup.env().required("BALANCES_TABLE")?)?;
    let sql = UPSERT.replace("{t}", &table);
    let credit = transact(move |e: Event<Credit>| {
        let account = e.scoped(&e.payload.account);
        SqlEffect::new(&sql).bind(account).bind(e.payload.amount)
    })
    .one_transaction_per_batch();
    // The tenant is the payload's: the queue's producers are trusted (its policy names them).
    let dedup = dedup
        .tenant(Tenant::extension("tenantid"))
        .trusted_producers();
    Ok(dedup.sqs(credit)?)
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(lambda_runtime::run_concurrent(service(Dedup::from_env("pg-credit")?.postgres()?)?).await?)
}

#[cfg(test)]
mod tests;
