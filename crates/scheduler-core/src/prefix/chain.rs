//! Chained block hashes of a prompt, computed lazily.

use xxhash_rust::xxh3::xxh3_64;

use super::block_hash;

use crate::request::Prompt;

/// Bytes per pseudo token: text prompts are cut into tokens of this many bytes, and token ids
/// are hashed as this many little-endian bytes each.
pub const BYTES_PER_TOKEN: usize = 4;

/// Bits of a [`BlockKey`] that name its shard.
pub const SHARD_BITS: u32 = 6;

/// Number of shards of the index (`2^SHARD_BITS`).
pub const SHARDS: usize = 1 << SHARD_BITS;

const HASH_BITS: u32 = 64 - SHARD_BITS;
const HASH_MASK: u64 = (1u64 << HASH_BITS) - 1;

/// Blocks hashed ahead at a time while a lookup starts walking the chain (later batches grow
/// with the match, up to [`MAX_HASH_SPAN`]).
pub(crate) const HASH_BATCH: usize = 8;

/// Most blocks a long lookup hashes ahead of its probes at once.
pub(crate) const MAX_HASH_SPAN: usize = 256;

/// One block of a prompt, as the index knows it: the chained hash of the block and everything
/// before it, with the index shard of its chain in the top [`SHARD_BITS`] bits.
///
/// Every key of one chain lives in the same shard (the one its first block picked), so a lookup
/// takes one lock however long the prompt is. Never zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockKey(u64);

impl BlockKey {
    /// A key from its raw 64-bit form (as [`BlockKey::get`] returned it). Zero becomes one.
    pub fn from_raw(raw: u64) -> Self {
        BlockKey(if raw & HASH_MASK == 0 { raw | 1 } else { raw })
    }

    /// The key tagged for `shard` from a chained hash.
    fn tagged(hash: u64, shard: usize) -> Self {
        BlockKey::from_raw((hash & HASH_MASK) | ((shard as u64) << HASH_BITS))
    }

    /// The raw 64-bit form.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The index shard holding this key.
    pub fn shard(self) -> usize {
        (self.0 >> HASH_BITS) as usize
    }
}

/// How prompts are cut into blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLayout {
    block_tokens: usize,
    max_blocks: usize,
}

impl BlockLayout {
    /// Blocks of `block_tokens` tokens (at least 1), at most `max_blocks` per request.
    pub fn new(block_tokens: usize, max_blocks: usize) -> Self {
        BlockLayout {
            block_tokens: block_tokens.max(1),
            max_blocks,
        }
    }

    /// Tokens per block.
    pub fn block_tokens(&self) -> usize {
        self.block_tokens
    }

    /// Most blocks indexed per request.
    pub fn max_blocks(&self) -> usize {
        self.max_blocks
    }

    /// Complete blocks of `prompt` that are indexed (a trailing partial block is not).
    pub fn blocks_of(&self, prompt: &Prompt) -> usize {
        let tokens = match prompt {
            Prompt::Text(s) => s.len() / BYTES_PER_TOKEN,
            Prompt::Tokens(t) => t.len(),
        };
        (tokens / self.block_tokens).min(self.max_blocks)
    }
}

impl Default for BlockLayout {
    /// 64-token blocks, up to 2,048 of them (131,072 tokens).
    fn default() -> Self {
        BlockLayout::new(64, 2048)
    }
}

/// The seed of every chain for one model, LoRA adapter and salt: h₀ = xxh3(model ‖ LoRA ‖ salt),
/// each part length-prefixed so no two different triples collide by concatenation.
pub fn chain_seed(model: &str, lora: Option<&str>, salt: &str) -> u64 {
    let lora = lora.unwrap_or("");
    let parts = [model, lora, salt];
    let len: usize = parts.iter().map(|p| p.len() + 8).sum();
    // Short names (every pick's case) are laid out on the stack, longer ones on the heap.
    let mut stack = [0u8; 256];
    let mut heap = Vec::new();
    let bytes: &mut [u8] = match stack.get_mut(..len) {
        Some(bytes) => bytes,
        None => {
            heap.resize(len, 0);
            &mut heap
        }
    };
    let mut at = 0;
    for part in parts {
        bytes[at..at + 8].copy_from_slice(&(part.len() as u64).to_le_bytes());
        bytes[at + 8..at + 8 + part.len()].copy_from_slice(part.as_bytes());
        at += 8 + part.len();
    }
    xxh3_64(bytes)
}

/// Where a chain stands after one of its blocks: the block's key, and what the next block's
/// hash chains onto.
///
/// A [`BlockChain`] hashes a whole prompt from its seed. Model servers report cached blocks
/// piecewise instead (a KV-cache event names the blocks it stores and the block before them),
/// so [`ChainLink::extend`] continues a chain from the link of the block before, giving
/// exactly the keys a [`BlockChain`] over the whole token sequence would give.
///
/// ```
/// use shepherd_scheduler_core::prefix::{BlockChain, BlockLayout, ChainLink, chain_seed};
/// use shepherd_scheduler_core::request::Prompt;
///
/// let tokens: Vec<u32> = (0..64).collect();
/// let seed = chain_seed("", None, "");
/// // The first 2 blocks of 16 tokens, then the next 2 continued from the second.
/// let mut first = Vec::new();
/// ChainLink::extend(seed, None, &tokens[..32], 16, &mut first);
/// let mut rest = Vec::new();
/// ChainLink::extend(seed, first.last().copied(), &tokens[32..], 16, &mut rest);
///
/// let prompt = Prompt::Tokens(tokens.clone());
/// let mut whole = BlockChain::new(&BlockLayout::new(16, 100), seed, &prompt);
/// let keys: Vec<_> = first.iter().chain(&rest).map(|l| l.key()).collect();
/// assert_eq!(keys, whole.complete(&prompt));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChainLink {
    hash: u64,
    shard: u16,
}

impl ChainLink {
    /// The key of the block this link stands after.
    pub fn key(self) -> BlockKey {
        BlockKey::tagged(self.hash, usize::from(self.shard))
    }

    /// Appends to `out` the links of the complete `block_tokens`-token blocks of `tokens` (a
    /// trailing partial block is left out), chained after `parent` or, without one, starting a
    /// chain from `seed`.
    pub fn extend(
        seed: u64,
        parent: Option<ChainLink>,
        tokens: &[u32],
        block_tokens: usize,
        out: &mut Vec<ChainLink>,
    ) {
        let block_tokens = block_tokens.max(1);
        let (mut prev, mut shard) = match parent {
            Some(link) => (link.hash, Some(link.shard)),
            None => (seed, None),
        };
        let mut scratch = Vec::with_capacity(block_tokens * BYTES_PER_TOKEN);
        out.reserve(tokens.len() / block_tokens);
        for block in tokens.chunks_exact(block_tokens) {
            scratch.clear();
            scratch.extend(block.iter().flat_map(|t| t.to_le_bytes()));
            let hash = block_hash::chain(block_hash::own(&scratch), prev);
            let shard = *shard.get_or_insert((hash >> HASH_BITS) as u16);
            prev = hash;
            out.push(ChainLink { hash, shard });
        }
    }
}

/// The chained block keys of one prompt, hashed only as far as someone asks.
///
/// hᵢ = chain(own(blockᵢ), hᵢ₋₁) starting from h₀ = the [`chain_seed`], with `own` and `chain`
/// built from XXH3's 16-byte mixing primitive (the exact functions are documented in the
/// `block_hash` module): each block's own hash is independent of the others (so the processor
/// overlaps them) and only the cheap chaining step is sequential. The same chain must always be extended with the same prompt.
///
/// ```
/// use shepherd_scheduler_core::prefix::{BlockChain, BlockLayout, chain_seed};
/// use shepherd_scheduler_core::request::Prompt;
///
/// let prompt = Prompt::Text("x".repeat(1000));
/// let layout = BlockLayout::new(64, 2048); // 256 bytes per block
/// let mut chain = BlockChain::new(&layout, chain_seed("llama", None, ""), &prompt);
/// assert_eq!(chain.total_blocks(), 3);
/// assert_eq!(chain.computed().len(), 0);
/// assert_eq!(chain.complete(&prompt).len(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct BlockChain {
    prev: u64,
    shard: usize,
    block_tokens: usize,
    total: usize,
    keys: Vec<BlockKey>,
    scratch: Vec<u8>,
}

impl BlockChain {
    /// A chain for `prompt` cut by `layout`, seeded with `seed`; nothing is hashed yet.
    pub fn new(layout: &BlockLayout, seed: u64, prompt: &Prompt) -> Self {
        BlockChain {
            prev: seed,
            shard: 0,
            block_tokens: layout.block_tokens,
            total: layout.blocks_of(prompt),
            keys: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Makes this chain a new one for `prompt` cut by `layout`, seeded with `seed` (as
    /// [`BlockChain::new`]), keeping its allocations.
    pub fn reset(&mut self, layout: &BlockLayout, seed: u64, prompt: &Prompt) {
        self.prev = seed;
        self.shard = 0;
        self.block_tokens = layout.block_tokens;
        self.total = layout.blocks_of(prompt);
        self.keys.clear();
    }

    /// Blocks in the whole chain.
    pub fn total_blocks(&self) -> usize {
        self.total
    }

    /// The keys hashed so far, in order from the first block.
    pub fn computed(&self) -> &[BlockKey] {
        &self.keys
    }

    /// Hashes blocks until at least `n` (or all) are known; returns the keys known.
    pub fn extend_to(&mut self, prompt: &Prompt, n: usize) -> &[BlockKey] {
        let target = n.min(self.total);
        if self.keys.len() >= target {
            return &self.keys;
        }
        if self.keys.capacity() < target {
            // Room for the whole chain at once: a lookup that hashes on in spans would
            // otherwise grow it several times.
            self.keys.reserve(self.total - self.keys.len());
        }
        let block_bytes = self.block_tokens * BYTES_PER_TOKEN;
        match prompt {
            Prompt::Text(text) => {
                let bytes = text.as_bytes();
                for i in self.keys.len()..target {
                    let start = i * block_bytes;
                    let own = match bytes.get(start..start + block_bytes) {
                        Some(block) => block_hash::own(block),
                        None => break,
                    };
                    self.push(own);
                }
            }
            Prompt::Tokens(tokens) => {
                for i in self.keys.len()..target {
                    let start = i * self.block_tokens;
                    let Some(block) = tokens.get(start..start + self.block_tokens) else {
                        break;
                    };
                    self.scratch.clear();
                    self.scratch
                        .extend(block.iter().flat_map(|t| t.to_le_bytes()));
                    let own = block_hash::own(&self.scratch);
                    self.push(own);
                }
            }
        }
        &self.keys
    }

    /// The key of the last indexed block of `prompt` cut by `layout` from `seed` (what
    /// [`complete`](Self::complete)`.last()` gives), without keeping the others: nothing is
    /// allocated for a text prompt. `None` when the prompt has no complete block.
    pub fn last_key(layout: &BlockLayout, seed: u64, prompt: &Prompt) -> Option<BlockKey> {
        let mut chain = BlockChain::new(layout, seed, prompt);
        let block_tokens = chain.block_tokens;
        let mut last = None;
        for i in 0..chain.total {
            let own = match prompt {
                Prompt::Text(text) => {
                    let bytes = block_tokens * BYTES_PER_TOKEN;
                    block_hash::own(text.as_bytes().get(i * bytes..(i + 1) * bytes)?)
                }
                Prompt::Tokens(tokens) => {
                    let block = tokens.get(i * block_tokens..(i + 1) * block_tokens)?;
                    chain.scratch.clear();
                    chain
                        .scratch
                        .extend(block.iter().flat_map(|t| t.to_le_bytes()));
                    block_hash::own(&chain.scratch)
                }
            };
            let hash = block_hash::chain(own, chain.prev);
            if i == 0 {
                chain.shard = (hash >> HASH_BITS) as usize;
            }
            chain.prev = hash;
            last = Some(BlockKey::tagged(hash, chain.shard));
        }
        last
    }

    /// Hashes every block; returns all keys.
    pub fn complete(&mut self, prompt: &Prompt) -> &[BlockKey] {
        self.extend_to(prompt, self.total)
    }

    fn push(&mut self, own: u64) {
        let hash = block_hash::chain(own, self.prev);
        if self.keys.is_empty() {
            self.shard = (hash >> HASH_BITS) as usize;
        }
        self.prev = hash;
        self.keys.push(BlockKey::tagged(hash, self.shard));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_hash_like_their_little_endian_bytes() {
        let tokens: Vec<u32> = (0..300).map(|i| i * 7919).collect();
        let text: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        // The byte string is not UTF-8 in general; compare the block hashes directly instead.
        let layout = BlockLayout::new(16, 100);
        let mut by_tokens = BlockChain::new(&layout, 7, &Prompt::Tokens(tokens.clone()));
        let keys = by_tokens.complete(&Prompt::Tokens(tokens)).to_vec();
        assert_eq!(keys.len(), 300 / 16);
        let mut prev = 7u64;
        let mut shard = 0;
        for (i, key) in keys.iter().enumerate() {
            let own = block_hash::own(&text[i * 64..(i + 1) * 64]);
            prev = block_hash::chain(own, prev);
            if i == 0 {
                shard = (prev >> HASH_BITS) as usize;
            }
            assert_eq!(*key, BlockKey::tagged(prev, shard));
        }
    }

    #[test]
    fn links_continue_a_chain_at_any_block_boundary() {
        let tokens: Vec<u32> = (0..400u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let prompt = Prompt::Tokens(tokens.clone());
        let seed = chain_seed("", Some("adapter"), "");
        let mut whole = BlockChain::new(&BlockLayout::new(16, 1000), seed, &prompt);
        let expected = whole.complete(&prompt).to_vec();
        for split in 0..=tokens.len() / 16 {
            let mut links = Vec::new();
            ChainLink::extend(seed, None, &tokens[..split * 16], 16, &mut links);
            let parent = links.last().copied();
            ChainLink::extend(seed, parent, &tokens[split * 16..], 16, &mut links);
            let keys: Vec<BlockKey> = links.iter().map(|l| l.key()).collect();
            assert_eq!(keys, expected, "split after block {split}");
        }
    }

    #[test]
    fn keys_of_one_chain_share_a_shard_and_are_never_zero() {
        let prompt = Prompt::Text("abcd".repeat(5000));
        let mut chain = BlockChain::new(&BlockLayout::new(4, 10_000), 1, &prompt);
        let keys = chain.complete(&prompt);
        assert_eq!(keys.len(), 1250);
        assert!(
            keys.iter()
                .all(|k| k.shard() == keys[0].shard() && k.get() != 0)
        );
    }

    #[test]
    fn partial_blocks_and_the_cap_are_respected() {
        let layout = BlockLayout::new(64, 3);
        assert_eq!(layout.blocks_of(&Prompt::Text("a".repeat(255))), 0);
        assert_eq!(layout.blocks_of(&Prompt::Text("a".repeat(511))), 1);
        assert_eq!(layout.blocks_of(&Prompt::Text("a".repeat(100_000))), 3);
        assert_eq!(layout.blocks_of(&Prompt::Tokens(vec![0; 130])), 2);
    }

    #[test]
    fn the_last_key_is_the_complete_chains_last() {
        let layout = BlockLayout::new(16, 5);
        for prompt in [
            Prompt::Text("abcdefg".repeat(40)),
            Prompt::Text("short".into()),
            Prompt::Tokens((0..200).collect()),
            Prompt::Tokens((0..70).collect()),
        ] {
            let mut chain = BlockChain::new(&layout, 11, &prompt);
            let expected = chain.complete(&prompt).last().copied();
            assert_eq!(BlockChain::last_key(&layout, 11, &prompt), expected);
        }
    }

    #[test]
    fn a_reset_chain_hashes_like_a_new_one() {
        let layout = BlockLayout::new(16, 100);
        let first = Prompt::Text("first ".repeat(500));
        let second = Prompt::Tokens((0..700).collect());
        let mut chain = BlockChain::new(&layout, 3, &first);
        chain.complete(&first);
        chain.reset(&layout, 9, &second);
        let mut fresh = BlockChain::new(&layout, 9, &second);
        assert_eq!(chain.total_blocks(), fresh.total_blocks());
        assert!(chain.computed().is_empty());
        assert_eq!(chain.complete(&second), fresh.complete(&second));
    }

    #[test]
    fn long_seed_parts_hash_as_their_length_prefixed_concatenation() {
        let long = "m".repeat(300);
        let mut bytes = Vec::new();
        for part in [long.as_str(), "l", ""] {
            bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
            bytes.extend_from_slice(part.as_bytes());
        }
        assert_eq!(chain_seed(&long, Some("l"), ""), xxh3_64(&bytes));
        assert_ne!(
            chain_seed(&long, Some("l"), ""),
            chain_seed(&long, None, "l")
        );
    }

    #[test]
    fn seeds_separate_models_adapters_and_salts() {
        let a = chain_seed("m", Some("l"), "");
        assert_ne!(a, chain_seed("m", None, ""));
        assert_ne!(a, chain_seed("ml", None, ""));
        assert_ne!(a, chain_seed("m", Some("l"), "s"));
        assert_eq!(a, chain_seed("m", Some("l"), ""));
    }
}
