//! What the report's Markdown tables share: a table's head, and a number read from a summary.

use std::fmt::Write as _;

use serde_json::Value;

/// Writes a table's head: the `columns` line and the `rule` line under it.
pub(crate) fn head(md: &mut String, columns: &str, rule: &str) {
    let _ = writeln!(md, "{columns}");
    let _ = writeln!(md, "{rule}");
}

/// The number `k` of the summary `v`; 0 when there is none.
pub(crate) fn num(v: Option<&Value>, k: &str) -> f64 {
    v.and_then(|v| v[k].as_f64()).unwrap_or(0.0)
}
