//! The ledger's business rule, shared by its two doors: `ledger-projector` (SQS) and
//! `ledger-stream` (Kinesis). Both commit each event's mark with its balance change (S5).

pub mod ledger;
