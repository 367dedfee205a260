//! A small, seedable random number generator for tie-breaking and random pickers.
//!
//! Pickers receive a `&mut PickRng`; the scheduler derives one per pick from its seed and a
//! pick counter, so a fixed seed and a fixed sequence of picks give the same choices.
//!
//! ```
//! use shepherd_scheduler_core::rng::PickRng;
//! let mut a = PickRng::seed_from(42);
//! let mut b = PickRng::seed_from(42);
//! assert_eq!(a.next_u64(), b.next_u64());
//! assert!(a.below(10) < 10);
//! ```

/// SplitMix64: tiny, fast, statistically solid for picking among candidates.
#[derive(Debug, Clone)]
pub struct PickRng {
    state: u64,
}

impl PickRng {
    /// A generator seeded with `seed`.
    pub fn seed_from(seed: u64) -> Self {
        PickRng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (0 when `n` is 0), without modulo bias worth measuring.
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        // Lemire's multiply-shift reduction.
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}
