//! Run with `cargo test -p example-custom-door` (its tests, on the memory store); in Lambda,
//! `cargo lambda build --release -p example-custom-door` and deploy it with `sqs-credit`'s
//! settings.
//!
//! Your company's envelope in SQS bodies, `{"envelope": {"event_id", "tenant"}, "data": {..}}`,
//! as a door of your own; the runner does the rest.

use lambda_dedup_runtime::door::{AnyOrder, AttributeValue, Door, Message, Record, Refused};
use lambda_dedup_runtime::events::{SqsBatchResponse, SqsEvent};
use lambda_dedup_runtime::{Dedup, Effect, Event, Reason, SqsService, door, lambda_runtime};

/// The company's envelope around each SQS body.
struct CompanyEnvelope;

impl Door for CompanyEnvelope {
    type Event = SqsEvent;
    type Response = SqsBatchResponse;
    type Ordering = AnyOrder;
    const NAME: &'static str = "company envelope";
    const IDENTITY: Option<&'static str> = Some("event_id");
    const TENANT: Option<&'static str> = Some("tenant");

    /// Each message under its SQS `messageId`, the work given `data`.
    fn messages(&self, event: &SqsEvent, _: &lambda_runtime::Context) -> Vec<Record> {
        let open = |mut m: Message| {
            let body: serde_json::Value = serde_json::from_slice(&m.body).unwrap_or_default();
            let (Some(head), Some(data)) = (body["envelope"].as_object(), body.get("data")) else {
                return Err(Refused::rejected(&m, Reason::EnvelopeMalformed, "envelope"));
            };
            for name in ["event_id", "tenant"] {
                let value = head.get(name).and_then(|v| v.as_str()).map(String::from);
                m.attributes
                    .extend(value.map(|v| (name.into(), AttributeValue::String(v))));
            }
            m.body = data.to_string().into_bytes();
            Ok(m)
        };
        door::sqs_messages(event).into_iter().map(open).collect()
    }
}

/// `sqs-credit`'s credit through the company's door; producers trusted to name the tenant.
fn service(dedup: Dedup) -> Result<SqsService, lambda_runtime::Error> {
    let balances = dedup.env().required("BALANCES_TABLE")?;
    let dedup = dedup.trusted_producers();
    Ok(dedup.door(CompanyEnvelope, move |e: Event<Credit>| {
        let account = ("account", e.scoped(&e.payload.account));
        Effect::add(&balances, account, "balance", e.payload.amount)
    })?)
}

#[derive(serde::Deserialize)]
struct Credit {
    account: String,
    amount: i64,
}

#[tokio::main]
async fn main() -> Result<(), lambda_dedup_runtime::MainError> {
    Ok(
        lambda_runtime::run_concurrent(service(Dedup::from_env("custom-door")?.dynamodb().await)?)
            .await?,
    )
}

#[cfg(test)]
mod tests;
