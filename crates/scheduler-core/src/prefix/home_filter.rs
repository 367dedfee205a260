//! A few bits per slot that say, for a key, whether an open-addressing array may hold it: bit
//! `home × BITS + print(key)` is set while some key with that home slot and that fingerprint
//! is present. All keys with one home lie in the probe run from that home, so removing a key
//! clears its bit exactly when the run holds no other key with the same home and fingerprint:
//! the filter never forgets a present key, and a clear bit settles absence without touching
//! the array.

/// Bits per slot (a power of two): the fingerprints a home tells apart.
const BITS: usize = 4;

/// Which bits of a key give its fingerprint (above any home an array could use).
const PRINT_SHIFT: u32 = 40;

/// The filter bits of one array, [`BITS`] per slot (empty: no filter).
#[derive(Debug, Default)]
pub(crate) struct HomeFilter {
    words: Vec<u64>,
}

/// The bit of `key`, for an array of `mask + 1` slots.
#[inline]
fn bit_of(key: u64, mask: usize) -> usize {
    (key as usize & mask) * BITS + ((key >> PRINT_SHIFT) as usize & (BITS - 1))
}

impl HomeFilter {
    /// Heap bytes owned.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    /// An empty filter for an array of `slots` slots.
    pub(crate) fn new(slots: usize) -> Self {
        HomeFilter {
            words: vec![0; (slots * BITS).div_ceil(64)],
        }
    }

    /// Whether the array of `mask + 1` slots may hold `key` (false: it certainly does not).
    #[inline]
    pub(crate) fn may_hold(&self, key: u64, mask: usize) -> bool {
        let bit = bit_of(key, mask);
        self.words
            .get(bit / 64)
            .is_none_or(|w| w & (1 << (bit % 64)) != 0)
    }

    /// Notes that `key` is now present.
    #[inline]
    pub(crate) fn add(&mut self, key: u64, mask: usize) {
        let bit = bit_of(key, mask);
        if let Some(w) = self.words.get_mut(bit / 64) {
            *w |= 1 << (bit % 64);
        }
    }

    /// Notes that `key` left, `others` being whether another present key has the same bit.
    #[inline]
    pub(crate) fn remove(&mut self, key: u64, mask: usize, others: bool) {
        let bit = bit_of(key, mask);
        if let Some(w) = self.words.get_mut(bit / 64)
            && !others
        {
            *w &= !(1 << (bit % 64));
        }
    }

    /// Whether `a` and `b` have the same bit in an array of `mask + 1` slots.
    #[inline]
    pub(crate) fn same_bit(a: u64, b: u64, mask: usize) -> bool {
        bit_of(a, mask) == bit_of(b, mask)
    }
}
