//! CloudWatch Embedded Metric Format lines: one JSON object per line on stdout, which
//! CloudWatch turns into metrics (namespace `lambda-dedup`, dimension `Function`).

/// The EMF namespace of every metric unless a builder says otherwise
/// (`Dedup::metrics_namespace`).
pub const NAMESPACE: &str = "lambda-dedup";

/// One EMF line of `metrics` (name, unit, value) for `function`. Print it with `println!`: EMF
/// must be a bare JSON line on stdout, hence not `tracing`.
pub fn line(function: &str, metrics: &[(&str, &str, u64)]) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut record = serde_json::Map::new();
    record.insert(
        "_aws".into(),
        serde_json::json!({
            "Timestamp": ms,
            "CloudWatchMetrics": [{
                "Namespace": "lambda-dedup",
                "Dimensions": [["Function"]],
                "Metrics": metrics
                    .iter()
                    .map(|(name, unit, _)| serde_json::json!({"Name": name, "Unit": unit}))
                    .collect::<Vec<_>>(),
            }],
        }),
    );
    record.insert("Function".into(), function.into());
    for (name, _, value) in metrics {
        record.insert((*name).into(), (*value).into());
    }
    serde_json::Value::Object(record).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_declares_and_carries_each_metric() {
        let v: serde_json::Value =
            serde_json::from_str(&super::line("f", &[("A", "Count", 2), ("B", "Seconds", 5)]))
                .expect("json");
        assert_eq!(v["Function"], "f");
        assert_eq!(v["A"], 2);
        assert_eq!(v["B"], 5);
        let declared = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(declared["Namespace"], "lambda-dedup");
        assert_eq!(declared["Metrics"][1]["Unit"], "Seconds");
    }
}
