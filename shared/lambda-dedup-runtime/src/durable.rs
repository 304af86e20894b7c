//! Lambda durable functions (feature `durable`): the dispatcher that starts one execution per
//! event, and steps whose effects happen once.
//!
//! An event source mapping starts a new execution for every delivery, retries included. The
//! dispatcher ([`starts`]) is a flow for any door (`dedup.sqs(durable::starts(starter))`): each
//! event's mark, then one start named from the event's key ([`execution_name`]), so Lambda
//! itself refuses a second execution of the same event; redeliveries and producers' retries are
//! duplicates of the mark, counted on the door's EMF line, and so is a start that finds the name
//! taken. [`LambdaStarter`] starts through Lambda's `Invoke`; tests give a [`Starter`] of their
//! own.
//!
//! A durable function checkpoints each step's result and replays the checkpoints after a
//! suspension or a crash; a step whose body ran but whose checkpoint was not written runs again
//! (AWS: steps are at least once per retry). [`Steps`] closes that gap with the mark store the
//! doors use: a step's mark is keyed by the execution (its ARN) and the step's name, which are
//! the same on every replay, so
//! - [`Steps::transact`] commits the step's writes with its mark in one transaction (the
//!   transactional flow, S5): the replay of a step that committed finds the mark and returns the
//!   result stored with it, never writing twice and never answering a conflict;
//! - [`Steps::call`] calls an external system with an idempotency key derived from the execution
//!   and the step (the same on every replay) under a claim taken in a step of its own, so the
//!   claim's owner is checkpointed in the execution's history: the lease belongs to the execution,
//!   not to one invocation's 15 minutes, and a long wait between steps loses nothing.
//!
//! The SDK is AWS's preview, `aws-durable-execution-sdk` pinned at `=0.1.0`: its context
//! ([`DurableContext`]) and step errors are its own, re-exported here in that version.

mod builder;
mod dispatch;
mod lambda;
mod name;
mod steps;

pub use aws_durable_execution_sdk::{BoxError, DurableContext, OperationError};
pub use dispatch::{StartError, StartFuture, Started, Starter, Starts, starts};
pub use lambda::LambdaStarter;
pub use name::{MAX_NAME, execution_name};
pub use steps::{GuardError, Steps, Writes};

#[cfg(test)]
mod tests;
