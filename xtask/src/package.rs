//! `cargo xtask package`: the release artifacts: every function of the template built with
//! `cargo lambda build --release --arm64` (zig cross-links; no Docker), zipped, sizes reported;
//! `examples/durable-order` is one package of two functions (its binaries). One build per
//! package: built together, the runtime's features would unify and every zip
//! would carry what any function enables (the SQS client, every door); built alone, each
//! carries what its `Cargo.toml` names, and the crates whose features agree are compiled once.
//! `--together` (CI) is one build of them all, features unified, in the dev profile: it proves
//! that every function compiles and links for arm64 (the profile changes how much is optimised,
//! not what compiles or links) at a fraction of the time, and its zips are not the ones to deploy
//! (the union of the features, unoptimised); their sizes are not printed. That no function compiles a client it never calls is pinned by the integration
//! test `lean_builds`.

use std::path::Path;
use std::process::Command;

use crate::Result;

/// The deployable functions, as `cargo lambda build` names their zips: every function.
pub(crate) const FUNCTIONS: [&str; 10] = crate::functions::ALL;

/// `examples/durable-order`, the package of the template's durable functions: one build
/// makes both its binaries' zips (`functions::NOT_RUN`, which the local stack does not run).
pub(crate) const DURABLE_PACKAGE: &str = "example-durable-order";

/// The packages built, one `cargo lambda build` each: every function's crate, then the
/// durable functions' package.
fn packages() -> Vec<&'static str> {
    FUNCTIONS.into_iter().chain([DURABLE_PACKAGE]).collect()
}

/// The zips made, by binary (`target/lambda/<binary>/bootstrap.zip`): every function of the
/// template.
fn zips() -> Vec<&'static str> {
    FUNCTIONS
        .into_iter()
        .chain(crate::functions::NOT_RUN)
        .collect()
}

pub(crate) fn run(root: &Path, together: bool) -> Result<()> {
    let template = crate::infra::load(&root.join("infra/template.yaml"))?;
    let mismatched = mismatched(&template);
    if !mismatched.is_empty() {
        return Err(format!(
            "the packaged functions are not the template's: {}",
            mismatched.join("; ")
        ));
    }
    let bin = crate::tools::ensure(root)?;
    let target = "aarch64-unknown-linux-gnu";
    // Quick and offline when the target is there already.
    let added = Command::new("rustup")
        .args(["target", "add", target])
        .status();
    if !added.is_ok_and(|s| s.success()) {
        return Err(format!(
            "could not add the Rust target {target}; install it with `rustup target add {target}`"
        ));
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let builds: Vec<Vec<&str>> = if together {
        vec![packages()]
    } else {
        packages().into_iter().map(|p| vec![p]).collect()
    };
    let profile = if together { None } else { Some("--release") };
    for functions in builds {
        let mut cmd = Command::new(crate::cargo());
        cmd.current_dir(root)
            .env("PATH", &path)
            .args(["lambda", "build"])
            .args(profile)
            .args(["--arm64", "--output-format", "zip"]);
        for f in &functions {
            cmd.args(["--package", f]);
        }
        let named = functions.join(" --package ");
        let release = profile.map(|p| format!("{p} ")).unwrap_or_default();
        println!("xtask: package: cargo lambda build {release}--arm64 --package {named}");
        let status =
            local_lambda::process::run(&mut cmd).map_err(|e| format!("cargo lambda: {e}"))?;
        if !status.success() {
            return Err(format!("cargo lambda build failed for {named}"));
        }
    }
    if together {
        println!(
            "\n  every function built and linked for arm64 (together, features unified, dev \
             profile): `cargo xtask package` builds each alone in release and prints its zip size"
        );
        return Ok(());
    }
    println!("\n  {:<20} {:>12}", "function (arm64)", "zip size");
    for f in zips() {
        let mb = zip_mb(root, f).ok_or_else(|| format!("{f}: no zip after the build"))?;
        println!("  {f:<20} {mb:>9.2} MB");
    }
    Ok(())
}

/// How the zips differ from the template's functions (`t`, by the binary each deploys): a
/// function no zip is made for, a zip no function deploys.
fn mismatched(t: &serde_json::Value) -> Vec<String> {
    let deployed = crate::infra::binaries(t);
    let zips = zips();
    let unpackaged = deployed.iter().filter(|b| !zips.contains(&b.as_str()));
    let undeployed = zips.iter().filter(|z| !deployed.contains(**z));
    (unpackaged.map(|b| format!("{b}: deployed, not packaged")))
        .chain(undeployed.map(|z| format!("{z}: packaged, not deployed")))
        .collect()
}

/// The size of `function`'s arm64 release zip in MB, if it has been built.
pub(crate) fn zip_mb(root: &Path, function: &str) -> Option<f64> {
    let zip = crate::target_dir(root)
        .join("lambda")
        .join(function)
        .join("bootstrap.zip");
    std::fs::metadata(zip)
        .ok()
        .map(|m| m.len() as f64 / 1_048_576.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every function of the template is packaged, and nothing else: its binaries are the
    /// zips (`run` refuses to build otherwise), and each zip's binary is built by a package of
    /// the list (a function's crate is its binary; the durable package has the rest).
    #[test]
    fn every_template_function_is_packaged() {
        let root = crate::root();
        let t = crate::infra::load(&root.join("infra/template.yaml")).expect("template");
        assert_eq!(mismatched(&t), Vec::<String>::new());
        // A function the list leaves out is refused, and so is a zip nothing deploys.
        let mut more = t.clone();
        more["Resources"]["Other"] = serde_json::json!({"Type": "AWS::Serverless::Function",
            "Properties": {"CodeUri": "../functions/other"}});
        assert_eq!(mismatched(&more), ["other: deployed, not packaged"]);
        let mut fewer = t.clone();
        let _ = fewer["Resources"]
            .as_object_mut()
            .expect("resources")
            .remove("OrderDispatcher");
        assert_eq!(
            mismatched(&fewer),
            ["order-dispatcher: packaged, not deployed"]
        );
        let durable = root.join("examples/durable-order");
        let manifest = std::fs::read_to_string(durable.join("Cargo.toml")).expect("manifest");
        assert!(
            manifest.contains(&format!("name = \"{DURABLE_PACKAGE}\"")),
            "{DURABLE_PACKAGE} is examples/durable-order's package"
        );
        // Its binaries: the package's own (src/main.rs) and each of src/bin.
        let mut binaries = vec![DURABLE_PACKAGE.to_owned()];
        for entry in std::fs::read_dir(durable.join("src/bin")).expect("src/bin") {
            let path = entry.expect("entry").path();
            let stem = path.file_stem().and_then(|s| s.to_str()).expect("a name");
            binaries.push(stem.to_owned());
        }
        binaries.sort();
        let mut not_run = crate::functions::NOT_RUN.map(str::to_owned).to_vec();
        not_run.sort();
        assert_eq!(binaries, not_run);
        for f in FUNCTIONS {
            assert!(packages().contains(&f), "{f}");
        }
        assert!(packages().contains(&DURABLE_PACKAGE));
    }
}
