//! Structured CloudEvents: the attributes the key is read from (`time`: see `time`).

use serde_json::Value as Json;

use super::Rejection;
use super::checks::{Named, checked, json_text};

pub(super) fn ce_attr(ce: &serde_json::Map<String, Json>, name: &str) -> Result<String, Rejection> {
    let what = Named("CloudEvents attribute", name);
    let v = ce.get(name).ok_or_else(|| Rejection::Missing {
        what: what.to_string(),
    })?;
    checked(&what, &json_text(&what, v, false)?)
}
