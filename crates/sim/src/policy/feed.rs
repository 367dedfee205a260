//! [`EngineFeed`]: what the simulated engines tell the peer plugins that a real deployment
//! tells their upstream routers — when a request's first token comes back, and which prompt
//! blocks each server's prefix cache holds (what vLLM's KV events report), and each server's
//! load as a periodic poll of its load endpoint reads it ([`LoadPoll`]).
//!
//! The runner creates one feed per run and puts it in the scheduler's shared
//! [`Resources`](shepherd_scheduler_core::resources::Resources) under [`FEED_NAME`] before the
//! plugins are built; a plugin factory finds it there ([`EngineFeed::from_resources`]), so
//! nobody downcasts a plugin. Without a runner (a plugin built elsewhere) the feed is empty:
//! no first tokens are reported and no server holds anything.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::endpoint::EndpointId;
//! use shepherd_scheduler_core::resources::Resources;
//! use shepherd_sim::policy::{EngineFeed, FEED_NAME};
//!
//! let resources = Resources::new();
//! let feed = resources.get_or_insert_with(FEED_NAME, EngineFeed::default);
//! assert!(!feed.wants_cached_blocks());
//! feed.publish_cached_blocks("7", [(EndpointId(1), 12)]);
//! assert_eq!(feed.cached_blocks("7", EndpointId(1)), 12);
//! assert_eq!(feed.cached_blocks("8", EndpointId(1)), 0); // another request: nothing known
//! ```

use std::sync::{Arc, Weak};

use ahash::AHashMap;
use parking_lot::Mutex;
use shepherd_scheduler_core::endpoint::EndpointId;
use shepherd_scheduler_core::resources::Resources;

/// The name the runner stores its [`EngineFeed`] under.
pub const FEED_NAME: &str = "shepherd-sim/engine-feed";

/// Told when a request's first token comes back from its server.
pub trait FirstTokenListener: Send + Sync {
    /// The request with id `request_id` has its first token.
    fn on_first_token(&self, request_id: &str);
}

/// The engines' side channel to the peer plugins. The runner feeds it; the peers read it (first tokens, engine caches).
#[derive(Default)]
pub struct EngineFeed {
    state: Mutex<FeedState>,
}

/// One server's load as its load endpoint reports it at a poll (SGLang's `/get_loads`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoadReport {
    /// Requests waiting in the server's queue.
    pub waiting: u32,
    /// Requests the server is running.
    pub running: u32,
    /// Prompt tokens of the waiting requests not found in the prefix cache.
    pub waiting_uncached_tokens: u64,
    /// KV-cache utilization in `[0, 1]`.
    pub kv_utilization: f64,
    /// Tokens the server has generated over its life (a poller turns two polls into a rate).
    pub generated_tokens: u64,
}

/// The servers' loads as one poll read them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadPoll {
    /// Counts the polls, from 1.
    pub seq: u64,
    /// When the poll sampled the servers (ns of simulated time).
    pub at_ns: u64,
    /// Each server's report.
    pub reports: Vec<(EndpointId, LoadReport)>,
}

#[derive(Default)]
struct FeedState {
    /// The shortest poll interval a plugin asked for (ns), and when the next poll is due.
    poll_interval_ns: Option<u64>,
    next_poll_ns: u64,
    last_poll: Option<Arc<LoadPoll>>,
    listeners: Vec<Weak<dyn FirstTokenListener>>,
    cache_readers: usize,
    /// The request whose cached blocks are published, and its leading cached prompt blocks
    /// per server.
    cached_for: String,
    cached: AHashMap<EndpointId, u32>,
}

impl std::fmt::Debug for EngineFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("EngineFeed")
            .field("listeners", &state.listeners.len())
            .field("cache_readers", &state.cache_readers)
            .finish()
    }
}

impl EngineFeed {
    /// The feed in `resources` (created empty when the embedder put none there).
    pub fn from_resources(resources: &Resources) -> Arc<EngineFeed> {
        resources.get_or_insert_with(FEED_NAME, EngineFeed::default)
    }

    /// Registers `listener` for first-token reports (kept weakly: it stops hearing when
    /// dropped).
    pub fn listen(&self, listener: Weak<dyn FirstTokenListener>) {
        self.state.lock().listeners.push(listener);
    }

    /// Whether anyone listens for first tokens (the runner skips the report otherwise).
    pub fn wants_first_tokens(&self) -> bool {
        !self.state.lock().listeners.is_empty()
    }

    /// Reports the first token of `request_id` to every listener.
    pub fn first_token(&self, request_id: &str) {
        let listeners: Vec<Arc<dyn FirstTokenListener>> = {
            let mut state = self.state.lock();
            state.listeners.retain(|l| l.strong_count() > 0);
            state.listeners.iter().filter_map(Weak::upgrade).collect()
        };
        for l in listeners {
            l.on_first_token(request_id);
        }
    }

    /// Declares that a plugin reads the servers' cached prompt blocks before each pick.
    pub fn read_cached_blocks(&self) {
        self.state.lock().cache_readers += 1;
    }

    /// Whether a plugin reads the servers' cached blocks (the runner skips the lookup
    /// otherwise).
    pub fn wants_cached_blocks(&self) -> bool {
        self.state.lock().cache_readers > 0
    }

    /// Publishes, for the request about to be picked, how many of its leading full prompt
    /// blocks each server's prefix cache holds (servers not listed hold none).
    pub fn publish_cached_blocks(
        &self,
        request_id: &str,
        blocks: impl IntoIterator<Item = (EndpointId, u32)>,
    ) {
        let mut state = self.state.lock();
        state.cached_for.clear();
        state.cached_for.push_str(request_id);
        state.cached.clear();
        state.cached.extend(blocks);
    }

    /// Leading full prompt blocks of `request_id` that `endpoint` caches, as last published
    /// (0 when nothing was published for this request).
    pub fn cached_blocks(&self, request_id: &str, endpoint: EndpointId) -> u32 {
        let state = self.state.lock();
        if state.cached_for != request_id {
            return 0;
        }
        state.cached.get(&endpoint).copied().unwrap_or(0)
    }

    /// Declares that a plugin polls the servers' loads every `interval_ns` (the shortest
    /// interval asked for wins; the first poll is due at once).
    pub fn poll_loads_every(&self, interval_ns: u64) {
        let mut state = self.state.lock();
        let interval = interval_ns.max(1);
        state.poll_interval_ns = Some(state.poll_interval_ns.map_or(interval, |i| i.min(interval)));
    }

    /// Whether a load poll is due at `now_ns` (the runner then reads the servers and
    /// [`EngineFeed::publish_load_poll`]s them; never when no plugin polls).
    pub fn load_poll_due(&self, now_ns: u64) -> bool {
        let state = self.state.lock();
        state.poll_interval_ns.is_some() && now_ns >= state.next_poll_ns
    }

    /// Stores the servers' loads read at `now_ns`; the next poll is due one interval after
    /// the slot this one filled.
    pub fn publish_load_poll(
        &self,
        now_ns: u64,
        reports: impl IntoIterator<Item = (EndpointId, LoadReport)>,
    ) {
        let mut state = self.state.lock();
        let interval = state.poll_interval_ns.unwrap_or(u64::MAX).max(1);
        let slots = (now_ns.saturating_sub(state.next_poll_ns) / interval).saturating_add(1);
        state.next_poll_ns = state
            .next_poll_ns
            .saturating_add(slots.saturating_mul(interval));
        let seq = state.last_poll.as_ref().map_or(1, |p| p.seq + 1);
        state.last_poll = Some(Arc::new(LoadPoll {
            seq,
            at_ns: now_ns,
            reports: reports.into_iter().collect(),
        }));
    }

    /// The latest load poll, if any.
    pub fn last_load_poll(&self) -> Option<Arc<LoadPoll>> {
        self.state.lock().last_poll.clone()
    }
}
