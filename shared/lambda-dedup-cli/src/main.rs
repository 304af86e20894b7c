//! `lambda-dedup`: the operators' tool. See the README's "When something went wrong".
//!
//! One module per command (`commands`), the function it works on (`context`: its settings, key
//! spec and flow, from the environment, the template and flags; it links no function's code),
//! the queues (`sqs`), what it prints (`render`) and why it fails (`error`).

mod commands;
mod context;
mod error;
mod render;
mod sqs;

use clap::{Parser, Subcommand};

use crate::commands::{account, explain, forget, redrive};
use crate::context::{Context, FunctionArgs};

/// Explain, redrive, forget and account for a lambda-dedup function's messages and marks.
///
/// The function's configuration is read as the function reads it: its `DEDUP_*` variables from
/// the environment, on top of its entry in the SAM template when `--template` is given (which
/// also declares its key spec and flow). AWS is reached with the SDK's usual credentials and
/// region; `AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_DYNAMODB` and `AWS_ENDPOINT_URL_SQS` point it
/// at a local stack.
#[derive(Debug, Parser)]
#[command(name = "lambda-dedup", version)]
struct Cli {
    #[command(flatten)]
    function: FunctionArgs,
    /// Print JSON for scripts instead of text for people.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Why a message is treated as it is: its key (or why it has none), its mark, the verdict.
    Explain(explain::ExplainArgs),
    /// Classify a dead-letter queue's messages and move back those that would be applied.
    ///
    /// Exit status 0 when every message that should move moved, 1 when one was left (a send
    /// failed; the report's `not_moved` and `left_because` say which) or an accepted conflict
    /// was sent but its mark not forgotten (`not_forgotten`), 2 when it could not run.
    Redrive(redrive::RedriveArgs),
    /// Remove a mark on purpose so its event can be applied again; always audited.
    Forget(forget::ForgetArgs),
    /// The S14 account of the function from its EMF lines and the mark table.
    Account(account::AccountArgs),
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let code = match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lambda-dedup: {e}");
            2
        }
    };
    std::process::exit(code);
}

/// Runs the command; its exit status (0, or 1 for a refusal or an account that does not close),
/// or why it could not do its work (2).
async fn run(cli: Cli) -> Result<i32, error::Error> {
    let ctx = Context::new(&cli.function, cli.json).await?;
    match &cli.command {
        Command::Explain(args) => explain::run(&ctx, args).await,
        Command::Redrive(args) => redrive::run(&ctx, args).await,
        Command::Forget(args) => forget::run(&ctx, args).await,
        Command::Account(args) => account::run(&ctx, args).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::explain::full_key;
    use lambda_dedup_config::{Env, Settings};

    /// A digest alone names the mark within the function's scope; a whole key is kept.
    #[test]
    fn a_digest_alone_is_within_the_functions_scope() {
        let s = Settings::read(
            &Env::from_pairs([("DEDUP_NAMESPACE", "t"), ("DEDUP_MARK_TABLE", "m")]),
            "ledger-projector",
        )
        .expect("settings");
        assert_eq!(full_key("abc", &s).as_str(), "t#ledger-projector#abc");
        assert_eq!(full_key("x#y#abc", &s).as_str(), "x#y#abc");
    }

    /// The command line as clap checks it (conflicts, requirements, value enums).
    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
