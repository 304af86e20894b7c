//! The run's trace: every step as a line, and its digest (SHA-256), which a replay of the seed
//! reproduces exactly.

use sha2::{Digest, Sha256};

/// The lines of one run and their running digest.
#[derive(Debug, Default)]
pub struct Trace {
    lines: Vec<String>,
    hasher: Sha256,
}

impl Trace {
    /// Appends a step at simulated time `t_ms`.
    pub fn push(&mut self, t_ms: u64, line: String) {
        let line = format!("{t_ms:>12} {line}");
        self.hasher.update(line.as_bytes());
        self.hasher.update(b"\n");
        self.lines.push(line);
    }

    /// Every line so far.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The last `n` lines: the shortened trace a violation prints.
    pub fn tail(&self, n: usize) -> &[String] {
        &self.lines[self.lines.len().saturating_sub(n)..]
    }

    /// The digest of every line so far, in hex.
    pub fn digest(&self) -> String {
        hex::encode(self.hasher.clone().finalize())
    }
}
