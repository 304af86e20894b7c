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
fn only_functions_know_lambda_events() {
    for m in crates_under("shared") {
        assert!(
            !depends_on(&m, "aws_lambda_events") && !depends_on(&m, "lambda_runtime"),
            "{}: the library must not know Lambda event types",
            m.display()
        );
    }
}

#[test]
fn the_core_and_the_flows_know_no_store_implementation() {
    for name in ["lambda-dedup", "lambda-dedup-batch", "lambda-dedup-memory"] {
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
