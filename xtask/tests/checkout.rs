//! xtask works on the checkout it is run in, found at run time (issue: it used the directory it
//! was compiled in, so with a target directory shared between two checkouts, `cargo xtask soak`
//! in one wrote its report into the other).

use std::process::Command;

/// A checkout of its own (the markers xtask looks for), with a template and no rules: `check-infra`,
/// run from a folder inside it, must judge that checkout's template, not this crate's.
#[test]
fn check_infra_reads_the_checkout_it_runs_in() {
    let dir = std::env::temp_dir().join(format!("xtask-checkout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("xtask")).expect("dir");
    std::fs::create_dir_all(dir.join("infra")).expect("dir");
    std::fs::create_dir_all(dir.join("docs/deeper")).expect("dir");
    std::fs::write(dir.join("xtask/Cargo.toml"), "").expect("write");
    std::fs::write(dir.join("infra/template.yaml"), "Resources: {}\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("check-infra")
        .current_dir(dir.join("docs/deeper"))
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .expect("run xtask");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the other checkout's template is broken: {stderr}"
    );
    let other = dir.join("infra/template.yaml");
    assert!(
        stderr.contains(&other.display().to_string()),
        "xtask must check {}: {stderr}",
        other.display()
    );

    // Outside any checkout: a clear refusal, not some other checkout's files.
    let outside = std::env::temp_dir().join(format!("xtask-nowhere-{}", std::process::id()));
    std::fs::create_dir_all(&outside).expect("dir");
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("check-infra")
        .current_dir(&outside)
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .expect("run xtask");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("not inside a lambda-dedup checkout"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&outside);
}
