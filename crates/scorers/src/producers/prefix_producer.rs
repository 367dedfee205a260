//! [`PrefixProducer`]: one prefix index, and the per-request match every consumer of it reads.
//!
//! A producer hashes the request's prompt once per scheduling cycle, looks it up in its
//! [`PrefixIndex`], and leaves the result in the cycle as a [`PrefixMatchInfo`]: matched blocks
//! per endpoint, total blocks, tokens per block. Every consumer (the `prefix-cache-scorer`, the
//! `prefix-cache-affinity-filter`, the `no-hit-lru-scorer`) asks the producer for it; the first
//! asks compute it, the others reuse it. After the pick, the first consumer's pick hook records
//! the prompt's blocks for the picked endpoint; later hooks of the same cycle see it done.
//!
//! Two producers over the same index share one entry (entries are keyed by the index), so a
//! consumer that wraps an index it found in the shared resources agrees with its owner.
//!
//! # A precise producer tokenizes only what the decision needs
//!
//! With a `token-producer` that can tokenize a piece at a time ([`TokenProducer::begin`]), a
//! precise producer first tokenizes the prompt's first block only. When no endpoint holds
//! that block, every endpoint matches 0 blocks, so every score reading the match is the same
//! whatever the prompt's length: the match stops there ([`PrefixMatchInfo::is_complete`] is
//! `false`). When some endpoint holds it, the rest is tokenized at once (the scores divide by
//! the prompt's block count), continuing where the first block stopped.
//!
//! What needs the whole prompt comes after the pick: the pick hook hands the rest of the
//! tokenization to the token producer's background thread ([`TokenProducer::finish_later`]),
//! which puts the prompt's pieces in the token cache and, with `speculativeIndexing`, records
//! the speculative entries for the picked endpoint (with neither a token cache nor
//! speculation, nothing reads the rest and it is not tokenized). Handing it over copies the
//! prompt's text (a completions prompt belongs to the request), on the picking thread. The trade-off: those entries appear when
//! the background tokenization ends (milliseconds for long prompts) rather than before the
//! pick returns, and a full queue drops the work (counted). A dry run (no pick hooks)
//! finishes nothing.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::endpoint::EndpointId;
use shepherd_scheduler_core::kv_events::{PreciseIndex, precise_seed};
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Extensions};
use shepherd_scheduler_core::prefix::{BlockChain, PrefixIndex, PrefixMatch, chain_seed};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scheduler_core::resources::Resources;

use super::TokenProducer;
use super::burst_prefix::BurstWindow;
use super::token::{BegunPrompt, PartialTokens};

/// The prefix match of the current request against one producer's index (a cycle
/// extension, read through [`PrefixProducer::produce`] or [`PrefixMatchInfo::find`]).
#[derive(Debug)]
pub struct PrefixMatchInfo {
    key: usize,
    chain: BlockChain,
    /// The prompt the chain hashes when it is not the request's own (real token ids).
    tokenized: Option<Prompt>,
    found: PrefixMatch,
    block_tokens: usize,
    recorded: bool,
    /// The prompt's tokenization, when it stopped at the first block (held by no endpoint).
    pending: Option<PartialTokens>,
}

impl PrefixMatchInfo {
    /// Leading blocks of the request that `endpoint` is believed to hold.
    pub fn match_blocks(&self, endpoint: &Endpoint) -> usize {
        self.found.matched_blocks(endpoint.id())
    }

    /// Blocks in the request (0 when the prompt is shorter than one block).
    ///
    /// When the match stopped early ([`is_complete`](Self::is_complete) is `false`: no
    /// endpoint holds the first block), the blocks tokenized before it stopped, a lower
    /// bound; every endpoint's match is 0 then, so every score is the same as with the whole
    /// count.
    pub fn total_blocks(&self) -> usize {
        self.found.total_blocks()
    }

    /// Whether the whole prompt was hashed; `false` when a precise producer stopped at the
    /// first block, which no endpoint holds (see the module docs).
    pub fn is_complete(&self) -> bool {
        self.pending.is_none()
    }

    /// Tokens per block.
    pub fn block_size_tokens(&self) -> usize {
        self.block_tokens
    }

    /// `matched / total` for `endpoint` (0 when the request has no full block).
    pub fn ratio(&self, endpoint: &Endpoint) -> f64 {
        self.found.score(endpoint.id())
    }

    /// Whether any endpoint holds at least the first block (a "warm" request).
    pub fn any_hit(&self) -> bool {
        !self.found.matches().is_empty()
    }

    /// The match a producer over `index` left in `extensions` this cycle, if any.
    pub fn find<'e>(extensions: &'e Extensions, index: &Arc<PrefixIndex>) -> Option<&'e Self> {
        let key = index_key(index);
        extensions
            .get::<Produced>()
            .and_then(|p| p.live().iter().find(|m| m.key == key))
    }
}

/// Every producer's match for the current request: the first `live` entries; the rest are
/// an earlier cycle's, kept so that their buffers (the chain's keys, the match) are reused.
#[derive(Debug, Default)]
struct Produced {
    infos: Vec<PrefixMatchInfo>,
    live: usize,
}

impl Produced {
    fn live(&self) -> &[PrefixMatchInfo] {
        self.infos.get(..self.live).unwrap_or_default()
    }

    fn live_mut(&mut self) -> &mut [PrefixMatchInfo] {
        let live = self.live.min(self.infos.len());
        &mut self.infos[..live]
    }

    /// Forgets the entries (an earlier cycle's), keeping them for reuse.
    fn recycle(&mut self) {
        self.live = 0;
    }

    /// An earlier cycle's entry to refill, if one is kept.
    fn take_spare(&mut self) -> Option<PrefixMatchInfo> {
        (self.infos.len() > self.live).then(|| self.infos.swap_remove(self.live))
    }

    /// Adds `info` as a live entry; returns its position.
    fn push(&mut self, info: PrefixMatchInfo) -> usize {
        self.infos.push(info);
        let last = self.infos.len() - 1;
        let at = self.live.min(last);
        self.infos.swap(at, last);
        self.live = at + 1;
        at
    }
}

fn index_key(index: &Arc<PrefixIndex>) -> usize {
    Arc::as_ptr(index) as usize
}

/// Hashes, matches and records prompts over one [`PrefixIndex`].
///
/// An *approximate* producer (`approx-prefix-cache-producer`) records every pick: the index is
/// its guess of what each server holds. A *precise* producer (`precise-prefix-cache-producer`)
/// never records a pick: its index is written by the servers' KV-cache events
/// ([`PreciseIndex`](shepherd_scheduler_core::kv_events::PreciseIndex)), and its chains are
/// seeded the way those events are keyed ([`precise_seed`]).
#[derive(Debug)]
pub struct PrefixProducer {
    index: Arc<PrefixIndex>,
    auto_tune: bool,
    precise: bool,
    tokens: Option<TokenSource>,
    speculation: Option<Speculation>,
    /// A `burst-prefix-cache-producer`'s window: matches come from its placements, not from
    /// the index (which only hashes).
    burst: Option<Arc<BurstWindow>>,
    name: Arc<str>,
}

/// Upstream's speculative indexing: a precise producer records each pick's blocks in its
/// index for `ttl`, until the server's events confirm them.
#[derive(Debug)]
struct Speculation {
    index: Arc<PreciseIndex>,
    ttl: Duration,
}

/// Where a precise producer gets the request's real token ids: the first exact
/// [`TokenProducer`] (a `token-producer` with a tokenizer) in the shared resources, found on
/// the first cycle (plugins may be declared in any order).
#[derive(Debug)]
struct TokenSource {
    resources: Arc<Resources>,
    resolved: OnceLock<Option<Arc<TokenProducer>>>,
}

impl TokenSource {
    fn get(&self) -> Option<&Arc<TokenProducer>> {
        self.resolved
            .get_or_init(|| {
                self.resources
                    .all::<TokenProducer>()
                    .into_iter()
                    .map(|(_, producer)| producer)
                    .find(|producer| producer.is_exact())
            })
            .as_ref()
    }
}

impl PrefixProducer {
    /// A producer over `index`; `auto_tune` sizes each endpoint's memory from its KV-cache
    /// metrics; `name` labels its metrics.
    pub fn new(index: Arc<PrefixIndex>, auto_tune: bool, name: &str) -> Self {
        PrefixProducer {
            index,
            auto_tune,
            precise: false,
            tokens: None,
            speculation: None,
            burst: None,
            name: Arc::from(name),
        }
    }

    /// A `burst-prefix-cache-producer` (see [`burst_prefix`](super::burst_prefix)): prompts
    /// are hashed with `index`'s layout (nothing is recorded in it), and each request's match
    /// is a full match on the server `window` steers it to, none elsewhere.
    pub fn burst(index: Arc<PrefixIndex>, window: Arc<BurstWindow>, name: &str) -> Self {
        PrefixProducer {
            burst: Some(window),
            ..PrefixProducer::new(index, false, name)
        }
    }

    /// A precise producer over `precise`'s index: picks are not recorded (unless
    /// `speculative_ttl` asks for speculative entries that last that long: see
    /// [`PreciseIndex::speculate`]), chains are seeded by the LoRA adapter alone, and requests
    /// are hashed from the token ids of an exact `token-producer` found in `resources` (else
    /// from their own prompt: token ids, or 4-byte pseudo tokens). `name` labels its metrics.
    pub fn precise(
        precise: &Arc<PreciseIndex>,
        speculative_ttl: Option<Duration>,
        name: &str,
        resources: &Arc<Resources>,
    ) -> Self {
        PrefixProducer {
            index: Arc::clone(precise.index()),
            auto_tune: false,
            precise: true,
            tokens: Some(TokenSource {
                resources: Arc::clone(resources),
                resolved: OnceLock::new(),
            }),
            speculation: speculative_ttl.map(|ttl| Speculation {
                index: Arc::clone(precise),
                ttl,
            }),
            burst: None,
            name: Arc::from(name),
        }
    }

    /// The exact token producer this (precise) producer hashes requests with, if any.
    pub fn token_producer(&self) -> Option<&Arc<TokenProducer>> {
        self.tokens.as_ref().and_then(TokenSource::get)
    }

    /// Whether this producer reads a precise (event-fed) index.
    pub fn is_precise(&self) -> bool {
        self.precise
    }

    /// The index this producer reads and records into.
    pub fn index(&self) -> &Arc<PrefixIndex> {
        &self.index
    }

    /// Whether endpoint memory is sized from metrics.
    pub fn auto_tune(&self) -> bool {
        self.auto_tune
    }

    fn seed(&self, request: &InferenceRequest) -> u64 {
        if self.precise {
            precise_seed(request.lora.as_deref())
        } else {
            chain_seed(&request.model, request.lora.as_deref(), "")
        }
    }

    fn fresh_chain(&self, request: &InferenceRequest, prompt: &Prompt) -> BlockChain {
        self.index.chain(self.seed(request), prompt)
    }

    fn position(&self, extensions: &Extensions) -> Option<usize> {
        let key = index_key(&self.index);
        extensions
            .get::<Produced>()
            .and_then(|p| p.live().iter().position(|m| m.key == key))
    }

    /// The request's match against this producer's index: computed on the first call of the
    /// cycle (which also publishes every endpoint's cached tokens as [`CachedPrefix`]), reused
    /// afterwards. Always `Some`; the option only spares a panic path.
    pub fn produce<'c>(&self, cycle: &'c mut CycleState<'_>) -> Option<&'c PrefixMatchInfo> {
        let at = match self.position(&cycle.extensions) {
            Some(at) => at,
            None => {
                let request = cycle.request;
                // A tokenizer failure falls back to the request's own prompt.
                let (tokenized, pending) = match self.token_producer() {
                    Some(tokens) => self.tokenize(tokens, request),
                    None => (None, None),
                };
                let prompt = match (&pending, &tokenized) {
                    (Some(partial), _) => Cow::Owned(Prompt::Tokens(partial.ids().to_vec())),
                    (None, Some(tokenized)) => Cow::Borrowed(tokenized.as_ref()),
                    (None, None) => Cow::Borrowed(&request.prompt),
                };
                // An earlier cycle's entry lends its buffers (this thread's last pick's).
                let spare = cycle
                    .extensions
                    .get_or_insert_reused(Produced::default, Produced::recycle)
                    .take_spare();
                let seed = self.seed(request);
                let (mut chain, mut found) = match spare {
                    Some(spare) => {
                        let mut chain = spare.chain;
                        self.index.reset_chain(&mut chain, seed, &prompt);
                        (chain, spare.found)
                    }
                    None => (self.index.chain(seed, &prompt), PrefixMatch::new()),
                };
                match &self.burst {
                    Some(window) => {
                        let total = chain.complete(&prompt).len();
                        let steered = window.assign(chain.computed(), cycle.now);
                        found.set(total, steered.map(|on| (on, total)));
                    }
                    None => self.index.match_into(&mut chain, &prompt, &mut found),
                }
                drop(prompt);
                let tokenized = match tokenized {
                    Some(Cow::Owned(prompt)) => Some(prompt),
                    _ => None,
                };
                let block_tokens = self.index.config().layout.block_tokens();
                let per_block = block_tokens as u64;
                CachedPrefix::publish(
                    &mut cycle.extensions,
                    found
                        .matches()
                        .iter()
                        .map(|&(id, blocks)| (id, blocks as u64 * per_block)),
                );
                let info = PrefixMatchInfo {
                    key: index_key(&self.index),
                    chain,
                    tokenized,
                    found,
                    block_tokens,
                    recorded: false,
                    pending,
                };
                Self::push(&mut cycle.extensions, info)
            }
        };
        cycle
            .extensions
            .get::<Produced>()
            .and_then(|produced| produced.live().get(at))
    }

    /// The request's prompt as `tokens` gives it: whole, or (the second value) only its first
    /// block when no endpoint holds that block. `(None, None)`: the tokenizer failed; the
    /// request's own prompt is used.
    fn tokenize<'r>(
        &self,
        tokens: &TokenProducer,
        request: &'r InferenceRequest,
    ) -> (Option<Cow<'r, Prompt>>, Option<PartialTokens>) {
        let mut partial = match tokens.begin(request) {
            Ok(BegunPrompt::Whole(prompt)) => return (Some(prompt), None),
            Ok(BegunPrompt::Partial(partial)) => partial,
            Err(_) => return (None, None),
        };
        let block_tokens = self.index.config().layout.block_tokens();
        if tokens.extend(request, &mut partial, block_tokens).is_err() {
            return (None, None);
        }
        if !partial.is_complete() && !self.first_block_held(request, partial.ids()) {
            return (None, Some(partial));
        }
        match tokens.finish(request, partial) {
            Ok(ids) => (Some(Cow::Owned(Prompt::Tokens(ids))), None),
            Err(_) => (None, None),
        }
    }

    /// Whether any endpoint holds the first block of a prompt starting with `ids`.
    fn first_block_held(&self, request: &InferenceRequest, ids: &[u32]) -> bool {
        let block_tokens = self.index.config().layout.block_tokens();
        let Some(first) = ids.get(..block_tokens) else {
            return true;
        };
        let probe = Prompt::Tokens(first.to_vec());
        let mut chain = self.index.chain(self.seed(request), &probe);
        let mut found = PrefixMatch::new();
        self.index.match_into(&mut chain, &probe, &mut found);
        !found.matches().is_empty()
    }

    fn push(extensions: &mut Extensions, info: PrefixMatchInfo) -> usize {
        extensions
            .get_or_insert_reused(Produced::default, Produced::recycle)
            .push(info)
    }

    /// Records the request's blocks for `picked`, once per cycle however many consumers call
    /// it (the prompt is hashed here when no consumer produced a match this cycle). A precise
    /// producer records nothing: the server's events will say what it cached.
    pub fn record(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        if let Some(window) = &self.burst {
            // A request the window steered nowhere anchors its prompt where it went.
            let Some(at) = self.position(&cycle.extensions) else {
                return;
            };
            if let Some(info) = cycle
                .extensions
                .get_mut::<Produced>()
                .and_then(|produced| produced.live_mut().get_mut(at))
                && !std::mem::replace(&mut info.recorded, true)
                && info.found.matches().is_empty()
            {
                window.anchor(info.chain.computed(), picked.id());
            }
            return;
        }
        if self.precise {
            self.speculate(cycle, picked);
            return;
        }
        let capacity = if self.auto_tune {
            self.index.config().capacity_for(&picked.metrics())
        } else {
            self.index.config().default_capacity
        };
        let prompt = &cycle.request.prompt;
        match self.position(&cycle.extensions) {
            Some(at) => {
                let Some(produced) = cycle.extensions.get_mut::<Produced>() else {
                    return;
                };
                let Some(info) = produced.live_mut().get_mut(at) else {
                    return;
                };
                if !info.recorded {
                    info.recorded = true;
                    self.index
                        .insert_chain(picked.id(), &mut info.chain, prompt, Some(capacity));
                }
            }
            None => {
                let mut chain = self.fresh_chain(cycle.request, prompt);
                self.index
                    .insert_chain(picked.id(), &mut chain, prompt, Some(capacity));
                let info = PrefixMatchInfo {
                    key: index_key(&self.index),
                    chain,
                    tokenized: None,
                    found: PrefixMatch::new(),
                    block_tokens: self.index.config().layout.block_tokens(),
                    recorded: true,
                    pending: None,
                };
                Self::push(&mut cycle.extensions, info);
            }
        }
    }

    /// A precise producer's work after the pick, once per cycle: the speculative entries for
    /// the picked endpoint, and the rest of a tokenization that stopped at the first block.
    fn speculate(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        if self.position(&cycle.extensions).is_none() {
            if self.speculation.is_none() {
                return;
            }
            // No consumer produced a match this cycle: produce it (and the chain) now.
            let _ = self.produce(cycle);
        }
        let now = cycle.now;
        let request = cycle.request;
        let Some(at) = self.position(&cycle.extensions) else {
            return;
        };
        let Some(info) = cycle
            .extensions
            .get_mut::<Produced>()
            .and_then(|produced| produced.live_mut().get_mut(at))
        else {
            return;
        };
        if info.recorded {
            return;
        }
        info.recorded = true;
        if let Some(partial) = info.pending.take() {
            self.finish_later(request, partial, picked.id(), now);
            return;
        }
        let Some(speculation) = &self.speculation else {
            return;
        };
        let prompt = info.tokenized.as_ref().unwrap_or(&request.prompt);
        let keys = info.chain.complete(prompt);
        speculation
            .index
            .speculate(picked.id(), keys, now, speculation.ttl);
    }

    /// Hands the rest of `partial` to the token producer's background thread, with the
    /// speculative entries for `picked` to record once the ids are known.
    fn finish_later(
        &self,
        request: &InferenceRequest,
        partial: PartialTokens,
        picked: EndpointId,
        now: Timestamp,
    ) {
        let Some(tokens) = self.token_producer() else {
            return;
        };
        let speculation = self
            .speculation
            .as_ref()
            .map(|s| (Arc::clone(&s.index), s.ttl));
        if speculation.is_none() && !tokens.is_caching() {
            // Nothing would read the rest.
            return;
        }
        let layout = self.index.config().layout;
        let seed = self.seed(request);
        tokens.finish_later(request, partial, move |ids| {
            if let Some((index, ttl)) = speculation {
                let prompt = Prompt::Tokens(ids);
                let mut chain = BlockChain::new(&layout, seed, &prompt);
                index.speculate(picked, chain.complete(&prompt), now, ttl);
            }
        });
    }
}

const ENTRIES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_entries",
    "(block, endpoint) entries held by the prefix-cache index.",
);
const ENDPOINTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_endpoints",
    "Endpoints the prefix-cache index remembers blocks for.",
);
const INSERTED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_inserted_blocks_total",
    "(block, endpoint) entries added to the prefix-cache index.",
);
const EVICTIONS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_evictions_total",
    "Entries evicted to keep endpoints within their capacity.",
);

impl MetricsSource for PrefixProducer {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let labels = [("plugin", &*self.name)];
        let stats = self.index.stats();
        v.gauge(ENTRIES, &labels, stats.entries as f64);
        v.gauge(ENDPOINTS, &labels, stats.endpoints as f64);
        v.counter(INSERTED, &labels, stats.inserted_blocks);
        v.counter(EVICTIONS, &labels, stats.evictions);
    }
}
