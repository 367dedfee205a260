//! `inflight-load-producer`: how many tokens each endpoint has in flight, for the
//! `token-load-scorer` and the `prefix-cache-affinity-filter`'s TTFT gate.
//!
//! Upstream's producer counts, per endpoint, the tokens of the requests it picked there: each
//! request's *uncached* input tokens (its prompt minus the prefix the endpoint holds), released
//! when the response starts; with `addEstimatedOutputTokens`, plus an output estimate
//! (`input × outputRatio`, capped by the request's `max_tokens` and `maxEstimatedOutputTokens`),
//! all released when the response ends. For the request being scheduled it also gives, per
//! candidate, the tokens that request would add there.
//!
//! Shepherd's endpoints keep these counts themselves, at every pick (the scheduler's pending
//! prefill tokens: uncached prompt tokens until the first token comes back, from this replica
//! and its peers, `docs/replicas.md`). So this plugin is the settings: [`InFlightLoad`], kept in
//! the shared resources under the plugin's name, reads the endpoint's counts.
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `addEstimatedOutputTokens` | false | false: pending prefill tokens, exactly upstream's count. true: the in-flight *prompt* tokens (held until the response ends) × (1 + `outputRatio`) — an approximation of upstream's per-request uncached input plus capped output estimate |
//! | `outputRatio` | 1.5 | output tokens estimated per input token (at least 0) |
//! | `maxEstimatedOutputTokens` | none | cap of one request's output estimate (at least 0) |
//! | `prefixMatchInfoProducerName` | — | the prefix producer whose match makes "uncached" (Shepherd: the cached estimates the profile's prefix plugins publish) |
//! | `syncCrossReplicaState` | true | accepted; peers' loads are exchanged by the `replicas` section |
//!
//! ```
//! use shepherd_scorers::producers::inflight_load::{InFlightLoad, InFlightLoadParameters};
//!
//! let load = InFlightLoad::new(&InFlightLoadParameters::default());
//! assert_eq!(load.request_tokens(400, 1000, None), 400); // uncached input only
//! let with_output: InFlightLoadParameters =
//!     serde_json::from_value(serde_json::json!({"addEstimatedOutputTokens": true})).unwrap();
//! // 400 uncached + round(1000 × 1.5) output, capped by max_tokens = 256.
//! assert_eq!(InFlightLoad::new(&with_output).request_tokens(400, 1000, Some(256)), 656);
//! ```

use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::resources::Resources;

/// Registry type name.
pub const TYPE_NAME: &str = "inflight-load-producer";

/// Upstream's output-to-input ratio.
pub const DEFAULT_OUTPUT_RATIO: f64 = 1.5;

/// The `inflight-load-producer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct InFlightLoadParameters {
    /// Count an output estimate too (held until the response ends).
    pub add_estimated_output_tokens: bool,
    /// Output tokens per input token.
    pub output_ratio: Option<f64>,
    /// Cap of one request's output estimate.
    pub max_estimated_output_tokens: Option<i64>,
    /// The prefix producer read (accepted).
    pub prefix_match_info_producer_name: Option<String>,
    /// Upstream's cross-replica switch (accepted).
    pub sync_cross_replica_state: Option<bool>,
}

/// How an endpoint's in-flight tokens are counted (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct InFlightLoad {
    add_output: bool,
    output_ratio: f64,
    max_output: Option<u64>,
}

impl Default for InFlightLoad {
    fn default() -> Self {
        InFlightLoad::new(&InFlightLoadParameters::default())
    }
}

impl InFlightLoad {
    /// The load counted as `parameters` say (unchecked: [`factory`] refuses bad values).
    pub fn new(parameters: &InFlightLoadParameters) -> Self {
        InFlightLoad {
            add_output: parameters.add_estimated_output_tokens,
            output_ratio: parameters
                .output_ratio
                .filter(|r| r.is_finite() && *r >= 0.0)
                .unwrap_or(DEFAULT_OUTPUT_RATIO),
            max_output: parameters
                .max_estimated_output_tokens
                .and_then(|m| u64::try_from(m).ok()),
        }
    }

    /// The tokens `endpoint` has in flight (this replica's and its peers').
    #[inline]
    pub fn tokens(&self, endpoint: &Endpoint) -> u64 {
        if self.add_output {
            let prompt = endpoint.total_in_flight_prompt_tokens() as f64;
            (prompt * (1.0 + self.output_ratio)) as u64
        } else {
            endpoint.total_pending_prefill_tokens()
        }
    }

    /// The tokens a request adds to an endpoint where `uncached` of its `input` tokens are not
    /// cached, with `max_tokens` its output cap.
    #[inline]
    pub fn request_tokens(&self, uncached: u64, input: u64, max_tokens: Option<u32>) -> u64 {
        if !self.add_output || input == 0 {
            return uncached;
        }
        let mut output = (input as f64 * self.output_ratio).round() as u64;
        if let Some(cap) = max_tokens {
            output = output.min(u64::from(cap));
        }
        if let Some(cap) = self.max_output {
            output = output.min(cap);
        }
        uncached.saturating_add(output)
    }
}

/// A consumer's lazily found [`InFlightLoad`]: the one declared under `name` (or, without a
/// name, under the type's name), else upstream's defaults.
#[derive(Debug)]
pub struct InFlightLink {
    resources: Arc<Resources>,
    name: String,
    resolved: OnceLock<Arc<InFlightLoad>>,
}

impl InFlightLink {
    /// A link to the producer named `name` (the type's name when `None` or empty).
    pub fn new(resources: &Arc<Resources>, name: Option<&str>) -> Self {
        InFlightLink {
            resources: Arc::clone(resources),
            name: name
                .filter(|n| !n.is_empty())
                .unwrap_or(TYPE_NAME)
                .to_string(),
            resolved: OnceLock::new(),
        }
    }

    /// The load settings (resolved on the first call, when every plugin exists).
    #[inline]
    pub fn get(&self) -> &InFlightLoad {
        self.resolved.get_or_init(|| {
            self.resources
                .get::<InFlightLoad>(&self.name)
                .unwrap_or_default()
        })
    }
}

/// Builds an `inflight-load-producer`: its [`InFlightLoad`] in the shared resources.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: InFlightLoadParameters = args.parse()?;
    if let Some(ratio) = parameters.output_ratio
        && !(ratio.is_finite() && ratio >= 0.0)
    {
        return Err(PluginError::invalid(
            "outputRatio",
            format!("must be non-negative, got {ratio}"),
        ));
    }
    if let Some(cap) = parameters.max_estimated_output_tokens
        && cap < 0
    {
        return Err(PluginError::invalid(
            "maxEstimatedOutputTokens",
            format!("must be non-negative, got {cap}"),
        ));
    }
    args.resources
        .insert(args.name, Arc::new(InFlightLoad::new(&parameters)));
    Ok(PluginInstance::default())
}
