//! How a stream's checkpoint passes an invocation's records ([`BatchReport::passage`]): in
//! order, each acknowledged record is passed, each that can never apply is passed once parked,
//! and the first that is neither — a retry — is the checkpoint the stream retries from. The
//! stream sources (Kinesis, DynamoDB Streams, Kafka) park and answer by it; the simulation
//! drives it over several shards.

use crate::outcome::Outcome;
use crate::runner::BatchReport;

/// What the checkpoint does with one record it passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Done (applied, duplicate, superseded, reconciled): passed as it is.
    Acknowledged,
    /// Can never apply: passed once parked with this code.
    Park(&'static str),
}

/// The records an invocation's checkpoint passes, in order, and the one it stops at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage<'a> {
    /// The records before the checkpoint, by id, and what each needs to be passed.
    pub passed: Vec<(&'a str, Pass)>,
    /// The first record neither done nor to be parked: the stream retries from it (`None`:
    /// the whole batch is passed).
    pub checkpoint: Option<&'a str>,
}

/// The code a record is parked with, if its outcome says it can never apply: a rejection's own
/// code, or `conflict`. `None` for what is done or may yet be done (a retry).
pub fn never_applies(outcome: &Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Rejected { code, .. } | Outcome::Reconciled { code, .. } => Some(code.code()),
        Outcome::Conflict => Some("conflict"),
        _ => None,
    }
}

impl BatchReport {
    /// The checkpoint's passage over this invocation's records (see the module's rules).
    pub fn passage(&self) -> Passage<'_> {
        let mut passage = Passage {
            passed: Vec::with_capacity(self.outcomes().len()),
            checkpoint: None,
        };
        for (id, outcome) in self.outcomes() {
            let pass = if outcome.acknowledged() {
                Pass::Acknowledged
            } else if let Some(code) = never_applies(outcome) {
                Pass::Park(code)
            } else {
                #[cfg(feature = "simulation-planted")]
                if lambda_dedup::planted::Planted::CheckpointPassesUnsettled.is_on() {
                    continue;
                }
                passage.checkpoint = Some(id);
                break;
            };
            passage.passed.push((id, pass));
        }
        passage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Reason;
    use crate::runner::run_batch;
    use lambda_dedup::Message;

    fn report(outcomes: Vec<Outcome>) -> BatchReport {
        let messages = (0..outcomes.len())
            .map(|i| Message {
                message_id: format!("r{i}"),
                ..Message::default()
            })
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        rt.block_on(run_batch(messages, 1, |m| {
            let i: usize = m.message_id[1..].parse().expect("an index");
            let o = outcomes[i].clone();
            async move { o }
        }))
    }

    fn rejected() -> Outcome {
        Outcome::Rejected {
            code: Reason::SequenceGap,
            reason: "a gap".into(),
            key: None,
            invalid: None,
        }
    }

    #[test]
    fn the_checkpoint_stops_at_the_first_retry_and_passes_what_is_done_or_parked() {
        let r = report(vec![
            Outcome::Applied,
            rejected(),
            Outcome::Conflict,
            Outcome::retry(crate::RetryCause::Store, "a store fault"),
            Outcome::Applied,
        ]);
        let p = r.passage();
        assert_eq!(
            p.passed,
            [
                ("r0", Pass::Acknowledged),
                ("r1", Pass::Park(Reason::SequenceGap.code())),
                ("r2", Pass::Park("conflict")),
            ]
        );
        assert_eq!(p.checkpoint, Some("r3"), "nothing after a retry is passed");
    }

    #[test]
    fn a_batch_all_done_or_parked_has_no_checkpoint() {
        let r = report(vec![Outcome::Applied, rejected()]);
        let p = r.passage();
        assert_eq!(p.passed.len(), 2);
        assert_eq!(p.checkpoint, None);
    }
}
