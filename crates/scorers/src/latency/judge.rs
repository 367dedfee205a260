//! [`Judge`]: how one request's predictions are judged against its objectives, as upstream
//! judges them (see the [producer's docs](super::producer)).
//!
//! With an objective, the headroom is `objective − predicted` and the prediction is valid
//! when under it. A request with no objective at all is measured against 0 (headroom
//! `−predicted`, never valid: upstream's ranking by predicted latency). A request with some
//! objective is not judged on one it lacks (headroom 0, valid).
//!
//! Every case is the one form `headroom = base − k × predicted`, valid when the headroom is
//! above 0 or the target is not judged; a pick judges 64 candidates or more, and this keeps
//! the per-candidate work to a multiply, a subtraction and a comparison, without branches.

use super::{LatencyPredictionInfo, Objectives};

/// One target's judgement: `headroom = base − k × predicted`, valid when above 0 or
/// `unjudged`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Verdict {
    base: f64,
    k: f64,
    unjudged: bool,
}

impl Verdict {
    /// Against `allowed`; without it, as the request's other objectives (`any`) say.
    fn against(allowed: Option<f64>, any: bool) -> Self {
        match allowed {
            Some(allowed) => Verdict {
                base: allowed,
                k: 1.0,
                unjudged: false,
            },
            None if any => Verdict {
                base: 0.0,
                k: 0.0,
                unjudged: true,
            },
            None => Verdict {
                base: 0.0,
                k: 1.0,
                unjudged: false,
            },
        }
    }

    /// The headroom and validity of a finite, non-negative `predicted`: `allowed − predicted`
    /// is above 0 exactly when `predicted < allowed` (finite IEEE subtraction never rounds a
    /// positive difference to 0).
    #[inline(always)]
    fn of(&self, predicted: f64) -> (f64, bool) {
        let headroom = self.base - self.k * predicted;
        (headroom, headroom > 0.0 || self.unjudged)
    }
}

/// How one request's predictions are judged (see the [module docs](self)).
#[derive(Debug, Clone, Copy)]
pub(super) struct Judge {
    /// Whether the request carries any objective.
    any: bool,
    /// Its own TPOT objective × the buffer factor.
    tpot_allowed: Option<f64>,
    buffer: f64,
    ttft: Verdict,
    tpot: Verdict,
}

impl Judge {
    /// The judge of a request with `objectives`, its TPOT objective multiplied by `buffer`.
    pub(super) fn new(objectives: &Objectives, buffer: f64) -> Self {
        let any = objectives.any();
        let tpot_allowed = objectives.tpot_ms.map(|o| o * buffer);
        Judge {
            any,
            tpot_allowed,
            buffer,
            ttft: Verdict::against(objectives.ttft_ms, any),
            tpot: Verdict::against(tpot_allowed, any),
        }
    }

    /// The judgement of a candidate predicted at `ttft` (and `tpot`, where judged; both
    /// finite and non-negative), the tightest TPOT objective of the requests running there
    /// being `min_running_tpot`.
    #[inline(always)]
    pub(super) fn info(
        &self,
        ttft: f64,
        tpot: Option<f64>,
        min_running_tpot: Option<f64>,
        dispatched: u64,
    ) -> LatencyPredictionInfo {
        let (ttft_headroom, ttft_valid) = self.ttft.of(ttft);
        let (tpot, tpot_headroom, tpot_valid) = match tpot {
            Some(tpot) => {
                let verdict = match min_running_tpot.filter(|_| self.any) {
                    Some(running) => self.tpot_with_running(running),
                    None => self.tpot,
                };
                let (headroom, valid) = verdict.of(tpot);
                (tpot, headroom, valid)
            }
            None => (0.0, 0.0, true),
        };
        LatencyPredictionInfo {
            ttft_ms: ttft,
            tpot_ms: tpot,
            ttft_valid,
            tpot_valid,
            ttft_headroom_ms: ttft_headroom,
            tpot_headroom_ms: tpot_headroom,
            dispatched,
        }
    }

    /// The TPOT verdict on an endpoint where the tightest running objective is `running`
    /// (× the buffer): the tighter of it and the request's own.
    fn tpot_with_running(&self, running: f64) -> Verdict {
        let running = running * self.buffer;
        let allowed = self.tpot_allowed.map_or(running, |own| own.min(running));
        Verdict::against(Some(allowed), self.any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The judgement as written out case by case (upstream's reading).
    fn reference(
        objectives: &Objectives,
        buffer: f64,
        ttft: f64,
        tpot: Option<f64>,
        running: Option<f64>,
    ) -> (f64, bool, f64, bool) {
        let any = objectives.any();
        let judged = |predicted: f64, allowed: Option<f64>| match allowed {
            Some(allowed) => (allowed - predicted, predicted < allowed),
            None if any => (0.0, true),
            None => (-predicted, false),
        };
        let (th, tv) = judged(ttft, objectives.ttft_ms);
        let (ph, pv) = match tpot {
            Some(tpot) => {
                let running = running.map(|o| o * buffer).filter(|_| any);
                let allowed = match (objectives.tpot_ms.map(|o| o * buffer), running) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                judged(tpot, allowed)
            }
            None => (0.0, true),
        };
        (th, tv, ph, pv)
    }

    proptest! {
        /// The one-form judgement agrees with the case-by-case one (headrooms equal as
        /// numbers: a 0 may come out as −0).
        #[test]
        fn the_one_form_is_the_case_by_case_judgement(
            ttft_objective in prop::option::of(prop_oneof![1e-3..5e3f64, Just(200.0)]),
            tpot_objective in prop::option::of(prop_oneof![1e-3..200.0f64, Just(50.0)]),
            buffer in prop_oneof![Just(1.0), 0.5..3.0f64],
            ttft in prop_oneof![0.0..1e4f64, Just(0.0), Just(200.0)],
            tpot in prop::option::of(prop_oneof![0.0..300.0f64, Just(0.0), Just(50.0)]),
            running in prop::option::of(1e-3..300.0f64),
            dispatched in 0u64..4,
        ) {
            let objectives = Objectives { ttft_ms: ttft_objective, tpot_ms: tpot_objective };
            let info = Judge::new(&objectives, buffer).info(ttft, tpot, running, dispatched);
            let (th, tv, ph, pv) = reference(&objectives, buffer, ttft, tpot, running);
            prop_assert!(info.ttft_headroom_ms == th, "{info:?} vs {th}");
            prop_assert_eq!(info.ttft_valid, tv);
            prop_assert!(info.tpot_headroom_ms == ph, "{info:?} vs {ph}");
            prop_assert_eq!(info.tpot_valid, pv);
            prop_assert_eq!(info.ttft_ms, ttft);
            prop_assert_eq!(info.tpot_ms, tpot.unwrap_or(0.0));
            prop_assert_eq!(info.dispatched, dispatched);
        }
    }
}
