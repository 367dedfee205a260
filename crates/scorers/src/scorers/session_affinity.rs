//! `session-affinity-scorer`: sends every request of a session to the endpoint that served the
//! session before, so a multi-turn conversation keeps hitting the server that caches it.
//!
//! The session key is [`InferenceRequest::session_key`](shepherd_scheduler_core::request::InferenceRequest::session_key).
//! After each pick, the scorer's pick hook remembers session → endpoint; while that endpoint is
//! a candidate it scores 1 and every other candidate 0. A request without a session key, or
//! with a session not (or no longer) remembered, scores 0 everywhere: no preference.
//!
//! Memory is bounded: at most `capacity` sessions (least recently used evicted first), each
//! forgotten `ttlSeconds` after its last pick, and all sessions of an endpoint that leaves the
//! pool are forgotten at once. Sessions are stored by a 64-bit hash of their key, so a long key
//! costs no more than a short one.
//!
//! ```yaml
//! plugins:
//! - type: session-affinity-scorer
//!   parameters:
//!     capacity: 100000
//!     ttlSeconds: 600
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId, MembershipListener};
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::plugin::{
    Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};

use super::session_store::SessionStore;
use crate::error::ParameterError;

/// Registry type name.
pub const TYPE_NAME: &str = "session-affinity-scorer";

/// Parameters of `session-affinity-scorer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SessionAffinityParameters {
    /// Most sessions remembered (default 100,000).
    pub capacity: usize,
    /// Seconds after its last pick that a session is forgotten (default 600).
    pub ttl_seconds: u64,
}

impl Default for SessionAffinityParameters {
    fn default() -> Self {
        SessionAffinityParameters {
            capacity: 100_000,
            ttl_seconds: 600,
        }
    }
}

/// Scores 1 for the endpoint that served the request's session before (a
/// [`Category::Affinity`] scorer). Also a [`PickHook`] (it learns from every pick) and a
/// [`MembershipListener`] (it forgets endpoints that leave).
#[derive(Debug)]
pub struct SessionAffinityScorer {
    store: SessionStore,
    hasher: ahash::RandomState,
    parameters: SessionAffinityParameters,
    seed: u64,
}

impl SessionAffinityScorer {
    /// A scorer with `parameters`; `seed` keys the session-key hash.
    pub fn new(parameters: SessionAffinityParameters, seed: u64) -> Result<Self, ParameterError> {
        let capacity = ParameterError::require_positive("capacity", parameters.capacity)?;
        let ttl = ParameterError::require_positive("ttlSeconds", parameters.ttl_seconds)?;
        Ok(SessionAffinityScorer {
            store: SessionStore::new(capacity, Duration::from_secs(ttl)),
            hasher: ahash::RandomState::with_seeds(seed, 0x5E55_1011, 0xAFF1_17E5, 0x5EED),
            parameters,
            seed,
        })
    }

    /// Sessions currently remembered.
    pub fn sessions(&self) -> usize {
        self.store.len()
    }

    /// The endpoint remembered for `session_key` at `now`, if any.
    pub fn endpoint_for(&self, session_key: &str, now: Timestamp) -> Option<EndpointId> {
        self.store.get(self.hasher.hash_one(session_key), now)
    }
}

impl Scorer for SessionAffinityScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let remembered = cycle
            .request
            .session_key
            .as_deref()
            .and_then(|key| self.endpoint_for(key, cycle.now));
        for (slot, ep) in out.iter_mut().zip(candidates) {
            let sticky = remembered == Some(ep.id());
            *slot = Score::new(if sticky { 1.0 } else { 0.0 });
        }
    }
}

impl PickHook for SessionAffinityScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        if let Some(key) = cycle.request.session_key.as_deref() {
            self.store
                .record(self.hasher.hash_one(key), picked.id(), cycle.now);
        }
    }
}

impl MembershipListener for SessionAffinityScorer {
    fn on_removed(&self, removed: &[EndpointId]) {
        self.store.forget_endpoints(removed);
    }
}

const SESSIONS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_session_affinity_sessions",
    "Sessions remembered by a session-affinity scorer.",
);

impl MetricsSource for SessionAffinityScorer {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        v.gauge(SESSIONS, &[], self.sessions() as f64);
    }
}

/// Builds a `session-affinity-scorer`: its scorer, pick hook, membership listener and metrics
/// facets share one session store.
///
/// The scorer is kept in the shared [`Resources`](shepherd_scheduler_core::resources::Resources)
/// under the plugin's name, so an embedder reaches it there
/// (`resources.get::<SessionAffinityScorer>(name)`), and a reload with the same parameters
/// keeps the remembered sessions.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters = args.parse::<SessionAffinityParameters>()?;
    let fresh = SessionAffinityScorer::new(parameters, args.seed)?;
    let scorer = args.resources.get_or_replace_with(
        args.name,
        |old: &SessionAffinityScorer| old.parameters == parameters && old.seed == args.seed,
        || fresh,
    );
    Ok(
        PluginInstance::scorer(Arc::clone(&scorer) as Arc<dyn Scorer>)
            .with_pick_hook(Arc::clone(&scorer) as Arc<dyn PickHook>)
            .with_membership_listener(Arc::clone(&scorer) as Arc<dyn MembershipListener>)
            .with_metrics_source(scorer),
    )
}
