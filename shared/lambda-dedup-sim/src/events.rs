//! The simulated producers' events: CloudEvents bodies, as AWS queues and streams carry them.

use lambda_dedup::{Effect, FingerprintSource, Item, KeySpec, Scope, Value};
use lambda_dedup_engine::HandlerError;
use lambda_dedup_memory::MemoryStore;

/// The key spec every lane uses: CloudEvents `source` + `id`, tenant `tenantid`, the
/// fingerprint over `data` (S11).
pub fn spec(consumer: &str) -> KeySpec {
    let scope = Scope::new("sim", consumer).unwrap_or_else(|e| panic!("scope: {e}"));
    KeySpec::cloudevents(scope, "tenantid").fingerprint(FingerprintSource::CloudEventsData)
}

/// The body of event `id` with `amount` (another amount: the same key with another payload);
/// `seq` for ordered sources.
pub fn body(id: &str, amount: u64, seq: Option<(&str, u64)>) -> Vec<u8> {
    body_of("acme", id, id, amount, seq)
}

/// The body of event `ev` of `tenant`, whose CloudEvents id is `id` (two tenants may use one
/// id: their keys, and their effects' items, stay apart, S1).
pub fn body_of(tenant: &str, id: &str, ev: &str, amount: u64, seq: Option<(&str, u64)>) -> Vec<u8> {
    let mut data = serde_json::json!({ "ev": ev, "amount": amount });
    if let Some((aggregate, s)) = seq {
        data["aggregate"] = aggregate.into();
        data["seq"] = s.into();
    }
    serde_json::json!({
        "specversion": "1.0", "type": "sim.event", "source": "/sim", "id": id,
        "tenantid": tenant, "data": data,
    })
    .to_string()
    .into_bytes()
}

/// Sequence mode's effect: one counter per sequence on the aggregate's item (`s<seq>`), so
/// each event's effect is counted where it lands.
pub fn sequence_effect(e: &lambda_dedup::Derived) -> Result<Effect, HandlerError> {
    let data = HandlerError::data(e)?;
    let agg = data["aggregate"].as_str().unwrap_or_default().to_owned();
    let seq = data["seq"].as_u64().unwrap_or_default();
    Ok(
        Effect::update("aggs", Item::new().with("agg", agg.as_str()))
            .expression(&format!("ADD s{seq} :one"))
            .value(":one", 1),
    )
}

/// Each sequenced event's effect count, read from the aggregates' items, named
/// `<prefix>-<aggregate>-<seq>`.
pub fn sequence_effects(data: &MemoryStore, prefix: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for item in data.items("aggs") {
        let Some(Value::S(agg)) = item.0.get("agg") else {
            continue;
        };
        for (name, v) in &item.0 {
            if let (Some(seq), Value::N(n)) = (name.strip_prefix('s'), v) {
                out.push((
                    format!("{prefix}-{agg}-{seq}"),
                    n.parse().unwrap_or(u32::MAX),
                ));
            }
        }
    }
    out
}
