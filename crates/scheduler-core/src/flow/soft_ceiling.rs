//! Upstream's `soft-reflective-ceiling-policy`: a usage limit that tightens with saturation for
//! the lower priorities, and past a band's ceiling lets it dispatch on one call in `period`.
//!
//! With `N` active priority levels (rank 0 the highest) and the pool's saturation `s`:
//!
//! - rank 0 always has ceiling 1 (it dispatches while `s < 1`), and so does every band when
//!   there is only one;
//! - rank `i` has the reflective ceiling `1 - i·s/(N-1)`; below it (`s` smaller) the band is
//!   open (ceiling 1);
//! - at `s >= 1` every lower band is closed (ceiling 0);
//! - otherwise the band alternates: open on one call in `period = round(s / (1 - s))` (at
//!   least 1), closed on the others. One tick shared by all bands drives it, so on any call
//!   either every alternating band is open or every one is closed; the tick advances only on
//!   calls where some band alternates (`s >= 1 - s` and `s < 1`).
//!
//! The policy takes no parameters (an empty block is accepted, any key refused).
//!
//! ```
//! use shepherd_scheduler_core::flow::soft_ceiling::{SoftCeilingTick, soft_reflective_ceiling};
//!
//! // Three levels at saturation 0.3: rank 2's reflective ceiling is 1 - 2·0.3/2 = 0.7.
//! assert_eq!(soft_reflective_ceiling(2, 3, 0.3, false), 1.0);
//! // At 0.75 rank 1's ceiling (0.625) is passed: it alternates with period round(3) = 3.
//! let mut tick = SoftCeilingTick::default();
//! let opens: Vec<bool> = (0..6).map(|_| tick.advance(0.75)).collect();
//! assert_eq!(opens, [false, false, true, false, false, true]);
//! assert_eq!(soft_reflective_ceiling(1, 3, 0.75, false), 0.0);
//! assert_eq!(soft_reflective_ceiling(1, 3, 0.75, true), 1.0);
//! assert_eq!(soft_reflective_ceiling(0, 3, 0.75, false), 1.0);
//! ```

/// The ceiling of the band at `rank` (0: highest) among `levels` active levels at
/// `saturation`, on a call where alternating bands are `open` or not.
pub fn soft_reflective_ceiling(rank: usize, levels: usize, saturation: f64, open: bool) -> f64 {
    if rank == 0 || levels <= 1 {
        return 1.0;
    }
    let rank = rank.min(levels - 1) as f64;
    let reflective = 1.0 - rank * saturation / (levels - 1) as f64;
    if saturation < reflective {
        1.0
    } else if saturation >= 1.0 || saturation.is_nan() {
        0.0
    } else if open {
        1.0
    } else {
        0.0
    }
}

/// The policy-wide tick that spreads an alternating band's dispatches over calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoftCeilingTick {
    tick: u64,
}

impl SoftCeilingTick {
    /// Advances the tick for one call at `saturation` and says whether alternating bands are
    /// open on it. Below the alternating regime (`s < 1 - s`) or at `s >= 1` the tick stays
    /// and the answer is `false` (no band alternates then).
    pub fn advance(&mut self, saturation: f64) -> bool {
        let alternating = saturation >= 1.0 - saturation && saturation < 1.0;
        if !alternating {
            return false;
        }
        // The small term keeps the period finite when `s` is within rounding of 1.
        let period = (saturation / (1.0 - saturation + 1e-9)).round().max(1.0);
        // `period` is at least 1 and, with `s < 1`, at most about 1e9: the cast is exact.
        let period = period.min(u64::MAX as f64) as u64;
        self.tick = self.tick.wrapping_add(1);
        self.tick.is_multiple_of(period)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's README: band 0 has ceiling 1 and every band is open under light load.
    #[test]
    fn light_load_leaves_every_band_open() {
        for rank in 0..4 {
            assert_eq!(soft_reflective_ceiling(rank, 4, 0.2, false), 1.0);
        }
        let mut tick = SoftCeilingTick::default();
        assert!(!tick.advance(0.2));
        assert_eq!(tick, SoftCeilingTick::default(), "no alternation: no tick");
    }

    #[test]
    fn full_saturation_closes_every_lower_band() {
        assert_eq!(soft_reflective_ceiling(0, 3, 1.0, true), 1.0);
        assert_eq!(soft_reflective_ceiling(1, 3, 1.0, true), 0.0);
        assert_eq!(soft_reflective_ceiling(2, 3, 1.5, true), 0.0);
        assert_eq!(soft_reflective_ceiling(2, 3, f64::NAN, true), 0.0);
    }

    #[test]
    fn a_single_band_is_always_open() {
        assert_eq!(soft_reflective_ceiling(0, 1, 0.99, false), 1.0);
        assert_eq!(soft_reflective_ceiling(3, 1, 0.99, false), 1.0);
    }

    /// Two bands at saturation 0.5: rank 1's ceiling is 0.5, reached; period round(1) = 1, so
    /// every call is open (dispatch rate (1-s)/s = 1).
    #[test]
    fn at_half_saturation_two_bands_alternate_with_period_one() {
        let mut tick = SoftCeilingTick::default();
        for _ in 0..5 {
            let open = tick.advance(0.5);
            assert!(open);
            assert_eq!(soft_reflective_ceiling(1, 2, 0.5, open), 1.0);
        }
    }

    /// At 0.9 the period is round(9) = 9: one call in nine is open, the shared tick gating
    /// every alternating band together.
    #[test]
    fn high_saturation_opens_one_call_in_period() {
        let mut tick = SoftCeilingTick::default();
        let opens = (0..90).filter(|_| tick.advance(0.9)).count();
        assert_eq!(opens, 10);
        // Below its reflective ceiling a band stays open whatever the tick: rank 1 of 5 at 0.7
        // has ceiling 1 - 0.7/4 = 0.825.
        assert_eq!(soft_reflective_ceiling(1, 5, 0.7, false), 1.0);
        assert_eq!(soft_reflective_ceiling(4, 5, 0.7, false), 0.0);
    }
}
