//! Request policies from the pool's `InferenceObjective` and `InferenceModelRewrite` objects
//! (`llm-d.ai/v1alpha2`, or the older `inference.networking.x-k8s.io/v1alpha2`), applied by
//! both adapters after a request's body is parsed and before flow control and scheduling:
//!
//! - **objectives**: a request names its objective in `x-llm-d-inference-objective` (alias
//!   `x-gateway-inference-objective`); the objective's `spec.priority` becomes the request's
//!   priority (flow control's band, the `priority` metric label). An unknown objective, or
//!   one without a priority, gets the default priority 0, as upstream. Shepherd's direct
//!   `x-shepherd-priority` (where trusted) wins over an objective.
//! - **model rewrites** ([`ModelRewrites`]): the body's `model` is replaced by a weighted
//!   target before scheduling; the forwarded body carries the new name, every other byte as
//!   sent ([`replace_model`]).
//!
//! The tables are swapped whole when the objects change (Kubernetes discovery keeps them,
//! `discovery::kubernetes`); a request reads them without a lock.
//!
//! ```
//! use std::collections::HashMap;
//! use shepherd_runtime::policies::{ModelRewrites, RequestPolicies, RewriteObject, RewriteRule, RewriteTarget};
//! use shepherd_scheduler_core::request::{InferenceRequest, ParseLimits, Prompt};
//!
//! let policies = RequestPolicies::new();
//! policies.set_objectives(HashMap::from([("batch".to_string(), Some(-1))]));
//! assert_eq!(policies.objective_priority(Some("batch")), -1);
//! assert_eq!(policies.objective_priority(Some("unknown")), 0);
//!
//! policies.set_rewrites(ModelRewrites::new(vec![RewriteObject {
//!     name: "rollout".into(),
//!     created: "2026-01-01T00:00:00Z".into(),
//!     rules: vec![RewriteRule {
//!         matches: vec!["llama".into()],
//!         targets: vec![RewriteTarget { model: "llama-v2".into(), weight: None }],
//!     }],
//! }]));
//! let body = br#"{"model":"llama","prompt":"hi"}"#;
//! let mut request = InferenceRequest::new("r", "llama", Prompt::Text("hi".into()));
//! let rewritten = policies.rewrite(&mut request, body, &ParseLimits::default()).unwrap();
//! assert_eq!(request.model, "llama-v2");
//! assert_eq!(rewritten.body.unwrap(), br#"{"model":"llama-v2","prompt":"hi"}"#);
//! assert_eq!((rewritten.rule.as_ref(), rewritten.incoming.as_str()), ("rollout", "llama"));
//! ```

mod model_field;
mod rewrites;

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::request::{InferenceRequest, ParseLimits};

pub use model_field::replace_model;
pub use rewrites::{ModelRewrites, RewriteChoice, RewriteObject, RewriteRule, RewriteTarget};

/// The header naming a request's `InferenceObjective`.
pub const OBJECTIVE_HEADER: &str = "x-llm-d-inference-objective";

/// The deprecated alias of [`OBJECTIVE_HEADER`].
pub const OBJECTIVE_HEADER_LEGACY: &str = "x-gateway-inference-objective";

/// The priority of a request whose objective is unknown or has none (upstream's).
pub const DEFAULT_PRIORITY: i32 = 0;

/// A model rewrite applied to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// The `InferenceModelRewrite` whose rule decided.
    pub rule: Arc<str>,
    /// The model the client asked for.
    pub incoming: String,
    /// The model the request goes to.
    pub target: Arc<str>,
    /// The body to forward, when the model changed (`None`: the target is the incoming model).
    pub body: Option<Vec<u8>>,
}

/// The objectives and rewrites in force. See the [module docs](self).
#[derive(Debug)]
pub struct RequestPolicies {
    objectives: ArcSwap<HashMap<String, Option<i32>>>,
    rewrites: ArcSwap<ModelRewrites>,
    draws: AtomicU64,
    rewritten: AtomicU64,
    unchanged: AtomicU64,
    skipped: AtomicU64,
    objective_found: AtomicU64,
    objective_unknown: AtomicU64,
}

impl Default for RequestPolicies {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestPolicies {
    /// No objectives, no rewrites; target draws seeded at random.
    pub fn new() -> Self {
        Self::with_seed(RandomState::new().hash_one(0x5eed_u64))
    }

    /// As [`Self::new`] with the target draws seeded with `seed` (deterministic tests).
    pub fn with_seed(seed: u64) -> Self {
        RequestPolicies {
            objectives: ArcSwap::from_pointee(HashMap::new()),
            rewrites: ArcSwap::from_pointee(ModelRewrites::default()),
            draws: AtomicU64::new(seed),
            rewritten: AtomicU64::new(0),
            unchanged: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            objective_found: AtomicU64::new(0),
            objective_unknown: AtomicU64::new(0),
        }
    }

    /// Puts `objectives` (name to `spec.priority`) in force.
    pub fn set_objectives(&self, objectives: HashMap<String, Option<i32>>) {
        self.objectives.store(Arc::new(objectives));
    }

    /// Puts `rewrites` in force.
    pub fn set_rewrites(&self, rewrites: ModelRewrites) {
        self.rewrites.store(Arc::new(rewrites));
    }

    /// The objectives in force (name to priority).
    pub fn objectives(&self) -> Arc<HashMap<String, Option<i32>>> {
        self.objectives.load_full()
    }

    /// The rewrites in force.
    pub fn rewrites(&self) -> Arc<ModelRewrites> {
        self.rewrites.load_full()
    }

    /// The priority of a request naming `objective` (none, unknown, or without a priority:
    /// [`DEFAULT_PRIORITY`]).
    pub fn objective_priority(&self, objective: Option<&str>) -> i32 {
        let Some(name) = objective.map(str::trim).filter(|n| !n.is_empty()) else {
            return DEFAULT_PRIORITY;
        };
        match self.objectives.load().get(name) {
            Some(priority) => {
                self.objective_found.fetch_add(1, Ordering::Relaxed);
                priority.unwrap_or(DEFAULT_PRIORITY)
            }
            None => {
                self.objective_unknown.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    objective = name,
                    "no InferenceObjective of that name; default priority"
                );
                DEFAULT_PRIORITY
            }
        }
    }

    /// Rewrites `request`'s model when a rule matches the model its body named: the
    /// request's `model` and `lora` (through `limits`' adapter map) and `body_size` change,
    /// and [`Rewritten::body`] is the body to forward. `None` when no rule matches, or when
    /// the body has no string `model` to replace (the request then goes as it came).
    pub fn rewrite(
        &self,
        request: &mut InferenceRequest,
        body: &[u8],
        limits: &ParseLimits,
    ) -> Option<Rewritten> {
        let rewrites = self.rewrites.load();
        if rewrites.is_empty() {
            return None;
        }
        let incoming = request.target_model().to_string();
        if incoming.is_empty() {
            return None;
        }
        let choice = rewrites.choose(&incoming, self.draw())?;
        if *choice.target == *incoming {
            self.unchanged.fetch_add(1, Ordering::Relaxed);
            return Some(Rewritten {
                rule: choice.rule,
                incoming,
                target: choice.target,
                body: None,
            });
        }
        let Some(new_body) = replace_model(body, &choice.target) else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                model = %incoming,
                rewrite = %choice.rule,
                "model rewrite skipped: the body has no top-level string model"
            );
            return None;
        };
        match limits.lora_base(&choice.target) {
            Some(base) => {
                request.model = base.to_string();
                request.lora = Some(choice.target.to_string());
            }
            None => {
                request.model = choice.target.to_string();
                request.lora = None;
            }
        }
        request.body_size = new_body.len();
        self.rewritten.fetch_add(1, Ordering::Relaxed);
        Some(Rewritten {
            rule: choice.rule,
            incoming,
            target: choice.target,
            body: Some(new_body),
        })
    }

    /// A uniform draw over `u64` (splitmix64 over a shared counter: lock-free, and
    /// reproducible from a seed).
    fn draw(&self) -> u64 {
        let mut z = self
            .draws
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

const OBJECTIVES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_inference_objectives",
    "InferenceObjectives of the pool in force.",
);
const REWRITE_OBJECTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_inference_model_rewrites",
    "InferenceModelRewrites of the pool in force.",
);
const REWRITES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_model_rewrites_total",
    "Requests a model rewrite rule matched, by outcome (rewritten; unchanged: the target was the incoming model; skipped: no string model in the body).",
);
const LOOKUPS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_objective_lookups_total",
    "Requests naming an InferenceObjective, by whether it exists.",
);

impl MetricsSource for RequestPolicies {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        v.gauge(OBJECTIVES, &[], self.objectives.load().len() as f64);
        v.gauge(REWRITE_OBJECTS, &[], self.rewrites.load().objects() as f64);
        for (outcome, count) in [
            ("rewritten", &self.rewritten),
            ("unchanged", &self.unchanged),
            ("skipped", &self.skipped),
        ] {
            v.counter(
                REWRITES,
                &[("outcome", outcome)],
                count.load(Ordering::Relaxed),
            );
        }
        for (found, count) in [
            ("true", &self.objective_found),
            ("false", &self.objective_unknown),
        ] {
            v.counter(LOOKUPS, &[("found", found)], count.load(Ordering::Relaxed));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use shepherd_scheduler_core::request::Prompt;

    fn split(policies: &RequestPolicies) {
        policies.set_rewrites(ModelRewrites::new(vec![RewriteObject {
            name: "split".into(),
            created: "t".into(),
            rules: vec![RewriteRule {
                matches: vec!["m".into()],
                targets: vec![
                    RewriteTarget {
                        model: "m".into(),
                        weight: Some(90),
                    },
                    RewriteTarget {
                        model: "sql-lora".into(),
                        weight: Some(10),
                    },
                ],
            }],
        }]));
    }

    #[test]
    fn a_split_lands_near_its_weights_and_maps_adapters_to_their_base() {
        let policies = RequestPolicies::with_seed(7);
        split(&policies);
        let limits = ParseLimits::default().with_lora_adapter("sql-lora", "base");
        let body = br#"{"model":"m","prompt":"p"}"#;
        let mut to_lora = 0;
        for _ in 0..10_000 {
            let mut request = InferenceRequest::new("r", "m", Prompt::Text("p".into()));
            let rewritten = policies.rewrite(&mut request, body, &limits).unwrap();
            if let Some(body) = rewritten.body {
                to_lora += 1;
                assert_eq!(request.model, "base");
                assert_eq!(request.lora.as_deref(), Some("sql-lora"));
                assert_eq!(request.body_size, body.len());
            } else {
                assert_eq!(request.model, "m");
            }
        }
        assert!((900..1_100).contains(&to_lora), "{to_lora}");
    }

    #[test]
    fn a_body_without_a_string_model_goes_unchanged() {
        let policies = RequestPolicies::with_seed(1);
        policies.set_rewrites(ModelRewrites::new(vec![RewriteObject {
            name: "all".into(),
            created: "t".into(),
            rules: vec![RewriteRule {
                matches: vec![],
                targets: vec![RewriteTarget {
                    model: "x".into(),
                    weight: None,
                }],
            }],
        }]));
        let mut request = InferenceRequest::new("r", "m", Prompt::Text("p".into()));
        assert!(
            policies
                .rewrite(&mut request, b"not json", &ParseLimits::default())
                .is_none()
        );
        assert_eq!(request.model, "m");
    }

    #[test]
    fn objectives_give_their_priority_or_the_default() {
        let policies = RequestPolicies::new();
        policies.set_objectives(HashMap::from([
            ("critical".to_string(), Some(10)),
            ("plain".to_string(), None),
        ]));
        assert_eq!(policies.objective_priority(Some("critical")), 10);
        assert_eq!(policies.objective_priority(Some("plain")), 0);
        assert_eq!(policies.objective_priority(Some(" ")), 0);
        assert_eq!(policies.objective_priority(None), 0);
    }
}
