//! The side queues a function sends to ([`SideQueues`]): late events to reconciliation (S10,
//! `DEDUP_RECONCILIATION_QUEUE_URL`) and, for a stream function, the records that can never
//! apply to its parking queue (S15, `DEDUP_PARKING_QUEUE_URL`). Read with the function's
//! [`Settings`](crate::Settings); the clients that send there are built from them on the first
//! send (`queue::Queue`).

use crate::SettingsError;
use crate::env::Lookup;

/// The variable naming the reconciliation queue.
pub const RECONCILIATION_QUEUE_VAR: &str = "DEDUP_RECONCILIATION_QUEUE_URL";
/// The variable naming the parking queue of a stream function (Kinesis, DynamoDB Streams).
pub const PARKING_QUEUE_VAR: &str = "DEDUP_PARKING_QUEUE_URL";

/// Where a function's side queues are, by URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SideQueues {
    /// Where events the mark table cannot judge go (late, from the future, past the provider's
    /// key retention); `None`: they stay failed, for the DLQ.
    pub reconciliation: Option<String>,
    /// Where a stream service parks the records that can never apply; a stream service refuses
    /// to start without it (`None`).
    pub parking: Option<String>,
}

impl SideQueues {
    /// The queues `env` names (an empty value is unset). The runtime built without an SQS client
    /// (its feature `sqs-client`) refuses a reconciliation queue: late events would silently go
    /// to the DLQ instead.
    pub fn read(env: Lookup<'_>) -> Result<Self, SettingsError> {
        let url = |name: &str| {
            env.get(name)
                .map(|u| u.trim().to_owned())
                .filter(|u| !u.is_empty())
        };
        Ok(Self {
            reconciliation: url(RECONCILIATION_QUEUE_VAR),
            parking: url(PARKING_QUEUE_VAR),
        })
    }

    /// The parking queue, or why a stream service cannot start: `DEDUP_PARKING_QUEUE_URL` unset.
    pub fn required_parking(&self) -> Result<&str, SettingsError> {
        self.parking
            .as_deref()
            .ok_or_else(|| SettingsError::Missing(PARKING_QUEUE_VAR.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    /// Both queues by URL, trimmed; an empty value is unset; the parking queue is required only
    /// where it is asked for, naming the variable.
    #[test]
    fn the_side_queues_are_read_by_url() {
        let queues = SideQueues::read(&Env::from_pairs([
            (RECONCILIATION_QUEUE_VAR, " https://sqs/late "),
            (PARKING_QUEUE_VAR, ""),
        ]))
        .expect("queues");
        assert_eq!(queues.reconciliation.as_deref(), Some("https://sqs/late"));
        assert_eq!(queues.parking, None);
        assert_eq!(
            queues.required_parking(),
            Err(SettingsError::Missing(PARKING_QUEUE_VAR.into()))
        );
        let queues = SideQueues::read(&Env::from_pairs([(PARKING_QUEUE_VAR, "https://sqs/p")]))
            .expect("queues");
        assert_eq!(queues.required_parking(), Ok("https://sqs/p"));
    }
}
