//! The local DynamoDB: Dynoxide (crate `dynoxide-rs`, open source, DynamoDB on SQLite), embedded
//! in xtask itself and run as a child process (`xtask serve-dynamodb`) on a free loopback port,
//! so that it can be frozen, killed and restarted like any server. Nothing is downloaded and no
//! other runtime is needed. Stopped on drop; never outlives xtask (see [`Guarded`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Result;
use local_lambda::process::{Guarded, free_port, shell_quote};

pub(crate) struct LocalDynamo {
    /// `None` while stopped (see [`LocalDynamo::stop`]).
    process: Option<Guarded>,
    /// The program the server runs: a link to (or copy of) this xtask binary, taken at start,
    /// because `cargo test --workspace` may rebuild `target/debug/xtask` while the stack runs,
    /// and a restart (chaos) must still find a program to run.
    exe: PathBuf,
    port: u16,
    root: PathBuf,
    /// The SQLite file of a persistent instance; `None` for an in-memory one.
    data: Option<PathBuf>,
    log: PathBuf,
}

impl LocalDynamo {
    /// An in-memory instance: fastest, and its data is gone when it stops.
    pub(crate) fn start(root: &Path) -> Result<Self> {
        Self::start_with(root, None)
    }

    /// An instance that keeps its data in a fresh SQLite file under `.cache/`, so that it can be
    /// stopped and started again mid-run with its tables intact (the chaos runs do that).
    pub(crate) fn start_persistent(root: &Path) -> Result<Self> {
        let dir = root.join(".cache").join("dynamodb-data");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Self::start_with(root, Some(dir.join("dynamodb.sqlite")))
    }

    fn start_with(root: &Path, data: Option<PathBuf>) -> Result<Self> {
        let port = free_port()?;
        let bin = root.join(".cache").join("bin");
        fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
        let exe = bin.join(format!("xtask-serve-dynamodb-{port}"));
        let own = std::env::current_exe().map_err(|e| format!("xtask's own path: {e}"))?;
        let _ = fs::remove_file(&exe);
        fs::hard_link(&own, &exe)
            .or_else(|_| fs::copy(&own, &exe).map(drop))
            .map_err(|e| format!("{} -> {}: {e}", own.display(), exe.display()))?;
        local_lambda::process::track_file(&exe);
        let mut ddb = Self {
            process: None,
            exe,
            port,
            root: root.to_path_buf(),
            data,
            log: PathBuf::new(),
        };
        // The stack's (persistent) instance logs to `dynamodb.log`; in-memory ones (soak, bench,
        // `cargo xtask dynamodb`, tests) may run beside it, each with a log of its own, removed
        // when it stops.
        let name = match ddb.data {
            Some(_) => "dynamodb.log".to_owned(),
            None => format!("dynamodb-{}.log", ddb.port),
        };
        ddb.log = root.join(".cache").join("logs").join(name);
        ddb.ensure_running()?;
        Ok(ddb)
    }

    /// Stops the process (SIGTERM, then waits for it): clients get connection refused.
    pub(crate) fn stop(&mut self) {
        drop(self.process.take());
    }

    /// Starts the process unless it runs: on the same port every time, and with its data when
    /// persistent, so a stopped instance comes back as it was.
    pub(crate) fn ensure_running(&mut self) -> Result<()> {
        if self.process.is_some() {
            return Ok(());
        }
        let mut cmdline = format!(
            "exec {} serve-dynamodb --port {}",
            shell_quote(&self.exe.display().to_string()),
            self.port
        );
        if let Some(d) = &self.data {
            cmdline.push_str(&format!(
                " --data {}",
                shell_quote(&d.display().to_string())
            ));
        }
        let process = Guarded::spawn(
            "DynamoDB (Dynoxide)",
            &self.root,
            &cmdline,
            &[],
            self.log.clone(),
        )?;
        process.wait_listening(self.port, Duration::from_secs(30))?;
        self.process = Some(process);
        Ok(())
    }

    /// Freezes (`true`) or thaws (`false`) the process: requests in flight hang meanwhile.
    pub(crate) fn freeze(&self, frozen: bool) -> Result<()> {
        let p = self
            .process
            .as_ref()
            .ok_or("the local DynamoDB is stopped")?;
        p.signal(if frozen { "STOP" } else { "CONT" })
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Guarded::pid)
    }

    pub(crate) fn print_log_tail(&self, lines: usize) {
        if let Some(p) = &self.process {
            p.print_log_tail(lines);
        }
    }
}

impl Drop for LocalDynamo {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_file(&self.exe);
        local_lambda::process::untrack_file(&self.exe);
        if self.data.is_none() {
            let _ = fs::remove_file(&self.log);
            let _ = fs::remove_file(self.log.with_extension("pid"));
        }
    }
}

/// `xtask serve-dynamodb --port P [--data FILE]`: the server process itself. Serves until
/// SIGTERM or SIGINT; sweeps expired TTL items on a timer.
pub(crate) async fn serve(port: u16, data: Option<PathBuf>) -> Result<()> {
    let db = lambda_dedup_testkit::dynamodb::open(data.as_deref()).map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("serve-dynamodb: port {port}: {e}"))?;
    eprintln!(
        "Dynoxide {} (crate dynoxide-rs) on http://127.0.0.1:{port} ({}), TTL swept every {:?}",
        lambda_dedup_testkit::dynamodb::dynoxide::PRODUCT_VERSION,
        data.as_deref()
            .map_or("in memory".to_owned(), |d| d.display().to_string()),
        lambda_dedup_testkit::dynamodb::SWEEP_EVERY
    );
    lambda_dedup_testkit::dynamodb::serve(listener, db, async {
        local_lambda::signals::terminated().await;
    })
    .await
    .map_err(|e| e.to_string())
}
