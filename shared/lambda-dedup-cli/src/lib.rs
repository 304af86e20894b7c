//! The library behind `lambda-dedup`, the operators' command-line tool (see the README's "When
//! something went wrong"). The verdicts themselves are the flows' own
//! (`lambda_dedup_batch::Deduplicator::explain`); this crate reads configuration, sums the
//! account and renders.
//!
//! - [`account`]: the S14 account from EMF lines and mark counts, shared with `cargo xtask audit`.
//! - [`template`]: a function's environment from its entry in `infra/template.yaml`.

pub mod account;
pub mod template;
