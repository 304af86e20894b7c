//! What the tool prints: tables and sentences for people, JSON for scripts, progress on a
//! terminal. The verdicts are the library's (`Deduplicator::explain`); only their words are here.

use std::io::{IsTerminal, Write};
use std::time::SystemTime;

use lambda_dedup::{DedupKey, Mark};
use lambda_dedup_engine::{Explanation, Verdict};
use serde_json::{Value, json};

/// A time as the tool shows it: RFC 3339, milliseconds, UTC.
pub(crate) fn time(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A stored mark, for scripts.
pub(crate) fn mark_json(m: &Mark, now: SystemTime) -> Value {
    json!({
        "key": m.key.as_str(),
        "status": m.status.as_str(),
        "first_attempt_at": time(m.first_seen_at),
        "completed_at": m.completed_at.map(time),
        "lease_expires_at": m.lease_expires_at.map(time),
        "lease_live": m.lease_is_live(now),
        "owner": m.owner.as_ref().map(|o| o.as_str()),
        "fingerprint": m.fingerprint.as_ref().map(|f| f.as_str()),
        "result": m.result,
        "expires_at": time(m.expires_at),
    })
}

/// The one-line verdict for people.
pub(crate) fn sentence(e: &Explanation) -> String {
    match &e.verdict {
        Verdict::WouldApply => match &e.mark {
            Some(_) => "would be applied: the earlier claim's lease has expired; it would be taken over".into(),
            None => "would be applied: no mark stands in its way".into(),
        },
        Verdict::Duplicate {
            first_seen_at,
            completed_at,
            ..
        } => format!(
            "is a duplicate of the event first processed at {}{}: acknowledged, not applied again",
            time(*first_seen_at),
            completed_at
                .map(|c| format!(" (completed {})", time(c)))
                .unwrap_or_default()
        ),
        Verdict::InProgress { lease_expires_at } => format!(
            "is in progress elsewhere (lease until {}): it would be retried",
            lease_expires_at.map(time).unwrap_or_else(|| "?".into())
        ),
        Verdict::Conflict { .. } => {
            "conflicts: same key, different payload than the one applied; dead-lettered, never applied".into()
        }
        Verdict::Late(r) => format!("is late ({r}): for reconciliation, never applied"),
        Verdict::ProviderKeyExpired { first_attempt_at } => format!(
            "is a takeover first attempted at {}, longer ago than the provider keeps keys: for reconciliation",
            time(*first_attempt_at)
        ),
        Verdict::NoIdentity(r) => {
            format!("has no identity ({}: {r}): rejected, dead-lettered", r.code())
        }
    }
}

/// An explanation, for scripts: the verdict's code and sentence, the key, the mark.
pub(crate) fn explanation_json(e: &Explanation, now: SystemTime) -> Value {
    json!({
        "verdict": e.verdict.code(),
        "sentence": sentence(e),
        "key": e.key.as_ref().map(DedupKey::as_str),
        "rejection": match &e.verdict {
            Verdict::NoIdentity(r) | Verdict::Late(r) => Some(r.code()),
            _ => None,
        },
        "event_time": e.event_time.map(time),
        "fingerprint": e.fingerprint.as_ref().map(|f| f.as_str()),
        "fingerprint_matches": e.fingerprint_matches(),
        "mark": e.mark.as_ref().map(|m| mark_json(m, now)),
    })
}

/// An explanation, for people: one row per fact, then the verdict.
pub(crate) fn print_explanation(e: &Explanation, now: SystemTime) {
    let row = |k: &str, v: &str| println!("  {k:<13} {v}");
    row(
        "key",
        e.key.as_ref().map(DedupKey::as_str).unwrap_or("(none)"),
    );
    if let Some(t) = e.event_time {
        row("event time", &time(t));
    }
    match &e.mark {
        None => row("mark", "none"),
        Some(m) => {
            row("mark", m.status.as_str());
            row("first attempt", &time(m.first_seen_at));
            if let Some(c) = m.completed_at {
                row("completed", &time(c));
            }
            match (&m.lease_expires_at, &m.owner) {
                (Some(l), owner) if m.status == lambda_dedup::MarkStatus::InProgress => row(
                    "lease",
                    &format!(
                        "{} until {} (owner {})",
                        if m.lease_is_live(now) {
                            "live"
                        } else {
                            "expired"
                        },
                        time(*l),
                        owner.as_ref().map(|o| o.as_str()).unwrap_or("?")
                    ),
                ),
                _ => row("lease", "none"),
            }
            row(
                "fingerprint",
                match e.fingerprint_matches() {
                    Some(true) => "matches",
                    Some(false) => "differs from the stored one",
                    None => "not compared",
                },
            );
            row("result", m.result.as_deref().unwrap_or("(none)"));
            row("expires", &time(m.expires_at));
        }
    }
    println!("verdict: {}", sentence(e));
}

/// Progress on stderr, for people watching a terminal.
pub(crate) struct Progress {
    on: bool,
    label: &'static str,
}

impl Progress {
    pub(crate) fn new(label: &'static str) -> Self {
        Self {
            on: std::io::stderr().is_terminal(),
            label,
        }
    }
    pub(crate) fn show(&self, n: u64) {
        if self.on {
            eprint!("\r{}: {n}", self.label);
            let _ = std::io::stderr().flush();
        }
    }
    pub(crate) fn done(&self) {
        if self.on {
            eprintln!();
        }
    }
}
