//! Every invocation's work bounded by its deadline (issue 19): Lambda kills an invocation at its
//! deadline, and a killed invocation answers nothing (no partial batch response, no EMF line), so
//! an SQS batch would come back whole, a webhook sender would time out and a stream shard would
//! stall. The runners therefore stop what is unfinished a margin before the deadline and answer
//! with it reported for redelivery (a retry), in time.
//!
//! Abandoning a call in flight is safe by construction: a commit whose answer is abandoned is
//! found as a duplicate on redelivery, and a claim abandoned with its lease expires, since the
//! lease is cut to the deadline (S6). The account still closes: an abandoned record is a retry.
//!
//! `DEDUP_DEADLINE_MARGIN_MS` (read once, a `lambda_dedup_config::DeadlineMargin`) is the time
//! kept before the deadline for answering: the account, the EMF line and the runtime API's round
//! trip.

use std::future::Future;
use std::time::{Duration, SystemTime};

use lambda_dedup_engine::{BatchReport, Outcome, RetryCause};

/// The reason of the retry given to work abandoned at the cutoff.
pub(crate) const ABANDONED: &str = "abandoned before the invocation's deadline";

/// The invocation's deadline, for leases (S6): a lease must not outlive the invocation.
///
/// Lambda sends it as epoch milliseconds, and that is how it is read. A value that cannot be an
/// epoch deadline — before `TIMEOUT_NOT_DEADLINE_BELOW_MS`, that is before 2001 — is what a
/// local runtime sends in its place: the function's timeout (`cargo lambda watch` 1.9 sends e.g.
/// `600000`). It is read as milliseconds from now, and said once in the log, so the functions
/// run under `cargo lambda watch` with no setting. No deadline at all (0) gives `None`.
pub(crate) fn deadline(ctx: &lambda_runtime::Context) -> Option<SystemTime> {
    let read = deadline_from(ctx.deadline);
    if let Deadline::Relative(_) = read {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                sent_ms = ctx.deadline,
                "the runtime API sent a timeout where Lambda sends the deadline: read as from now"
            );
        });
    }
    read.at()
}

/// Deadlines below this many epoch milliseconds (2001-09-09) are timeouts: no Lambda deadline
/// lies before it.
pub(crate) const TIMEOUT_NOT_DEADLINE_BELOW_MS: u64 = 1_000_000_000_000;

/// How the runtime's deadline header was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deadline {
    /// No deadline (0).
    None,
    /// Lambda's epoch milliseconds.
    Epoch(SystemTime),
    /// A local runtime's timeout, from now.
    Relative(SystemTime),
}

impl Deadline {
    fn at(self) -> Option<SystemTime> {
        match self {
            Deadline::None => None,
            Deadline::Epoch(t) | Deadline::Relative(t) => Some(t),
        }
    }
}

fn deadline_from(ms: u64) -> Deadline {
    match ms {
        0 => Deadline::None,
        ms if ms < TIMEOUT_NOT_DEADLINE_BELOW_MS => {
            Deadline::Relative(SystemTime::now() + Duration::from_millis(ms))
        }
        ms => Deadline::Epoch(SystemTime::UNIX_EPOCH + Duration::from_millis(ms)),
    }
}

/// When the invocation's work must be over: `deadline` ([`deadline`]) less `margin` (the
/// function's setting; the epoch when the margin is longer than the time to the epoch); `None`
/// when the runtime sends no deadline.
pub(crate) fn cutoff_at(deadline: Option<SystemTime>, margin: Duration) -> Option<SystemTime> {
    deadline.map(|d| d.checked_sub(margin).unwrap_or(SystemTime::UNIX_EPOCH))
}

/// Runs `work` until `cutoff`: its output, or `None` when the cutoff came first (the work is
/// dropped, its calls in flight abandoned). Work is not started at all once the cutoff is past.
/// No cutoff: `work` runs to its end.
pub(crate) async fn within<F: Future>(cutoff: Option<SystemTime>, work: F) -> Option<F::Output> {
    let Some(cutoff) = cutoff else {
        return Some(work.await);
    };
    let left = cutoff.duration_since(SystemTime::now()).ok()?;
    if left.is_zero() {
        return None;
    }
    tokio::time::timeout(left, work).await.ok()
}

/// One message's `work` until `cutoff`: its outcome, or a retry ([`ABANDONED`]) when the cutoff
/// came first.
pub(crate) async fn outcome_within<F>(cutoff: Option<SystemTime>, id: &str, work: F) -> Outcome
where
    F: Future<Output = Outcome>,
{
    within(cutoff, work).await.unwrap_or_else(|| {
        tracing::warn!(
            message_id = id,
            "not done before the invocation's deadline: reported for redelivery"
        );
        Outcome::retry(RetryCause::Deadline, ABANDONED)
    })
}

/// A whole batch's `work` (records `ids`, in order) until `cutoff`: its report, or every record a
/// retry ([`ABANDONED`]) when the cutoff came first. What it committed meanwhile is found as
/// duplicates on redelivery.
pub(crate) async fn report_within<F>(
    cutoff: Option<SystemTime>,
    ids: &[String],
    work: F,
) -> BatchReport
where
    F: Future<Output = BatchReport>,
{
    within(cutoff, work).await.unwrap_or_else(|| {
        tracing::warn!(
            records = ids.len(),
            "the batch was not done before the invocation's deadline: reported for redelivery"
        );
        BatchReport::from_outcomes(
            ids.iter()
                .map(|id| (id.clone(), Outcome::retry(RetryCause::Deadline, ABANDONED)))
                .collect(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_is_cut_at_the_cutoff_and_not_started_after_it() {
        let soon = Some(SystemTime::now() + Duration::from_millis(200));
        let started = std::time::Instant::now();
        let hung = within(soon, std::future::pending::<()>()).await;
        assert_eq!(hung, None);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(150) && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert_eq!(within(soon, async { 7 }).await, None, "past: not started");
        let later = Some(SystemTime::now() + Duration::from_secs(5));
        assert_eq!(within(later, async { 7 }).await, Some(7));
        assert_eq!(within(None, async { 7 }).await, Some(7));
    }

    #[test]
    fn the_cutoff_is_the_deadline_less_the_margin() {
        let d = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        assert_eq!(
            cutoff_at(Some(d), Duration::from_secs(2)),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(98))
        );
        assert_eq!(cutoff_at(None, Duration::from_secs(2)), None);
    }
}

#[cfg(test)]
mod deadline_tests {
    use super::{Deadline, deadline_from};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    #[test]
    fn the_deadline_is_read_as_lambda_sends_it_and_a_timeout_as_from_now() {
        let now = SystemTime::now();
        let in_a_minute = now + Duration::from_secs(60);
        let ms = in_a_minute
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        let lambda = deadline_from(ms);
        assert!(matches!(lambda, Deadline::Epoch(_)), "{lambda:?}");
        let left = lambda
            .at()
            .map(|d| d.duration_since(now).unwrap_or_default());
        assert!(
            left.is_some_and(
                |left| left > Duration::from_secs(59) && left <= Duration::from_secs(60)
            )
        );
        // cargo lambda watch sends the timeout: read as from now, never as a deadline in 1970.
        let local = deadline_from(600_000);
        assert!(matches!(local, Deadline::Relative(_)), "{local:?}");
        let left = local.at().and_then(|d| d.duration_since(now).ok());
        assert!(left.is_some_and(|left| left > Duration::from_secs(599)));
        assert_eq!(deadline_from(0), Deadline::None);
    }
}
