//! `prefill-load-pd-decider` (Shepherd's extension): the prefix-based decider for long prompts
//! while the prefill servers keep up, plus short prompts sent to the prefill servers while those
//! have nothing queued ahead of them.
//!
//! `prefix-based-pd-decider` keeps every prompt with fewer than `nonCachedTokens` uncached
//! tokens on its decode server. That is right while the prefill servers are busy (a short
//! prompt queued behind a long prefill waits for all of it), and wrong while they are idle: the
//! short prefill then runs as a chunk in a decode step and stretches that step for every
//! request decoding on the server, while a prefill server could have done it at once. This
//! decider weighs that with the scheduler's own count of prompt tokens each server still has
//! to prefill ([`Endpoint::pending_prefill_tokens`]: fresh at every pick, prefill stages sent
//! there included, released at the first token):
//!
//! 1. no cached-prefix estimate in the decode profile (no prefix scorer) or no uncached token:
//!    aggregated (as the prefix-based decider);
//! 2. uncached tokens on the decode server ≥ `nonCachedTokens` (and the prompt ≥
//!    `promptTokens`): disaggregated (as the prefix-based decider) unless the least-loaded
//!    prefill server (role `prefill`, `encode-prefill`, `prefill-decode`, `both` or
//!    `encode-prefill-decode`, as `prefill-filter` keeps them; enabled; the decode server
//!    itself left out) has more than `longQueueTokens` pending beyond what the decode server
//!    itself has: then the prefill servers are the bottleneck, the prompt would wait longer
//!    there than where it decodes, and it is served aggregated;
//! 3. otherwise disaggregated only when the least-loaded prefill server has at most
//!    `max(queueTokens, the decode server's own pending prefill)` tokens pending.
//!
//! The decider does not choose the prefill server: the prefill profile does. Give that profile
//! `prefill-load-scorer` (the same pending counts), so the prompt goes to the server whose
//! queue was judged short — without it the pick may land on a busy one.
//!
//! `queueTokens` defaults to 8192, vLLM's default step token budget
//! (`max_num_batched_tokens` for the OpenAI server): with no more than that pending, a prefill
//! server starts the prompt in its next step, as soon as the decode server would; with more,
//! the prompt would wait at least a whole step (hundreds of milliseconds of prefill) behind
//! other prompts, so it stays where it decodes. `queueTokens: 0` turns the load rule off (the
//! decider then decides as `prefix-based-pd-decider` for short prompts). No server is
//! disaggregated to when the pool has none that prefills.
//!
//! `longQueueTokens` defaults to 32768, four of those step budgets: a long prompt accepts
//! up to four full prefill steps queued ahead of it on a prefill server (on an H100 serving an
//! 8B model, about 0.75 s) to keep its prefill out of the decode batches. A pool whose prefill
//! servers fall further behind than that is short of prefill capacity for its traffic, and a
//! long prompt is then better prefilled where it decodes than queued. Set it from the TTFT
//! objective: the tokens the prefill servers get through in the time a long prompt may wait.
//! `longQueueTokens: 0` turns this rule off (long prompts are disaggregated whatever the
//! queue, as `prefix-based-pd-decider` does).
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Decider};
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::disagg::{PrefillLoadDecider, PrefillLoadDeciderParameters};
//!
//! let pool = Arc::new(Pool::new());
//! let role = |r: &str| [("llm-d.ai/role".to_string(), r.to_string())].into_iter().collect();
//! let decode = pool.add("10.0.0.1:8000");
//! decode.set_labels(role("decode"));
//! let prefill = pool.add("10.0.0.2:8000");
//! prefill.set_labels(role("prefill"));
//! let decider = PrefillLoadDecider::new(PrefillLoadDeciderParameters::default(), Arc::clone(&pool));
//!
//! // A 500-token prompt nobody caches, while the prefill server is idle: sent there.
//! let request = InferenceRequest::new("r", "m", Prompt::Tokens(vec![7; 500]));
//! let mut cycle = CycleState::new(&request, Timestamp::from_millis(0), std::time::Duration::from_secs(1));
//! CachedPrefix::publish(&mut cycle.extensions, [(decode.id(), 0)]);
//! assert!(decider.disaggregate(&cycle, &decode));
//! // The prefill server has a 12k-token prompt to prefill: the short one stays.
//! let _document = prefill.start_request_uncached(12_000, 12_000);
//! assert!(!decider.disaggregate(&cycle, &decode));
//! // A long prompt still goes (2048 uncached tokens or more, and the queue within 32768).
//! let long = InferenceRequest::new("l", "m", Prompt::Tokens(vec![7; 4000]));
//! let mut cycle = CycleState::new(&long, Timestamp::from_millis(0), std::time::Duration::from_secs(1));
//! CachedPrefix::publish(&mut cycle.extensions, [(decode.id(), 0)]);
//! assert!(decider.disaggregate(&cycle, &decode));
//! // Behind 40k tokens the prefill server is the bottleneck: the long prompt stays too.
//! let _more = prefill.start_request_uncached(28_000, 28_000);
//! assert!(!decider.disaggregate(&cycle, &decode));
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointHealth, Pool};
use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Decider, PluginInstance};

use crate::filters::by_label::{ByLabelFilter, ROLE_LABEL};

/// Registry type name.
pub const TYPE_NAME: &str = "prefill-load-pd-decider";

/// The `prefill-load-pd-decider` parameters (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PrefillLoadDeciderParameters {
    /// Uncached tokens at which a prompt is always disaggregated (0: never by length).
    pub non_cached_tokens: u64,
    /// Shortest prompt disaggregated by length (0: any).
    pub prompt_tokens: u64,
    /// A shorter prompt is disaggregated when the least-loaded prefill server has at most this
    /// many tokens pending to prefill (or no more than the decode server has); 0: never.
    pub queue_tokens: u64,
    /// A long prompt stays on its decode server when the least-loaded prefill server has more
    /// than this many tokens pending beyond the decode server's own; 0: no such limit.
    pub long_queue_tokens: u64,
}

impl Default for PrefillLoadDeciderParameters {
    /// `nonCachedTokens` 2048, `promptTokens` 0, `queueTokens` 8192, `longQueueTokens` 32768.
    fn default() -> Self {
        PrefillLoadDeciderParameters {
            non_cached_tokens: 2048,
            prompt_tokens: 0,
            queue_tokens: 8192,
            long_queue_tokens: 32_768,
        }
    }
}

/// Disaggregates long uncached prompts, and short ones while a prefill server is free (see the
/// module docs).
#[derive(Debug)]
pub struct PrefillLoadDecider {
    params: PrefillLoadDeciderParameters,
    pool: Arc<Pool>,
    prefill_role: ByLabelFilter,
}

impl PrefillLoadDecider {
    /// A decider with `params` over the servers of `pool`.
    pub fn new(params: PrefillLoadDeciderParameters, pool: Arc<Pool>) -> Self {
        PrefillLoadDecider {
            params,
            pool,
            prefill_role: ByLabelFilter::prefill(),
        }
    }

    /// The fewest pending prefill tokens on a server that could prefill for `decode`, `None`
    /// when no server could.
    fn shortest_prefill_queue(&self, decode: &Endpoint) -> Option<u64> {
        let snapshot = self.pool.load();
        snapshot
            .endpoints()
            .iter()
            .filter(|e| e.id() != decode.id() && e.health() == EndpointHealth::Enabled)
            .filter(|e| {
                self.prefill_role
                    .keeps(e.labels().get(ROLE_LABEL).map(String::as_str))
            })
            .map(|e| e.pending_prefill_tokens())
            .min()
    }
}

impl Decider for PrefillLoadDecider {
    fn disaggregate(&self, cycle: &CycleState<'_>, decode: &Arc<Endpoint>) -> bool {
        let Some(cached) = cycle.extensions.get::<CachedPrefix>() else {
            return false;
        };
        let prompt = cycle.request.prompt.estimated_tokens() as u64;
        let uncached = cached.uncached_tokens(decode.id(), prompt);
        if uncached == 0 {
            return false;
        }
        let long = self.params.non_cached_tokens;
        if long > 0 && prompt >= self.params.prompt_tokens && uncached >= long {
            let limit = self.params.long_queue_tokens;
            if limit == 0 {
                return true;
            }
            let bound = decode.pending_prefill_tokens().saturating_add(limit);
            return self
                .shortest_prefill_queue(decode)
                .is_some_and(|queued| queued <= bound);
        }
        if self.params.queue_tokens == 0 {
            return false;
        }
        let bound = self
            .params
            .queue_tokens
            .max(decode.pending_prefill_tokens());
        self.shortest_prefill_queue(decode)
            .is_some_and(|queued| queued <= bound)
    }
}

/// Builds a `prefill-load-pd-decider`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: PrefillLoadDeciderParameters = args.parse()?;
    Ok(PluginInstance::decider(Arc::new(PrefillLoadDecider::new(
        params,
        Arc::clone(args.pool),
    ))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use shepherd_scheduler_core::clock::Timestamp;
    use shepherd_scheduler_core::prelude::*;

    use super::*;

    /// A pool of `roles` (None: no role label) and the decider over it.
    fn rig(
        params: PrefillLoadDeciderParameters,
        roles: &[Option<&str>],
    ) -> (PrefillLoadDecider, Vec<Arc<Endpoint>>) {
        let pool = Arc::new(Pool::new());
        let endpoints = roles
            .iter()
            .enumerate()
            .map(|(i, role)| {
                let e = pool.add(&format!("127.0.0.1:{}", 9000 + i));
                if let Some(role) = role {
                    e.set_labels(
                        [(ROLE_LABEL.to_string(), role.to_string())]
                            .into_iter()
                            .collect(),
                    );
                }
                e
            })
            .collect();
        (PrefillLoadDecider::new(params, pool), endpoints)
    }

    /// Whether `decider` disaggregates a prompt of `prompt` tokens of which the decode server
    /// caches `cached` (None: no estimate published).
    fn decide(
        decider: &PrefillLoadDecider,
        decode: &Arc<Endpoint>,
        prompt: usize,
        cached: Option<u64>,
    ) -> bool {
        let request = InferenceRequest::new("r", "m", Prompt::Tokens(vec![1; prompt]));
        let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_secs(1));
        if let Some(cached) = cached {
            CachedPrefix::publish(&mut cycle.extensions, [(decode.id(), cached)]);
        }
        decider.disaggregate(&cycle, decode)
    }

    #[test]
    fn short_prompts_go_while_a_prefill_server_is_free() {
        let (d, e) = rig(
            PrefillLoadDeciderParameters::default(),
            &[Some("decode"), Some("prefill"), Some("prefill")],
        );
        assert!(decide(&d, &e[0], 300, Some(0)));
        // One prefill server is busy, the other free: the short prompt goes.
        let _a = e[1].start_request_uncached(20_000, 20_000);
        assert!(decide(&d, &e[0], 300, Some(0)));
        // The other holds one step's budget: still free enough.
        let _b = e[2].start_request_uncached(8192, 8192);
        assert!(decide(&d, &e[0], 300, Some(0)));
        // More than a step on both: the short prompt stays.
        let _c = e[2].start_request_uncached(100, 100);
        assert!(!decide(&d, &e[0], 300, Some(0)));
        drop(_a);
        assert!(decide(&d, &e[0], 300, Some(0)));
    }

    #[test]
    fn a_busier_decode_server_raises_the_bound() {
        let (d, e) = rig(
            PrefillLoadDeciderParameters::default(),
            &[Some("decode"), Some("prefill")],
        );
        let _p = e[1].start_request_uncached(12_000, 12_000);
        assert!(!decide(&d, &e[0], 300, Some(0)));
        let _q = e[0].start_request_uncached(20_000, 20_000);
        assert!(decide(&d, &e[0], 300, Some(0)));
    }

    #[test]
    fn long_prompts_go_while_the_prefill_queue_keeps_up_and_cached_ones_stay() {
        let (d, e) = rig(
            PrefillLoadDeciderParameters::default(),
            &[Some("decode"), Some("prefill")],
        );
        let _p = e[1].start_request_uncached(30_000, 30_000);
        assert!(decide(&d, &e[0], 4000, Some(1000)));
        // 1000 uncached of 4000: short, and the prefill server is busy.
        assert!(!decide(&d, &e[0], 4000, Some(3000)));
        // Fully cached on the decode server, or no estimate: aggregated.
        assert!(!decide(&d, &e[0], 4000, Some(4000)));
        assert!(!decide(&d, &e[0], 4000, None));
        // 32768 + 1 pending on the prefill server, none on the decode server: the long prompt
        // stays where it decodes.
        let _q = e[1].start_request_uncached(2_769, 2_769);
        assert!(!decide(&d, &e[0], 4000, Some(0)));
        // The decode server is as far behind: the prefill server is the shorter wait again.
        let _own = e[0].start_request_uncached(5_000, 5_000);
        assert!(decide(&d, &e[0], 4000, Some(0)));
        drop(_q);
        drop(_own);
        drop(_p);
        assert!(decide(&d, &e[0], 4000, Some(0)));
    }

    #[test]
    fn zero_long_queue_tokens_sends_long_prompts_whatever_the_queue() {
        let params = PrefillLoadDeciderParameters {
            long_queue_tokens: 0,
            ..PrefillLoadDeciderParameters::default()
        };
        let (d, e) = rig(params, &[Some("decode"), Some("prefill")]);
        let _p = e[1].start_request_uncached(500_000, 500_000);
        assert!(decide(&d, &e[0], 4000, Some(0)));
        assert!(!decide(&d, &e[0], 300, Some(0)));
    }

    #[test]
    fn long_prompts_stay_without_a_prefill_server() {
        let (d, e) = rig(
            PrefillLoadDeciderParameters::default(),
            &[Some("decode"), Some("decode")],
        );
        assert!(!decide(&d, &e[0], 4000, Some(0)));
    }

    #[test]
    fn only_enabled_prefill_capable_servers_count() {
        let (d, e) = rig(
            PrefillLoadDeciderParameters::default(),
            &[Some("decode"), Some("decode"), None],
        );
        // Nobody prefills: a short prompt is never disaggregated.
        assert!(!decide(&d, &e[0], 300, Some(0)));
        let (d, e) = rig(
            PrefillLoadDeciderParameters::default(),
            &[
                Some("prefill-decode"),
                Some("prefill-decode"),
                Some("prefill"),
            ],
        );
        // The decode server's own queue (30k) is not a prefill server's; a disabled free
        // server does not count.
        let _own = e[0].start_request_uncached(30_000, 30_000);
        let _busy = e[2].start_request_uncached(40_000, 40_000);
        d.pool.set_health(e[1].address(), EndpointHealth::Disabled);
        assert!(!decide(&d, &e[0], 300, Some(0)));
        d.pool.set_health(e[1].address(), EndpointHealth::Enabled);
        assert!(decide(&d, &e[0], 300, Some(0)));
    }

    #[test]
    fn zero_queue_tokens_is_the_prefix_based_rule() {
        let params = PrefillLoadDeciderParameters {
            queue_tokens: 0,
            ..PrefillLoadDeciderParameters::default()
        };
        let (d, e) = rig(params, &[Some("decode"), Some("prefill")]);
        assert!(!decide(&d, &e[0], 300, Some(0)));
        assert!(decide(&d, &e[0], 3000, Some(0)));
    }

    #[test]
    fn parameters_parse_strictly() {
        let p: PrefillLoadDeciderParameters =
            serde_json::from_value(serde_json::json!({"queueTokens": 100, "longQueueTokens": 7}))
                .unwrap();
        assert_eq!(p.queue_tokens, 100);
        assert_eq!(p.long_queue_tokens, 7);
        assert_eq!(p.non_cached_tokens, 2048);
        assert!(
            serde_json::from_value::<PrefillLoadDeciderParameters>(serde_json::json!({"queue": 1}))
                .is_err()
        );
    }
}
