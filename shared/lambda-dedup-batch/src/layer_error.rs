//! The error of a call's own layers (a `tower` timeout, a rate limit, a load shed), as a
//! [`HandlerError`]: transient, so the message is redelivered and the call made again under the
//! same idempotency key. A layer that knows better answers a [`HandlerError`] itself.

use crate::flows::HandlerError;

impl From<Box<dyn std::error::Error + Send + Sync>> for HandlerError {
    fn from(e: Box<dyn std::error::Error + Send + Sync>) -> Self {
        HandlerError::Transient(format!("a layer of the call failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layer's error is transient (retried), and says it came from a layer.
    #[test]
    fn a_layers_error_is_transient() {
        let e: Box<dyn std::error::Error + Send + Sync> = "request timed out".into();
        let HandlerError::Transient(reason) = HandlerError::from(e) else {
            panic!("not transient");
        };
        assert!(reason.contains("layer"), "{reason}");
    }
}
