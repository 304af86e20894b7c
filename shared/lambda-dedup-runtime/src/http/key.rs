//! The `Idempotency-Key` header read as the IETF draft writes it: a structured-field string
//! (RFC 8941 §3.3.3, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`), or the bare form most clients
//! send (Stripe's `Idempotency-Key: KG5LxwFBepaKHyUD`); anything else is refused, typed.

use lambda_http::http::HeaderMap;

/// The header's name.
pub(crate) const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The longest key accepted, in characters (Stripe's limit).
pub(crate) const MAX_KEY_CHARS: usize = 255;

/// Why a request's `Idempotency-Key` is refused (400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeyError {
    /// No header, and the resource requires one.
    #[error("the Idempotency-Key header is required")]
    Missing,
    /// The header sent more than once (or, through a Function URL, joined with a comma).
    #[error("the Idempotency-Key header is sent more than once")]
    Repeated,
    /// Empty, or only quotes.
    #[error("the Idempotency-Key is empty")]
    Empty,
    /// Over [`MAX_KEY_CHARS`].
    #[error("the Idempotency-Key is over {MAX_KEY_CHARS} characters")]
    TooLong,
    /// A character outside printable ASCII (a control character, a byte over 0x7E), a bare key
    /// holding `"`, `\`, `,`, `;` or a space, a string not closed, or anything after it (a
    /// structured-field parameter included).
    #[error("the Idempotency-Key is not a structured-field string nor a bare token")]
    Malformed,
}

impl KeyError {
    /// The stable code in the answer's body.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Self::Missing => "idempotency_key_missing",
            Self::Repeated => "idempotency_key_repeated",
            Self::Empty => "idempotency_key_empty",
            Self::TooLong => "idempotency_key_too_long",
            Self::Malformed => "idempotency_key_malformed",
        }
    }
}

/// The request's key: `Ok(None)` when it sends none.
pub(super) fn read(headers: &HeaderMap) -> Result<Option<String>, KeyError> {
    let mut all = headers.get_all(IDEMPOTENCY_KEY_HEADER).iter();
    let (Some(value), None) = (all.next(), all.next()) else {
        return match headers.contains_key(IDEMPOTENCY_KEY_HEADER) {
            true => Err(KeyError::Repeated),
            false => Ok(None),
        };
    };
    parse(value.as_bytes()).map(Some)
}

/// One header value as a key.
pub(super) fn parse(raw: &[u8]) -> Result<String, KeyError> {
    let raw = trim(raw);
    let key = match raw.first() {
        Some(b'"') => sf_string(&raw[1..])?,
        _ => bare(raw)?,
    };
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.chars().count() > MAX_KEY_CHARS {
        return Err(KeyError::TooLong);
    }
    Ok(key)
}

/// The rest of a structured-field string after its opening quote: printable ASCII, `\"` and
/// `\\` escapes, a closing quote and nothing after it.
fn sf_string(rest: &[u8]) -> Result<String, KeyError> {
    let mut key = String::new();
    let mut bytes = rest.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&e @ (b'"' | b'\\')) => key.push(char::from(e)),
                _ => return Err(KeyError::Malformed),
            },
            b'"' if bytes.as_slice().is_empty() => return Ok(key),
            b'"' => {
                // A comma after the string: the header sent twice and joined by the front.
                return Err(if trim(bytes.as_slice()).starts_with(b",") {
                    KeyError::Repeated
                } else {
                    KeyError::Malformed
                });
            }
            0x20..=0x7e => key.push(char::from(b)),
            _ => return Err(KeyError::Malformed),
        }
    }
    Err(KeyError::Malformed)
}

/// A bare key: visible ASCII without the characters that delimit structured fields.
fn bare(raw: &[u8]) -> Result<String, KeyError> {
    if raw.contains(&b',') {
        return Err(KeyError::Repeated);
    }
    if raw
        .iter()
        .all(|&b| (0x21..=0x7e).contains(&b) && !b"\"\\;".contains(&b))
    {
        Ok(raw.iter().map(|&b| char::from(b)).collect())
    } else {
        Err(KeyError::Malformed)
    }
}

fn trim(raw: &[u8]) -> &[u8] {
    let start = raw
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .unwrap_or(raw.len());
    let end = raw
        .iter()
        .rposition(|b| *b != b' ' && *b != b'\t')
        .map_or(start, |e| e + 1);
    &raw[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The draft's form and the bare form read the same key; escapes are undone.
    #[test]
    fn idempotency_key_reads_the_structured_field_string_and_the_bare_form() {
        let uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324";
        assert_eq!(parse(format!("\"{uuid}\"").as_bytes()), Ok(uuid.to_owned()));
        assert_eq!(parse(uuid.as_bytes()), Ok(uuid.to_owned()));
        assert_eq!(parse(br#" "a \"b\" c\\d" "#), Ok(r#"a "b" c\d"#.to_owned()));
    }

    /// Hostile keys: 256 characters, control characters, a parameter, an unclosed string, a
    /// repeated header joined with a comma, empty.
    #[test]
    fn idempotency_key_hostile_forms_are_refused_typed() {
        assert_eq!(parse("k".repeat(255).as_bytes()).map(|k| k.len()), Ok(255));
        assert_eq!(parse("k".repeat(256).as_bytes()), Err(KeyError::TooLong));
        assert_eq!(
            parse(format!("\"{}\"", "k".repeat(256)).as_bytes()),
            Err(KeyError::TooLong)
        );
        assert_eq!(parse(b"\"ab\x01c\""), Err(KeyError::Malformed));
        assert_eq!(parse(b"ab\x7fc"), Err(KeyError::Malformed));
        assert_eq!(parse(b"\"abc\";p=1"), Err(KeyError::Malformed));
        assert_eq!(parse(b"\"abc"), Err(KeyError::Malformed));
        assert_eq!(parse(b"\"a\\x\""), Err(KeyError::Malformed));
        assert_eq!(parse(b"a b"), Err(KeyError::Malformed));
        assert_eq!(parse("ké".as_bytes()), Err(KeyError::Malformed));
        assert_eq!(parse(b"\"a\", \"b\""), Err(KeyError::Repeated));
        assert_eq!(parse(b"a,b"), Err(KeyError::Repeated));
        assert_eq!(parse(b"\"\""), Err(KeyError::Empty));
        assert_eq!(parse(b""), Err(KeyError::Empty));
    }

    /// Two `Idempotency-Key` headers are refused; none is `None`.
    #[test]
    fn idempotency_key_sent_twice_is_refused() {
        let mut headers = HeaderMap::new();
        assert_eq!(read(&headers), Ok(None));
        headers.append(IDEMPOTENCY_KEY_HEADER, "\"a\"".parse().expect("value"));
        assert_eq!(read(&headers), Ok(Some("a".into())));
        headers.append(IDEMPOTENCY_KEY_HEADER, "\"b\"".parse().expect("value"));
        assert_eq!(read(&headers), Err(KeyError::Repeated));
    }
}
