//! The library behind `lambda-dedup`, the operators' command-line tool (see the README's "When
//! something went wrong"). The verdicts themselves are the flows' own
//! (`lambda_dedup_engine::Deduplicator::explain`); this crate reads configuration, sums the
//! account and renders.
//!
//! - [`account`]: the S14 account from EMF lines and mark counts, shared with `cargo xtask audit`.
//! - [`template`]: a function's environment, key spec and flow from its entry in
//!   `infra/template.yaml` (the tool links no function's code; the functions' tests read their
//!   entries with it to check the template declares what their code does).

pub mod account;
pub mod template;
