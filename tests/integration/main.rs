//! Integration tests of the library against DynamoDB Local (started by `cargo xtask test`).
//! One test binary, a module per area. Each test names the rule of `SEMANTICS.md` it proves.

mod architecture;
mod batch;
mod batch_mode;
mod claim;
mod commit;
mod e2e;
mod faults;
mod hostile;
mod lease;
mod model;
mod model_leased;
mod privacy;
mod retention;
