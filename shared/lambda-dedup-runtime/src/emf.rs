//! CloudWatch Embedded Metric Format lines: one JSON object per line on stdout, which
//! CloudWatch turns into metrics (namespace `lambda-dedup`, dimension `Function`).

/// The EMF namespace of every metric unless a builder says otherwise
/// (`Dedup::metrics_namespace`).
pub const NAMESPACE: &str = "lambda-dedup";

/// One EMF line of `metrics` (name, unit, value) for `function`. Print it with `println!`: EMF
/// must be a bare JSON line on stdout, hence not `tracing`.
pub fn line(function: &str, metrics: &[(&str, &str, u64)]) -> String {
    lambda_dedup_batch::emf_line(NAMESPACE, &[("Function", function)], metrics)
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
