//! `multicluster-queue-scorer` and `multicluster-kv-cache-utilization-scorer`: a cluster's
//! score from its pool-aggregate attributes (see the [module docs](super)).
//!
//! - queue: `(max − q) / (max − min)` over the candidates that have the attribute, 1 when
//!   they all have the same queue;
//! - KV cache: `1 − utilization` (clamped to `[0, 1]`).
//!
//! A candidate without the attribute scores 0. Both are [`Distribution`](shepherd_scheduler_core::plugin::Category::Distribution)
//! scorers and take no parameters, as their stock counterparts.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::endpoint::EndpointAttributes;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::multicluster::{KV_CACHE_UTILIZATION_KEY, scorers::kv_cache_scorer};
//!
//! let pool = Pool::with_clock(Arc::new(ManualClock::default()));
//! pool.set_members(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]);
//! let eps = pool.snapshot().endpoints().to_vec();
//! let table = Arc::new(EndpointAttributes::default());
//! table.set(eps[0].id(), &[(KV_CACHE_UTILIZATION_KEY.to_string(), 0.25)]);
//! table.set(eps[1].id(), &[(KV_CACHE_UTILIZATION_KEY.to_string(), 0.9)]);
//! let scorer = kv_cache_scorer(table).unwrap();
//! let candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
//! let request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
//! let mut out = [Score::NEUTRAL; 3];
//! scorer.score(&mut cycle, &candidates, &mut out);
//! assert_eq!(out[0].value, 0.75);
//! assert!((out[1].value - 0.1).abs() < 1e-9);
//! assert_eq!(out[2].value, 0.0); // never scraped
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::EndpointAttributes;
use shepherd_scheduler_core::plugin::PluginInstance;

use super::{KV_CACHE_UTILIZATION_KEY, QUEUE_SIZE_KEY};
use crate::params::NoParameters;
use crate::scorers::endpoint_attribute::{EndpointAttributeScorer, Normalization, column_of};

/// Registry type name of the queue scorer.
pub const QUEUE_TYPE_NAME: &str = "multicluster-queue-scorer";

/// Registry type name of the KV-cache scorer.
pub const KV_CACHE_TYPE_NAME: &str = "multicluster-kv-cache-utilization-scorer";

/// The queue scorer over `table`: the pool queue size, lower is better, over the candidates'
/// own range.
///
/// # Errors
///
/// The table already holds its most keys.
pub fn queue_scorer(
    table: Arc<EndpointAttributes>,
) -> Result<EndpointAttributeScorer, PluginError> {
    let column = column_of(&table, "attribute", QUEUE_SIZE_KEY)?;
    Ok(EndpointAttributeScorer::new(
        table,
        column,
        true,
        Normalization::Adaptive,
    ))
}

/// The KV-cache scorer over `table`: `1 − utilization`.
///
/// # Errors
///
/// The table already holds its most keys.
pub fn kv_cache_scorer(
    table: Arc<EndpointAttributes>,
) -> Result<EndpointAttributeScorer, PluginError> {
    let column = column_of(&table, "attribute", KV_CACHE_UTILIZATION_KEY)?;
    Ok(EndpointAttributeScorer::new(
        table,
        column,
        true,
        Normalization::Fixed(0.0, 1.0),
    ))
}

/// Builds a `multicluster-queue-scorer` (no parameters).
pub fn queue_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    let scorer = queue_scorer(EndpointAttributes::of(args.resources))?;
    Ok(PluginInstance::scorer(Arc::new(scorer)))
}

/// Builds a `multicluster-kv-cache-utilization-scorer` (no parameters).
pub fn kv_cache_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    let scorer = kv_cache_scorer(EndpointAttributes::of(args.resources))?;
    Ok(PluginInstance::scorer(Arc::new(scorer)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::Duration;

    use super::*;
    use shepherd_scheduler_core::endpoint::Endpoint;
    use shepherd_scheduler_core::prelude::*;

    /// Scores of `scorer` over endpoints whose attribute `key` is `values` (`None`: absent).
    fn scores(
        build: fn(Arc<EndpointAttributes>) -> Result<EndpointAttributeScorer, PluginError>,
        key: &str,
        values: &[Option<f64>],
    ) -> Vec<f64> {
        let pool = Pool::with_clock(Arc::new(ManualClock::default()));
        pool.set_members((0..values.len()).map(|i| format!("127.0.0.1:{}", 9000 + i)));
        let eps = pool.snapshot().endpoints().to_vec();
        let table = Arc::new(EndpointAttributes::default());
        for (ep, v) in eps.iter().zip(values) {
            if let Some(v) = v {
                table.set(ep.id(), &[(key.to_string(), *v)]);
            }
        }
        let scorer = build(table).unwrap();
        let candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
        let request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
        let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
        let mut out = vec![Score::NEUTRAL; values.len()];
        scorer.score(&mut cycle, &candidates, &mut out);
        out.iter().map(|s| s.value).collect()
    }

    // queuedepth/multicluster_test.go: min-max normalized, shortest 1, longest 0.
    #[test]
    fn queue_is_min_max_normalized_over_the_clusters() {
        assert_eq!(
            scores(
                queue_scorer,
                QUEUE_SIZE_KEY,
                &[Some(0.0), Some(5.0), Some(10.0)]
            ),
            [1.0, 0.5, 0.0]
        );
    }

    // "equal queues score a neutral 1".
    #[test]
    fn equal_queues_all_score_one() {
        assert_eq!(
            scores(queue_scorer, QUEUE_SIZE_KEY, &[Some(3.0), Some(3.0)]),
            [1.0, 1.0]
        );
    }

    // "Endpoints without the attribute are unscored", and do not widen the range.
    #[test]
    fn a_cluster_without_the_attribute_scores_zero_and_is_left_out_of_the_range() {
        assert_eq!(
            scores(queue_scorer, QUEUE_SIZE_KEY, &[Some(2.0), None, Some(6.0)]),
            [1.0, 0.0, 0.0]
        );
        assert_eq!(
            scores(queue_scorer, QUEUE_SIZE_KEY, &[None, None]),
            [0.0, 0.0]
        );
    }

    // kvcacheutilization/multicluster_test.go: 1 - utilization.
    #[test]
    fn kv_cache_is_one_minus_the_pool_utilization() {
        let out = scores(
            kv_cache_scorer,
            KV_CACHE_UTILIZATION_KEY,
            &[Some(0.2), Some(0.8), None, Some(1.5)],
        );
        assert!((out[0] - 0.8).abs() < 1e-9, "{out:?}");
        assert!((out[1] - 0.2).abs() < 1e-9, "{out:?}");
        assert_eq!(out[2], 0.0);
        assert_eq!(out[3], 0.0, "clamped");
    }

    #[test]
    fn the_scorers_take_no_parameters() {
        let pool = Arc::new(Pool::new());
        let shared = shepherd_scheduler_core::shared::SharedState::new(Arc::clone(&pool));
        for (name, factory) in [
            (QUEUE_TYPE_NAME, queue_factory as fn(&PluginArgs<'_>) -> _),
            (KV_CACHE_TYPE_NAME, kv_cache_factory),
        ] {
            let ok = serde_json::Value::Null;
            assert!(factory(&PluginArgs::new(name, name, &ok, &shared, 1)).is_ok());
            let bad = serde_json::json!({"threshold": 3});
            assert!(factory(&PluginArgs::new(name, name, &bad, &shared, 1)).is_err());
        }
    }
}
