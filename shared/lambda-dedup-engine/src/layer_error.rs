//! The error of a call's own layers (a `tower` timeout, a rate limit, a load shed), as a
//! [`HandlerError`]: transient ([`Transient::Layer`]), so the message is redelivered and the call
//! made again under the same idempotency key. A layer that knows better answers a
//! [`HandlerError`] itself.

use crate::handler_error::{HandlerError, Transient};

impl From<Box<dyn std::error::Error + Send + Sync>> for HandlerError {
    fn from(e: Box<dyn std::error::Error + Send + Sync>) -> Self {
        HandlerError::Transient(Transient::Layer(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TransientCause;

    /// A layer's error is transient (retried), counted as a layer's, and says so.
    #[test]
    fn a_layers_error_is_transient() {
        let e: Box<dyn std::error::Error + Send + Sync> = "request timed out".into();
        let HandlerError::Transient(t) = HandlerError::from(e) else {
            panic!("not transient");
        };
        assert_eq!(t.cause(), TransientCause::Layer);
        assert!(t.to_string().contains("layer"), "{t}");
    }
}
