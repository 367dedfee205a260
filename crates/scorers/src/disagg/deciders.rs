//! The P/D deciders: whether a request's prefill is worth running on a separate server.
//!
//! - `prefix-based-pd-decider`: disaggregate when the part of the prompt the decode server is
//!   not believed to cache is at least `nonCachedTokens` (0 disables the decider: never), and
//!   the prompt has at least `promptTokens` tokens (0: no such gate). The cached part is the
//!   decode profile's prefix estimate for the decode server (its prefix scorer publishes it),
//!   so a request whose prefix the decode server holds stays aggregated; without any estimate
//!   (no prefix scorer in the decode profile) the request is not disaggregated, as upstream.
//!   Prompt tokens are Shepherd's estimate (token ids when the request has them, else 4 bytes
//!   a token).
//! - `always-disagg-pd-decider`: every request.
//! - `always-disagg-multimodal-decider` (the encode decider): every request that carries
//!   media ([`InferenceRequest::has_media`](shepherd_scheduler_core::request::InferenceRequest::has_media):
//!   a chat completions message with an image, audio, video or file part). Upstream reads
//!   the multimodal features its tokenizer found; Shepherd reads the request's content parts.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::endpoint::EndpointId;
//! use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Decider};
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::disagg::{PrefixBasedDecider, PrefixBasedDeciderParameters};
//!
//! let decider = PrefixBasedDecider::new(PrefixBasedDeciderParameters { non_cached_tokens: 512, prompt_tokens: 0 });
//! let pool = Pool::new();
//! pool.set_members(["10.0.0.1:8000"]);
//! let decode = Arc::clone(&pool.snapshot().endpoints()[0]);
//! let request = InferenceRequest::new("r", "m", Prompt::Tokens(vec![7; 2000]));
//! let mut cycle = CycleState::new(&request, Timestamp::from_millis(0), std::time::Duration::from_secs(1));
//! CachedPrefix::publish(&mut cycle.extensions, [(decode.id(), 1024)]);
//! assert!(decider.disaggregate(&cycle, &decode)); // 976 uncached ≥ 512
//! CachedPrefix::publish(&mut cycle.extensions, [(decode.id(), 1600)]);
//! assert!(!decider.disaggregate(&cycle, &decode)); // 400 uncached < 512
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Decider, PluginInstance};

use crate::params::NoParameters;

/// Registry type name of the prefix-based decider.
pub const PREFIX_BASED_TYPE_NAME: &str = "prefix-based-pd-decider";
/// Registry type name of the always-disaggregate decider.
pub const ALWAYS_TYPE_NAME: &str = "always-disagg-pd-decider";
/// Registry type name of the encode decider for multimodal requests.
pub const MULTIMODAL_TYPE_NAME: &str = "always-disagg-multimodal-decider";

/// The `prefix-based-pd-decider` parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PrefixBasedDeciderParameters {
    /// Uncached tokens at which the prefill runs separately (0: never).
    pub non_cached_tokens: u64,
    /// Shortest prompt disaggregated (0: any).
    pub prompt_tokens: u64,
}

/// Disaggregates a request whose uncached prompt on the decode server is long enough.
#[derive(Debug, Clone, Copy)]
pub struct PrefixBasedDecider {
    params: PrefixBasedDeciderParameters,
}

impl PrefixBasedDecider {
    /// A decider with `params`.
    pub fn new(params: PrefixBasedDeciderParameters) -> Self {
        PrefixBasedDecider { params }
    }
}

impl Decider for PrefixBasedDecider {
    fn disaggregate(&self, cycle: &CycleState<'_>, decode: &Arc<Endpoint>) -> bool {
        let threshold = self.params.non_cached_tokens;
        if threshold == 0 {
            return false;
        }
        let prompt = cycle.request.prompt.estimated_tokens() as u64;
        if prompt < self.params.prompt_tokens || prompt < threshold {
            return false;
        }
        let Some(cached) = cycle.extensions.get::<CachedPrefix>() else {
            return false;
        };
        cached.uncached_tokens(decode.id(), prompt) >= threshold
    }
}

/// Disaggregates every request.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysDisaggDecider;

impl Decider for AlwaysDisaggDecider {
    fn disaggregate(&self, _cycle: &CycleState<'_>, _decode: &Arc<Endpoint>) -> bool {
        true
    }
}

/// Encodes every request that carries media, on separate encode servers.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysDisaggMultimodalDecider;

impl Decider for AlwaysDisaggMultimodalDecider {
    fn disaggregate(&self, cycle: &CycleState<'_>, _decode: &Arc<Endpoint>) -> bool {
        cycle.request.has_media()
    }
}

/// Builds a `prefix-based-pd-decider`.
pub fn prefix_based_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: PrefixBasedDeciderParameters = args.parse()?;
    Ok(PluginInstance::decider(Arc::new(PrefixBasedDecider::new(
        params,
    ))))
}

/// Builds an `always-disagg-pd-decider`.
pub fn always_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let _: NoParameters = args.parse()?;
    Ok(PluginInstance::decider(Arc::new(AlwaysDisaggDecider)))
}

/// Builds an `always-disagg-multimodal-decider`. It has no parameters; like upstream's
/// factory, which never reads them, it ignores any given.
pub fn multimodal_factory(_args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    Ok(PluginInstance::decider(Arc::new(
        AlwaysDisaggMultimodalDecider,
    )))
}
