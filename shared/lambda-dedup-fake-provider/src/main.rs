//! `lambda-dedup-fake-provider [--host HOST] [--port PORT]`: serves the fake provider until
//! killed. The first stdout line, `lambda-dedup-fake-provider listening on http://ADDR`, is
//! what scripts wait for (and parse, when `--port 0` lets the OS pick).

use std::io::Write;
use std::process::ExitCode;

use lambda_dedup_fake_provider::Provider;

const USAGE: &str = "usage: lambda-dedup-fake-provider [--host HOST] [--port PORT]  (defaults: 127.0.0.1, 0 = any free port)";

#[derive(Debug)]
struct Args {
    host: String,
    port: u16,
}

impl Args {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Self>, String> {
        let mut parsed = Self {
            host: "127.0.0.1".to_owned(),
            port: 0,
        };
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
                None => (arg, None),
            };
            match flag.as_str() {
                "-h" | "--help" => return Ok(None),
                "--host" | "--port" => {
                    let value = inline
                        .or_else(|| args.next())
                        .ok_or_else(|| format!("{flag} needs a value"))?;
                    if flag == "--host" {
                        parsed.host = value;
                    } else {
                        parsed.port = value
                            .parse()
                            .map_err(|_| format!("--port: not a port number: {value}"))?;
                    }
                }
                _ => return Err(format!("unknown argument: {flag}")),
            }
        }
        Ok(Some(parsed))
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("lambda-dedup-fake-provider: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Bound here rather than through `lambda_dedup_fake_provider::spawn` so a serve error
    // reaches the exit code instead of a log nobody reads. A (host, port)
    // pair also lets `--host localhost` resolve.
    let listener = match tokio::net::TcpListener::bind((args.host.as_str(), args.port)).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!(
                "lambda-dedup-fake-provider: cannot bind {}:{}: {error}",
                args.host, args.port
            );
            return ExitCode::FAILURE;
        }
    };
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(error) => {
            eprintln!("lambda-dedup-fake-provider: cannot read the bound address: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("lambda-dedup-fake-provider listening on http://{addr}");
    // Scripts block on this line; do not leave it in a buffer.
    if let Err(error) = std::io::stdout().flush() {
        eprintln!("lambda-dedup-fake-provider: cannot write to stdout: {error}");
        return ExitCode::FAILURE;
    }
    match axum::serve(listener, Provider::new().router()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lambda-dedup-fake-provider: server failed: {error}");
            ExitCode::FAILURE
        }
    }
}
