//! `predicted-latency-producer`: predicts each candidate's TTFT and TPOT for the request and
//! judges them against the request's objectives (`x-slo-ttft-ms`, `x-slo-tpot-ms`), for the
//! `latency-scorer`, the `slo-headroom-tier-filter` and the `latency-slo-admitter`.
//!
//! Upstream's producer talks to a training sidecar and a prediction sidecar (XGBoost); in
//! Shepherd the model is in process: a [`LatencyModel`](crate::latency::LatencyModel) (ridge
//! regression over load features) learned online from the scheduler's own finished requests
//! and swapped in lock-free. The producer is kept in the shared resources under the plugin's
//! name as a [`LatencyProducer`], where consumers find it (`latencyPredictionInfoProducerName`,
//! default `predicted-latency-producer`); a consumer whose producer is not declared gets one
//! with the defaults. See [`crate::latency::producer`] for how predictions are judged and
//! learned.
//!
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `streamingMode` | `false` | `true`: learn TTFT at the first token and TPOT, judge the TPOT objective; `false`: learn the whole request's latency as "TTFT" (upstream's non-streaming mode), TPOT not judged |
//! | `sloBufferFactor` | 1 | multiplier of the TPOT objective (above 0) |
//! | `endpointRoleLabel` | — | label whose value `prefill` marks prefill-only endpoints (TPOT not judged there) |
//! | `predictInProduce` | `true` | `false`: learn only, publish no predictions |
//! | `contextTTL` | `5m` | age after which a request's kept features may be dropped to make room (a Go duration) |
//! | `prefixMatchInfoProducerName` | — | the prefix producer whose match gives the uncached tokens (default: the declared `approx-prefix-cache-producer`, else an all-in-one `prefix-cache-scorer`'s index, else none) |
//! | `samplingMean`, `maxDecodeTokenSamplesForPrediction` | 1000, 0 | accepted and unused: every finished request's TPOT is learned from its usage |
//! | `inFlightLoadProducerName`, `encoderCacheMatchInfoProducerName` | — | accepted and unused (in-flight counts are the endpoints' own) |
//! | `useEncoderCacheFeatures` | `false` | `true` is refused (no multimodal features) |
//! | `window` | 4096 | Shepherd's: finished requests kept for fitting |
//! | `minSamples` | 200 | Shepherd's: samples before predictions are made |
//! | `maxError` | 0.3 | Shepherd's: largest recent MAPE at which predictions are made |
//! | `maxTracked` | 65536 | Shepherd's: most requests in flight whose features are kept |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scheduler_core::config::build_scheduler_in;
//! use shepherd_scorers::builtin_registry;
//! use shepherd_scorers::latency::LatencyProducer;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: predicted-latency-producer
//!   parameters:
//!     streamingMode: true
//!     minSamples: 50
//! - type: slo-headroom-tier-filter
//! - type: latency-scorer
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: slo-headroom-tier-filter
//!   - pluginRef: latency-scorer
//!   - pluginRef: max-score-picker
//! ").unwrap();
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
//! let producer = shared.resources.get::<LatencyProducer>("predicted-latency-producer").unwrap();
//! assert!(producer.settings().streaming_mode);
//! // Cold: no predictions yet, so the consumers fall back and the request is still served.
//! let d = scheduler.schedule(&InferenceRequest::new("r", "m", Prompt::Text("hi".into()))).unwrap();
//! d.finish(Completion::success(None));
//! ```

use std::time::Duration;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::flow::parse_go_duration;
use shepherd_scheduler_core::plugin::PluginInstance;

use crate::error::ParameterError;
use crate::latency::link::default_prefix_link;
use crate::latency::{LatencyModelParameters, LatencyProducer, LatencyProducerSettings};

/// Registry type name.
pub const TYPE_NAME: &str = "predicted-latency-producer";

/// The `predicted-latency-producer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PredictedLatencyParameters {
    /// Accepted, unused.
    pub sampling_mean: f64,
    /// Accepted, unused.
    pub max_decode_token_samples_for_prediction: u64,
    /// Multiplier of the TPOT objective.
    pub slo_buffer_factor: f64,
    /// Age after which kept features may be dropped (a Go duration).
    #[serde(rename = "contextTTL")]
    pub context_ttl: String,
    /// Learn and judge TTFT and TPOT separately.
    pub streaming_mode: bool,
    /// Label marking prefill-only endpoints.
    pub endpoint_role_label: String,
    /// Publish predictions.
    pub predict_in_produce: bool,
    /// The prefix producer read.
    pub prefix_match_info_producer_name: Option<String>,
    /// Accepted, unused.
    pub in_flight_load_producer_name: Option<String>,
    /// Refused when true.
    pub use_encoder_cache_features: bool,
    /// Accepted, unused.
    pub encoder_cache_match_info_producer_name: Option<String>,
    /// Finished requests kept for fitting.
    pub window: usize,
    /// Samples before predictions are made.
    pub min_samples: usize,
    /// Largest recent MAPE at which predictions are made.
    pub max_error: f64,
    /// Most requests in flight whose features are kept.
    pub max_tracked: usize,
}

impl Default for PredictedLatencyParameters {
    fn default() -> Self {
        let model = LatencyModelParameters::default();
        PredictedLatencyParameters {
            sampling_mean: 1000.0,
            max_decode_token_samples_for_prediction: 0,
            slo_buffer_factor: 1.0,
            context_ttl: "5m".into(),
            streaming_mode: false,
            endpoint_role_label: String::new(),
            predict_in_produce: true,
            prefix_match_info_producer_name: None,
            in_flight_load_producer_name: None,
            use_encoder_cache_features: false,
            encoder_cache_match_info_producer_name: None,
            window: model.window,
            min_samples: model.min_samples,
            max_error: model.max_error,
            max_tracked: 1 << 16,
        }
    }
}

impl PredictedLatencyParameters {
    /// The producer's settings, or why the parameters are invalid.
    pub fn settings(&self) -> Result<LatencyProducerSettings, PluginError> {
        if self.use_encoder_cache_features {
            return Err(PluginError::invalid(
                "useEncoderCacheFeatures",
                "Shepherd's latency model has no multimodal encoder-cache features",
            ));
        }
        let context_ttl = parse_go_duration(&self.context_ttl)
            .filter(|d| *d > Duration::ZERO)
            .ok_or_else(|| {
                PluginError::invalid("contextTTL", "must be a positive duration such as `5m`")
            })?;
        let slo_buffer_factor =
            ParameterError::require_range("sloBufferFactor", self.slo_buffer_factor, 1e-9, 1e9)?;
        let model = LatencyModelParameters {
            window: ParameterError::require_positive("window", self.window)?,
            min_samples: ParameterError::require_positive("minSamples", self.min_samples)?,
            max_error: ParameterError::require_range("maxError", self.max_error, 0.0, 1e9)?,
            ..LatencyModelParameters::default()
        };
        Ok(LatencyProducerSettings {
            slo_buffer_factor,
            streaming_mode: self.streaming_mode,
            endpoint_role_label: Some(self.endpoint_role_label.clone()).filter(|l| !l.is_empty()),
            predict_in_produce: self.predict_in_produce,
            max_tracked: ParameterError::require_positive("maxTracked", self.max_tracked)?,
            context_ttl,
            model,
        })
    }
}

/// Builds a `predicted-latency-producer`, kept in the shared resources under the plugin's name;
/// a reload with the same settings keeps what its model learned.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: PredictedLatencyParameters = args.parse()?;
    let settings = parameters.settings()?;
    let producer = args.resources.get_or_replace_with(
        args.name,
        |old: &LatencyProducer| *old.settings() == settings,
        || {
            LatencyProducer::new(
                args.name,
                settings.clone(),
                Some(default_prefix_link(
                    args.resources,
                    args.pool,
                    parameters.prefix_match_info_producer_name.as_deref(),
                )),
            )
        },
    );
    Ok(PluginInstance::default()
        .with_pick_hook(producer.clone())
        .with_completion_hook(producer))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(json: serde_json::Value) -> Result<PredictedLatencyParameters, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    #[test]
    fn upstream_parameters_load_with_upstreams_defaults() {
        let p = parse(serde_json::json!({
            "samplingMean": 500, "maxDecodeTokenSamplesForPrediction": 4,
            "sloBufferFactor": 0.9, "contextTTL": "2m", "streamingMode": true,
            "endpointRoleLabel": "llm-d.ai/role", "predictInProduce": true,
            "prefixMatchInfoProducerName": "p", "inFlightLoadProducerName": "i",
            "encoderCacheMatchInfoProducerName": "e"
        }))
        .unwrap();
        let s = p.settings().unwrap();
        assert!(s.streaming_mode);
        assert_eq!(s.slo_buffer_factor, 0.9);
        assert_eq!(s.context_ttl, Duration::from_secs(120));
        assert_eq!(s.endpoint_role_label.as_deref(), Some("llm-d.ai/role"));
        let d = PredictedLatencyParameters::default().settings().unwrap();
        assert!(!d.streaming_mode && d.predict_in_produce && d.endpoint_role_label.is_none());
        assert_eq!(d.context_ttl, Duration::from_secs(300));
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let refused = |json: serde_json::Value| {
            let p = parse(json).unwrap();
            match p.settings().unwrap_err() {
                PluginError::InvalidValue { parameter, .. } => parameter,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(
            refused(serde_json::json!({"useEncoderCacheFeatures": true})),
            "useEncoderCacheFeatures"
        );
        assert_eq!(
            refused(serde_json::json!({"contextTTL": "soon"})),
            "contextTTL"
        );
        assert_eq!(
            refused(serde_json::json!({"sloBufferFactor": 0})),
            "sloBufferFactor"
        );
        assert_eq!(refused(serde_json::json!({"minSamples": 0})), "minSamples");
        assert!(parse(serde_json::json!({"unknown": 1})).is_err());
    }
}
