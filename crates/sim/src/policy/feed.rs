//! [`EngineFeed`]: what the simulated engines tell the peer plugins that a real deployment
//! tells their upstream routers — when a request's first token comes back, and which prompt
//! blocks each server's prefix cache holds (what vLLM's KV events report).
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

#[derive(Default)]
struct FeedState {
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
}
