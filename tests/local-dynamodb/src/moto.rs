//! One call to a moto emulator over plain HTTP, as the Kinesis and SNS clients here make it:
//! a POST with the credential scope the emulator reads the service and region from (nothing is
//! checked), its answer's text or what failed, naming the service and the action.

/// A moto emulator's endpoint for one service.
#[derive(Debug, Clone)]
pub(crate) struct Emulator {
    http: reqwest::Client,
    endpoint: String,
    service: &'static str,
}

impl Emulator {
    /// `service` (`kinesis`, `sns`: its credential scope) at `endpoint`.
    pub(crate) fn new(endpoint: &str, service: &'static str) -> Self {
        Self {
            http: reqwest::Client::new(),
            endpoint: endpoint.to_owned(),
            service,
        }
    }

    /// `action` with `body` of `content_type`, and `target` as `x-amz-target` where the
    /// protocol names the action there: the answer's text when it succeeded.
    pub(crate) async fn post(
        &self,
        action: &str,
        content_type: &str,
        target: Option<String>,
        body: String,
    ) -> Result<String, String> {
        let credential = format!(
            "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/{}/aws4_request, \
             SignedHeaders=host, Signature=0",
            self.service
        );
        let mut request = (self.http.post(&self.endpoint))
            .header("authorization", credential)
            .header("content-type", content_type);
        if let Some(target) = target {
            request = request.header("x-amz-target", target);
        }
        let resp = request
            .body(body)
            .send()
            .await
            .map_err(|e| self.failed(action, e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.failed(action, e))?;
        if !status.is_success() {
            return Err(self.failed(action, format!("{status} {text}")));
        }
        Ok(text)
    }

    /// What failed in `action`, naming the service.
    pub(crate) fn failed(&self, action: &str, what: impl std::fmt::Display) -> String {
        format!("{} {action}: {what}", self.service)
    }
}
