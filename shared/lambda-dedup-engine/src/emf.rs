//! One CloudWatch Embedded Metric Format record, written as one JSON line.
//!
//! Written straight from borrowed parts into one string: an invocation prints one line, and
//! building it as a `serde_json::Value` first cost some eighty allocations per line.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::ser::{Serialize, SerializeMap, Serializer};

/// One CloudWatch Embedded Metric Format record as a single JSON line: `metrics` (name, unit,
/// value) in `namespace`, with `dimensions` (name, value) as one dimension set. Print it to
/// stdout on its own line (not through `tracing`: EMF must be a bare JSON line).
pub fn emf_line(
    namespace: &str,
    dimensions: &[(&str, &str)],
    metrics: &[(&str, &str, u64)],
) -> String {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let line = Line {
        timestamp,
        namespace,
        dimensions,
        metrics,
    };
    // Serialising borrowed strings and integers into a `Vec` cannot fail.
    serde_json::to_string(&line).unwrap_or_default()
}

/// The record: `_aws` (the metadata), then each dimension's and each metric's value.
struct Line<'a> {
    timestamp: u64,
    namespace: &'a str,
    dimensions: &'a [(&'a str, &'a str)],
    metrics: &'a [(&'a str, &'a str, u64)],
}

impl Serialize for Line<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("_aws", &Metadata(self))?;
        for (name, value) in self.dimensions {
            map.serialize_entry(name, value)?;
        }
        for (name, _, value) in self.metrics {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// `{"Timestamp": …, "CloudWatchMetrics": [{"Namespace", "Dimensions": [[names]], "Metrics"}]}`.
struct Metadata<'a>(&'a Line<'a>);

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("Timestamp", &self.0.timestamp)?;
        map.serialize_entry("CloudWatchMetrics", &[Directive(self.0)])?;
        map.end()
    }
}

/// The one metric directive: the namespace, one dimension set, the metrics' names and units.
struct Directive<'a>(&'a Line<'a>);

impl Serialize for Directive<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let line = self.0;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("Namespace", line.namespace)?;
        map.serialize_entry("Dimensions", &[DimensionNames(line.dimensions)])?;
        map.serialize_entry("Metrics", &Definitions(line.metrics))?;
        map.end()
    }
}

/// The dimension set: the dimensions' names.
struct DimensionNames<'a>(&'a [(&'a str, &'a str)]);

impl Serialize for DimensionNames<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|(name, _)| name))
    }
}

/// The metrics' definitions: `{"Name": …, "Unit": …}` each.
struct Definitions<'a>(&'a [(&'a str, &'a str, u64)]);

impl Serialize for Definitions<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            self.0
                .iter()
                .map(|&(name, unit, _)| Definition { name, unit }),
        )
    }
}

/// One metric's definition.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct Definition<'a> {
    name: &'a str,
    unit: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_declares_each_metric_and_carries_each_value() {
        let line = emf_line(
            "ns \"quoted\"",
            &[("Function", "f"), ("Step", "call")],
            &[("Applied", "Count", 3), ("Retry", "Count", 0)],
        );
        assert!(!line.contains('\n'), "one line: {line}");
        let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON object");
        let declared = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(declared["Namespace"], "ns \"quoted\"");
        assert_eq!(
            declared["Dimensions"],
            serde_json::json!([["Function", "Step"]])
        );
        assert_eq!(
            declared["Metrics"],
            serde_json::json!([{"Name": "Applied", "Unit": "Count"}, {"Name": "Retry", "Unit": "Count"}])
        );
        assert!(
            v["_aws"]["Timestamp"]
                .as_u64()
                .is_some_and(|ms| ms > 1_700_000_000_000)
        );
        assert_eq!(
            (v["Function"].as_str(), v["Step"].as_str()),
            (Some("f"), Some("call"))
        );
        assert_eq!(
            (v["Applied"].as_u64(), v["Retry"].as_u64()),
            (Some(3), Some(0))
        );
        assert_eq!(v.as_object().map(|o| o.len()), Some(5));
    }
}
