//! [`RequestPredictor`]: the model's coefficients bound to one request, predicting each of
//! its candidates from the figures read at pick time ([`RawFeatures`]) — the form a pick
//! uses, 64 candidates or more at a time.

use super::drain;
use super::features::{DESIGN, LOAD_TERMS, RawFeatures};
use super::model::{Fitted, finite_or_zero};

/// The coefficients in force, bound to one request's prompt
/// ([`Predictor::for_request`](super::Predictor::for_request)).
///
/// A prediction is the dot product of the coefficients with the design vector
/// ([`RawFeatures::design`]), summed in order: the constant, the uncached prompt tokens and
/// their square, then the candidate's load. The first three terms depend on the candidate
/// only through its cached prefix, and most candidates cache none of the prompt: their sum
/// for the whole prompt is taken once per request, and each such candidate starts from it.
/// The sums are the same additions in the same order, so the predictions are bit for bit
/// those of [`Predictor::predict`](super::Predictor::predict).
///
/// ```
/// use shepherd_scorers::latency::{LatencyFeatures, LatencyModel, LatencyModelParameters, RawFeatures};
///
/// let model = LatencyModel::new(LatencyModelParameters { min_samples: 50, ..Default::default() });
/// for i in 0..300u32 {
///     let f = LatencyFeatures {
///         uncached_tokens: f64::from(i % 40) * 100.0,
///         waiting: f64::from(i % 7),
///         ..LatencyFeatures::default()
///     };
///     model.learn(&f, Some(10.0 + 0.05 * f.uncached_tokens + 8.0 * f.waiting), Some(6.0));
/// }
/// let request = model.predictor().for_request(3000).expect("ready");
/// // A candidate caching none of the 3000 prompt tokens, and one caching 1000 of them.
/// for uncached in [3000, 2000] {
///     let raw = RawFeatures { prompt_tokens: 3000, uncached_tokens: uncached, waiting: 2, ..RawFeatures::default() };
///     let [ttft, tpot] = request.predict::<true>(&raw);
///     let p = model.predict(&LatencyFeatures::from(raw));
///     assert_eq!((Some(ttft), Some(tpot)), (p.ttft_ms, p.tpot_ms));
/// }
/// ```
#[derive(Debug, Clone)]
pub struct RequestPredictor {
    /// Each design entry's coefficients: TTFT, and TPOT (0 while it is not ready).
    lanes: [[f64; 2]; DESIGN],
    /// The drain rate the coefficients were fitted with.
    rate: f64,
    /// The request's prompt tokens.
    prompt: u64,
    /// The first three terms' sums, both lanes, for a candidate caching none of the prompt.
    whole_prompt: [f64; 2],
    tpot_ready: bool,
}

impl RequestPredictor {
    /// The predictor of a request of `prompt_tokens` with `fitted`'s coefficients; `None`
    /// while the TTFT target is not ready.
    pub(super) fn new(fitted: &Fitted, prompt_tokens: u64) -> Option<Self> {
        fitted.ttft?;
        let mut predictor = RequestPredictor {
            lanes: fitted.lanes,
            rate: fitted.rate,
            prompt: prompt_tokens,
            whole_prompt: [0.0; 2],
            tpot_ready: fitted.tpot.is_some(),
        };
        predictor.whole_prompt = predictor.head::<true>(prompt_tokens);
        Some(predictor)
    }

    /// Whether the TPOT target is ready (else [`RequestPredictor::predict`]'s TPOT is 0).
    pub fn tpot_ready(&self) -> bool {
        self.tpot_ready
    }

    /// The predicted TTFT and, with `TPOT`, TPOT (else 0) of a candidate whose figures are
    /// `raw` (its `prompt_tokens` are not read: the request's are): finite, never negative.
    #[inline(always)]
    pub fn predict<const TPOT: bool>(&self, raw: &RawFeatures) -> [f64; 2] {
        let mut acc = if raw.uncached_tokens == self.prompt {
            self.whole_prompt
        } else {
            self.head::<TPOT>(raw.uncached_tokens)
        };
        let mut x = raw.load_terms();
        let (pending, age) = (drain::PENDING - 3, drain::PENDING_AGE - 3);
        x[age] = drain::left(x[pending], x[age], self.rate);
        for (c, v) in self.lanes[3..].iter().zip(x) {
            acc[0] += c[0] * v;
            if TPOT {
                acc[1] += c[1] * v;
            }
        }
        [
            finite_or_zero(acc[0]),
            if TPOT { finite_or_zero(acc[1]) } else { 0.0 },
        ]
    }

    /// The constant plus the uncached tokens' two terms, for `uncached` tokens (the TPOT
    /// lane only with `TPOT`).
    #[inline(always)]
    fn head<const TPOT: bool>(&self, uncached: u64) -> [f64; 2] {
        let x = RawFeatures::uncached_terms(uncached);
        let mut acc = self.lanes[0];
        for (c, v) in self.lanes[1..3].iter().zip(x) {
            acc[0] += c[0] * v;
            if TPOT {
                acc[1] += c[1] * v;
            }
        }
        acc
    }
}

// The load terms sit right after the constant and the two uncached ones.
const _: () = assert!(LOAD_TERMS + 3 == DESIGN);

#[cfg(test)]
mod tests {
    use super::super::model::dot;
    use super::*;
    use proptest::prelude::*;

    fn raw_features() -> impl Strategy<Value = RawFeatures> {
        (
            proptest::array::uniform3(prop_oneof![0u64..40_000, Just(u64::MAX)]),
            proptest::array::uniform2(0u32..300),
            0u64..300,
            prop_oneof![0.0..1.0f64, Just(f64::NAN), Just(-3.0)],
            proptest::array::uniform2(prop_oneof![0u64..90_000_000_000, Just(u64::MAX)]),
        )
            .prop_map(|(tokens, queues, in_flight, kv, ages)| RawFeatures {
                prompt_tokens: 0,
                uncached_tokens: tokens[0],
                pending_prefill_tokens: tokens[1],
                pending_prefill_age_nanos: ages[0],
                waiting: queues[0],
                running: queues[1],
                in_flight: in_flight.saturating_add(tokens[2] % 3),
                kv_utilization: kv,
                metrics_age_nanos: ages[1],
            })
    }

    proptest! {
        /// Each candidate's prediction has the bits of the model's dot product over its
        /// design vector, whether it caches none of the prompt or some.
        #[test]
        fn a_request_predicts_as_the_model_does(
            ttft in proptest::array::uniform10(-50.0..50.0f64),
            tpot in prop::option::of(proptest::array::uniform10(-5.0..5.0f64)),
            rate in 1.0..600.0f64,
            raw in raw_features(),
            caches_none in any::<bool>(),
            prompt in 0u64..40_000,
        ) {
            let fitted = Fitted::new(Some(ttft), tpot, rate);
            let raw = RawFeatures {
                uncached_tokens: if caches_none { prompt } else { raw.uncached_tokens },
                prompt_tokens: prompt,
                ..raw
            };
            let request = RequestPredictor::new(&fitted, prompt).expect("TTFT ready");
            prop_assert_eq!(request.tpot_ready(), tpot.is_some());
            let x = drain::with_left(&raw.design(), rate);
            let model = |c: &[f64; DESIGN]| finite_or_zero(dot(c, &x)).to_bits();
            let [t, p] = request.predict::<true>(&raw);
            prop_assert_eq!(t.to_bits(), model(&ttft));
            if let Some(tpot) = &tpot {
                prop_assert_eq!(p.to_bits(), model(tpot));
            }
            let [t_alone, none] = request.predict::<false>(&raw);
            prop_assert_eq!(t_alone.to_bits(), model(&ttft));
            prop_assert_eq!(none, 0.0);
        }
    }

    #[test]
    fn no_request_predictor_before_the_ttft_is_ready() {
        let fitted = Fitted::new(None, Some([1.0; DESIGN]), 32.0);
        assert!(RequestPredictor::new(&fitted, 100).is_none());
    }
}
