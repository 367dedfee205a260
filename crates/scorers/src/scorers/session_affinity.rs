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
//! ## Parameters
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `strategy` | `session_id` | upstream's `session_id` strategy: a client session id bound to the endpoint that served it. Upstream's default, `encoded_endpoint_header` (the picked endpoint encoded in a response header the client echoes), needs plugins to write response headers, which Shepherd cannot yet: asking for it by name (or giving `encodedEndpointHeaderConfig`) is an error; a bare scorer uses `session_id` |
//! | `sessionIdConfig.sources` | the `x-session-id` header | `[{header: NAME}]` or `[{attribute: KEY}]` in priority order; `x-session-id` is the session key the adapters read, other headers are read from the headers the adapter hands to plugins; `{attribute: KEY, producer: NAME}` reads what a declared `agent-identity` or `session-id-producer` publishes ([`crate::attributes`]) |
//! | `sessionIdConfig.evictionTtlSeconds` | 300 upstream, 600 as `ttlSeconds` | seconds a session is remembered after its last pick |
//! | `sessionIdConfig.evictionSweepSeconds` | 10 | accepted, not used: expired sessions are dropped when met and by capacity |
//! | `profileName` | — | accepted: the pick recorded is always the one of the profile the scorer runs in, which is what upstream's `profileName: prefill` selects when the instance sits in the prefill profile |
//! | `capacity` | 100000 | Shepherd extension: most sessions remembered |
//! | `ttlSeconds` | 600 | Shepherd extension: the TTL when `evictionTtlSeconds` is not given |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: session-affinity-scorer
//!   parameters:
//!     strategy: session_id
//!     sessionIdConfig:
//!       sources:
//!       - header: x-session-id
//!       - attribute: agent-identity
//!       evictionTtlSeconds: 300
//!       evictionSweepSeconds: 10
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: session-affinity-scorer
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let mut request = InferenceRequest::new("r1", "m", Prompt::Text("hi".into()));
//! request.session_key = Some("chat-42".into());
//! let first = scheduler.schedule(&request).unwrap().primary().address().to_string();
//! for i in 0..10 {
//!     request.id = format!("r{i}");
//!     assert_eq!(scheduler.schedule(&request).unwrap().primary().address(), first);
//! }
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

use shepherd_scheduler_core::request::{ConfiguredHeaders, InferenceRequest};

use super::session_source::{SessionIdConfig, Strategy};
use super::session_store::SessionStore;
use crate::attributes::RequestAttributes;
use crate::error::ParameterError;

/// Registry type name.
pub const TYPE_NAME: &str = "session-affinity-scorer";

/// Parameters of `session-affinity-scorer`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SessionAffinityParameters {
    /// Most sessions remembered (default 100,000).
    pub capacity: usize,
    /// Seconds after its last pick that a session is forgotten (default 600).
    pub ttl_seconds: u64,
    /// Upstream's strategy (only `session_id` is supported).
    pub strategy: Option<Strategy>,
    /// Upstream's `session_id` settings.
    pub session_id_config: SessionIdConfig,
    /// Upstream's `encoded_endpoint_header` settings (not supported).
    pub encoded_endpoint_header_config: Option<serde_json::Value>,
    /// Upstream's profile selector (accepted; see the module docs).
    pub profile_name: Option<String>,
}

impl SessionAffinityParameters {
    /// The TTL: `sessionIdConfig.evictionTtlSeconds` when given, else `ttlSeconds`.
    pub fn ttl(&self) -> Duration {
        match self.session_id_config.ttl_given() {
            Some(seconds) if seconds.is_finite() => Duration::from_secs_f64(seconds.min(1e12)),
            _ => Duration::from_secs(self.ttl_seconds),
        }
    }

    pub(crate) fn check(&self) -> Result<(), PluginError> {
        if self.strategy == Some(Strategy::EncodedEndpointHeader)
            || self.encoded_endpoint_header_config.is_some()
        {
            return Err(PluginError::invalid(
                "strategy",
                "`encoded_endpoint_header` needs response headers written by plugins, which \
                 Shepherd does not support yet; use `strategy: session_id`",
            ));
        }
        self.session_id_config.check()
    }
}

impl Default for SessionAffinityParameters {
    fn default() -> Self {
        SessionAffinityParameters {
            capacity: 100_000,
            ttl_seconds: 600,
            strategy: None,
            session_id_config: SessionIdConfig::default(),
            encoded_endpoint_header_config: None,
            profile_name: None,
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
    attributes: Arc<RequestAttributes>,
}

impl SessionAffinityScorer {
    /// A scorer with `parameters`; `seed` keys the session-key hash. Attribute sources find
    /// nothing: [`Self::with_attributes`] gives the config's producers.
    pub fn new(parameters: SessionAffinityParameters, seed: u64) -> Result<Self, ParameterError> {
        Self::with_attributes(parameters, seed, Arc::default())
    }

    /// A scorer whose attribute sources read `attributes`.
    pub fn with_attributes(
        parameters: SessionAffinityParameters,
        seed: u64,
        attributes: Arc<RequestAttributes>,
    ) -> Result<Self, ParameterError> {
        let capacity = ParameterError::require_positive("capacity", parameters.capacity)?;
        ParameterError::require_positive("ttlSeconds", parameters.ttl_seconds)?;
        Ok(SessionAffinityScorer {
            store: SessionStore::new(capacity, parameters.ttl()),
            hasher: ahash::RandomState::with_seeds(seed, 0x5E55_1011, 0xAFF1_17E5, 0x5EED),
            parameters,
            seed,
            attributes,
        })
    }

    /// The session of `request`, as the sources find it.
    pub fn session_of<'r>(&self, request: &'r InferenceRequest) -> Option<&'r str> {
        self.parameters
            .session_id_config
            .session_of(request, &self.attributes)
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
        let remembered = self
            .session_of(cycle.request)
            .and_then(|key| self.endpoint_for(key, cycle.now));
        for (slot, ep) in out.iter_mut().zip(candidates) {
            let sticky = remembered == Some(ep.id());
            *slot = Score::new(if sticky { 1.0 } else { 0.0 });
        }
    }
}

impl PickHook for SessionAffinityScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        if let Some(key) = self.session_of(cycle.request) {
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

/// The checked scorer (session store) for `parameters`, kept in the shared resources under the
/// plugin's name; the adapters are asked for the headers its sources read.
pub(crate) fn shared_scorer(
    args: &PluginArgs<'_>,
    parameters: SessionAffinityParameters,
) -> Result<Arc<SessionAffinityScorer>, PluginError> {
    parameters.check()?;
    for header in parameters.session_id_config.headers() {
        if !ConfiguredHeaders::of(args.resources).add(&header) {
            return Err(PluginError::invalid(
                "sessionIdConfig.sources",
                format!("header `{header}`: the config's plugins read too many request headers"),
            ));
        }
    }
    // The config's producers, when a source reads one (else an empty set of its own).
    let reads_attributes = parameters
        .session_id_config
        .sources
        .iter()
        .any(|s| s.attribute.is_some());
    let attributes = if reads_attributes {
        RequestAttributes::of(args.resources)
    } else {
        Arc::default()
    };
    let fresh = SessionAffinityScorer::with_attributes(parameters.clone(), args.seed, attributes)?;
    Ok(args.resources.get_or_replace_with(
        args.name,
        |old: &SessionAffinityScorer| old.parameters == parameters && old.seed == args.seed,
        || fresh,
    ))
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
    let scorer = shared_scorer(args, parameters)?;
    Ok(
        PluginInstance::scorer(Arc::clone(&scorer) as Arc<dyn Scorer>)
            .with_pick_hook(Arc::clone(&scorer) as Arc<dyn PickHook>)
            .with_membership_listener(Arc::clone(&scorer) as Arc<dyn MembershipListener>)
            .with_metrics_source(scorer),
    )
}
