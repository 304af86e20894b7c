//! The builder's relay service (feature `dynamodb-streams`): the recorded-intent and inbox
//! pattern (S7, [`crate::relay`]) — a table whose items carry their own settle status, one
//! action per new item on its stream, in shard order, each item then settled (or parked) on the
//! item itself, and a scheduled sweep — built from the function's settings like every other
//! service.
//!
//! ```no_run
//! # use lambda_dedup_runtime::relay::{Act, Layout};
//! # use lambda_dedup_config::RelayVars;
//! # async fn run<A: Act>(vars: RelayVars, layout: Layout, act: A) -> Result<(), lambda_runtime::Error> {
//! use lambda_dedup_runtime::{Dedup, relay::RelayService};
//! let dedup = Dedup::from_env("intent-relay")?.dynamodb().await;
//! lambda_runtime::run_concurrent(RelayService::new(dedup, &vars, layout, act)?).await
//! # }
//! ```

use crate::relay::{Act, Layout, Relay, RelayService};
use crate::service::{BuildError, Dedup};
use crate::store::Items;
use lambda_dedup_config::{RelayConfig, RelayVars, SettingsError};

impl<A: Act> RelayService<A> {
    /// The relay service, on the builder `dedup`, of a table whose items carry their own
    /// settle status: for each new
    /// item on the table's stream, in shard order, `act`'s action — one call per stream record —
    /// and then the item settled with what it returned, in one conditional update (or parked on
    /// the item, when it can never succeed); the item is its own mark, so no mark table is read.
    /// `vars` names the relay's table and the prefix of its own variables, read from the
    /// builder's own environment ([`RelayConfig`]): a record is started only with its record
    /// budget left before the invocation's deadline, and one still not done the function's
    /// `DEDUP_DEADLINE_MARGIN_MS` before it is abandoned and retried. A record budget not longer
    /// than the action's own time limit ([`Act::time_limit`]) refuses the start. Any event
    /// without `Records` (the schedule's) runs the sweep. The items are the store's tables
    /// ([`Items`]: on DynamoDB, `DynamoItems` on the same client). Give it to
    /// `lambda_runtime::run_concurrent`.
    ///
    /// Only on a store with item tables ([`Items`]), not on a store of marks only:
    ///
    /// ```compile_fail
    /// use lambda_dedup_runtime::relay::{Act, Layout, RelayService};
    /// use lambda_dedup_runtime::{Dedup, Effect, store::Store};
    /// fn f<A: Act>(dedup: Dedup<Store<Effect>>, vars: &lambda_dedup_config::RelayVars, layout: Layout, act: A) {
    ///     let _ = RelayService::new(dedup, vars, layout, act);
    /// }
    /// ```
    pub fn new(
        dedup: Dedup<Items>,
        vars: &RelayVars,
        layout: Layout,
        act: A,
    ) -> Result<Self, BuildError> {
        let config = RelayConfig::read(&dedup.env, vars)?;
        Self::with_config(dedup, vars, config, layout, act)
    }

    /// [`new`](Self::new) with its settings already read from the builder's environment
    /// (the inbox's forwarder reads its queue with them).
    pub(crate) fn with_config(
        dedup: Dedup<Items>,
        vars: &RelayVars,
        config: RelayConfig,
        layout: Layout,
        act: A,
    ) -> Result<Self, BuildError> {
        if let Some((limit_var, limit)) = act.time_limit()
            && config.record_budget <= limit
        {
            use lambda_dedup_config::millis;
            return Err(SettingsError::refused(
                vars.budget_var(),
                lambda_dedup_config::SettingRule::NotLongerThan {
                    value: millis(config.record_budget),
                    other: limit_var,
                    other_value: millis(limit),
                    why: "a record needs its action and the writes around it",
                },
            )
            .into());
        }
        let relay = Relay {
            function: dedup.function,
            table: config.table,
            layout,
            act,
            per_record: config.record_budget,
            margin: dedup.settings.deadline_margin.get(),
            redrive_after: config.redrive_after,
        };
        Ok(relay.service(dedup.store.items()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, SystemTime};

    use aws_lambda_events::event::dynamodb::EventRecord;
    use lambda_dedup::Item;
    use lambda_runtime::tower::ServiceExt;

    use super::*;
    use crate::relay::tests::ANSWERED;
    use crate::relay::{Attribute, Attributes, Failure, Read};
    use crate::testing::on_memory;
    use lambda_dedup_config::Env;

    const VARS: RelayVars = lambda_dedup_config::relay_vars!("JOBS_TABLE", "JOBS", 3_000);

    /// The relay tests' layout, keyed by `id`.
    const LAYOUT: Layout = Layout {
        attributes: Attributes {
            key: Attribute::new("id"),
            ..ANSWERED.attributes
        },
        ..ANSWERED
    };

    /// Acts on every inserted item: counts its calls, takes `slow` each, and declares `limit`
    /// as its own time limit.
    #[derive(Debug, Clone, Default)]
    struct Counted {
        calls: Arc<AtomicUsize>,
        slow: Duration,
        limit: Option<Duration>,
    }

    impl Act for Counted {
        type Item = ();

        fn read(&self, record: &EventRecord) -> Read<()> {
            match crate::in_order::image_part::<Key>(&record.change.new_image) {
                Some(Key { id }) => Read::Act { key: id, item: () },
                None => Read::NoImage,
            }
        }

        async fn act(&self, _: &str, _: &()) -> Result<Item, Failure> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.slow).await;
            Ok(Item::new())
        }

        fn time_limit(&self) -> Option<(&'static str, Duration)> {
            self.limit.map(|l| ("JOBS_CALL_TIMEOUT_MS", l))
        }
    }

    #[derive(serde::Deserialize)]
    struct Key {
        id: String,
    }

    fn env() -> Env {
        Env::from_pairs([("DEDUP_NAMESPACE", "test"), ("JOBS_TABLE", "jobs")])
    }

    /// The relay the builder makes of `env`, on the memory store of its own settings, with a
    /// pending job `j1` in its table.
    fn relay(env: &Env, act: Counted) -> Result<RelayService<Counted>, BuildError> {
        let (dedup, store) = on_memory(Dedup::read(env, "jobs-relay")?);
        store.create_table("jobs", "id");
        let job = Item::new().with("id", "j1").with("status", "PENDING");
        store.put_item("jobs", job).expect("seed");
        RelayService::new(dedup, &VARS, LAYOUT, act)
    }

    fn stream() -> serde_json::Value {
        serde_json::json!({"Records": [crate::testing::events::insert_record(
            1,
            serde_json::json!({"id": {"S": "j1"}}),
            serde_json::json!({"id": {"S": "j1"}, "status": {"S": "PENDING"}}),
        )]})
    }

    /// The stream event `stream()` as Lambda hands it over, its deadline `left` from now.
    async fn invoke(service: &RelayService<Counted>, left: Duration) -> serde_json::Value {
        let mut context = lambda_runtime::Context::default();
        context.deadline = lambda_dedup::clock::epoch_millis(SystemTime::now() + left);
        service
            .clone()
            .oneshot(lambda_runtime::LambdaEvent::new(stream(), context))
            .await
            .expect("answer")
    }

    /// The builder's relay keeps the settings of its own `Env`: the record budget under the
    /// relay's name, and the function's one deadline margin, `DEDUP_DEADLINE_MARGIN_MS`.
    #[test]
    fn the_builders_relay_reads_its_budget_and_the_one_deadline_margin() {
        let defaults = relay(&env(), Counted::default()).expect("relay");
        assert_eq!(defaults.per_record(), Duration::from_millis(3_000));
        assert_eq!(
            defaults.deadline_margin(),
            lambda_dedup_config::DeadlineMargin::DEFAULT.get()
        );
        assert_eq!(defaults.redrive_after(), Duration::from_secs(3_600));
        let env = env()
            .with("JOBS_RECORD_BUDGET_MS", "1200")
            .with("JOBS_REDRIVE_AFTER_SECONDS", "60")
            .with("DEDUP_DEADLINE_MARGIN_MS", "250");
        let set = relay(&env, Counted::default()).expect("relay");
        assert_eq!(set.per_record(), Duration::from_millis(1_200));
        assert_eq!(set.redrive_after(), Duration::from_secs(60));
        assert_eq!(set.deadline_margin(), Duration::from_millis(250));
    }

    /// A record is started only with the record budget left: with 2 s to the deadline, a
    /// budget of 3 s leaves the record to the next invocation, uncalled; a budget of 1 s calls.
    #[tokio::test]
    async fn a_record_is_started_only_with_the_budget_left() {
        for (budget, called) in [("3000", 0), ("1000", 1)] {
            let act = Counted::default();
            let env = env().with("JOBS_RECORD_BUDGET_MS", budget);
            let service = relay(&env, act.clone()).expect("relay");
            let answer = invoke(&service, Duration::from_secs(2)).await;
            assert_eq!(act.calls.load(Ordering::SeqCst), called, "budget {budget}");
            let failures = answer["batchItemFailures"].as_array().map(Vec::len);
            assert_eq!(failures, Some(1 - called), "budget {budget}: {answer}");
        }
    }

    /// `DEDUP_DEADLINE_MARGIN_MS` bounds a record in flight: an action of 3.7 s, started with
    /// 4.2 s left (a budget of 4 s), is abandoned 900 ms before the deadline under a margin of
    /// 900 ms, the record retried, and runs to its end under a margin of 100 ms.
    #[tokio::test]
    async fn a_record_in_flight_is_abandoned_the_deadline_margin_before_the_deadline() {
        for (margin, retried) in [("900", 1), ("100", 0)] {
            let act = Counted {
                slow: Duration::from_millis(3_700),
                ..Counted::default()
            };
            let env = crate::testing::with_margin(env(), Some(margin))
                .with("JOBS_RECORD_BUDGET_MS", "4000");
            let service = relay(&env, act.clone()).expect("relay");
            let started = std::time::Instant::now();
            let answer = invoke(&service, Duration::from_millis(4_200)).await;
            let failures = answer["batchItemFailures"].as_array().map(Vec::len);
            assert_eq!(failures, Some(retried), "margin {margin}: {answer}");
            assert_eq!(act.calls.load(Ordering::SeqCst), 1, "margin {margin}");
            assert!(started.elapsed() < Duration::from_millis(4_200));
        }
    }

    /// A budget that cannot finish one action refuses the start, naming both variables; the
    /// retired margin's name refuses it too, naming the budget's.
    #[test]
    fn a_budget_within_the_actions_own_limit_and_the_retired_margin_are_refused() {
        let limited = Counted {
            limit: Some(Duration::from_millis(3_000)),
            ..Counted::default()
        };
        let Err(BuildError::Settings(e @ SettingsError::Refused { .. })) = relay(&env(), limited)
        else {
            panic!("a 3 s budget for a 3 s action was accepted");
        };
        let why = e.to_string();
        assert!(
            why.contains("JOBS_RECORD_BUDGET_MS") && why.contains("JOBS_CALL_TIMEOUT_MS"),
            "{why}"
        );
        let env = env().with("JOBS_DEADLINE_MARGIN_MS", "2000");
        let Err(BuildError::Settings(e @ SettingsError::Refused { .. })) =
            relay(&env, Counted::default())
        else {
            panic!("the retired margin was accepted");
        };
        let why = e.to_string();
        assert!(why.contains("JOBS_RECORD_BUDGET_MS"), "{why}");
    }
}
