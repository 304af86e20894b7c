//! Payload fingerprints (S11): a digest of a configurable part of the message, stored with the
//! mark. A later delivery of the same key with a different fingerprint is a *conflict*, not a
//! duplicate: the producer reused an identity for a different payload.

use std::fmt;

use serde_json::Value as Json;

use crate::hash_parts;

/// A payload fingerprint: SHA-256, hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// The fingerprint of raw bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(hex::encode(hash_parts("lambda-dedup/fp/bytes/v1", [bytes])))
    }

    /// The fingerprint of a JSON value, canonicalised (object keys sorted, no whitespace), so a
    /// producer that re-serialises the same payload keeps the same fingerprint.
    pub fn of_json(value: &Json) -> Self {
        let mut canonical = Vec::with_capacity(256);
        write_canonical(value, &mut canonical);
        Self(hex::encode(hash_parts(
            "lambda-dedup/fp/json/v1",
            [canonical.as_slice()],
        )))
    }

    /// Rebuilds a fingerprint from its stored form.
    pub fn from_stored(hex: String) -> Self {
        Self(hex)
    }

    /// The stored form (hex).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What part of a message the fingerprint covers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FingerprintSource {
    /// No fingerprint: same key, any payload, is a duplicate.
    #[default]
    None,
    /// The whole body: canonical JSON when it parses as JSON, the raw bytes otherwise.
    WholeBody,
    /// The CloudEvents `data` member (envelope attributes such as `time` may differ between a
    /// producer's retries of one event).
    CloudEventsData,
    /// The JSON value at a pointer (absent counts as `null`).
    JsonPointer(String),
    /// The JSON values at several pointers, each with its pointer (absent counts as `null`):
    /// what a handler's effect depends on, declared field by field, so that the same id with a
    /// different value in any of them is a conflict (S11), e.g. `["/type", "/data/amount"]`
    /// for a ledger whose `type` says credit or debit.
    JsonPointers(Vec<String>),
}

impl FingerprintSource {
    /// [`FingerprintSource::JsonPointers`] from a list of pointers.
    pub fn pointers(pointers: &[&str]) -> Self {
        Self::JsonPointers(pointers.iter().map(|p| (*p).to_owned()).collect())
    }

    pub(crate) fn needs_json(&self) -> bool {
        matches!(
            self,
            FingerprintSource::CloudEventsData
                | FingerprintSource::JsonPointer(_)
                | FingerprintSource::JsonPointers(_)
        )
    }

    /// The fingerprint of a message, given its raw body and, when parsed, its JSON. A pointer
    /// that runs into a JSON-encoded string it cannot read ([`crate::pointer`]) gives no
    /// fingerprint here; [`try_compute`](Self::try_compute), which `KeySpec::derive` uses, refuses it.
    pub fn compute(&self, raw: &[u8], json: Option<&Json>) -> Option<Fingerprint> {
        self.try_compute(raw, json).ok().flatten()
    }

    /// The fingerprint of a message, given its raw body and, when parsed, its JSON; pointers
    /// read inside JSON-encoded strings ([`crate::pointer`]), and one that cannot is refused.
    pub fn try_compute(
        &self,
        raw: &[u8],
        json: Option<&Json>,
    ) -> Result<Option<Fingerprint>, crate::pointer::PointerError> {
        let at = |p: &str| -> Result<Json, crate::pointer::PointerError> {
            Ok(match json {
                Some(j) => crate::pointer::resolve(j, p)?
                    .map(std::borrow::Cow::into_owned)
                    .unwrap_or(Json::Null),
                None => Json::Null,
            })
        };
        Ok(match self {
            FingerprintSource::JsonPointer(p) => Some(Fingerprint::of_json(&at(p)?)),
            FingerprintSource::JsonPointers(ps) => {
                let mut pairs = Vec::with_capacity(ps.len());
                for p in ps {
                    pairs.push(Json::Array(vec![Json::String(p.clone()), at(p)?]));
                }
                Some(Fingerprint::of_json(&Json::Array(pairs)))
            }
            other => other.simple(raw, json),
        })
    }

    fn simple(&self, raw: &[u8], json: Option<&Json>) -> Option<Fingerprint> {
        let pick = |v: Option<&Json>| Fingerprint::of_json(v.unwrap_or(&Json::Null));
        match self {
            FingerprintSource::None => None,
            FingerprintSource::WholeBody => Some(match json {
                Some(j) => Fingerprint::of_json(j),
                None => match serde_json::from_slice::<Json>(raw) {
                    Ok(j) => Fingerprint::of_json(&j),
                    Err(_) => Fingerprint::of_bytes(raw),
                },
            }),
            FingerprintSource::CloudEventsData => Some(pick(json.and_then(|j| j.get("data")))),
            FingerprintSource::JsonPointer(_) | FingerprintSource::JsonPointers(_) => None,
        }
    }
}

/// Writes `v` as canonical JSON (object keys sorted, no whitespace) into `out`: keys and scalars
/// written as `serde_json` writes them, with no string built per key or scalar.
fn write_canonical(v: &Json, out: &mut Vec<u8>) {
    match v {
        Json::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(k, out);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Json::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

/// A key or a scalar, compact. Writing a string, a number, a boolean or null into a `Vec`
/// cannot fail; were it to, the bytes written so far stay and the digest differs, never a panic.
fn write_scalar<T: serde::Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Stored fingerprints must not change between versions: the canonical text of a value with
    /// every kind of JSON in it, written out by hand, is what gets hashed.
    #[test]
    fn s11_canonical_json_is_the_text_stored_fingerprints_were_made_of() {
        let value: Json = serde_json::from_str(
            r#"{ "b": [1, 2.5, "x\"y\u00e9\n", null, true, false], "a": {"d": {}, "c": -3, "é": []} }"#,
        )
        .expect("json");
        let canonical = r#"{"a":{"c":-3,"d":{},"é":[]},"b":[1,2.5,"x\"yé\n",null,true,false]}"#;
        let expected = hex::encode(hash_parts(
            "lambda-dedup/fp/json/v1",
            [canonical.as_bytes()],
        ));
        assert_eq!(Fingerprint::of_json(&value).as_str(), expected);
    }

    #[test]
    fn s11_canonical_json_ignores_key_order_and_whitespace() {
        let a: Json = serde_json::from_str(r#"{"a":1,"b":{"c":[1,2],"d":"x"}}"#).expect("json");
        let b: Json =
            serde_json::from_str(r#"{ "b": {"d":"x", "c":[1, 2]}, "a": 1 }"#).expect("json");
        assert_eq!(Fingerprint::of_json(&a), Fingerprint::of_json(&b));
        assert_ne!(
            Fingerprint::of_json(&a),
            Fingerprint::of_json(&json!({"a": 2, "b": {"c": [1, 2], "d": "x"}}))
        );
        assert_ne!(
            Fingerprint::of_json(&json!({"c": [1, 2]})),
            Fingerprint::of_json(&json!({"c": [2, 1]})),
            "array order matters"
        );
    }

    #[test]
    fn s11_sources_cover_what_they_name() {
        let with_time =
            |t: &str, amount: i64| json!({"id": "1", "time": t, "data": {"amount": amount}});
        let ce = FingerprintSource::CloudEventsData;
        let a = with_time("2026-01-01T00:00:00Z", 10);
        let b = with_time("2026-01-01T00:00:05Z", 10);
        let c = with_time("2026-01-01T00:00:00Z", 11);
        assert_eq!(
            ce.compute(b"", Some(&a)),
            ce.compute(b"", Some(&b)),
            "envelope time ignored"
        );
        assert_ne!(ce.compute(b"", Some(&a)), ce.compute(b"", Some(&c)));
        let whole = FingerprintSource::WholeBody;
        assert_ne!(whole.compute(b"", Some(&a)), whole.compute(b"", Some(&b)));
        assert_eq!(
            whole.compute(b"not json", None),
            Some(Fingerprint::of_bytes(b"not json"))
        );
        assert_eq!(FingerprintSource::None.compute(b"x", None), None);
        let ptr = FingerprintSource::JsonPointer("/data/amount".into());
        assert_eq!(ptr.compute(b"", Some(&a)), ptr.compute(b"", Some(&b)));
        assert_ne!(ptr.compute(b"", Some(&a)), ptr.compute(b"", Some(&c)));
    }

    /// S11: `JsonPointers` covers each named field, bound to its name, and nothing else.
    #[test]
    fn s11_pointers_cover_each_named_field() {
        let fp = FingerprintSource::pointers(&["/type", "/data/amount"]);
        let ev = |kind: &str, amount: i64, note: &str| json!({"type": kind, "time": "t", "data": {"amount": amount, "note": note}});
        let base = fp.compute(b"", Some(&ev("credit", 10, "a")));
        assert_ne!(base, fp.compute(b"", Some(&ev("debit", 10, "a"))), "type");
        assert_ne!(
            base,
            fp.compute(b"", Some(&ev("credit", 11, "a"))),
            "amount"
        );
        assert_eq!(
            base,
            fp.compute(b"", Some(&ev("credit", 10, "b"))),
            "unnamed field"
        );
        let swapped = FingerprintSource::pointers(&["/a", "/b"]);
        assert_ne!(
            swapped.compute(b"", Some(&json!({"a": 1, "b": 2}))),
            swapped.compute(b"", Some(&json!({"a": 2, "b": 1}))),
            "values are bound to their pointers"
        );
    }
}
