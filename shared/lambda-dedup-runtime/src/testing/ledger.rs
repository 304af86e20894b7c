//! The runtime's own door tests' ledger: AWS's sample events, credits as a broker or a stream
//! carries them (base64), the builder on the memory store with a `balances` table, and the credit
//! work whose dependency a test can take down.

use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine as _;
use lambda_dedup::{Effect, Item, Value};
use lambda_dedup_memory::MemoryStore;

use crate::service::{Dedup, Event, HandlerError};

/// AWS's published sample event `name` (the repository's `events/`), as `T`.
pub(crate) fn aws_sample<T: serde::de::DeserializeOwned>(name: &str) -> T {
    super::read_json(format!(
        "{}/../../events/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// `bytes` in base64, as Kafka values and MQ data travel.
pub(crate) fn b64(bytes: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A credit as a record's value or a message's data: `{"account", "amount"}`, base64.
pub(crate) fn credit(account: &str, amount: i64) -> String {
    b64(serde_json::json!({"account": account, "amount": amount}).to_string())
}

/// A credit, as the work reads it.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Credit {
    pub(crate) account: String,
    pub(crate) amount: i64,
}

/// The builder of the function `ledger` on the memory store, with the least environment
/// ([`super::env`]) and `more`, and the store's `balances` table (key `account`).
pub(crate) fn ledger(more: &[(&str, &str)]) -> (Dedup, MemoryStore) {
    let settings = Dedup::read(&super::env(more), "ledger").expect("settings");
    let (dedup, store) = super::on_memory(settings);
    store.create_table("balances", "account");
    (dedup, store)
}

/// The credit work: `amount` added to the account's balance; `down` makes account `b`'s
/// dependency fail transiently.
pub(crate) fn credit_work(
    down: &'static AtomicBool,
) -> impl Fn(Event<Credit>) -> Result<Effect, HandlerError> + Send + Sync + 'static {
    move |e: Event<Credit>| {
        if e.payload.account == "b" && down.load(Ordering::SeqCst) {
            return Err(HandlerError::transient("dependency down"));
        }
        let item = Item::new().with("account", e.payload.account.as_str());
        Ok(Effect::update("balances", item)
            .expression("ADD balance :a")
            .value(":a", e.payload.amount))
    }
}

/// `account`'s balance in the store's `balances` table, if it has one.
pub(crate) fn balance(store: &MemoryStore, account: &str) -> Option<Value> {
    super::attribute(store, "balances", ("account", account), "balance")
}

/// Each letter parked in `taken`: its attribute `name` (what the door names a record by) and its
/// `dedup-reason`, in order.
pub(crate) fn parked_by(taken: &crate::queue::Taken, name: &str) -> Vec<(String, String)> {
    let taken = taken.lock().expect("taken");
    let letters = taken.iter().map(|(_, attributes)| {
        let get = |n: &str| {
            attributes
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
        };
        let reason = get("dedup-reason").expect("a reason");
        (get(name).unwrap_or_else(|| panic!("no {name}")), reason)
    });
    letters.collect()
}

/// The sequence numbers a stream's response names for Lambda to retry from, in order.
pub(crate) fn checkpoints(
    response: &aws_lambda_events::event::streams::KinesisEventResponse,
) -> Vec<String> {
    let failures = response.batch_item_failures.iter();
    failures.filter_map(|f| f.item_identifier.clone()).collect()
}
