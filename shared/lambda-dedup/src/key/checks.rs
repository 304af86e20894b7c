//! The checks every identity and tenant value passes, and reading them out of JSON.

use std::fmt;

use serde_json::Value as Json;

use super::Rejection;

/// What a rejection names, `kind` then the name in backquotes (`CloudEvents attribute `id``):
/// written out only when a rejection is made, not for every value that passes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Named<'a>(pub &'static str, pub &'a str);

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.0, self.1)
    }
}

/// Longest accepted identity or tenant value, in bytes.
pub const MAX_IDENTITY_BYTES: usize = 1024;

pub(super) fn pointer(
    body: Option<&Json>,
    ptr: &str,
    what: &dyn fmt::Display,
) -> Result<String, Rejection> {
    let v = embedded(body, ptr, what)?.ok_or_else(|| Rejection::Missing {
        what: what.to_string(),
    })?;
    checked(what, &json_text(what, &v, true)?)
}

/// The value at `ptr` of `body`, reading inside JSON-encoded strings ([`crate::pointer`]); a
/// string it cannot read is a rejection naming `what`, never "absent".
pub(super) fn embedded<'a>(
    body: Option<&'a Json>,
    ptr: &str,
    what: &dyn fmt::Display,
) -> Result<Option<std::borrow::Cow<'a, Json>>, Rejection> {
    let Some(body) = body else {
        return Ok(None);
    };
    crate::pointer::resolve(body, ptr).map_err(|error| Rejection::Embedded {
        what: what.to_string(),
        error,
    })
}

/// The text of a JSON identity value: a string, or (where allowed) an integer in its canonical
/// decimal form. Floats, booleans, null, arrays and objects are not identities.
pub(super) fn json_text<'a>(
    what: &dyn fmt::Display,
    v: &'a Json,
    allow_integer: bool,
) -> Result<std::borrow::Cow<'a, str>, Rejection> {
    match v {
        Json::String(s) => Ok(s.as_str().into()),
        Json::Number(n) if allow_integer && (n.is_i64() || n.is_u64()) => Ok(n.to_string().into()),
        other => Err(Rejection::WrongType {
            what: what.to_string(),
            found: json_kind(other),
        }),
    }
}

fn json_kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Length and character checks on an identity or tenant value; the checked value, owned.
pub(super) fn checked(what: &dyn fmt::Display, v: &str) -> Result<String, Rejection> {
    check(what, v)?;
    Ok(v.to_owned())
}

/// Length and character checks on an identity or tenant value ([`checked`]).
pub(super) fn check(what: &dyn fmt::Display, v: &str) -> Result<(), Rejection> {
    if v.trim().is_empty() {
        return Err(Rejection::Empty {
            what: what.to_string(),
        });
    }
    if v.len() > MAX_IDENTITY_BYTES {
        return Err(Rejection::TooLong {
            what: what.to_string(),
            len: v.len(),
            max: MAX_IDENTITY_BYTES,
        });
    }
    if v.chars().any(char::is_control) {
        return Err(Rejection::BadCharacters {
            what: what.to_string(),
        });
    }
    Ok(())
}
