//! `cargo xtask soak [N] [--memory M]`: the model-based fault schedules of
//! `tests/integration/model.rs` (transactional flow, with poison effects and DLQ redrives) and
//! `tests/integration/model_leased.rs` (leased flow with crashes, lease and TTL expiry, and
//! providers that refuse a key, run slow or forget keys), N of each (default 500; `cargo xtask
//! test` runs 32 and 16) against a fresh local DynamoDB (Dynoxide); then M transactional
//! and M leased schedules (default 100,000 each) on the memory store, which passes the same
//! conformance suite, in several test processes at once.
//! Prints how many schedules and faults they tried and what they found, and writes
//! `docs/RELIABILITY.md` from `docs/RELIABILITY.template.md` (the prose and the counters' labels)
//! with the numbers filled in.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::Result;
use crate::dynamodb::LocalDynamo;

fn read_stats(path: &Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Test processes the memory-store soak runs side by side.
const MEMORY_PROCESSES: u64 = 12;

/// The integration test binary, built (debug) if need be.
fn integration_binary(root: &Path) -> Result<std::path::PathBuf> {
    let out = Command::new(crate::cargo())
        .current_dir(root)
        .args([
            "test",
            "-p",
            "dedup-tests",
            "--test",
            "integration",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cargo test --no-run: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"]["name"] == "integration")
        .find_map(|v| v["executable"].as_str().map(std::path::PathBuf::from))
        .ok_or_else(|| "cargo test --no-run named no integration test binary".into())
}

/// Sums the counts of several stats files.
fn sum_stats(paths: &[std::path::PathBuf]) -> Value {
    let mut sum = serde_json::Map::new();
    for p in paths {
        if let Value::Object(m) = read_stats(p) {
            for (k, v) in m {
                let total =
                    sum.get(&k).and_then(Value::as_u64).unwrap_or(0) + v.as_u64().unwrap_or(0);
                sum.insert(k, Value::from(total));
            }
        }
    }
    Value::Object(sum)
}

/// Runs `cases` schedules per flow on the memory store, split over [`MEMORY_PROCESSES`] runs of
/// the test binary at once. Returns whether all passed, and the summed stats of each flow.
fn memory_soak(root: &Path, cache: &Path, cases: u64) -> Result<(bool, Value, Value)> {
    let bin = integration_binary(root)?;
    let per = cases.div_ceil(MEMORY_PROCESSES);
    let files = |flow: &str| -> Vec<std::path::PathBuf> {
        (0..MEMORY_PROCESSES)
            .map(|i| cache.join(format!("model-stats-memory-{flow}-{i}.json")))
            .collect()
    };
    let (transactional, leased) = (files("transactional"), files("leased"));
    for f in transactional.iter().chain(&leased) {
        let _ = std::fs::remove_file(f);
    }
    let ok = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..MEMORY_PROCESSES as usize)
            .map(|i| {
                let (bin, t, l) = (&bin, &transactional[i], &leased[i]);
                scope.spawn(move || {
                    local_lambda::process::run(
                        Command::new(bin)
                            .current_dir(root.join("tests"))
                            .args(["--quiet", "on_the_memory_store"])
                            .env("DEDUP_MODEL_CASES", per.to_string())
                            .env("DEDUP_MODEL_STATS", t)
                            .env("DEDUP_MODEL_STATS_LEASED", l),
                    )
                    .is_ok_and(|s| s.success())
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().unwrap_or(false))
            .fold(true, |a, b| a & b)
    });
    Ok((ok, sum_stats(&transactional), sum_stats(&leased)))
}

/// `docs/RELIABILITY.template.md` with each `{name}` replaced by `value(name)`; an error for a
/// name it has no value for (a counter the stats do not have, say), so that the template and the
/// model's counters cannot drift apart.
fn render(template: &str, value: impl Fn(&str) -> Option<String>) -> Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest[open..]
            .find('}')
            .ok_or("docs/RELIABILITY.template.md: an unclosed {")?;
        let name = &rest[open + 1..open + close];
        out.push_str(&rest[..open]);
        out.push_str(
            &value(name)
                .ok_or_else(|| format!("docs/RELIABILITY.template.md: no value for {{{name}}}"))?,
        );
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn verdict(ok: bool) -> String {
    (if ok { "passed" } else { "FAILED" }).into()
}

pub(crate) fn run(root: &Path, cases: u64, memory: u64) -> Result<()> {
    let ddb = LocalDynamo::start(root)?;
    let cache = root.join(".cache");
    let stats = cache.join("model-stats.json");
    let stats_leased = cache.join("model-stats-leased.json");
    let _ = std::fs::remove_file(&stats);
    let _ = std::fs::remove_file(&stats_leased);
    println!(
        "xtask: soak: {cases} generated schedules per flow against the local DynamoDB (Dynoxide, in memory) at {}",
        ddb.endpoint()
    );
    let started = std::time::Instant::now();
    // `model` selects both `model::` and `model_leased::`; they run side by side.
    let status = local_lambda::process::run(
        Command::new(crate::cargo())
            .current_dir(root)
            .args([
                "test",
                "--quiet",
                "-p",
                "dedup-tests",
                "--test",
                "integration",
            ])
            .args(["--", "model", "--skip", "on_the_memory_store"])
            .env("DEDUP_DYNAMODB_ENDPOINT", ddb.endpoint())
            .env("DEDUP_MODEL_CASES", cases.to_string())
            .env("DEDUP_MODEL_STATS", &stats)
            .env("DEDUP_MODEL_STATS_LEASED", &stats_leased),
    )
    .map_err(|e| format!("cargo test: {e}"))?;
    let secs = started.elapsed().as_secs();
    drop(ddb);
    let started = std::time::Instant::now();
    let (memory_ok, on_memory, leased_on_memory) = if memory > 0 {
        crate::step(format!(
            "soak: {memory} schedules per flow on the memory store, in {MEMORY_PROCESSES} processes"
        ));
        memory_soak(root, &cache, memory)?
    } else {
        (true, Value::Null, Value::Null)
    };
    let memory_secs = started.elapsed().as_secs();
    let flows = [
        ("t", read_stats(&stats)),
        ("l", read_stats(&stats_leased)),
        ("mt", on_memory),
        ("ml", leased_on_memory),
    ];
    let template = root.join("docs").join("RELIABILITY.template.md");
    let template =
        std::fs::read_to_string(&template).map_err(|e| format!("{}: {e}", template.display()))?;
    // The template's first line says what it is; the report starts after it.
    let template = template.split_once('\n').map_or("", |(_, t)| t);
    let md = render(template, |name| match name {
        "cases" => Some(cases.to_string()),
        "secs" => Some(secs.to_string()),
        "result" => Some(verdict(status.success())),
        "memory" => Some(memory.to_string()),
        "processes" => Some(MEMORY_PROCESSES.to_string()),
        "memory_secs" => Some(memory_secs.to_string()),
        "memory_result" if memory == 0 => Some("not run".into()),
        "memory_result" => Some(verdict(memory_ok)),
        _ => {
            let (flow, key) = name.split_once('.')?;
            let stats = &flows.iter().find(|(f, _)| *f == flow)?.1;
            // A flow that did not run (no memory store soak) has no numbers.
            match stats {
                Value::Null => Some("–".into()),
                _ => stats[key].as_u64().map(|n| n.to_string()),
            }
        }
    })?;
    let rows = md
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| |"));
    for table_row in rows.filter(|l| !l.starts_with("| ---")) {
        println!("  {table_row}");
    }
    std::fs::write(root.join("docs").join("RELIABILITY.md"), md).map_err(|e| e.to_string())?;
    println!("xtask: soak: wrote docs/RELIABILITY.md ({secs} s)");
    if status.success() && memory_ok {
        Ok(())
    } else {
        Err("a schedule broke the model".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `{name}` is filled in; a name without a value (a counter the model's stats lack) is
    /// an error, never a silent blank.
    #[test]
    fn the_report_fills_every_number_and_refuses_an_unknown_one() {
        let value = |n: &str| (n == "t.schedules").then(|| "501".to_owned());
        assert_eq!(
            render("| schedules run | {t.schedules} |", value).as_deref(),
            Ok("| schedules run | 501 |")
        );
        assert!(render("| lost | {t.lost} |", value).is_err());
        assert!(render("| open | {t.schedules |", value).is_err());
    }

    /// The checkout's template names only counters the model's flows count.
    #[test]
    fn the_template_names_only_known_counters() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join("docs/RELIABILITY.template.md"))
            .expect("the template");
        let text = text.split_once('\n').expect("its first line").1;
        let model =
            std::fs::read_to_string(root.join("tests/integration/model.rs")).expect("model");
        let leased = std::fs::read_to_string(root.join("tests/integration/model_leased/mod.rs"))
            .expect("leased");
        let counted = |src: &str, key: &str| src.contains(&format!("    {key}: u64,"));
        let rendered = render(text, |name| {
            let known = match name.split_once('.') {
                Some(("t" | "mt", key)) => counted(&model, key),
                Some(("l" | "ml", key)) => counted(&leased, key),
                Some(_) => false,
                None => true,
            };
            known.then(String::new)
        });
        assert!(rendered.is_ok(), "{rendered:?}");
    }
}
