//! CloudWatch Embedded Metric Format lines: one JSON object per line on stdout, which
//! CloudWatch turns into metrics (namespace `lambda-dedup`, dimension `Function`).

/// The EMF namespace of every metric.
pub(crate) const NAMESPACE: &str = "lambda-dedup";

use std::cell::RefCell;

/// One EMF line of `metrics` (name, unit, value) for `function`. Print it with `println!` (or
/// `emit`): EMF must be a bare JSON line on stdout, hence not `tracing`.
pub fn line(function: &str, metrics: &[(&str, &str, u64)]) -> String {
    lambda_dedup_engine::emf_line(NAMESPACE, &[("Function", function)], metrics)
}

thread_local! {
    /// This thread's EMF lines, when it keeps them instead of printing ([`capture`]).
    static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Prints `line` on stdout, where CloudWatch reads it, unless this thread keeps its lines
/// ([`capture`]).
pub(crate) fn emit(line: String) {
    let kept = CAPTURED.with(|c| {
        c.borrow_mut()
            .as_mut()
            .map(|lines| lines.push(line.clone()))
            .is_some()
    });
    if !kept {
        println!("{line}");
    }
}

/// From now on this thread keeps the lines `emit` is given instead of printing them (a
/// simulation or a test that reads its metrics); [`take_captured`] hands them over. Lambda's
/// own threads never call it.
pub fn capture() {
    CAPTURED.with(|c| {
        c.borrow_mut().get_or_insert_with(Vec::new);
    });
}

/// The lines this thread kept since [`capture`] (or the last take), emptied.
pub fn take_captured() -> Vec<String> {
    CAPTURED.with(|c| {
        c.borrow_mut()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    })
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

    #[test]
    fn a_thread_that_captures_keeps_its_lines_and_hands_them_over_once() {
        std::thread::spawn(|| {
            assert!(
                super::take_captured().is_empty(),
                "nothing kept before capture"
            );
            super::capture();
            super::emit("a".into());
            super::emit("b".into());
            assert_eq!(super::take_captured(), ["a", "b"]);
            assert!(super::take_captured().is_empty(), "taken once");
        })
        .join()
        .expect("the capturing thread");
    }
}
