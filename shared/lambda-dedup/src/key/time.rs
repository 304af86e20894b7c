//! When the producer says an event happened (S10): read from wherever the producer declares it.
//!
//! The mark table cannot judge an event older than its retention (its mark may be gone), so the
//! flows reject such an event for reconciliation before looking at its mark, and one stamped
//! implausibly far in the future too. That needs the event's own time. CloudEvents carry it in
//! `time`; a producer with its own JSON puts it at a field of its choosing, or in a message
//! attribute. A producer that declares no time relies on the mark table alone: an event older
//! than the retention is then judged as new once its mark has expired.

use std::time::SystemTime;

use serde_json::Value as Json;

use super::checks::{embedded, json_text};
use super::{AttributeValue, Message, Rejection};

/// What a declared time beyond [`crate::clock::MAX_EPOCH_SECS`] is found to be: a refusal,
/// never a panic in `SystemTime`'s arithmetic (issue 42).
const BEYOND: &str = "a time after 9999-12-31T23:59:59Z";

/// How a declared time is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeFormat {
    /// An RFC 3339 timestamp (`2026-11-29T10:00:00Z`, offsets honoured), as CloudEvents `time`.
    #[default]
    Rfc3339,
    /// Whole seconds since the Unix epoch (a JSON integer, or its decimal text).
    EpochSeconds,
    /// Whole milliseconds since the Unix epoch (a JSON integer, or its decimal text).
    EpochMillis,
}

impl TimeFormat {
    /// The format named by a setting: `rfc3339`, `epoch-seconds` or `epoch-millis`.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "rfc3339" => Some(Self::Rfc3339),
            "epoch-seconds" => Some(Self::EpochSeconds),
            "epoch-millis" => Some(Self::EpochMillis),
            _ => None,
        }
    }

    /// `at` written in this format, as a producer would put it in an event (RFC 3339 text in
    /// UTC, or an epoch integer): what tests stamp their fixtures with, so an event is never
    /// "late" only because the fixture was written long ago (S10).
    pub fn write(self, at: SystemTime) -> Json {
        let millis = crate::clock::epoch_millis(at);
        match self {
            Self::Rfc3339 => {
                let t = chrono::DateTime::<chrono::Utc>::from(at);
                Json::String(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            }
            Self::EpochSeconds => Json::from(millis / 1000),
            Self::EpochMillis => Json::from(millis),
        }
    }

    fn read(self, what: &str, text: &str) -> Result<SystemTime, Rejection> {
        let wrong = |found: &'static str| Rejection::WrongType {
            what: what.into(),
            found,
        };
        match self {
            Self::Rfc3339 => {
                let t = chrono::DateTime::parse_from_rfc3339(text)
                    .map_err(|_| wrong("not an RFC 3339 timestamp"))?;
                let millis =
                    u64::try_from(t.timestamp_millis()).map_err(|_| wrong("a time before 1970"))?;
                crate::clock::checked_from_epoch_millis(millis).ok_or(wrong(BEYOND))
            }
            Self::EpochSeconds | Self::EpochMillis => {
                let n: u64 = text
                    .trim()
                    .parse()
                    .map_err(|_| wrong("not a whole number of epoch units"))?;
                match self {
                    Self::EpochSeconds => crate::clock::checked_from_epoch_secs(n),
                    _ => crate::clock::checked_from_epoch_millis(n),
                }
                .ok_or(wrong(BEYOND))
            }
        }
    }
}

/// Where the event's time comes from (S10). Without a time, an event's age is unknown and the
/// mark table alone decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventTimeSource {
    /// The CloudEvents `time` attribute (RFC 3339) of a JSON object body, when the producer set
    /// it. The default of a CloudEvents key spec.
    CloudEvents,
    /// A JSON pointer (RFC 6901) into the body. Absent: no time.
    JsonPointer {
        /// The pointer, e.g. `/meta/occurred_at`.
        pointer: String,
        /// How the value is written.
        format: TimeFormat,
    },
    /// A named SQS message attribute. Absent: no time.
    MessageAttribute {
        /// The attribute's name.
        name: String,
        /// How the value is written.
        format: TimeFormat,
    },
    /// The producer declares no time: the mark table alone decides (documented, S10). The
    /// default of every other key spec.
    None,
}

impl EventTimeSource {
    /// Whether reading the time needs the body as JSON.
    pub(super) fn needs_json(&self) -> bool {
        matches!(self, Self::CloudEvents | Self::JsonPointer { .. })
    }

    /// The event's time in `msg` (its body already parsed where [`needs_json`](Self::needs_json)):
    /// `None` where the producer declared none; a rejection where it declared one that does not
    /// read as a time (a malformed time must not pass as "no time": S10 covers every time a
    /// producer can declare).
    pub(super) fn read(
        &self,
        msg: &Message,
        body: Option<&Json>,
    ) -> Result<Option<SystemTime>, Rejection> {
        match self {
            Self::None => Ok(None),
            Self::CloudEvents => {
                let Some(v) = body.and_then(Json::as_object).and_then(|o| o.get("time")) else {
                    return Ok(None);
                };
                let what = "CloudEvents attribute `time`";
                TimeFormat::Rfc3339
                    .read(what, &json_text(&what, v, false)?)
                    .map(Some)
            }
            Self::JsonPointer { pointer, format } => {
                let what = format!("event time field `{pointer}`");
                let Some(v) = embedded(body, pointer, &what)? else {
                    return Ok(None);
                };
                let integer = *format != TimeFormat::Rfc3339;
                format
                    .read(&what, &json_text(&what, &v, integer)?)
                    .map(Some)
            }
            Self::MessageAttribute { name, format } => {
                let what = format!("event time message attribute `{name}`");
                let text = match msg.attributes.get(name) {
                    None => return Ok(None),
                    Some(AttributeValue::String(s)) => s.clone(),
                    Some(AttributeValue::Binary(b)) => String::from_utf8(b.clone())
                        .map_err(|_| Rejection::NotUtf8 { what: what.clone() })?,
                };
                format.read(&what, &text).map(Some)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// What `write` stamps, `read` reads back as the same instant (to the millisecond for RFC
    /// 3339 and epoch milliseconds, the second for epoch seconds), in every format.
    #[test]
    fn a_written_time_reads_back_as_the_same_instant() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_000_123_456);
        for (format, expected) in [
            (TimeFormat::Rfc3339, at),
            (TimeFormat::EpochMillis, at),
            (
                TimeFormat::EpochSeconds,
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_000_123),
            ),
        ] {
            let written = format.write(at);
            let text = match &written {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            assert_eq!(
                format.read("t", &text).ok(),
                Some(expected),
                "{format:?}: {written}"
            );
        }
        assert_eq!(
            TimeFormat::Rfc3339.write(at),
            Json::String("2025-11-24T16:02:03.456Z".into())
        );
    }
}
