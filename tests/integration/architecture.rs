//! The architecture invariants of `ARCHITECTURE.md`, checked on the manifests.

use std::path::{Path, PathBuf};

fn crates_under(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path().join("Cargo.toml")))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

fn depends_on(manifest: &Path, dep: &str) -> bool {
    let text = std::fs::read_to_string(manifest).expect("read manifest");
    text.lines().map(str::trim_start).any(|l| {
        l.starts_with(&format!("{dep} "))
            || l.starts_with(&format!("{dep}."))
            || l.starts_with(&format!("{dep}="))
    })
}

#[test]
fn only_the_store_adapter_knows_the_dynamodb_sdk() {
    let product: Vec<PathBuf> = crates_under("shared")
        .into_iter()
        .chain(crates_under("functions"))
        .collect();
    assert!(product.len() >= 2, "found the product crates: {product:?}");
    for m in &product {
        // The test kit is no product crate: a dev-dependency, it serves the local DynamoDB and
        // reads items back with the SDK, as `tests/local-dynamodb` does.
        if m.ends_with("shared/lambda-dedup-testkit/Cargo.toml") {
            continue;
        }
        let is_adapter = m.ends_with("shared/lambda-dedup-dynamodb/Cargo.toml");
        assert_eq!(
            depends_on(m, "aws-sdk-dynamodb"),
            is_adapter,
            "{}: only shared/lambda-dedup-dynamodb may depend on aws-sdk-dynamodb",
            m.display()
        );
    }
}

#[test]
fn only_functions_and_the_runtime_crate_know_lambda_events() {
    for m in crates_under("shared") {
        if m.ends_with("shared/lambda-dedup-runtime/Cargo.toml") {
            // The one library that knows `aws_lambda_events` and `lambda_runtime`.
            continue;
        }
        assert!(
            !depends_on(&m, "aws_lambda_events") && !depends_on(&m, "lambda_runtime"),
            "{}: the library must not know Lambda event types",
            m.display()
        );
    }
}

#[test]
fn the_core_and_the_flows_know_no_store_implementation() {
    for name in ["lambda-dedup", "lambda-dedup-engine", "lambda-dedup-memory"] {
        let m = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("shared")
            .join(name)
            .join("Cargo.toml");
        assert!(m.is_file(), "{}", m.display());
        assert!(
            !depends_on(&m, "lambda-dedup-dynamodb") && !depends_on(&m, "aws-sdk-dynamodb"),
            "{}: flows and stores meet only at the core's MarkStore trait",
            m.display()
        );
    }
}

/// The source files of a crate's `src/`, each with its text up to its first `#[cfg(test)]`
/// (the product code; tests may build what they need by hand).
fn product_sources(manifest: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut dirs = vec![manifest.with_file_name("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                // `tests.rs`: a crate's test module (`#[cfg(test)] mod tests;`), all test code.
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let text = std::fs::read_to_string(&path).expect("read source");
                let product = text.split("#[cfg(test)]").next().unwrap_or("").to_owned();
                out.push((path, product));
            }
        }
    }
    out
}

/// S9: every function and the example to copy build their deduplicator from the checked
/// settings (through the runtime's builder), so no production code bypasses the retention check or
/// the guards the settings document: `Retention::unchecked` and a hand-built `Deduplicator` or
/// `DynamoStore` appear only in tests.
#[test]
fn s9_no_production_main_builds_its_guards_by_hand() {
    let crates: Vec<PathBuf> = ["functions", "examples"]
        .iter()
        .flat_map(|d| crates_under(d))
        .collect();
    assert!(crates.len() >= 9, "{crates:?}");
    for manifest in crates {
        for (path, code) in product_sources(&manifest) {
            for forbidden in [
                "Retention::unchecked",
                "Deduplicator::new(",
                "DynamoStore::new(",
            ] {
                assert!(
                    !code.contains(forbidden),
                    "{}: `{forbidden}` in product code; build from `Settings`",
                    path.display()
                );
            }
        }
    }
}

/// The dependency names of `manifest`'s `[dependencies]` table (not its dev-dependencies).
fn runtime_dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).expect("read manifest");
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
        } else if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['.', '=', ' ']).next().unwrap_or_default();
            out.push(name.to_owned());
        }
    }
    out
}

#[test]
fn the_fake_provider_is_a_dev_dependency_only() {
    let product: Vec<PathBuf> = crates_under("shared")
        .into_iter()
        .chain(crates_under("functions"))
        .chain(crates_under("examples"))
        .collect();
    let dispatcher = product
        .iter()
        .find(|m| m.ends_with("functions/payment-dispatcher/Cargo.toml"))
        .expect("payment-dispatcher");
    assert!(
        depends_on(dispatcher, "lambda-dedup-fake-provider"),
        "the check reads the name its users give it"
    );
    let deps = runtime_dependencies(dispatcher);
    assert!(
        deps.iter().any(|d| d == "lambda-dedup-runtime"),
        "the [dependencies] table is read: {deps:?}"
    );
    for m in &product {
        let deps = runtime_dependencies(m);
        assert!(
            !deps.iter().any(|d| d == "lambda-dedup-fake-provider"),
            "{}: the fake provider is for tests: a dev-dependency only",
            m.display()
        );
    }
}

/// The runtime's rooms (issue 33): no source file of `shared/lambda-dedup-runtime` holds more
/// than 600 lines of product code (its text before its first `#[cfg(test)]`): a file that grows
/// past it holds more than one concern, and is split by concern.
#[test]
fn no_runtime_source_holds_more_than_600_lines_of_product_code() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared/lambda-dedup-runtime/Cargo.toml");
    let sources = product_sources(&manifest);
    assert!(
        sources.len() >= 20,
        "read the runtime's sources: {sources:?}"
    );
    for (path, code) in sources {
        let lines = code.lines().count();
        assert!(
            lines <= 600,
            "{}: {lines} lines of product code; split it by concern",
            path.display()
        );
    }
}

/// One settings crate reads every variable (issues 33, 46): no product code of the runtime
/// reads the process environment; it takes `lambda-dedup-config`'s typed structs.
#[test]
fn only_the_settings_crate_reads_the_environment() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared/lambda-dedup-runtime/Cargo.toml");
    for (path, code) in product_sources(&manifest) {
        for read in ["std::env::var", "env::var(", "env::vars("] {
            assert!(
                !code.contains(read),
                "{}: `{read}` in the runtime; read it in `lambda-dedup-config` into a typed struct",
                path.display()
            );
        }
    }
}

/// Settings in a crate of their own (issue 46): `lambda-dedup-config` builds nothing (its
/// dependencies are the core, the I/O-free signature schemes a webhook's settings name, and
/// `thiserror`: no AWS SDK, no store, no Lambda runtime), and the
/// operators' tool and xtask read the settings through it, without the Lambda glue.
#[test]
fn the_settings_crate_builds_nothing_and_the_tools_have_no_lambda_glue() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let config = runtime_dependencies(&root.join("shared/lambda-dedup-config/Cargo.toml"));
    assert_eq!(
        config,
        ["lambda-dedup", "lambda-dedup-signature", "thiserror"],
        "lambda-dedup-config"
    );
    for tool in ["shared/lambda-dedup-cli/Cargo.toml", "xtask/Cargo.toml"] {
        let deps = runtime_dependencies(&root.join(tool));
        assert!(
            deps.iter().any(|d| d == "lambda-dedup-config"),
            "{tool}: {deps:?}"
        );
        for glue in [
            "lambda-dedup-runtime",
            "lambda_runtime",
            "lambda_http",
            "aws_lambda_events",
        ] {
            assert!(
                !deps.iter().any(|d| d == glue),
                "{tool}: depends on {glue}, the Lambda glue"
            );
        }
    }
}
