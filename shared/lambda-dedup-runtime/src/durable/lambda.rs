//! The dispatcher's real start: Lambda's `Invoke` of the durable function with the execution's
//! name.

use aws_sdk_lambda::error::ProvideErrorMetadata;
use aws_sdk_lambda::operation::invoke::InvokeError;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;

use crate::durable::dispatch::{StartError, StartFuture, Started, Starter};

/// Starts executions of the durable function `function` (its name or ARN, with its version or
/// alias: durable functions are invoked qualified) with Lambda's `Invoke`, asynchronously (an
/// execution may outlive 15 minutes), under the execution's name.
#[derive(Debug, Clone)]
pub struct LambdaStarter {
    client: aws_sdk_lambda::Client,
    function: String,
}

impl LambdaStarter {
    /// A starter through `client` (built on [`sdk_config`](crate::sdk_config)).
    pub fn new(client: aws_sdk_lambda::Client, function: impl Into<String>) -> Self {
        Self {
            client,
            function: function.into(),
        }
    }
}

impl Starter for LambdaStarter {
    fn start<'a>(&'a self, name: &'a str, payload: &'a [u8]) -> StartFuture<'a> {
        Box::pin(async move {
            let sent = self
                .client
                .invoke()
                .function_name(&self.function)
                .invocation_type(InvocationType::Event)
                .durable_execution_name(name)
                .payload(Blob::new(payload))
                .send()
                .await;
            match sent {
                Ok(out) => Ok(Started::New {
                    execution_arn: out.durable_execution_arn().map(str::to_owned),
                }),
                Err(e) => match e.as_service_error() {
                    Some(InvokeError::DurableExecutionAlreadyStartedException(_)) => {
                        Ok(Started::NameTaken)
                    }
                    Some(service) => Err(classify(service)),
                    None => Err(StartError::Unavailable {
                        code: "no answer".into(),
                    }),
                },
            }
        })
    }
}

/// A service error, by its code (never its message, which may quote values): only what the
/// event itself causes is for good — its payload too large or not what the function takes. The
/// rest is retried under the same name: throttling and the service's failures, and the
/// deployment's own faults (the function or alias missing, access denied, a KMS key), which are
/// no message's doing and must not dead-letter every event while they last.
fn classify(e: &InvokeError) -> StartError {
    let code = e.code().unwrap_or("unknown").to_owned();
    let the_events = matches!(
        e,
        InvokeError::RequestTooLargeException(_) | InvokeError::InvalidRequestContentException(_)
    );
    if the_events {
        StartError::Refused { code }
    } else {
        StartError::Unavailable { code }
    }
}
