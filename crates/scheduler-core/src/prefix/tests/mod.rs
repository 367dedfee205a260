//! Properties and examples of the whole index, and the helpers they share.

mod concurrent;
mod examples;
mod hardening;
mod interleavings;
mod journal;
mod properties;
mod stats;

use proptest::prelude::*;

use super::*;
use crate::endpoint::EndpointId;
use crate::request::Prompt;

/// One pseudo token per block (4 bytes), so prompts are short strings of block symbols.
pub(super) fn tiny_index(capacity: usize) -> PrefixIndex {
    PrefixIndex::new(PrefixIndexConfig {
        layout: BlockLayout::new(1, 64),
        default_capacity: capacity,
    })
}

pub(super) fn prompt_of(symbols: &[u8]) -> Prompt {
    Prompt::Text(
        symbols
            .iter()
            .map(|s| char::from(b'a' + s).to_string().repeat(4))
            .collect(),
    )
}

pub(super) fn lookup(index: &PrefixIndex, symbols: &[u8]) -> PrefixMatch {
    let prompt = prompt_of(symbols);
    let mut chain = index.chain(chain_seed("m", None, ""), &prompt);
    index.match_prefix(&mut chain, &prompt)
}

pub(super) fn insert(index: &PrefixIndex, endpoint: u32, symbols: &[u8]) {
    let prompt = prompt_of(symbols);
    let mut chain = index.chain(chain_seed("m", None, ""), &prompt);
    index.insert_chain(EndpointId(endpoint), &mut chain, &prompt, None);
}

/// The block keys of `symbols`' chain.
pub(super) fn keys_of(index: &PrefixIndex, symbols: &[u8]) -> Vec<BlockKey> {
    let prompt = prompt_of(symbols);
    let mut chain = index.chain(chain_seed("m", None, ""), &prompt);
    chain.complete(&prompt).to_vec()
}

pub(super) fn prompts() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..3, 1..24)
}

pub(super) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl PrefixIndex {
    /// Test helper: removes every block of `chain` from `endpoint`.
    pub(super) fn complete_then_remove(
        &self,
        endpoint: EndpointId,
        chain: &mut BlockChain,
        prompt: &Prompt,
    ) {
        let keys = chain.complete(prompt).to_vec();
        self.remove_blocks(endpoint, &keys);
    }
}
