//! Structured CloudEvents: the attributes the key and the event time are read from.

use std::time::SystemTime;

use serde_json::Value as Json;

use super::Rejection;
use super::checks::{checked, json_text};

pub(super) fn ce_attr(ce: &serde_json::Map<String, Json>, name: &str) -> Result<String, Rejection> {
    let what = format!("CloudEvents attribute `{name}`");
    let v = ce
        .get(name)
        .ok_or_else(|| Rejection::Missing { what: what.clone() })?;
    checked(&what, &json_text(&what, v, false)?)
}

/// The CloudEvents `time` attribute: an RFC 3339 timestamp (CloudEvents spec, "time").
pub(super) fn ce_time(v: &Json) -> Result<SystemTime, Rejection> {
    let what = "CloudEvents attribute `time`";
    let text = json_text(what, v, false)?;
    let t = chrono::DateTime::parse_from_rfc3339(&text).map_err(|_| Rejection::WrongType {
        what: what.into(),
        found: "not an RFC 3339 timestamp",
    })?;
    let millis = u64::try_from(t.timestamp_millis()).map_err(|_| Rejection::WrongType {
        what: what.into(),
        found: "a time before 1970",
    })?;
    Ok(crate::clock::from_epoch_millis(millis))
}
