//! Deterministic prompt contents: segments of pseudo tokens, and the KV block hashes over them.
//!
//! A prompt is a list of [`Segment`]s; a segment's tokens depend only on its id and length, so
//! two prompts that start with the same segments start with the same tokens. The scheduler
//! receives those tokens (`Prompt::Tokens`) and the engine caches blocks keyed by a chained hash
//! of the same tokens: the prefix scorer sees exactly the sharing the engine can exploit.
//!
//! ```
//! use shepherd_sim::workload::{Segment, block_hashes, materialize};
//!
//! let system = Segment { id: 7, len: 40 };
//! let mut a = Vec::new();
//! materialize(&[system, Segment { id: 1, len: 10 }], &mut a);
//! let mut b = Vec::new();
//! materialize(&[system, Segment { id: 2, len: 10 }], &mut b);
//! let (ha, hb) = (block_hashes(&a, 16), block_hashes(&b, 16));
//! assert_eq!(ha.len(), 3);
//! assert_eq!(ha[..2], hb[..2]); // the shared 32 tokens
//! assert_ne!(ha[2], hb[2]);
//! ```

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Pseudo vocabulary size (token ids are below it).
pub const VOCAB: u32 = 128_000;

/// A run of `len` tokens whose content is determined by `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    /// Content id: equal ids give equal tokens.
    pub id: u64,
    /// Length in tokens.
    pub len: u32,
}

/// A content id derived from `parts` (namespaces and indexes).
pub fn segment_id(parts: &[u64]) -> u64 {
    let mut bytes = Vec::with_capacity(parts.len() * 8);
    for p in parts {
        bytes.extend_from_slice(&p.to_le_bytes());
    }
    xxh3_64_with_seed(&bytes, 0x5e9)
}

/// A content id derived from a name.
pub fn name_id(name: &str) -> u64 {
    xxh3_64_with_seed(name.as_bytes(), 0x5e9)
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Appends the tokens of `segments` to `out`.
pub fn materialize(segments: &[Segment], out: &mut Vec<u32>) {
    for s in segments {
        let base = mix(s.id);
        out.extend((0..u64::from(s.len)).map(|i| {
            (mix(base.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))) % u64::from(VOCAB))
                as u32
        }));
    }
}

/// Chained hashes of every full `block_size`-token block of `tokens`:
/// h₀ = H(block₀), hᵢ = H(blockᵢ ‖ hᵢ₋₁).
pub fn block_hashes(tokens: &[u32], block_size: usize) -> Vec<u64> {
    let block_size = block_size.max(1);
    let mut out = Vec::with_capacity(tokens.len() / block_size);
    let mut parent = 0u64;
    let mut buf = Vec::with_capacity(block_size * 4);
    for block in tokens.chunks_exact(block_size) {
        buf.clear();
        for t in block {
            buf.extend_from_slice(&t.to_le_bytes());
        }
        parent = xxh3_64_with_seed(&buf, parent);
        out.push(parent);
    }
    out
}
