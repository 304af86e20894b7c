//! The simulated broker: an SQS queue (visibility timeout, redelivery, receive count, DLQ,
//! copies of one message, sends scheduled days later) and a Kinesis shard (in order, a
//! checkpoint moved by partial batch responses, records parked after their attempts).

/// One SQS message.
#[derive(Debug, Clone)]
pub struct Msg {
    /// Its message id (copies of one message share it).
    pub id: String,
    /// The event it carries.
    pub event: String,
    /// Its body.
    pub body: Vec<u8>,
    /// It carries the event's key with another payload.
    pub conflicting: bool,
    /// Its FIFO message group and the producer's sequence in it (FIFO queues only).
    pub order: Option<(String, u64)>,
    receives: u32,
    visible_at: u64,
}

/// An SQS queue with its DLQ.
#[derive(Debug, Default)]
pub struct Queue {
    msgs: Vec<Msg>,
    /// The messages moved to the DLQ.
    pub dlq: Vec<Msg>,
    next: u64,
    /// Visibility timeout, ms.
    pub visibility_ms: u64,
    /// Receives before the DLQ.
    pub max_receive: u32,
    /// A FIFO queue: a group's messages are delivered in order, none while an earlier one of
    /// the group is in flight.
    pub fifo: bool,
}

impl Queue {
    /// An empty queue.
    pub fn new(visibility_ms: u64, max_receive: u32) -> Self {
        Self {
            visibility_ms,
            max_receive,
            ..Self::default()
        }
    }

    /// Sends a message for `event`, visible at `at_ms`; its new message id.
    pub fn send(&mut self, event: &str, body: Vec<u8>, conflicting: bool, at_ms: u64) -> String {
        self.next += 1;
        let id = format!("m{}", self.next);
        self.msgs.push(Msg {
            id: id.clone(),
            event: event.to_owned(),
            body,
            conflicting,
            order: None,
            receives: 0,
            visible_at: at_ms,
        });
        id
    }

    /// Sends a message of FIFO group `group` with the producer's sequence `seq`.
    pub fn send_in_group(
        &mut self,
        event: &str,
        body: Vec<u8>,
        group: &str,
        seq: u64,
        at_ms: u64,
    ) -> String {
        let id = self.send(event, body, false, at_ms);
        if let Some(m) = self.msgs.last_mut() {
            m.order = Some((group.to_owned(), seq));
        }
        id
    }

    /// A second copy of message `id` (standard queues deliver one message twice at times).
    pub fn duplicate(&mut self, id: &str) {
        if let Some(m) = self.msgs.iter().find(|m| m.id == id).cloned() {
            self.msgs.push(m);
        }
    }

    /// Up to `max` visible messages, made invisible for the visibility timeout; those received
    /// `max_receive` times go to the DLQ instead (returned second).
    pub fn receive(&mut self, now_ms: u64, max: usize) -> (Vec<Msg>, Vec<Msg>) {
        let (mut got, mut dead) = (Vec::new(), Vec::new());
        let mut blocked: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.msgs.len() && got.len() < max {
            let group = self.msgs[i]
                .order
                .as_ref()
                .map(|(g, _)| g.clone())
                .filter(|_| self.fifo);
            if group.as_ref().is_some_and(|g| blocked.contains(g)) {
                i += 1;
                continue;
            }
            if self.msgs[i].visible_at > now_ms {
                blocked.extend(group);
                i += 1;
                continue;
            }
            if self.msgs[i].receives >= self.max_receive {
                let m = self.msgs.remove(i);
                dead.push(m.clone());
                self.dlq.push(m);
                continue;
            }
            let m = &mut self.msgs[i];
            m.receives += 1;
            m.visible_at = now_ms + self.visibility_ms;
            got.push(m.clone());
            i += 1;
        }
        (got, dead)
    }

    /// Deletes every copy of message `id`.
    pub fn delete(&mut self, id: &str) {
        self.msgs.retain(|m| m.id != id);
    }

    /// When the next message becomes visible, if any is left. On a FIFO queue only the first
    /// message of each group counts: the later ones wait for it (a redrive scheduled days
    /// later holds its group's later messages until it is delivered).
    pub fn next_visible(&self) -> Option<u64> {
        let mut seen: Vec<&str> = Vec::new();
        self.msgs
            .iter()
            .filter(|m| match m.order.as_ref().filter(|_| self.fifo) {
                Some((g, _)) if seen.contains(&g.as_str()) => false,
                Some((g, _)) => {
                    seen.push(g);
                    true
                }
                None => true,
            })
            .map(|m| m.visible_at)
            .min()
    }

    /// The events still in the queue.
    pub fn left(&self) -> Vec<String> {
        self.msgs
            .iter()
            .map(|m| format!("{} ({})", m.event, m.id))
            .collect()
    }
}

/// One Kinesis record.
#[derive(Debug, Clone)]
pub struct Record {
    /// Its sequence number in the shard.
    pub seq_no: u64,
    /// The aggregate (partition key) and the producer's sequence of it.
    pub aggregate: String,
    /// The producer's sequence.
    pub seq: u64,
    /// Its event id.
    pub event: String,
    /// Its body.
    pub body: Vec<u8>,
    /// Failed attempts so far.
    pub attempts: u32,
}

/// A shard: its records in order, the checkpoint (the index of the first not yet passed) and
/// the records settled (acknowledged or parked), which alone the checkpoint may pass.
#[derive(Debug, Default)]
pub struct Shard {
    /// Every record put.
    pub records: Vec<Record>,
    /// The first record not yet passed.
    pub checkpoint: usize,
    /// The sequence numbers of the records acknowledged or parked.
    pub settled: std::collections::BTreeSet<u64>,
}

impl Shard {
    /// Up to `max` records from the checkpoint.
    pub fn batch(&self, max: usize) -> Vec<Record> {
        self.records
            .iter()
            .skip(self.checkpoint)
            .take(max)
            .cloned()
            .collect()
    }

    /// Moves the checkpoint to the record `seq_no` (`None`: past every record up to and with
    /// `last`); the records it passed that were neither acknowledged nor parked, by event.
    pub fn advance(&mut self, to: Option<u64>, last: u64) -> Vec<String> {
        let end = match to {
            Some(seq_no) => self.records.iter().position(|r| r.seq_no == seq_no),
            None => self
                .records
                .iter()
                .position(|r| r.seq_no == last)
                .map(|i| i + 1),
        }
        .unwrap_or(self.checkpoint)
        .max(self.checkpoint);
        let unsettled = self.records[self.checkpoint..end]
            .iter()
            .filter(|r| !self.settled.contains(&r.seq_no))
            .map(|r| format!("{} (record {})", r.event, r.seq_no))
            .collect();
        self.checkpoint = end;
        unsettled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reappears_after_its_visibility_and_goes_to_the_dlq_after_max_receives() {
        let mut q = Queue::new(100, 2);
        let id = q.send("e", b"{}".to_vec(), false, 0);
        assert_eq!(q.receive(0, 10).0.len(), 1);
        assert!(
            q.receive(99, 10).0.is_empty(),
            "invisible during its visibility timeout"
        );
        assert_eq!(q.receive(100, 10).0.len(), 1);
        let (got, dead) = q.receive(200, 10);
        assert!(got.is_empty());
        assert_eq!(dead.len(), 1);
        assert_eq!(q.dlq[0].id, id);
        assert_eq!(q.next_visible(), None);
    }

    #[test]
    fn a_copy_of_a_message_is_delivered_twice_and_deleted_together() {
        let mut q = Queue::new(100, 5);
        let id = q.send("e", b"{}".to_vec(), false, 0);
        q.duplicate(&id);
        assert_eq!(q.receive(0, 10).0.len(), 2);
        q.delete(&id);
        assert_eq!(q.next_visible(), None);
    }

    #[test]
    fn a_fifo_group_waits_while_an_earlier_message_of_it_is_in_flight() {
        let mut q = Queue::new(100, 5);
        q.fifo = true;
        q.send_in_group("a1", b"{}".to_vec(), "a", 1, 0);
        q.send_in_group("b1", b"{}".to_vec(), "b", 1, 0);
        q.send_in_group("a2", b"{}".to_vec(), "a", 2, 0);
        let first: Vec<String> = q.receive(0, 1).0.into_iter().map(|m| m.event).collect();
        assert_eq!(first, ["a1"]);
        let next: Vec<String> = q.receive(1, 10).0.into_iter().map(|m| m.event).collect();
        assert_eq!(next, ["b1"], "a2 waits behind a1, which is in flight");
    }

    #[test]
    fn a_checkpoint_moved_past_a_record_neither_acknowledged_nor_parked_names_it() {
        let mut shard = Shard::default();
        for (seq_no, event) in [(1, "a"), (2, "b"), (3, "c")] {
            shard.records.push(Record {
                seq_no,
                aggregate: "agg0".into(),
                seq: seq_no,
                event: event.into(),
                body: Vec::new(),
                attempts: 0,
            });
        }
        shard.settled.insert(1);
        assert!(
            shard.advance(Some(2), 3).is_empty(),
            "only the settled a passed"
        );
        assert_eq!(shard.checkpoint, 1);
        shard.settled.insert(3);
        assert_eq!(shard.advance(None, 3), ["b (record 2)"]);
        assert_eq!(shard.checkpoint, 3);
        assert!(shard.batch(5).is_empty());
    }
}
