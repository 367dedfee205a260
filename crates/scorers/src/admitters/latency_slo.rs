//! `latency-slo-admitter`: refuses a sheddable request that no endpoint is predicted to serve
//! within its latency objectives, with upstream's rules.
//!
//! A request is let through when any of these holds: its priority is ≥ 0 (not sheddable); it
//! carries no objective (`x-slo-ttft-ms`, `x-slo-tpot-ms`); the `predicted-latency-producer`
//! has no predictions (a cold model: fail open); some candidate is predicted to meet both
//! objectives; some candidate is idle (no running request, as scraped); some candidate is cold
//! (KV-cache use under 2 %: predictions there are unreliable). Otherwise it fails with
//! `ScheduleError::Rejected` (HTTP 429; the adapters answer it like a flow-control shed), so
//! the client can retry or go elsewhere instead of waiting past its objective.
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `latencyPredictionInfoProducerName` | `predicted-latency-producer` | the producer read |

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Admitter, CycleState, PluginInstance};

use crate::latency::{LatencyLink, Objectives};

/// Registry type name.
pub const TYPE_NAME: &str = "latency-slo-admitter";

/// KV-cache use under which an endpoint counts as cold (upstream's 2 %).
pub const COLD_KV_UTILIZATION: f64 = 0.02;

/// The `latency-slo-admitter` parameters (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LatencySloAdmitterParameters {
    /// The producer read.
    pub latency_prediction_info_producer_name: Option<String>,
}

/// The admitter (see the module docs).
#[derive(Debug)]
pub struct LatencySloAdmitter {
    link: Arc<LatencyLink>,
}

impl Admitter for LatencySloAdmitter {
    fn admit(
        &self,
        cycle: &mut CycleState<'_>,
        candidates: &[&Arc<Endpoint>],
    ) -> Result<(), String> {
        if cycle.request.priority >= 0 || !Objectives::of(cycle.request).any() {
            return Ok(());
        }
        let producer = Arc::clone(self.link.get());
        let Some(predictions) = producer.produce(cycle, candidates) else {
            return Ok(());
        };
        let infos = predictions.by_candidate(candidates);
        let servable = candidates.iter().zip(infos).any(|(e, info)| {
            let metrics = e.load_metrics();
            info.is_some_and(|p| p.is_valid())
                || metrics.running == 0
                || metrics.kv_utilization_clamped() < COLD_KV_UTILIZATION
        });
        if servable {
            Ok(())
        } else {
            Err("no endpoint is predicted to meet the request's latency objectives".into())
        }
    }
}

/// Builds a `latency-slo-admitter`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: LatencySloAdmitterParameters = args.parse()?;
    let link = Arc::new(LatencyLink::new(
        args.resources,
        args.pool,
        parameters.latency_prediction_info_producer_name.as_deref(),
    ));
    let admitter = Arc::new(LatencySloAdmitter {
        link: Arc::clone(&link),
    });
    Ok(PluginInstance::admitter(admitter)
        .with_pick_hook(link.clone())
        .with_completion_hook(link))
}
