//! The simulated producers' events: CloudEvents bodies, as AWS queues and streams carry them.

use lambda_dedup::{FingerprintSource, KeySpec, Scope};

/// The key spec every lane uses: CloudEvents `source` + `id`, tenant `tenantid`, the
/// fingerprint over `data` (S11).
pub fn spec(consumer: &str) -> KeySpec {
    let scope = Scope::new("sim", consumer).unwrap_or_else(|e| panic!("scope: {e}"));
    KeySpec::cloudevents(scope, "tenantid").fingerprint(FingerprintSource::CloudEventsData)
}

/// The body of event `id` with `amount` (another amount: the same key with another payload);
/// `seq` for ordered sources.
pub fn body(id: &str, amount: u64, seq: Option<(&str, u64)>) -> Vec<u8> {
    let mut data = serde_json::json!({ "ev": id, "amount": amount });
    if let Some((aggregate, s)) = seq {
        data["aggregate"] = aggregate.into();
        data["seq"] = s.into();
    }
    serde_json::json!({
        "specversion": "1.0", "type": "sim.event", "source": "/sim", "id": id,
        "tenantid": "acme", "data": data,
    })
    .to_string()
    .into_bytes()
}
