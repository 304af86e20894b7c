//! What the report's Markdown tables share: the modes in their rows' order, a section's start
//! and the build it names, a table's head, and a number read from a summary.

use std::fmt::Write as _;

use serde_json::Value;

/// The modes in the order of the tables' rows: Powertools first, then ours ([`OUR_MODES`]).
pub(crate) const MODES: [&str; 7] = [
    "powertools",
    "per_message",
    "batch_transaction",
    "batch_transaction_prefilter",
    "batch_transaction_warm_cache",
    "sequence",
    "create_once",
];

/// Our modes, in the order of the tables' rows.
pub(crate) const OUR_MODES: &[&str] = MODES.split_at(1).1;

/// The build this run is from, as a section names it: `debug` or `release`.
pub(crate) fn build() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// A section's start: its `begin` marker, then its `title` as a heading and a blank line.
pub(crate) fn opened(begin: &str, title: &str) -> String {
    format!("{begin}\n## {title}\n\n")
}

/// Writes a table's head: the `columns` line and the `rule` line under it.
pub(crate) fn head(md: &mut String, columns: &str, rule: &str) {
    let _ = writeln!(md, "{columns}");
    let _ = writeln!(md, "{rule}");
}

/// The number `k` of the summary `v`; 0 when there is none.
pub(crate) fn num(v: Option<&Value>, k: &str) -> f64 {
    v.and_then(|v| v[k].as_f64()).unwrap_or(0.0)
}

/// The part of `old` from `begin` to `end`, both included; empty if there is none.
pub(crate) fn kept<'a>(old: &'a str, (begin, end): (&str, &str)) -> &'a str {
    match (old.find(begin), old.find(end)) {
        (Some(b), Some(e)) if b < e => &old[b..e + end.len()],
        _ => "",
    }
}

/// `doc` with its part from `begin` to `end` replaced by `section` (which carries both
/// markers); without one, `section` appended.
pub(crate) fn replace(doc: &str, (begin, end): (&str, &str), section: &str) -> String {
    match (doc.find(begin), doc.find(end)) {
        (Some(b), Some(e)) if b < e => format!(
            "{}{}{}",
            &doc[..b],
            section.trim_end(),
            &doc[e + end.len()..]
        ),
        _ => format!("{}\n\n{}\n", doc.trim_end(), section.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    /// A section is replaced between its markers, the rest kept; appended when absent.
    #[test]
    fn a_section_is_replaced_in_place_or_appended() {
        let markers = ("<!-- a:begin -->", "<!-- a:end -->");
        let new = "<!-- a:begin -->\nnew\n<!-- a:end -->";
        let doc = "head\n\n<!-- a:begin -->\nold\n<!-- a:end -->\n\ntail\n";
        assert_eq!(
            super::replace(doc, markers, new),
            "head\n\n<!-- a:begin -->\nnew\n<!-- a:end -->\n\ntail\n"
        );
        assert_eq!(
            super::replace("head\n", markers, new),
            format!("head\n\n{new}\n")
        );
    }
}
