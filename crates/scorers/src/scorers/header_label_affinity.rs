//! `header-label-affinity-scorer` (upstream's name): a soft preference for the endpoints whose
//! label `labelKey` equals the request's header `headerName` (1), every other endpoint 0 and
//! still eligible. A request without the header (or with an empty one) scores 0 everywhere.
//! One instance per header-to-label mapping, each with its own weight. An
//! [`Category::Affinity`] scorer, as upstream.
//!
//! The adapters hand the header to the scorer: every `headerName` a config's plugins read is
//! copied from the client's request, as the latency objectives are.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::scorers::header_label_affinity::HeaderLabelAffinityScorer;
//!
//! let pool = Pool::new();
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let eps = pool.snapshot().endpoints().to_vec();
//! for (ep, zone) in eps.iter().zip(["us-east-1a", "us-east-1b"]) {
//!     let key = "topology.kubernetes.io/zone".to_string();
//!     ep.set_labels([(key, zone.to_string())].into_iter().collect());
//! }
//! let scorer = HeaderLabelAffinityScorer::new("X-Preferred-Zone", "topology.kubernetes.io/zone");
//! let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! request.headers.push(("x-preferred-zone".into(), "us-east-1b".into()));
//! let candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
//! let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
//! let mut out = [Score::NEUTRAL; 2];
//! scorer.score(&mut cycle, &candidates, &mut out);
//! assert_eq!([out[0].value, out[1].value], [0.0, 1.0]);
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};
use shepherd_scheduler_core::request::{ConfiguredHeaders, MAX_CONFIGURED_HEADERS};

/// Registry type name.
pub const TYPE_NAME: &str = "header-label-affinity-scorer";

/// The `header-label-affinity-scorer` parameters (both required).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct HeaderLabelAffinityParameters {
    /// The request header holding the preferred label value.
    pub header_name: String,
    /// The endpoint label compared with it.
    pub label_key: String,
}

/// The scorer (see the module docs).
#[derive(Debug)]
pub struct HeaderLabelAffinityScorer {
    header_name: String,
    label_key: String,
}

impl HeaderLabelAffinityScorer {
    /// A scorer preferring endpoints whose `label_key` equals header `header_name`.
    pub fn new(header_name: &str, label_key: &str) -> Self {
        HeaderLabelAffinityScorer {
            header_name: header_name.to_ascii_lowercase(),
            label_key: label_key.to_string(),
        }
    }

    /// The header read (lower-case).
    pub fn header_name(&self) -> &str {
        &self.header_name
    }
}

impl Scorer for HeaderLabelAffinityScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let wanted = cycle.request.header(&self.header_name).unwrap_or("");
        for (endpoint, slot) in candidates.iter().zip(out.iter_mut()) {
            let matched = !wanted.is_empty()
                && endpoint
                    .labels()
                    .get(&self.label_key)
                    .is_some_and(|v| v == wanted);
            *slot = Score::new(if matched { 1.0 } else { 0.0 });
        }
    }
}

/// Builds a `header-label-affinity-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    if args.parameters.is_null() {
        return Err(PluginError::Other(
            "header-label-affinity-scorer requires parameters".into(),
        ));
    }
    let p: HeaderLabelAffinityParameters = args.parse()?;
    if p.header_name.is_empty() {
        return Err(PluginError::invalid("headerName", "is required"));
    }
    if p.label_key.is_empty() {
        return Err(PluginError::invalid("labelKey", "is required"));
    }
    if !ConfiguredHeaders::of(args.resources).add(&p.header_name) {
        return Err(PluginError::Other(format!(
            "header `{}`: the config's plugins read more than {MAX_CONFIGURED_HEADERS} request headers",
            p.header_name
        )));
    }
    let scorer = HeaderLabelAffinityScorer::new(&p.header_name, &p.label_key);
    Ok(PluginInstance::scorer(Arc::new(scorer)))
}
