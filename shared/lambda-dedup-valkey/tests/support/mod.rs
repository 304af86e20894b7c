//! A `valkey-server` of a test's own: started from the binary `cargo xtask test` names in
//! `DEDUP_VALKEY_BIN`, on a free port and in a directory of its own, stopped (and the
//! directory removed) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The server, stopped when dropped.
pub struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    /// `bin` on a free port of 127.0.0.1, without snapshots, in a new directory named after
    /// `label`; `mode` adds the arguments of its role, given that directory.
    pub fn start(bin: &str, label: &str, mode: impl FnOnce(&mut Command, &Path)) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(lambda_dedup_conformance::unique(label));
        std::fs::create_dir_all(&dir).expect("its directory");
        let mut command = Command::new(bin);
        command.args([
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--save",
            "",
        ]);
        mode(&mut command, &dir);
        let child = command
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("valkey-server starts");
        Server { child, dir, port }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}
