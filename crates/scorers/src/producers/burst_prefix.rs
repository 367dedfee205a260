//! `burst-prefix-cache-producer`: co-locates a burst of requests that share a prompt (the `n`
//! samples of one RL rollout step, say), so the shared prefix is prefilled once instead of on
//! every server of a cold pool. It emits a prefix match, as upstream: a full match on the
//! server a request is steered to and none elsewhere; point a `prefix-cache-scorer` at it
//! (`prefixMatchInfoProducerName: burst-prefix-cache-producer`).
//!
//! **What Shepherd does instead of upstream's batch.** Upstream holds every request up to
//! `windowDurationMs`, then assigns the whole batch at once. Shepherd's scheduler never waits
//! on the request path, so it assigns each request as it arrives, within the same window:
//!
//! - The first request of a prompt in a window gets no affinity (upstream gives a request
//!   that shares nothing none either): the other scorers place it, and where it goes becomes
//!   its group's replica for the rest of the window.
//! - Each later request with the identical prompt (the same chained block hashes) is steered
//!   to its group's replica while that replica holds fewer than `maxPerReplica` of the group,
//!   then to the least window-loaded server (by requests, or by `balanceBy: tokens` by the
//!   prefix blocks it must still prefill), then fewer running requests, then address.
//! - With `minColocateBlocks > 0`, the first request of a new prompt sharing at least that
//!   many leading blocks with a prompt already placed in the window is steered to the server
//!   holding the longest such prefix, unless that server already has its fair share of the
//!   window so far (`ceil(total / servers)`, the total in requests, or by tokens in the
//!   blocks of every distinct prompt), as upstream bounds prefix co-location. Upstream's
//!   share is of the whole batch, known when it seals; this one grows as the window fills,
//!   so early in a window prefix-sharing prompts co-locate less than upstream's would.
//! - At most `maxBatchSize` requests are placed per window (upstream fails the request past
//!   it; Shepherd gives it no affinity and counts it); the window's memory is bounded by it,
//!   by [`MAX_WINDOW_GROUPS`] prompts and by [`MAX_WINDOW_BLOCKS`] remembered blocks.
//!
//! So no request waits, the first of each group is placed by the load scorers rather than by
//! the batch, and longer prompts are not placed before shorter ones. Prompts are hashed as
//! Shepherd's approximate producer hashes them (token ids when the request has them, else
//! 4-byte pseudo tokens). The start-up log says so.
//!
//! ## Parameters (upstream's, with its checks)
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `windowDurationMs` | 100 | the window, `1..=10000` ms |
//! | `maxPerReplica` | -1 | requests of one group per server; -1: unlimited (≥ 1 otherwise) |
//! | `blockSizeTokens` | 64 | tokens per hashed block (> 0) |
//! | `maxPrefixTokensToMatch` | 0 | most prompt tokens hashed; 0: 2,048 blocks; else ≥ `blockSizeTokens` |
//! | `minColocateBlocks` | 0 | shared leading blocks for prefix co-location; 0: identical prompts only |
//! | `maxBatchSize` | 1000 | requests per window; -1: unlimited (≥ 1 otherwise) |
//! | `balanceBy` | `requests` | `requests` or `tokens` |
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::config::build_scheduler_in;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: burst-prefix-cache-producer
//!   parameters: {windowDurationMs: 100, maxPerReplica: -1}
//! - type: prefix-cache-scorer
//!   parameters: {prefixMatchInfoProducerName: burst-prefix-cache-producer}
//! - type: active-request-scorer
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - {pluginRef: prefix-cache-scorer, weight: 2}
//!   - {pluginRef: active-request-scorer, weight: 1}
//!   - {pluginRef: max-score-picker}
//! ").unwrap();
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
//! let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
//! // Eight samples of one prompt, all in flight at once: the in-flight scorer alone would
//! // spread them; the burst producer keeps them on the first one's server.
//! let prompt = Prompt::Text("solve: ".repeat(200));
//! let samples: Vec<Decision> = (0..8)
//!     .map(|i| scheduler.schedule(&InferenceRequest::new(format!("s{i}"), "m", prompt.clone())).unwrap())
//!     .collect();
//! let first = samples[0].primary().address().to_string();
//! assert!(samples.iter().all(|d| d.primary().address() == first));
//! # for d in samples { d.finish(Completion::success(None)); }
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId, Pool};
use shepherd_scheduler_core::plugin::{PickHook, PluginInstance};
use shepherd_scheduler_core::prefix::{BlockKey, BlockLayout, PrefixIndex, PrefixIndexConfig};

use super::PrefixProducer;

/// Registry type name.
pub const TYPE_NAME: &str = "burst-prefix-cache-producer";

/// Upstream's sentinel for no per-replica or per-window cap.
const UNLIMITED: i64 = -1;

/// The longest window upstream accepts.
const MAX_WINDOW_MS: i64 = 10_000;

/// Blocks hashed per request when `maxPrefixTokensToMatch` is 0 (upstream's).
const DEFAULT_MAX_BLOCKS: usize = 2048;

/// Block hashes a window remembers for prefix co-location; past it, new blocks are not
/// remembered (later prompts match less) until the window ends.
pub const MAX_WINDOW_BLOCKS: usize = 262_144;

/// Distinct prompts a window places; a new prompt past it gets no affinity until the window
/// ends (with `maxBatchSize: -1` this is what bounds a window's memory).
pub const MAX_WINDOW_GROUPS: usize = 65_536;

/// The `burst-prefix-cache-producer` parameters, as upstream (strictly decoded).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct BurstPrefixParameters {
    /// The window, ms.
    pub window_duration_ms: i64,
    /// Requests of one group per server (-1: unlimited).
    pub max_per_replica: i64,
    /// Tokens per block.
    pub block_size_tokens: i64,
    /// Most prompt tokens hashed (0: 2,048 blocks).
    pub max_prefix_tokens_to_match: i64,
    /// Shared leading blocks for prefix co-location (0: identical prompts only).
    pub min_colocate_blocks: i64,
    /// Requests per window (-1: unlimited).
    pub max_batch_size: i64,
    /// `requests` or `tokens`.
    pub balance_by: String,
}

impl Default for BurstPrefixParameters {
    fn default() -> Self {
        BurstPrefixParameters {
            window_duration_ms: 100,
            max_per_replica: UNLIMITED,
            block_size_tokens: 64,
            max_prefix_tokens_to_match: 0,
            min_colocate_blocks: 0,
            max_batch_size: 1000,
            balance_by: "requests".into(),
        }
    }
}

/// Checked settings of a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BurstSettings {
    /// The window.
    pub window: Duration,
    /// Requests of one group per server.
    pub max_per_replica: Option<usize>,
    /// How prompts are cut into blocks.
    pub layout: BlockLayout,
    /// Shared leading blocks for prefix co-location (0: off).
    pub min_colocate_blocks: usize,
    /// Requests per window.
    pub max_batch_size: Option<usize>,
    /// Balance by prefix blocks rather than requests.
    pub by_tokens: bool,
}

impl BurstPrefixParameters {
    /// Upstream's checks, with its words.
    pub fn settings(&self) -> Result<BurstSettings, PluginError> {
        let invalid = |field: &'static str, reason: String| {
            PluginError::invalid(field, format!("invalid configuration: {reason}"))
        };
        if self.window_duration_ms <= 0 {
            return Err(invalid(
                "windowDurationMs",
                format!(
                    "windowDurationMs must be > 0 (current value: {})",
                    self.window_duration_ms
                ),
            ));
        }
        if self.window_duration_ms > MAX_WINDOW_MS {
            return Err(invalid(
                "windowDurationMs",
                format!(
                    "windowDurationMs must be <= {MAX_WINDOW_MS} (current value: {})",
                    self.window_duration_ms
                ),
            ));
        }
        if self.max_per_replica != UNLIMITED && self.max_per_replica < 1 {
            return Err(invalid(
                "maxPerReplica",
                format!(
                    "maxPerReplica must be -1 (unlimited) or >= 1 (current value: {})",
                    self.max_per_replica
                ),
            ));
        }
        if self.block_size_tokens <= 0 {
            return Err(invalid(
                "blockSizeTokens",
                format!(
                    "blockSizeTokens must be > 0 (current value: {})",
                    self.block_size_tokens
                ),
            ));
        }
        if self.max_prefix_tokens_to_match < 0 {
            return Err(invalid(
                "maxPrefixTokensToMatch",
                format!(
                    "maxPrefixTokensToMatch must be >= 0 (current value: {})",
                    self.max_prefix_tokens_to_match
                ),
            ));
        }
        if self.max_prefix_tokens_to_match > 0
            && self.max_prefix_tokens_to_match < self.block_size_tokens
        {
            return Err(invalid(
                "maxPrefixTokensToMatch",
                format!(
                    "maxPrefixTokensToMatch ({}) must be 0 or >= blockSizeTokens ({}); a smaller \
                     positive value yields zero prefix blocks",
                    self.max_prefix_tokens_to_match, self.block_size_tokens
                ),
            ));
        }
        if self.min_colocate_blocks < 0 {
            return Err(invalid(
                "minColocateBlocks",
                format!(
                    "minColocateBlocks must be >= 0 (current value: {})",
                    self.min_colocate_blocks
                ),
            ));
        }
        if self.max_batch_size != UNLIMITED && self.max_batch_size < 1 {
            return Err(invalid(
                "maxBatchSize",
                format!(
                    "maxBatchSize must be -1 (unlimited) or >= 1 (current value: {})",
                    self.max_batch_size
                ),
            ));
        }
        let by_tokens = match self.balance_by.as_str() {
            "" | "requests" => false,
            "tokens" => true,
            other => {
                return Err(invalid(
                    "balanceBy",
                    format!(
                        "balanceBy must be \"requests\" or \"tokens\" (current value: {other:?})"
                    ),
                ));
            }
        };
        let block = self.block_size_tokens as usize;
        let max_blocks = if self.max_prefix_tokens_to_match > 0 {
            self.max_prefix_tokens_to_match as usize / block
        } else {
            DEFAULT_MAX_BLOCKS
        };
        let cap = |v: i64| (v != UNLIMITED).then(|| usize::try_from(v).unwrap_or(usize::MAX));
        Ok(BurstSettings {
            window: Duration::from_millis(self.window_duration_ms as u64),
            max_per_replica: cap(self.max_per_replica),
            layout: BlockLayout::new(block, max_blocks),
            min_colocate_blocks: self.min_colocate_blocks as usize,
            max_batch_size: cap(self.max_batch_size),
            by_tokens,
        })
    }
}

/// The start-up line: what Shepherd does instead of upstream's batch.
pub const WARNING: &str = "requests are not held for the window: each is steered as it \
    arrives to where the first request of its prompt in the window went (that first one gets \
    no affinity and the other scorers place it), within `maxPerReplica`, then to the least \
    window-loaded server; past `maxBatchSize` a request gets no affinity (upstream fails it)";

/// One prompt's placements in the window.
#[derive(Debug, Default)]
struct Group {
    /// `(server, requests)` in placement order.
    placed: Vec<(EndpointId, usize)>,
}

impl Group {
    fn count(&self, on: EndpointId) -> usize {
        self.placed
            .iter()
            .find(|(e, _)| *e == on)
            .map_or(0, |(_, n)| *n)
    }

    fn add(&mut self, on: EndpointId) -> bool {
        match self.placed.iter_mut().find(|(e, _)| *e == on) {
            Some((_, n)) => {
                *n += 1;
                false
            }
            None => {
                self.placed.push((on, 1));
                true
            }
        }
    }
}

/// What one window knows.
#[derive(Debug, Default)]
struct Window {
    started: Option<Timestamp>,
    requests: usize,
    /// The window's work in the balancing unit: requests, or (by tokens) the block count of
    /// every distinct prompt (upstream's fair-share total).
    total: usize,
    /// By the prompt's last block key and block count.
    groups: HashMap<(u64, usize), Group>,
    /// Block key → servers holding it from this window's placements.
    holders: HashMap<u64, Vec<EndpointId>>,
    /// Per-server load: requests, or prefix blocks to prefill.
    load: HashMap<EndpointId, usize>,
}

/// A window of placements over a pool (see the module docs).
#[derive(Debug)]
pub struct BurstWindow {
    settings: BurstSettings,
    pool: Arc<Pool>,
    window: Mutex<Window>,
    /// Requests that found their window full, ever.
    overflowed: std::sync::atomic::AtomicU64,
}

impl BurstWindow {
    /// A window with `settings` over `pool`'s servers.
    pub fn new(settings: BurstSettings, pool: Arc<Pool>) -> Self {
        BurstWindow {
            settings,
            pool,
            window: Mutex::new(Window::default()),
            overflowed: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Requests given no affinity because their window was full (`maxBatchSize`), ever.
    pub fn overflowed(&self) -> u64 {
        self.overflowed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The settings.
    pub fn settings(&self) -> &BurstSettings {
        &self.settings
    }

    /// Where a request whose prompt hashes to `keys` is steered at `now`, if anywhere.
    pub fn assign(&self, keys: &[BlockKey], now: Timestamp) -> Option<EndpointId> {
        let last = keys.last()?.get();
        let mut w = self.window.lock();
        if w.started
            .is_none_or(|at| now.saturating_since(at) >= self.settings.window)
        {
            *w = Window {
                started: Some(now),
                ..Window::default()
            };
        }
        if self
            .settings
            .max_batch_size
            .is_some_and(|cap| w.requests >= cap)
        {
            self.overflowed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        w.requests += 1;
        let key = (last, keys.len());
        let placed = w.groups.get(&key).is_some_and(|g| !g.placed.is_empty());
        w.total += match (self.settings.by_tokens, placed) {
            (false, _) => 1,
            (true, false) => keys.len(),
            (true, true) => 0,
        };
        let target = if placed {
            self.next_of_group(&w, key)
        } else {
            self.by_shared_prefix(&w, keys)
        }?;
        self.place(&mut w, key, keys, target);
        Some(target)
    }

    /// Records where a request that got no affinity went: its group's replica for the rest of
    /// the window.
    pub fn anchor(&self, keys: &[BlockKey], picked: EndpointId) {
        let Some(last) = keys.last() else {
            return;
        };
        let mut w = self.window.lock();
        if w.started.is_none() {
            return;
        }
        self.place(&mut w, (last.get(), keys.len()), keys, picked);
    }

    /// The group's first replica with room, else the least-loaded server with room, else the
    /// least-loaded server.
    fn next_of_group(&self, w: &Window, key: (u64, usize)) -> Option<EndpointId> {
        let group = w.groups.get(&key)?;
        let room = |on: EndpointId| {
            self.settings
                .max_per_replica
                .is_none_or(|cap| group.count(on) < cap)
        };
        if let Some((on, _)) = group.placed.iter().find(|(on, _)| room(*on)) {
            return Some(*on);
        }
        let snapshot = self.pool.load();
        let servers = snapshot.endpoints();
        least_loaded(servers.iter().filter(|e| room(e.id())), &w.load)
            .or_else(|| least_loaded(servers.iter(), &w.load))
    }

    /// A new prompt sharing at least `minColocateBlocks` leading blocks with one placed in the
    /// window: the server holding the longest such prefix, below its fair share.
    fn by_shared_prefix(&self, w: &Window, keys: &[BlockKey]) -> Option<EndpointId> {
        let min = self.settings.min_colocate_blocks;
        if min == 0 || keys.len() < min {
            return None;
        }
        let held = longest_prefix(&w.holders, keys);
        let servers = self.pool.load().endpoints().len().max(1);
        let fair_share = w.total.div_ceil(servers);
        held.into_iter()
            .filter(|(on, blocks)| {
                *blocks >= min && w.load.get(on).copied().unwrap_or(0) < fair_share
            })
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(on, _)| on)
    }

    fn place(&self, w: &mut Window, key: (u64, usize), keys: &[BlockKey], on: EndpointId) {
        if !w.groups.contains_key(&key) && w.groups.len() >= MAX_WINDOW_GROUPS {
            return;
        }
        let first_touch = w.groups.entry(key).or_default().add(on);
        let charge = if !self.settings.by_tokens {
            1
        } else if first_touch {
            // The prefix once per server, less the leading blocks it already holds.
            let held = longest_prefix(&w.holders, keys)
                .into_iter()
                .find(|(e, _)| *e == on)
                .map_or(0, |(_, n)| n);
            keys.len().saturating_sub(held)
        } else {
            0
        };
        *w.load.entry(on).or_default() += charge;
        let mut remembered = w.holders.len();
        for k in keys {
            let holders = match w.holders.get_mut(&k.get()) {
                Some(holders) => holders,
                None if remembered < MAX_WINDOW_BLOCKS => {
                    remembered += 1;
                    w.holders.entry(k.get()).or_default()
                }
                None => break,
            };
            if !holders.contains(&on) {
                holders.push(on);
            }
        }
    }
}

/// Per server, the leading blocks of `keys` it holds in the window (a whole prompt is
/// recorded at once, so holding block i means holding blocks 0..=i).
fn longest_prefix(
    holders: &HashMap<u64, Vec<EndpointId>>,
    keys: &[BlockKey],
) -> Vec<(EndpointId, usize)> {
    let mut counts: Vec<(EndpointId, usize)> = Vec::new();
    for k in keys {
        let Some(on) = holders.get(&k.get()).filter(|h| !h.is_empty()) else {
            break;
        };
        for e in on {
            match counts.iter_mut().find(|(id, _)| id == e) {
                Some((_, n)) => *n += 1,
                None => counts.push((*e, 1)),
            }
        }
    }
    counts
}

/// The least window-loaded server, then fewer running requests, then lower address.
fn least_loaded<'a>(
    servers: impl Iterator<Item = &'a Arc<Endpoint>>,
    load: &HashMap<EndpointId, usize>,
) -> Option<EndpointId> {
    servers
        .min_by(|a, b| {
            let la = load.get(&a.id()).copied().unwrap_or(0);
            let lb = load.get(&b.id()).copied().unwrap_or(0);
            la.cmp(&lb)
                .then(a.load_metrics().running.cmp(&b.load_metrics().running))
                .then(a.address().cmp(b.address()))
        })
        .map(|e| e.id())
}

/// Builds a `burst-prefix-cache-producer`: a [`PrefixProducer`] in burst mode, kept in the
/// shared resources under the plugin's name for its `prefix-cache-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: BurstPrefixParameters = args.parse()?;
    let settings = parameters.settings()?;
    let index = Arc::new(PrefixIndex::new(PrefixIndexConfig {
        layout: settings.layout,
        default_capacity: 1,
    }));
    let window = Arc::new(BurstWindow::new(settings, Arc::clone(args.pool)));
    let producer = Arc::new(PrefixProducer::burst(index, window, args.name));
    args.resources.insert(args.name, Arc::clone(&producer));
    Ok(PluginInstance::default().with_pick_hook(producer as Arc<dyn PickHook>))
}

#[cfg(test)]
mod tests;
