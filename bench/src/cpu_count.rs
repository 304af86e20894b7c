//! `bench cpu-count MODE MESSAGES`: the SQS door's path of `bench cpu` without the Lambda
//! runtime API and without the bed's holds, for counters that a loaded machine does not move:
//! `MESSAGES` new CloudEvents credits in SQS batches of 10 (as `bench cpu` builds them), each
//! batch's JSON parsed as the runtime parses it, given to `mode`'s service (`cpu::service`) on
//! the memory store alone, its answer serialised, one batch after another on one thread. Run it
//! under `valgrind --tool=callgrind` for instructions, under `heaptrack` for allocations by call
//! site (the stacks through `serve` are the served batches'; those through
//! `lambda_dedup_memory` the bed's); a run of 10 messages (one batch) is the start-up and the
//! first batch's one-time costs to subtract from a run of 1010, over 1000 messages.

use lambda_dedup_runtime::aws_lambda_events::event::sqs::SqsEvent;

use crate::Result;
use crate::cpu::{BATCH, memory_store, payload, service};
use crate::error::BenchError;

/// Runs `messages` (rounded up to whole batches) through `mode`'s service.
pub(crate) fn run(mode: &str, messages: usize) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(BenchError::failed)?;
    lambda_dedup_runtime::init_tracing();
    let memory = memory_store()?;
    let service = service(mode, &memory, memory.clone())?;
    // The events are the bench's to build: all of them before the first is served.
    let events: Vec<Vec<u8>> = (0..messages.div_ceil(BATCH))
        .map(|k| {
            payload(k * BATCH).and_then(|v| serde_json::to_vec(&v).map_err(BenchError::failed))
        })
        .collect::<Result<_>>()?;
    serve(&runtime, &service, &events)
}

/// The batches served, one after another: the counted part (`valgrind
/// --toggle-collect=*cpu_count*serve*`; heaptrack's stacks through it).
#[inline(never)]
fn serve(
    runtime: &tokio::runtime::Runtime,
    service: &lambda_dedup_runtime::SqsService,
    events: &[Vec<u8>],
) -> Result<()> {
    runtime.block_on(async {
        for (k, bytes) in events.iter().enumerate() {
            let event: SqsEvent = serde_json::from_slice(bytes).map_err(BenchError::failed)?;
            let answer = service
                .call_with(event)
                .await
                .map_err(|e| BenchError::Unexpected(format!("batch {k}: {e}")))?;
            if !answer.batch_item_failures.is_empty() {
                return Err(BenchError::Unexpected(format!("batch {k}: {answer:?}")));
            }
            let out = serde_json::to_vec(&answer).map_err(BenchError::failed)?;
            std::hint::black_box(out);
        }
        Ok(())
    })
}
