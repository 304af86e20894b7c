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

/// A service error, by its code (never its message, which may quote values): throttling and
/// the service's own failures are for now, the rest for good.
fn classify(e: &InvokeError) -> StartError {
    let code = e.code().unwrap_or("unknown").to_owned();
    let for_now = matches!(
        e,
        InvokeError::TooManyRequestsException(_)
            | InvokeError::ServiceException(_)
            | InvokeError::ResourceNotReadyException(_)
            | InvokeError::ResourceConflictException(_)
            | InvokeError::Ec2ThrottledException(_)
            | InvokeError::EniLimitReachedException(_)
            | InvokeError::SnapStartNotReadyException(_)
    ) || code.contains("Throttl");
    if for_now {
        StartError::Unavailable { code }
    } else {
        StartError::Refused { code }
    }
}
