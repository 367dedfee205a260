//! `hot-prefix-scorer` (Shepherd's extension): gives a prefix that carries a large share of
//! the pool's work more than one home, one new home at a time, before a burst needs them.
//!
//! Prefix affinity keeps every prefix on the servers that cache it. For a prefix that carries
//! much of the traffic that is one server's worth of capacity for several servers' worth of
//! work: when its traffic spikes, the load scorers must spread it onto servers that lack it,
//! and each pays a cold prefill of the whole prefix while the spike is on. This scorer warms
//! those servers earlier, while the prefix is merely popular, at the price of one cold prefill
//! per new home.
//!
//! The *key* of a request is the chained hash of its first `prefixBlocks` blocks (as
//! [`RendezvousAffinityScorer::key`] cuts it). The scorer counts, per key, the prompt tokens of
//! the requests it has seen picked that have not finished (a pick hook and a completion
//! hook): the key's *share* is that count, this request included, over the count of every key.
//! A key deserves `homes = ceil(share × candidates × homesPerShare)` homes (at least 1, at
//! most `maxHomes` and the candidates), once it has `minRequests` requests in flight (this
//! one included; before that, one home: an idle pool makes any lone prefix a large share). Its *holders* are the candidates the profile's prefix
//! scorer believes cache at least the key's tokens ([`CachedPrefix`], so list this scorer
//! after `prefix-cache-scorer`).
//!
//! - fewer holders than homes: every candidate that is not a holder scores 1 and the holders
//!   0 — the request should open a new home, and the load scorers choose which;
//! - otherwise (the usual case: a prefix with a small share deserves one home): every
//!   candidate scores [`Score::NEUTRAL`], and the other scorers decide as without it.
//!
//! So the scorer opens at most `homes` homes per key, each with one request, and it says
//! nothing about prefixes that are not hot. Requests without a complete block have no key:
//! neutral. It is an [`Category::Affinity`] scorer (an adaptive controller in burst mode
//! turns it down with the other affinity scorers). Memory: one entry per request in flight
//! (at most `maxTracked`; beyond that new requests are not counted) and one per key with
//! requests in flight.
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `prefixBlocks` | 1 | blocks of the prompt the key covers |
//! | `blockSize` (also `blockSizeTokens`, `hashBlockSize`) | 64 | tokens per block (pseudo tokens of 4 bytes for text), as `prefix-cache-scorer` reads it |
//! | `homesPerShare` | 1.0 | homes per candidate's worth of share: a key with a third of the work in flight on 8 candidates deserves `ceil(8/3)` = 3 homes |
//! | `maxHomes` | 0 (all candidates) | most homes per key |
//! | `maxTracked` | 65536 | most requests in flight counted |
//! | `minRequests` | 4 | requests of a key in flight, this one included, before it may have a second home |
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
//! use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Score, Scorer};
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scorers::scorers::HotPrefixScorer;
//!
//! let pool = Pool::new();
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.4:8000"]);
//! let snapshot = pool.snapshot();
//! let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
//! let scorer = HotPrefixScorer::default();
//!
//! // Three requests of one prefix in flight and nothing else: with this one it carries all
//! // the work and deserves every server.
//! # use shepherd_scheduler_core::plugin::PickHook;
//! for id in ["a", "b", "c"] {
//!     let request = InferenceRequest::new(id, "m", Prompt::Tokens((0..1000).collect()));
//!     let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
//!     scorer.on_pick(&mut cycle, candidates[0]);
//! }
//! let request = InferenceRequest::new("r", "m", Prompt::Tokens((0..1000).collect()));
//! let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
//! CachedPrefix::publish(&mut cycle.extensions, [(candidates[0].id(), 1000)]);
//! let mut out = vec![Score::NEUTRAL; 4];
//! scorer.score(&mut cycle, &candidates, &mut out);
//! // The holder scores 0: the request should warm another server.
//! assert_eq!(out[0].value, 0.0);
//! assert!(out[1..].iter().all(|s| s.value == 1.0));
//! ```

use std::sync::Arc;

use ahash::AHashMap;
use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::completion::{CompletedRequest, Completion, CompletionHook};
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, CycleState, PickHook, PluginInstance, Score, Scorer,
};
use shepherd_scheduler_core::prefix::BlockLayout;
use shepherd_scheduler_core::request::InferenceRequest;

use super::rendezvous::{RendezvousAffinityScorer, RendezvousParameters};
use crate::error::ParameterError;

/// Registry type name.
pub const TYPE_NAME: &str = "hot-prefix-scorer";

/// Default `maxTracked`.
pub const DEFAULT_MAX_TRACKED: usize = 1 << 16;

/// Default `minRequests`.
pub const DEFAULT_MIN_REQUESTS: u64 = 4;

/// The `hot-prefix-scorer` parameters (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct HotPrefixParameters {
    /// Blocks of the prompt the key covers (at least 1).
    pub prefix_blocks: usize,
    /// Tokens per block (at least 1).
    #[serde(alias = "blockSizeTokens", alias = "hashBlockSize")]
    pub block_size: usize,
    /// Homes per candidate's worth of share (above 0).
    pub homes_per_share: f64,
    /// Most homes per key (0: every candidate).
    pub max_homes: usize,
    /// Most requests in flight counted (at least 1).
    pub max_tracked: usize,
    /// Requests of a key in flight, this one included, before it may have a second home
    /// (at least 1).
    pub min_requests: u64,
}

impl Default for HotPrefixParameters {
    fn default() -> Self {
        HotPrefixParameters {
            prefix_blocks: 1,
            block_size: BlockLayout::default().block_tokens(),
            homes_per_share: 1.0,
            max_homes: 0,
            max_tracked: DEFAULT_MAX_TRACKED,
            min_requests: DEFAULT_MIN_REQUESTS,
        }
    }
}

/// The request's key and prompt tokens, computed while scoring and read by the pick hook.
#[derive(Debug, Clone, Copy)]
struct ScoredKey {
    key: u64,
    tokens: u64,
}

/// Prompt tokens in flight, per key and in total.
#[derive(Debug, Default)]
struct Work {
    /// Request id (its [`id_key`]) → (key, prompt tokens).
    requests: AHashMap<u64, (u64, u64)>,
    /// Key → (prompt tokens, requests) in flight.
    keys: AHashMap<u64, (u64, u64)>,
    total: u64,
}

/// Opens new homes for prefixes that carry a large share of the work in flight.
#[derive(Debug)]
pub struct HotPrefixScorer {
    keys: RendezvousAffinityScorer,
    key_tokens: usize,
    homes_per_share: f64,
    max_homes: usize,
    max_tracked: usize,
    min_requests: u64,
    work: Mutex<Work>,
}

impl HotPrefixScorer {
    /// A scorer with these parameters, or why they are invalid.
    pub fn new(params: HotPrefixParameters) -> Result<Self, ParameterError> {
        let keys = RendezvousAffinityScorer::new(RendezvousParameters {
            prefix_blocks: params.prefix_blocks,
            block_size: params.block_size,
            load_factor: None,
        })?;
        let homes_per_share =
            ParameterError::require_range("homesPerShare", params.homes_per_share, 1e-9, 1e9)?;
        let max_tracked = ParameterError::require_positive("maxTracked", params.max_tracked)?;
        let min_requests = ParameterError::require_positive("minRequests", params.min_requests)?;
        Ok(HotPrefixScorer {
            keys,
            key_tokens: params.prefix_blocks * params.block_size,
            homes_per_share,
            max_homes: params.max_homes,
            max_tracked,
            min_requests,
            work: Mutex::new(Work::default()),
        })
    }

    /// Homes the key deserves among `candidates` when `tokens` more of its prompt tokens
    /// join the work in flight.
    fn homes(&self, key: u64, tokens: u64, candidates: usize) -> usize {
        let ((mine, requests), total) = {
            let work = self.work.lock();
            (work.keys.get(&key).copied().unwrap_or((0, 0)), work.total)
        };
        if requests + 1 < self.min_requests {
            return 1;
        }
        let share = (mine + tokens) as f64 / (total + tokens).max(1) as f64;
        let wanted = (share * candidates as f64 * self.homes_per_share).ceil();
        let most = match self.max_homes {
            0 => candidates,
            m => m.min(candidates),
        };
        (wanted.clamp(1.0, most.max(1) as f64)) as usize
    }

    /// Prompt tokens in flight for `key` (for tests and explanations).
    pub fn tokens_in_flight(&self, key: u64) -> u64 {
        self.work.lock().keys.get(&key).map_or(0, |k| k.0)
    }

    /// The request's key (see the module docs).
    pub fn key(&self, request: &InferenceRequest) -> Option<u64> {
        self.keys.key(request)
    }
}

impl Default for HotPrefixScorer {
    fn default() -> Self {
        HotPrefixScorer {
            keys: RendezvousAffinityScorer::default(),
            key_tokens: BlockLayout::default().block_tokens(),
            homes_per_share: 1.0,
            max_homes: 0,
            max_tracked: DEFAULT_MAX_TRACKED,
            min_requests: DEFAULT_MIN_REQUESTS,
            work: Mutex::new(Work::default()),
        }
    }
}

impl Scorer for HotPrefixScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let neutral = |out: &mut [Score]| out.iter_mut().for_each(|s| *s = Score::NEUTRAL);
        let Some(key) = self.keys.key(cycle.request) else {
            return neutral(out);
        };
        let prompt = cycle.request.prompt.estimated_tokens();
        let tokens = prompt as u64;
        cycle.extensions.insert(ScoredKey { key, tokens });
        let homes = self.homes(key, tokens, candidates.len());
        if homes <= 1 {
            return neutral(out);
        }
        let needed = self.key_tokens.min(prompt) as u64;
        let cached = cycle.extensions.get::<CachedPrefix>();
        let holds = |ep: &Endpoint| {
            cached.is_some_and(|c| needed > 0 && c.cached_tokens(ep.id()) >= needed)
        };
        let holders = candidates.iter().filter(|ep| holds(ep)).count();
        if holders >= homes || holders == candidates.len() {
            return neutral(out);
        }
        for (slot, ep) in out.iter_mut().zip(candidates) {
            *slot = Score::new(if holds(ep) { 0.0 } else { 1.0 });
        }
    }
}

impl PickHook for HotPrefixScorer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, _picked: &Arc<Endpoint>) {
        // The key scoring computed; a profile that did not score with this plugin computes it.
        // Read, not removed: the cycle's extensions are reused by the next one on this thread.
        let scored = cycle.extensions.get::<ScoredKey>().copied().or_else(|| {
            self.keys.key(cycle.request).map(|key| ScoredKey {
                key,
                tokens: cycle.request.prompt.estimated_tokens() as u64,
            })
        });
        let Some(ScoredKey { key, tokens }) = scored else {
            return;
        };
        let mut work = self.work.lock();
        if work.requests.len() >= self.max_tracked {
            return;
        }
        let id = id_key(cycle.request_id());
        if let Some((old_key, old_tokens)) = work.requests.insert(id, (key, tokens)) {
            // The same id picked again (a retry): count it once.
            release(&mut work, old_key, old_tokens);
        }
        let entry = work.keys.entry(key).or_insert((0, 0));
        entry.0 += tokens;
        entry.1 += 1;
        work.total += tokens;
    }
}

impl CompletionHook for HotPrefixScorer {
    fn on_complete(&self, request: &CompletedRequest<'_>, _: &Completion) {
        let mut work = self.work.lock();
        if let Some((key, tokens)) = work.requests.remove(&id_key(request.id)) {
            release(&mut work, key, tokens);
        }
    }
}

/// A request id as the work table keys it: its 64-bit hash, so that counting a pick copies
/// nothing (two ids in flight sharing a hash, about one chance in 2⁶⁴ per pair, would count
/// as a retry of one request).
fn id_key(id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(id.as_bytes())
}

fn release(work: &mut Work, key: u64, tokens: u64) {
    work.total = work.total.saturating_sub(tokens);
    if let Some(left) = work.keys.get_mut(&key) {
        left.0 = left.0.saturating_sub(tokens);
        left.1 = left.1.saturating_sub(1);
        if left.1 == 0 {
            work.keys.remove(&key);
        }
    }
}

/// Builds a `hot-prefix-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params = args.parse::<HotPrefixParameters>()?;
    let scorer = Arc::new(HotPrefixScorer::new(params)?);
    Ok(PluginInstance::scorer(scorer.clone())
        .with_pick_hook(scorer.clone())
        .with_completion_hook(scorer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever picks (some retried under the same id) and completions (some of unknown
        /// ids) happen, the counts are exactly those of the requests still in flight.
        #[test]
        fn the_counts_are_those_of_the_requests_in_flight(
            ops in proptest::collection::vec((any::<bool>(), 0u8..12, 0u64..3, 1u64..5000), 0..200),
        ) {
            let scorer = HotPrefixScorer::default();
            let mut model: std::collections::HashMap<String, (u64, u64)> = Default::default();
            for (pick, id, key, tokens) in ops {
                let id = format!("r{id}");
                let mut work = scorer.work.lock();
                if pick {
                    if let Some((k, t)) = work.requests.insert(id_key(&id), (key, tokens)) {
                        release(&mut work, k, t);
                    }
                    let entry = work.keys.entry(key).or_insert((0, 0));
                    entry.0 += tokens;
                    entry.1 += 1;
                    work.total += tokens;
                    model.insert(id, (key, tokens));
                } else {
                    if let Some((k, t)) = work.requests.remove(&id_key(&id)) {
                        release(&mut work, k, t);
                    }
                    model.remove(&id);
                }
            }
            let work = scorer.work.lock();
            prop_assert_eq!(work.total, model.values().map(|v| v.1).sum::<u64>());
            for key in 0..3 {
                let expected: u64 = model.values().filter(|v| v.0 == key).map(|v| v.1).sum();
                let requests = model.values().filter(|v| v.0 == key).count() as u64;
                prop_assert_eq!(work.keys.get(&key).copied().unwrap_or((0, 0)), (expected, requests));
            }
            prop_assert!(work.keys.values().all(|&(_, r)| r > 0));
        }

        /// Homes are at least 1 and at most the candidates (or `maxHomes`), for any counts.
        #[test]
        fn homes_stay_within_bounds(
            mine in 0u64..1_000_000, total in 0u64..1_000_000, tokens in 0u64..100_000,
            candidates in 0usize..600, max_homes in 0usize..10,
        ) {
            let scorer = HotPrefixScorer { max_homes, ..HotPrefixScorer::default() };
            {
                let mut work = scorer.work.lock();
                work.keys.insert(7, (mine, 5));
                work.total = total.max(mine);
            }
            let homes = scorer.homes(7, tokens, candidates);
            prop_assert!(homes >= 1);
            prop_assert!(homes <= candidates.max(1));
            if max_homes > 0 {
                prop_assert!(homes <= max_homes);
            }
        }
    }
}
