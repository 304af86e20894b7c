//! JSON pointers that read inside JSON-encoded strings.
//!
//! Brokers wrap a producer's JSON in a JSON *string*: an SNS notification delivered to SQS
//! without raw message delivery carries the producer's JSON in its `Message` string, and many
//! producers put a JSON document in a string field of their own. Every pointer of a key spec
//! (identity, tenant, fingerprint, time, sequence) is an RFC 6901 pointer with one extension:
//! **a pointer that continues past a string value descends into that string, read as JSON**.
//! `/Message/order_id` reads `order_id` of the JSON in the string `Message`; a pointer that
//! stops at the string reads the string itself, as before; a string whose JSON is itself a
//! string (JSON encoded twice) is read again. A pointer that RFC 6901 resolves
//! resolves to the same value; only a pointer it could not resolve (it ran into a string) reads
//! further.
//!
//! Bounded, and every refusal names the pointer, never the value (S3): at most
//! [`MAX_EMBEDDED_DEPTH`] strings decoded per pointer ([`PointerError::TooDeep`]), each at most
//! [`MAX_EMBEDDED_BYTES`] long ([`PointerError::TooLarge`]); a string the pointer continues past
//! that is not JSON is [`PointerError::NotJson`]. None of them reads as "absent".

use std::borrow::Cow;

use serde_json::Value as Json;

/// How many JSON-encoded strings one pointer may descend into (a JSON string inside a JSON string
/// inside the body is two, and so is a string encoded twice).
pub const MAX_EMBEDDED_DEPTH: usize = 2;

/// The longest JSON-encoded string a pointer descends into, in bytes: 256 KiB, SNS's largest
/// message.
pub const MAX_EMBEDDED_BYTES: usize = 256 * 1024;

/// Why a pointer could not be read. Names the pointer, never a value (S3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    /// The pointer continues past a string that is not JSON.
    #[error("`{pointer}` continues past a string that is not JSON")]
    NotJson {
        /// The pointer.
        pointer: String,
    },
    /// The pointer would descend into more JSON-encoded strings than [`MAX_EMBEDDED_DEPTH`].
    #[error("`{pointer}` descends into more than {max} JSON-encoded strings")]
    TooDeep {
        /// The pointer.
        pointer: String,
        /// The bound.
        max: usize,
    },
    /// A JSON-encoded string the pointer continues past is over [`MAX_EMBEDDED_BYTES`].
    #[error("`{pointer}` continues past a {len}-byte string, over the {max}-byte limit")]
    TooLarge {
        /// The pointer.
        pointer: String,
        /// The string's length.
        len: usize,
        /// The bound.
        max: usize,
    },
}

/// The value at `pointer` in `root`, descending into JSON-encoded strings (see the module docs):
/// `Ok(None)` where there is none, an error where a string on the way cannot be read.
pub fn resolve<'a>(root: &'a Json, pointer: &str) -> Result<Option<Cow<'a, Json>>, PointerError> {
    if pointer.is_empty() {
        return Ok(Some(Cow::Borrowed(root)));
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Ok(None);
    };
    let mut at = Cow::Borrowed(root);
    let mut decoded = 0;
    for token in rest.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        // A string the pointer continues past is read as JSON, and so is a string that JSON is.
        while let Json::String(s) = at.as_ref() {
            if decoded == MAX_EMBEDDED_DEPTH {
                return Err(PointerError::TooDeep {
                    pointer: pointer.into(),
                    max: MAX_EMBEDDED_DEPTH,
                });
            }
            if s.len() > MAX_EMBEDDED_BYTES {
                return Err(PointerError::TooLarge {
                    pointer: pointer.into(),
                    len: s.len(),
                    max: MAX_EMBEDDED_BYTES,
                });
            }
            let inner: Json = serde_json::from_str(s).map_err(|_| PointerError::NotJson {
                pointer: pointer.into(),
            })?;
            decoded += 1;
            at = Cow::Owned(inner);
        }
        let next = match at {
            Cow::Borrowed(v) => child(v, &token).map(Cow::Borrowed),
            Cow::Owned(v) => take_child(v, &token).map(Cow::Owned),
        };
        match next {
            Some(v) => at = v,
            None => return Ok(None),
        }
    }
    Ok(Some(at))
}

/// An array index as RFC 6901 writes it: digits, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.is_empty() || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    if !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

fn child<'a>(v: &'a Json, token: &str) -> Option<&'a Json> {
    match v {
        Json::Object(m) => m.get(token),
        Json::Array(a) => a.get(index(token)?),
        _ => None,
    }
}

fn take_child(v: Json, token: &str) -> Option<Json> {
    match v {
        Json::Object(mut m) => m.remove(token),
        Json::Array(mut a) => {
            let i = index(token)?;
            (i < a.len()).then(|| a.swap_remove(i))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(root: &Json, p: &str) -> Result<Option<Json>, PointerError> {
        resolve(root, p).map(|v| v.map(Cow::into_owned))
    }

    /// Wherever RFC 6901 resolves a pointer, this resolves it to the same value (serde_json's
    /// own `pointer`), escapes and indexes included; where it ran into a string, this reads on.
    #[test]
    fn a_pointer_rfc_6901_resolves_reads_the_same_and_one_past_a_string_reads_inside() {
        let root = json!({"a/b": {"m~n": [10, {"x": "y"}]}, "s": "{\"k\": [1, 2]}", "n": null});
        for p in [
            "",
            "/a~1b",
            "/a~1b/m~0n",
            "/a~1b/m~0n/1/x",
            "/s",
            "/n",
            "/nope",
            "/a~1b/m~0n/01",
            "no-slash",
        ] {
            assert_eq!(at(&root, p), Ok(root.pointer(p).cloned()), "{p}");
        }
        assert_eq!(at(&root, "/s/k/1"), Ok(Some(json!(2))));
        assert_eq!(at(&root, "/s/absent"), Ok(None));
    }

    /// SNS without raw delivery, read from its own published sample: the producer's JSON in
    /// the `Message` string, and that JSON holding a JSON string of its own.
    #[test]
    fn sns_message_strings_are_read_inside_up_to_the_bound() {
        let inner = json!({"order_id": "o-1", "meta": json!({"trace": "t"}).to_string()});
        let body = json!({"Type": "Notification", "Message": inner.to_string()});
        assert_eq!(at(&body, "/Message/order_id"), Ok(Some(json!("o-1"))));
        assert_eq!(at(&body, "/Message/meta/trace"), Ok(Some(json!("t"))));
        let twice = json!({"m": json!(json!({"k": 1}).to_string()).to_string()});
        assert_eq!(
            at(&twice, "/m/k"),
            Ok(Some(json!(1))),
            "a JSON string of a JSON string"
        );
        let three = json!({"m": json!({"n": json!({"o": 1}).to_string()}).to_string()});
        let wrapped = json!({"w": three.to_string()});
        assert_eq!(
            at(&wrapped, "/w/m/n/o"),
            Err(PointerError::TooDeep {
                pointer: "/w/m/n/o".into(),
                max: MAX_EMBEDDED_DEPTH
            })
        );
    }

    /// Hostile strings: not JSON, or over the bound, are refused naming the pointer only.
    #[test]
    fn a_string_that_is_not_json_or_too_large_is_refused_without_its_value() {
        let body = json!({"Message": "Hello alice@example.com"});
        let e = at(&body, "/Message/order_id").expect_err("refused");
        assert_eq!(
            e,
            PointerError::NotJson {
                pointer: "/Message/order_id".into()
            }
        );
        assert!(!e.to_string().contains("alice"), "{e}");
        let huge = json!({"Message": format!("{{\"a\": \"{}\"}}", "x".repeat(MAX_EMBEDDED_BYTES))});
        assert!(matches!(
            at(&huge, "/Message/a"),
            Err(PointerError::TooLarge { len, .. }) if len > MAX_EMBEDDED_BYTES
        ));
    }
}
