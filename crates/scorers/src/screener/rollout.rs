//! `disaggregatedset-rollout-screener`: keeps a request's prefill and decode picks on one
//! `DisaggregatedSet` revision whose required roles all have ready pods (upstream's
//! `requestcontrol/screener/disaggregatedsetrollout`, llm-d router at `ebab68792`; README
//! first).
//!
//! For each request, before every profile:
//!
//! 1. with revision gating (`sum` or `max-role`), the ready pods of each revision and role are
//!    counted: the pool's members that accept requests, match `scope.labelSelector` and carry
//!    both the revision and the role label, one pod per IP (the ports of one pod are one pod).
//!    A revision missing a required role gets no traffic; the others are weighted — `sum`: its
//!    pods over all required roles; `max-role`: its pods of the role with the most pods over
//!    the covered revisions (ties: the first listed role) — and, unless a strict header names
//!    the revision, one revision is drawn by weight and only its candidates stay;
//! 2. each `strict` header selector whose header the request carries keeps only the candidates
//!    whose `labelKey` label equals it (none left: the request fails with no endpoint, 503).
//!
//! The draw is a hash of the request id and the scheduler's seed (upstream: a global random
//! generator), so the decode and prefill stages of one request draw the same revision.
//!
//! Every header selector (strict or prefer) also stamps its header on the response, with the
//! serving endpoint's `labelKey` label, as upstream
//! ([`ResponseHeader::EndpointLabel`]).
//!
//! Differences from upstream, said at start: the pods counted are the pool's members (their
//! labels from discovery), not a separate watch of every pod the scope selects; the
//! `llm_d_epp_disaggregatedset_*` metrics are not exported.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml(r#"
//! plugins:
//! - type: disaggregatedset-rollout-screener
//!   parameters:
//!     scope: {labelSelector: "disaggregatedset.x-k8s.io/name=my-set"}
//!     revisionGating: {mode: sum, requireRoles: {values: [prefill, decode]}}
//! - type: random-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: random-picker
//! "#).unwrap();
//! let pool = Arc::new(Pool::new());
//! let pod = |address: &str, revision: &str, role: &str| {
//!     let labels = [("disaggregatedset.x-k8s.io/name", "my-set"),
//!         ("disaggregatedset.x-k8s.io/revision", revision),
//!         ("disaggregatedset.x-k8s.io/role", role)];
//!     pool.add(address).set_labels(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
//! };
//! // Revision B has no prefill pod yet: it cannot serve.
//! pod("127.0.0.1:8000", "A", "prefill");
//! pod("127.0.0.2:8000", "A", "decode");
//! pod("127.0.0.3:8000", "B", "decode");
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! for i in 0..20 {
//!     let request = InferenceRequest::new(format!("r{i}"), "m", Prompt::Text("hi".into()));
//!     assert_ne!(scheduler.schedule(&request).unwrap().primary().address(), "127.0.0.3:8000");
//! }
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};
use shepherd_scheduler_core::request::ConfiguredHeaders;
use shepherd_scheduler_core::response_headers::ResponseHeader;

use super::config::{GatingMode, HeaderSelector, RolloutParameters, SelectorMode};
use super::selector::Selector;

/// Registry type name.
pub const TYPE_NAME: &str = "disaggregatedset-rollout-screener";

/// What the screener does differently from upstream, logged at start.
pub const WARNING: &str = "disaggregatedset-rollout-screener: ready pods are counted from the \
     pool's members (their labels from discovery), one per IP, not from a watch of every pod \
     the scope selects; the llm_d_epp_disaggregatedset_* metrics are not exported";

/// Ready pods per revision, then per role.
type Counts = BTreeMap<String, BTreeMap<String, usize>>;

/// The screener (see the module docs).
#[derive(Debug)]
pub struct RolloutScreener {
    pool: Arc<Pool>,
    scope: Selector,
    strict: Vec<HeaderSelector>,
    gating: Option<Gating>,
    hasher: ahash::RandomState,
}

#[derive(Debug)]
struct Gating {
    mode: GatingMode,
    roles: Vec<String>,
    revision_key: String,
    role_key: String,
}

/// Each covered revision's share of traffic (upstream's `newRevisionDistribution`):
/// revisions missing a required role are left out.
pub fn shares(counts: &Counts, roles: &[String], mode: GatingMode) -> BTreeMap<String, f64> {
    let covered: Vec<(&String, &BTreeMap<String, usize>)> = counts
        .iter()
        .filter(|(_, per_role)| {
            roles
                .iter()
                .all(|r| per_role.get(r).is_some_and(|n| *n > 0))
        })
        .collect();
    let weight = |per_role: &BTreeMap<String, usize>, role: &str| *per_role.get(role).unwrap_or(&0);
    let weights: Vec<(&String, usize)> = if mode == GatingMode::MaxRole {
        let mut dominant = None;
        let mut most = None;
        for role in roles {
            let total: usize = covered.iter().map(|(_, p)| weight(p, role)).sum();
            if most.is_none_or(|m| total > m) {
                most = Some(total);
                dominant = Some(role.as_str());
            }
        }
        let dominant = dominant.unwrap_or_default();
        covered
            .iter()
            .map(|(rev, p)| (*rev, weight(p, dominant)))
            .collect()
    } else {
        covered
            .iter()
            .map(|(rev, p)| (*rev, roles.iter().map(|r| weight(p, r)).sum()))
            .collect()
    };
    let total: usize = weights.iter().map(|(_, w)| w).sum();
    if total == 0 {
        return BTreeMap::new();
    }
    weights
        .into_iter()
        .map(|(rev, w)| (rev.clone(), w as f64 / total as f64))
        .collect()
}

/// Upstream's `pickWeightedRevision`: revisions in name order, the first whose cumulative
/// share passes `draw × total`.
pub fn pick_weighted(shares: &BTreeMap<String, f64>, draw: f64) -> Option<&str> {
    let total: f64 = shares.values().sum();
    if total <= 0.0 {
        return None;
    }
    let x = draw * total;
    let mut cumulative = 0.0;
    for (revision, share) in shares {
        cumulative += share;
        if x < cumulative {
            return Some(revision);
        }
    }
    shares.keys().next_back().map(String::as_str)
}

impl RolloutScreener {
    /// The ready pods of the pool per revision and role (see the module docs).
    fn counts(&self, gating: &Gating) -> Counts {
        let snapshot = self.pool.load();
        let mut pods: BTreeMap<(String, String), Vec<IpAddr>> = BTreeMap::new();
        for endpoint in snapshot.endpoints() {
            if !endpoint.accepts_requests() {
                continue;
            }
            let labels = endpoint.labels();
            if !self.scope.matches(|k| labels.get(k).map(String::as_str)) {
                continue;
            }
            let (Some(revision), Some(role)) = (
                labels.get(&gating.revision_key).filter(|v| !v.is_empty()),
                labels.get(&gating.role_key).filter(|v| !v.is_empty()),
            ) else {
                continue;
            };
            let Ok(addr) = endpoint.address().parse::<std::net::SocketAddr>() else {
                continue;
            };
            let ips = pods.entry((revision.clone(), role.clone())).or_default();
            if !ips.contains(&addr.ip()) {
                ips.push(addr.ip());
            }
        }
        let mut counts = Counts::new();
        for ((revision, role), ips) in pods {
            counts.entry(revision).or_default().insert(role, ips.len());
        }
        counts
    }

    fn strict_header(&self, cycle: &CycleState<'_>) -> bool {
        self.strict.iter().any(|s| {
            cycle
                .request
                .header(&s.header_name)
                .is_some_and(|v| !v.is_empty())
        })
    }
}

fn label_of(endpoint: &Endpoint, key: &str) -> Option<String> {
    endpoint.labels().get(key).cloned()
}

impl Filter for RolloutScreener {
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        if let Some(gating) = &self.gating {
            let shares = shares(&self.counts(gating), &gating.roles, gating.mode);
            let chosen = if self.strict_header(cycle) {
                None
            } else {
                let draw = (self.hasher.hash_one(cycle.request.id.as_str()) >> 11) as f64
                    / (1u64 << 53) as f64;
                // Upstream draws among the revisions the candidates have.
                let seen: BTreeMap<String, f64> = candidates
                    .iter()
                    .filter_map(|e| label_of(e, &gating.revision_key))
                    .filter_map(|rev| shares.get(&rev).map(|s| (rev, *s)))
                    .filter(|(_, s)| *s > 0.0)
                    .collect();
                pick_weighted(&seen, draw).map(str::to_string)
            };
            candidates.retain(|e| {
                let Some(revision) = label_of(e, &gating.revision_key) else {
                    return false;
                };
                shares.get(&revision).is_some_and(|s| *s > 0.0)
                    && chosen.as_ref().is_none_or(|c| *c == revision)
            });
            if candidates.is_empty() {
                return;
            }
        }
        for selector in &self.strict {
            let Some(wanted) = cycle
                .request
                .header(&selector.header_name)
                .filter(|v| !v.is_empty())
            else {
                continue;
            };
            candidates.retain(|e| {
                e.labels().get(&selector.label_key).map(String::as_str) == Some(wanted)
            });
            if candidates.is_empty() {
                return; // fails closed: the scheduler answers no endpoint
            }
        }
    }
}

/// Builds a `disaggregatedset-rollout-screener` (a screener: it runs first in every profile)
/// and asks the adapters to copy its strict headers.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    if args.parameters.is_null() {
        return Err(PluginError::invalid(
            "parameters",
            "disaggregatedset-rollout-screener requires parameters",
        ));
    }
    let mut parameters: RolloutParameters = args.parse()?;
    let scope = parameters
        .validate()
        .map_err(|reason| PluginError::invalid("parameters", reason))?;
    let strict: Vec<HeaderSelector> = parameters
        .header_selectors
        .iter()
        .filter(|s| s.mode == Some(SelectorMode::Strict))
        .cloned()
        .collect();
    let headers = ConfiguredHeaders::of(args.resources);
    for selector in &strict {
        if !headers.add(&selector.header_name) {
            return Err(PluginError::invalid(
                "headerSelectors",
                "too many request headers are read by the config's plugins",
            ));
        }
    }
    let gating = parameters
        .revision_gating
        .as_ref()
        .filter(|g| g.active())
        .map(|g| Gating {
            mode: g.mode.unwrap_or(GatingMode::Sum),
            roles: g.roles().to_vec(),
            revision_key: g.revision_label_key.clone(),
            role_key: g.role_label_key.clone(),
        });
    // Every selector stamps its header from the endpoint that served.
    let stamps = parameters
        .header_selectors
        .iter()
        .map(|s| ResponseHeader::endpoint_label(&s.header_name, &s.label_key))
        .collect();
    Ok(PluginInstance::screener(Arc::new(RolloutScreener {
        pool: Arc::clone(args.pool),
        scope,
        strict,
        gating,
        hasher: ahash::RandomState::with_seeds(args.seed, 0xD15A, 0x6E7, 0x5E7),
    }))
    .with_response_headers(stamps))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn counts(rows: &[(&str, &str, usize)]) -> Counts {
        let mut c = Counts::new();
        for (rev, role, n) in rows {
            c.entry(rev.to_string())
                .or_default()
                .insert(role.to_string(), *n);
        }
        c
    }

    fn roles() -> Vec<String> {
        vec!["prefill".into(), "decode".into()]
    }

    // README: the 2P:10D rollout, A = {prefill 2, decode 9}, B = {prefill 1, decode 1}.
    #[test]
    fn the_readmes_shares() {
        let c = counts(&[
            ("A", "prefill", 2),
            ("A", "decode", 9),
            ("B", "prefill", 1),
            ("B", "decode", 1),
        ]);
        let max_role = shares(&c, &roles(), GatingMode::MaxRole);
        assert!((max_role["A"] - 0.9).abs() < 1e-12);
        assert!((max_role["B"] - 0.1).abs() < 1e-12);
        let sum = shares(&c, &roles(), GatingMode::Sum);
        assert!((sum["A"] - 11.0 / 13.0).abs() < 1e-12);
        assert!((sum["B"] - 2.0 / 13.0).abs() < 1e-12);
    }

    // README steps 2-3: the new revision has no prefill pod, so it gets nothing; steps 4, 6, 8.
    #[test]
    fn the_readmes_rollout_steps() {
        let step = |old_d, old_p, new_d, new_p| {
            shares(
                &counts(&[
                    ("old", "decode", old_d),
                    ("old", "prefill", old_p),
                    ("new", "decode", new_d),
                    ("new", "prefill", new_p),
                ]),
                &roles(),
                GatingMode::MaxRole,
            )
        };
        let s = step(8, 2, 2, 0);
        assert_eq!(s.get("new"), None);
        assert_eq!(s["old"], 1.0);
        for ((old_d, old_p, new_d, new_p), old_share) in [
            ((6, 1, 4, 1), 0.6),
            ((4, 1, 6, 1), 0.4),
            ((2, 1, 8, 1), 0.2),
        ] {
            let s = step(old_d, old_p, new_d, new_p);
            assert!((s["old"] - old_share).abs() < 1e-12, "{s:?}");
        }
    }

    // Equal role totals: the first listed role wins the tie.
    #[test]
    fn a_tie_goes_to_the_first_role() {
        let c = counts(&[
            ("A", "prefill", 3),
            ("A", "decode", 1),
            ("B", "prefill", 1),
            ("B", "decode", 3),
        ]);
        let s = shares(&c, &roles(), GatingMode::MaxRole);
        assert!((s["A"] - 0.75).abs() < 1e-12, "prefill dominates: {s:?}");
    }

    #[test]
    fn weighted_pick_is_upstreams() {
        let mut s = BTreeMap::new();
        s.insert("a".to_string(), 0.25);
        s.insert("b".to_string(), 0.75);
        assert_eq!(pick_weighted(&s, 0.0), Some("a"));
        assert_eq!(pick_weighted(&s, 0.24), Some("a"));
        assert_eq!(pick_weighted(&s, 0.25), Some("b"));
        assert_eq!(pick_weighted(&s, 0.999), Some("b"));
        assert_eq!(pick_weighted(&BTreeMap::new(), 0.5), None);
    }
}
