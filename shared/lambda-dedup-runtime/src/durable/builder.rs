//! The builder's way to the step guard: [`Dedup::durable_steps`].

use lambda_dedup_config::DurableConfig;

use crate::durable::steps::Steps;
use crate::service::{BuildError, Dedup};
use crate::store::Marks;

impl<S: Marks> Dedup<S> {
    /// The step guard of a durable function ([`Steps`]): marks in the function's mark table
    /// (any store: DynamoDB writes, SQL statements or Valkey commands commit with them), keyed
    /// under the settings' scope by the execution and the step's name. Refused when the marks'
    /// retention does not exceed `DURABLE_EXECUTION_TIMEOUT_SECONDS` (a step's mark must outlive
    /// every replay of the step, S9), or another durable setting is refused
    /// ([`DurableConfig`]).
    pub fn durable_steps(self) -> Result<Steps<S::Effect>, BuildError> {
        DurableConfig::read(&self.env, &self.settings)?;
        let store = self.store.mark_store()?;
        Ok(Steps::new(store, self.settings.scope.clone()))
    }
}
