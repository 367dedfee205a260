//! The seeds of a multi-seed comparison, derived from one base seed.
//!
//! The first seed is the base itself, so `--seeds 1` is exactly the single-seed run; seed `i`
//! (from 1) is SplitMix64's output for `base + i · 0x9E37_79B9_7F4A_7C15`, a fixed bijective
//! mix: the same base always gives the same list, and neighbouring bases give unrelated seeds.
//!
//! ```
//! use shepherd_sim::seeds::derive;
//!
//! let s = derive(42, 3);
//! assert_eq!(s.len(), 3);
//! assert_eq!(s[0], 42);
//! assert_eq!(s, derive(42, 3));
//! assert_eq!(&derive(42, 5)[..3], &s[..]);
//! ```

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// `n` seeds (at least one) starting with `base`.
pub fn derive(base: u64, n: u32) -> Vec<u64> {
    (0..u64::from(n.max(1)))
        .map(|i| {
            if i == 0 {
                base
            } else {
                splitmix64(base.wrapping_add(i.wrapping_mul(GOLDEN)))
            }
        })
        .collect()
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::derive;

    #[test]
    fn seeds_are_fixed_distinct_and_start_with_the_base() {
        let s = derive(42, 5);
        // Pinned: a change here changes every published multi-seed figure.
        assert_eq!(
            s,
            [
                42,
                2_949_826_092_126_892_291,
                5_139_283_748_462_763_858,
                6_349_198_060_258_255_764,
                701_532_786_141_963_250
            ]
        );
        assert_eq!(s, derive(42, 5));
        let mut sorted = s.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 5);
        assert_ne!(derive(43, 5)[1], s[1]);
        assert_eq!(derive(7, 0), vec![7]);
    }
}
