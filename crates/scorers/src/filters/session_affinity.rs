//! `session-affinity-filter`: upstream's hard session pin. When the endpoint that served the
//! request's session before is a candidate, it is the only one kept; a request without a
//! session, a session not (or no longer) remembered, or one whose endpoint is not a
//! candidate keeps every candidate, so the filter never leaves the list empty. After the
//! pick the session is bound to the endpoint picked.
//!
//! The parameters are the `session-affinity-scorer`'s (upstream shares them too), with
//! upstream's default TTL of the filter, 300 seconds. Shepherd supports the `session_id`
//! strategy (a bare filter uses it, reading `x-session-id`); upstream's default
//! `encoded_endpoint_header` (the picked endpoint echoed in a response header) needs
//! response headers written by plugins and is refused by name. A filter and a scorer keep
//! separate session stores, as upstream. Alpha upstream: needs `--allow-experimental-plugins`.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: session-affinity-filter
//!   parameters:
//!     strategy: session_id
//!     sessionIdConfig:
//!       sources:
//!       - header: x-session-id
//!       - attribute: agent-identity
//! - type: random-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: session-affinity-filter
//!   - pluginRef: random-picker
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let mut request = InferenceRequest::new("r0", "m", Prompt::Text("hi".into()));
//! request.session_key = Some("chat-42".into());
//! let first = scheduler.schedule(&request).unwrap().primary().address().to_string();
//! for i in 1..10 {
//!     request.id = format!("r{i}");
//!     assert_eq!(scheduler.schedule(&request).unwrap().primary().address(), first);
//! }
//! ```

use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, MembershipListener};
use shepherd_scheduler_core::plugin::{CycleState, Filter, PickHook, PluginInstance};

use crate::scorers::session_affinity::{
    SessionAffinityParameters, SessionAffinityScorer, shared_scorer,
};

/// Registry type name.
pub const TYPE_NAME: &str = "session-affinity-filter";

/// Upstream's default TTL for the filter's bindings, in seconds.
pub const DEFAULT_TTL_SECONDS: u64 = 300;

/// Keeps only the session's endpoint when it is a candidate (see the module docs).
#[derive(Debug)]
pub struct SessionAffinityFilter {
    sessions: Arc<SessionAffinityScorer>,
}

impl SessionAffinityFilter {
    /// The filter over a session store.
    pub fn new(sessions: Arc<SessionAffinityScorer>) -> Self {
        SessionAffinityFilter { sessions }
    }
}

impl Filter for SessionAffinityFilter {
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        let Some(bound) = self
            .sessions
            .session_of(cycle.request)
            .and_then(|key| self.sessions.endpoint_for(key, cycle.now))
        else {
            return;
        };
        if candidates.iter().any(|ep| ep.id() == bound) {
            candidates.retain(|ep| ep.id() == bound);
        }
    }
}

/// Builds a `session-affinity-filter`: the filter, and the pick hook, membership listener
/// and metrics of its session store (kept in the shared resources under the plugin's name).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let mut parameters = args.parse::<SessionAffinityParameters>()?;
    if args.parameters.get("ttlSeconds").is_none() {
        parameters.ttl_seconds = DEFAULT_TTL_SECONDS;
    }
    let sessions = shared_scorer(args, parameters)?;
    Ok(
        PluginInstance::filter(Arc::new(SessionAffinityFilter::new(Arc::clone(&sessions))))
            .with_pick_hook(Arc::clone(&sessions) as Arc<dyn PickHook>)
            .with_membership_listener(Arc::clone(&sessions) as Arc<dyn MembershipListener>)
            .with_metrics_source(sessions),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use shepherd_scheduler_core::config::EndpointPickerConfig;
    use shepherd_scheduler_core::prelude::*;

    use crate::builtin_registry;

    fn scheduler(
        parameters: &str,
    ) -> Result<Scheduler, shepherd_scheduler_core::config::ConfigError> {
        let yaml = format!(
            "plugins:\n- type: session-affinity-filter\n  parameters: {parameters}\n- type: random-picker\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: session-affinity-filter\n  - pluginRef: random-picker\n"
        );
        let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
        let pool = Arc::new(Pool::new());
        pool.set_members([
            "10.0.0.1:8000",
            "10.0.0.2:8000",
            "10.0.0.3:8000",
            "10.0.0.4:8000",
        ]);
        build_scheduler(&config, &builtin_registry(), pool)
    }

    // Upstream's factory-validation table (session_affinity_test.go), with the one strategy
    // Shepherd lacks refused by name.
    #[test]
    fn upstream_validation_cases() {
        for ok in [
            "{}",
            "{strategy: session_id}",
            "{strategy: session_id, sessionIdConfig: {sources: [{attribute: agent-identity}]}}",
            "{strategy: session_id, sessionIdConfig: {sources: [{header: x-session-id}, {attribute: agent-identity}]}}",
            "{strategy: session_id, sessionIdConfig: {sources: []}}",
            "{strategy: session_id, sessionIdConfig: {evictionTtlSeconds: 0}}",
        ] {
            assert!(scheduler(ok).is_ok(), "{ok}");
        }
        for bad in [
            "{strategy: bogus}",
            "{strategy: session_id, sessionIdConfig: {sources: [{header: h, attribute: a}]}}",
            "{strategy: session_id, sessionIdConfig: {evictionTtlSeconds: -1}}",
            "{strategy: session_id, sessionIdConfig: {evictionSweepSeconds: -1}}",
        ] {
            assert!(scheduler(bad).is_err(), "{bad}");
        }
        let refused = scheduler("{strategy: encoded_endpoint_header}")
            .err()
            .unwrap();
        assert!(
            refused.to_string().contains("encoded_endpoint_header"),
            "{refused}"
        );
    }

    #[test]
    fn pins_a_session_and_passes_everything_else() {
        let s = scheduler("{strategy: session_id}").unwrap();
        let mut request = InferenceRequest::new("r0", "m", Prompt::Text("hi".into()));
        request.session_key = Some("s".into());
        let first = s
            .schedule(&request)
            .unwrap()
            .primary()
            .address()
            .to_string();
        for i in 1..20 {
            request.id = format!("r{i}");
            assert_eq!(s.schedule(&request).unwrap().primary().address(), first);
        }
        // Without a session, the random picker spreads the requests.
        let mut picked = std::collections::BTreeSet::new();
        for i in 0..40 {
            let r = InferenceRequest::new(format!("n{i}"), "m", Prompt::Text("hi".into()));
            picked.insert(s.schedule(&r).unwrap().primary().address().to_string());
        }
        assert!(picked.len() > 1);
    }

    #[test]
    fn a_bound_endpoint_outside_the_candidates_keeps_them_all_and_rebinds() {
        let s = scheduler("{strategy: session_id}").unwrap();
        let mut request = InferenceRequest::new("r0", "m", Prompt::Text("hi".into()));
        request.session_key = Some("s".into());
        let first = s
            .schedule(&request)
            .unwrap()
            .primary()
            .address()
            .to_string();
        let others: Vec<String> = s
            .pool()
            .load()
            .endpoints()
            .iter()
            .map(|ep| ep.address().to_string())
            .filter(|a| *a != first)
            .collect();
        request.id = "r1".into();
        let options = ScheduleOptions {
            subset: Some(&others),
            ..Default::default()
        };
        let moved = s
            .schedule_with(&request, options)
            .unwrap()
            .primary()
            .address()
            .to_string();
        assert_ne!(moved, first);
        request.id = "r2".into();
        assert_eq!(s.schedule(&request).unwrap().primary().address(), moved);
    }
}
