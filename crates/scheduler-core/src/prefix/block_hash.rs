//! The two hash functions of a chain: one block's own hash, and the step that chains it.
//!
//! Both are built from XXH3's 16-byte mixing primitive — the 64×64→128-bit multiply of two
//! secret-keyed words, folded by XOR of its halves — and XXH3's final avalanche, with fixed
//! secrets, so they are deterministic across runs, processes and platforms:
//!
//! * `own(block)`: `acc = len × P₁`; for each 16-byte chunk `c` (two little-endian words
//!   `lo`, `hi`) `acc += fold(lo ⊕ sₖ, hi ⊕ sₖ₊₁)`, the secret words taken in turn from a fixed
//!   table of 32; a trailing partial chunk (blocks are whole 4-byte tokens, so 4, 8 or 12
//!   bytes) is zero-padded; then `own = avalanche(acc)`. The chunks' multiplies are independent
//!   of each other, so a 256-byte block costs a few nanoseconds, several times less than
//!   XXH3's general path for inputs over 240 bytes.
//! * `chain(own, prev) = avalanche(fold(own ⊕ c₀, prev ⊕ c₁))`: a cheap dependent step, so the
//!   blocks' own hashes overlap in the processor and only this short step is sequential.
//!
//! `fold(a, b) = lo64(a·b) ⊕ hi64(a·b)`; `avalanche(x)`: `x ⊕= x ≫ 37; x ×= 0x165667919E3779F9;
//! x ⊕= x ≫ 32` (XXH3's). These are good non-cryptographic hashes, not a defence against
//! crafted collisions (as with XXH3 itself).

/// XXH64's first prime, as XXH3 uses it for the length.
const PRIME_1: u64 = 0x9E37_79B1_85EB_CA87;
/// XXH3's avalanche multiplier.
const AVALANCHE: u64 = 0x1656_6791_9E37_79F9;
/// Words of the secret table.
const SECRET_WORDS: usize = 32;
/// The secret: splitmix64 of 1, 2, 3, …, fixed at compile time.
const SECRET: [u64; SECRET_WORDS] = secret_table();
/// The chaining step's two secret words.
const CHAIN: [u64; 2] = [0x3C6E_F372_FE94_F82B, 0xA54F_F53A_5F1D_36F1];

const fn splitmix64(n: u64) -> u64 {
    let mut z = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const fn secret_table() -> [u64; SECRET_WORDS] {
    let mut table = [0u64; SECRET_WORDS];
    let mut i = 0;
    while i < SECRET_WORDS {
        table[i] = splitmix64(i as u64 + 1);
        i += 1;
    }
    table
}

#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

#[inline(always)]
fn avalanche(mut x: u64) -> u64 {
    x ^= x >> 37;
    x = x.wrapping_mul(AVALANCHE);
    x ^ (x >> 32)
}

#[inline(always)]
fn word(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn mix_chunk(chunk: &[u8], k: usize) -> u64 {
    fold(
        word(chunk, 0) ^ SECRET[(2 * k) % SECRET_WORDS],
        word(chunk, 8) ^ SECRET[(2 * k + 1) % SECRET_WORDS],
    )
}

/// The common 256-byte block (64 tokens of 4 bytes), unrolled.
#[inline(always)]
fn own_256(block: &[u8; 256]) -> u64 {
    let mut acc = 256u64.wrapping_mul(PRIME_1);
    for k in 0..16 {
        acc = acc.wrapping_add(mix_chunk(&block[16 * k..16 * k + 16], k));
    }
    avalanche(acc)
}

/// A block's own hash (see the module docs).
#[inline]
pub(crate) fn own(block: &[u8]) -> u64 {
    if let Ok(block) = <&[u8; 256]>::try_from(block) {
        return own_256(block);
    }
    let mut acc = (block.len() as u64).wrapping_mul(PRIME_1);
    let mut chunks = block.chunks_exact(16);
    for (k, chunk) in chunks.by_ref().enumerate() {
        acc = acc.wrapping_add(mix_chunk(chunk, k));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut padded = [0u8; 16];
        padded[..rest.len()].copy_from_slice(rest);
        acc = acc.wrapping_add(mix_chunk(&padded, block.len() / 16));
    }
    avalanche(acc)
}

/// The chained hash of a block whose own hash is `own`, after a block (or seed) hashing to
/// `prev`.
#[inline(always)]
pub(crate) fn chain(own: u64, prev: u64) -> u64 {
    avalanche(fold(own ^ CHAIN[0], prev ^ CHAIN[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward reading of the module docs, byte by byte.
    fn reference(block: &[u8]) -> u64 {
        let mut acc = (block.len() as u64).wrapping_mul(PRIME_1);
        let mut padded = block.to_vec();
        while !padded.len().is_multiple_of(16) {
            padded.push(0);
        }
        for (k, chunk) in padded.chunks(16).enumerate() {
            let lo = u64::from_le_bytes(chunk[..8].try_into().unwrap());
            let hi = u64::from_le_bytes(chunk[8..].try_into().unwrap());
            acc = acc.wrapping_add(fold(
                lo ^ SECRET[(2 * k) % 32],
                hi ^ SECRET[(2 * k + 1) % 32],
            ));
        }
        avalanche(acc)
    }

    #[test]
    fn the_fast_paths_compute_the_documented_function() {
        let bytes: Vec<u8> = (0..1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [4, 8, 12, 16, 64, 252, 256, 260, 512, 1024] {
            assert_eq!(own(&bytes[..len]), reference(&bytes[..len]), "length {len}");
        }
    }

    #[test]
    fn fixed_values_do_not_drift() {
        // Keys are compared across processes (and may be persisted): pin the function.
        let block: Vec<u8> = (0..=255u8).collect();
        assert_eq!(SECRET[0], 0xE220_A839_7B1D_CDAF);
        assert_eq!(own(&block), 0x103F_D95F_C548_8672);
        assert_eq!(own(&block[..12]), 0xD4DC_1BDF_8F14_A48E);
        assert_eq!(chain(1, 2), 0x5A8D_3422_79DC_9171);
        assert_ne!(own(&block), own(&block[..252]));
        assert_ne!(chain(1, 2), chain(2, 1));
    }

    #[test]
    fn single_bit_flips_change_about_half_the_bits() {
        let block = [0x5Au8; 256];
        let base = own(&block);
        let mut total = 0u32;
        for bit in 0..256 * 8 {
            let mut flipped = block;
            flipped[bit / 8] ^= 1 << (bit % 8);
            let diff = (own(&flipped) ^ base).count_ones();
            assert!((8..=56).contains(&diff), "bit {bit}: {diff} bits changed");
            total += diff;
        }
        let mean = f64::from(total) / (256.0 * 8.0);
        assert!((28.0..=36.0).contains(&mean), "mean {mean}");
        let mut total = 0u32;
        for bit in 0..64 {
            total += (chain(base, 7) ^ chain(base ^ (1 << bit), 7)).count_ones();
            total += (chain(base, 7) ^ chain(base, 7 ^ (1 << bit))).count_ones();
        }
        let mean = f64::from(total) / 128.0;
        assert!((28.0..=36.0).contains(&mean), "chain mean {mean}");
    }
}
