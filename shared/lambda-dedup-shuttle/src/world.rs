//! What every check starts from: a memory store on a manual clock (a schedule must not depend
//! on the real time, or shuttle could not replay it), the key spec, the messages and the
//! credit they make.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::{
    DedupKey, Derived, Effect, Item, KeySpec, ManualClock, Message, Retention, Scope, Value,
};
use lambda_dedup_engine::{HandlerError, Plan};
use lambda_dedup_memory::MemoryStore;

/// The lease a claim takes.
pub const LEASE: Duration = Duration::from_secs(5);

/// The table the credits land in, keyed by `account`.
pub const BALANCES: &str = "balances";

/// A store and the clock it reads.
#[derive(Debug, Clone)]
pub struct World {
    /// The memory store (its lock shuttle's).
    pub store: MemoryStore,
    /// Its clock, which moves only when told to.
    pub clock: Arc<ManualClock>,
}

impl World {
    /// An empty store with the balances table, marks kept a day, leases of [`LEASE`].
    pub fn new() -> Self {
        let clock = Arc::new(ManualClock::new(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        ));
        let retention = Retention::unchecked(Duration::from_secs(86_400)).expect("retention");
        let store = MemoryStore::new(retention)
            .with_clock(clock.clone())
            .with_lease(LEASE);
        store.create_table(BALANCES, "account");
        Self { store, clock }
    }

    /// The balance of `account` (0 when it was never credited).
    pub fn balance(&self, account: &str) -> i64 {
        self.store
            .item(BALANCES, &Item::new().with("account", account))
            .and_then(|item| match item.0.get("balance") {
                Some(Value::N(n)) => n.parse().ok(),
                _ => None,
            })
            .unwrap_or(0)
    }
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

/// The key spec: CloudEvents `source` + `id`, the tenant from the `tenantid` extension.
pub fn spec() -> KeySpec {
    KeySpec::cloudevents(Scope::new("bank", "ledger").expect("scope"), "tenantid")
}

/// The key of event `id` of `tenant`, as [`spec`] derives it.
pub fn key(tenant: &str, id: &str) -> DedupKey {
    spec()
        .derive(&message(tenant, id, None, false))
        .expect("key")
        .key
}

/// A delivery of event `id` of `tenant` (in FIFO group `group`); `fail`: its work refuses it
/// for now (a transient failure, a retry).
pub fn message(tenant: &str, id: &str, group: Option<&str>, fail: bool) -> Message {
    let body = serde_json::json!({
        "specversion": "1.0", "type": "credit", "source": "/bank", "id": id,
        "tenantid": tenant, "data": { "amount": 1, "fail": fail },
    });
    Message {
        message_id: format!("{tenant}/{id}"),
        body: body.to_string().into_bytes(),
        group_id: group.map(str::to_owned),
        ..Message::default()
    }
}

/// The account an event of `tenant` credits (its own item: tenants apart in the data, S1).
pub fn account(tenant: &str) -> String {
    format!("{tenant}/a-1")
}

/// The work of every delivery: credit 1 to its tenant's account, or refuse it for now when its
/// data says `fail`.
pub fn credit(event: &Derived) -> Result<Plan, HandlerError> {
    let fail = event
        .body
        .as_ref()
        .and_then(|b| b.pointer("/data/fail"))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    if fail {
        return Err(HandlerError::transient("told to fail"));
    }
    Ok(Plan::from(credit_effect(&account(&event.tenant))))
}

/// A credit of 1 to `account`, as an effect to commit with a mark.
pub fn credit_effect(account: &str) -> Effect {
    Effect::update(BALANCES, Item::new().with("account", account))
        .expression("ADD balance :amount")
        .value(":amount", 1)
}
