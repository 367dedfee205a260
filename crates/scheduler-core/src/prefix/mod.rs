//! The prefix-cache index: which endpoints are believed to hold which prompt blocks.
//!
//! A prompt becomes bytes (text as UTF-8; token ids as 4 little-endian bytes each), the bytes
//! become blocks of `block_tokens` pseudo tokens of [`BYTES_PER_TOKEN`] bytes (a trailing
//! partial block is not indexed), and the blocks become a chain of hashes seeded by the model,
//! the LoRA adapter and a salt ([`chain_seed`], [`BlockChain`]): a block's key stands for the
//! block *and everything before it*.
//!
//! [`PrefixIndex`] maps keys to the endpoints believed to hold them. A lookup walks the chain
//! and counts, for every endpoint, the consecutive blocks it holds from the start; it hashes
//! only as far as some endpoint still matches, so a long prompt whose shared part ends early
//! costs little. An insert (at pick time, for the endpoint picked) finishes hashing and records
//! every block. Each endpoint keeps at most its capacity in blocks — from its KV-cache metrics
//! when known ([`PrefixIndexConfig::capacity_for`]), else a default — evicting its coldest
//! blocks first, so memory is bounded by the sum of capacities. Endpoints that leave the pool
//! are forgotten (the index is a [`MembershipListener`](crate::endpoint::MembershipListener)).
//! Capacities never exceed [`MAX_CAPACITY_PER_ENDPOINT`], whatever a server reports, and
//! [`PrefixIndex::stats`] gives a runtime the counters to export as metrics.
//!
//! Keys carry their shard: every key of a chain lives in the shard its first block chose, so a
//! lookup takes one read lock, and picks for different prefixes work on different shards.
//! An endpoint's eviction queue has its own lock, held only to queue and count entries: an
//! insert updates the tables first and the eviction clock runs over a batch taken off the
//! queue, both with the endpoint unlocked, so picks sending requests to the same endpoint
//! overlap instead of waiting for each other's table work. Which lock protects what, the order
//! they are taken in and how an insert racing the removal of its endpoint settles are written
//! down in the crate-private `locking` module, and checked by seeded interleaving tests.
//!
//! Within a shard, blocks held by one or two endpoints keep their holders inline in a 16-byte
//! slot; blocks held by three or more (shared prefixes) live in a separate, much smaller array
//! and point to an interned, reference-counted holder set, so a lookup sees "same holders as the
//! previous block" by comparing ids. An insert also records on each shared block the *run* of
//! following blocks of its chain with the same set (its length and last key). A lookup that
//! reaches such a block hashes on to the run's end and, if its own chain has the run's last key
//! there (chained keys: the whole prefix is then the same) and no block has left the set since
//! (each set counts departures), skips the run's probes. The result is exact either way: runs
//! only save probes.
//!
//! ```
//! use shepherd_scheduler_core::endpoint::EndpointId;
//! use shepherd_scheduler_core::prefix::{PrefixIndex, PrefixIndexConfig, chain_seed};
//! use shepherd_scheduler_core::request::Prompt;
//!
//! let index = PrefixIndex::new(PrefixIndexConfig::default());
//! let seed = chain_seed("llama", None, "");
//! let system = "You are a helpful assistant. ".repeat(40); // 1,160 bytes: 4 full blocks
//!
//! // Request one went to endpoint #1.
//! let first = Prompt::Text(format!("{system}What is Rust?"));
//! let mut chain = index.chain(seed, &first);
//! index.insert_chain(EndpointId(1), &mut chain, &first, None);
//!
//! // Request two shares the system prompt: #1 holds its first 4 of 5 blocks.
//! let second = Prompt::Text(format!("{system}{}", "Tell me about Go. ".repeat(20)));
//! let mut chain = index.chain(seed, &second);
//! let found = index.match_prefix(&mut chain, &second);
//! assert_eq!(found.total_blocks(), 5);
//! assert_eq!(found.matched_blocks(EndpointId(1)), 4);
//! assert_eq!(found.score(EndpointId(2)), 0.0);
//!
//! // #1 leaves the pool: nothing of it remains.
//! index.remove_endpoint(EndpointId(1));
//! assert_eq!(index.entries(), 0);
//! ```

mod block_hash;
mod chain;
mod chunk_queue;
mod config;
mod endpoint_blocks;
mod holder_sets;
mod home_filter;
mod index;
mod locking;
mod matched;
mod retired;
mod slots;
mod stats;
mod table;
#[cfg(test)]
mod tests;

pub use chain::{
    BYTES_PER_TOKEN, BlockChain, BlockKey, BlockLayout, ChainLink, SHARD_BITS, SHARDS, chain_seed,
};
pub use config::{MAX_CAPACITY_PER_ENDPOINT, PrefixIndexConfig};
pub use index::PrefixIndex;
pub use index::journal::Journal;
pub use matched::PrefixMatch;
pub use stats::PrefixIndexStats;
