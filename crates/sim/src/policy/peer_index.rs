//! What the peer routers key their state on, from a request's prompt: the chained hashes of
//! its full KV blocks (Dynamo) and its symbols for a prefix tree over text (SGLang).

use shepherd_scheduler_core::request::Prompt;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::workload::block_hashes;

/// Chained hashes of the full `block_size`-token blocks of a prompt (text counts 4 bytes per
/// token).
pub(crate) fn prompt_blocks(prompt: &Prompt, block_size: usize) -> Vec<u64> {
    let block_size = block_size.max(1);
    match prompt {
        // The same chain the simulated servers use for their own prefix caches.
        Prompt::Tokens(tokens) => block_hashes(tokens, block_size),
        Prompt::Text(text) => {
            let mut parent = 0u64;
            text.as_bytes()
                .chunks_exact(block_size * 4)
                .map(|block| {
                    parent = xxh3_64_with_seed(block, parent);
                    parent
                })
                .collect()
        }
    }
}

/// The prompt as a sequence of symbols for a prefix tree: its characters for text, its token
/// ids for tokens (a token stands for the characters it decodes to).
pub(crate) fn prompt_symbols(prompt: &Prompt) -> Vec<u32> {
    match prompt {
        Prompt::Tokens(tokens) => tokens.clone(),
        Prompt::Text(text) => text.chars().map(u32::from).collect(),
    }
}
