//! Integration tests of the library against a local DynamoDB (Dynoxide: the one `cargo xtask test`
//! starts, or one in this test binary when `DEDUP_DYNAMODB_ENDPOINT` is unset).
//! One test binary, a module per area. Each test names the rule of `docs/CONTRACT.md` it proves.

mod architecture;
mod batch;
mod batch_concurrent;
mod batch_mode;
mod built;
mod chaos_kill;
mod chaos_postgres;
mod chaos_valkey;
mod claim;
mod commit;
mod concurrent;
mod conformance_postgres;
mod conformance_valkey;
mod cost;
mod e2e;
mod e2e_deadline;
mod e2e_doors;
mod e2e_envelopes;
mod e2e_eventbridge;
mod e2e_http;
mod e2e_kafka;
mod e2e_mq;
mod e2e_operator;
mod e2e_s3;
mod emulator;
mod faults;
mod hostile;
mod http_door;
mod invoke_door;
mod isolation;
mod lease;
mod model;
mod model_leased;
mod model_postgres;
mod model_server;
mod model_valkey;
mod privacy;
mod relay;
mod retention;
mod round_trips;
mod s3_latest;
mod secrets;
mod stream_parking;
mod webhook_store;
