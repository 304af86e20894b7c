//! The functions' processes, as Lambda's execution environments: one instance per function,
//! started against the runtime API of `cargo lambda watch --only-lambda-apis`, and
//! replaced by a fresh instance whenever one dies, as Lambda starts a new environment after a
//! crash, and ending an invocation at its function's timeout by killing its instance
//! ([`crate::runtime_api`]), as Lambda does.
//!
//! Why not let `cargo lambda watch` start them: cargo-lambda 1.9 does not replace an instance
//! that was killed — every later invocation of that function hangs — so a `kill -9` chaos run
//! (S13, issue "exactly-once under faults") needs the processes in our hands.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::Result;
use crate::runtime_api::RuntimeApi;

#[derive(Debug)]
struct Instance {
    child: Child,
    /// How many instances of this function have died (killed or crashed).
    deaths: watch::Sender<u64>,
}

/// The running instances; dropping this stops them.
#[derive(Debug)]
pub struct Functions {
    instances: Arc<Mutex<BTreeMap<String, Instance>>>,
    supervisor: JoinHandle<()>,
    /// The runtime API the instances poll: cargo-lambda's, with Lambda's deadlines enforced.
    runtime_api: RuntimeApi,
}

#[derive(Debug)]
struct Launch {
    bin_dir: PathBuf,
    env: Vec<(String, String)>,
    /// Per function, variables that override `env`.
    own_env: BTreeMap<String, Vec<(String, String)>>,
    runtime_api: String,
    log: PathBuf,
}

impl Launch {
    fn spawn(&self, name: &str) -> Result<Child> {
        let open = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log)
                .map_err(|e| format!("{}: {e}", self.log.display()))
        };
        Command::new(self.bin_dir.join(name))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(
                self.own_env
                    .get(name)
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )
            .env(
                "AWS_LAMBDA_RUNTIME_API",
                format!("{}/.rt/{name}", self.runtime_api),
            )
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            // The deadline comes as Lambda sends it (epoch milliseconds): `crate::runtime_api`
            // rewrites cargo-lambda's timeout into one.
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .stdin(Stdio::null())
            .stdout(open()?)
            .stderr(open()?)
            .kill_on_drop(true)
            .spawn()
            .inspect(|c| {
                c.id()
                    .into_iter()
                    .for_each(|pid| crate::process::track(pid, false))
            })
            .map_err(|e| format!("could not start {name}: {e}"))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Functions {
    /// Starts one instance of each of `names`, the program of that name in `bin_dir`, polling
    /// `runtime_api` (`http://host:port` of `cargo lambda watch --only-lambda-apis`) through
    /// [`RuntimeApi`], which ends an invocation at the function's `timeouts` entry and kills
    /// its instance, as Lambda does; with `env` (and each function's `own_env` over it), their
    /// output appended to `log`.
    pub async fn start(
        bin_dir: PathBuf,
        names: &[&str],
        runtime_api: String,
        timeouts: BTreeMap<String, Duration>,
        env: Vec<(String, String)>,
        own_env: BTreeMap<String, Vec<(String, String)>>,
        log: PathBuf,
    ) -> Result<Self> {
        let instances: Arc<Mutex<BTreeMap<String, Instance>>> = Arc::default();
        let known = instances.clone();
        let kill = Box::new(move |function: &str| {
            if let Some(pid) = lock(&known).get(function).and_then(|i| i.child.id())
                && let Err(e) = crate::process::signal_pid(pid, "KILL")
            {
                eprintln!("local-lambda: {function}: {e}");
            }
        });
        let runtime_api = RuntimeApi::start(runtime_api, timeouts, kill).await?;
        let launch = Launch {
            bin_dir,
            env,
            own_env,
            runtime_api: runtime_api.url(),
            log,
        };
        for &name in names {
            let child = launch.spawn(name)?;
            lock(&instances).insert(
                name.to_owned(),
                Instance {
                    child,
                    deaths: watch::Sender::new(0),
                },
            );
        }
        let supervisor = tokio::spawn(supervise(instances.clone(), launch));
        Ok(Self {
            instances,
            supervisor,
            runtime_api,
        })
    }

    /// The runtime API the instances poll (`GET /__timeouts`: timed-out invocations per
    /// function).
    pub fn runtime_api_url(&self) -> String {
        self.runtime_api.url()
    }

    /// Counts the deaths of `function`'s instances; a trigger cuts its invocation short when it
    /// changes, as Lambda answers an invocation whose environment crashed with an error.
    pub fn deaths(&self, function: &str) -> Result<watch::Receiver<u64>> {
        lock(&self.instances)
            .get(function)
            .map(|i| i.deaths.subscribe())
            .ok_or_else(|| format!("no function {function}"))
    }

    /// `kill -9` of `function`'s current instance; a fresh one replaces it. Returns its pid.
    pub fn kill9(&self, function: &str) -> Result<u32> {
        let mut all = lock(&self.instances);
        let i = all
            .get_mut(function)
            .ok_or_else(|| format!("no function {function}"))?;
        let pid = i.child.id().ok_or("the instance has exited already")?;
        crate::process::signal_pid(pid, "KILL")?;
        Ok(pid)
    }
}

impl Drop for Functions {
    fn drop(&mut self) {
        self.supervisor.abort();
        for i in lock(&self.instances).values_mut() {
            i.child.id().into_iter().for_each(crate::process::untrack);
            let _ = i.child.start_kill();
        }
    }
}

/// Replaces dead instances, every 50 ms.
async fn supervise(instances: Arc<Mutex<BTreeMap<String, Instance>>>, launch: Launch) {
    loop {
        {
            let mut all = lock(&instances);
            for (name, i) in all.iter_mut() {
                let pid = i.child.id();
                let Ok(Some(status)) = i.child.try_wait() else {
                    continue;
                };
                pid.into_iter().for_each(crate::process::untrack);
                match launch.spawn(name) {
                    Ok(child) => {
                        println!(
                            "local-lambda: {name} exited ({status}); a new instance replaces it"
                        );
                        i.child = child;
                        i.deaths.send_modify(|n| *n += 1);
                    }
                    Err(e) => eprintln!("local-lambda: {e}"),
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
