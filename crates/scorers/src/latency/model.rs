//! [`LatencyModel`]: TTFT and TPOT predicted per candidate from a few load features, learned
//! online from finished requests.
//!
//! Each target is a ridge regression over the same design vector ([`LatencyFeatures::design`]):
//! a constant, the uncached prompt tokens and their square (prefill work, and attention growing
//! with the prompt), the pending prefill tokens already sent to the endpoint and how long
//! they have been pending (summed over their requests: how far that prefill has got), its
//! waiting and running requests, this scheduler's in flight, its KV-cache utilization, and the
//! age of the scraped figures. The samples of the last `window` finished requests are kept; every
//! `refit_every` samples the model is refitted over them and the new coefficients swapped in
//! behind an [`ArcSwap`], so a prediction is a lock-free load and two dot products.
//!
//! **Cold start.** A target is *ready* once it has `min_samples` samples and its recent
//! error — the mean absolute percentage error of each new sample as predicted before it was
//! learned, smoothed over the last `min_samples` or so — is at most `max_error`. Until then
//! [`LatencyModel::predict`] says `None` for it, and callers fall back to their other scorers.
//!
//! Predictions are never negative or non-finite: garbage features are clamped first
//! ([`LatencyFeatures::design`]) and the result is floored at 0.
//!
//! ```
//! use shepherd_scorers::latency::{LatencyFeatures, LatencyModel, LatencyModelParameters};
//!
//! let model = LatencyModel::new(LatencyModelParameters { min_samples: 50, ..Default::default() });
//! // An endpoint whose TTFT is 10 ms + 0.05 ms per uncached token, TPOT 6 ms + 0.1 ms per running request.
//! for i in 0..400u32 {
//!     let f = LatencyFeatures {
//!         uncached_tokens: f64::from(i % 40) * 100.0,
//!         running: f64::from(i % 16),
//!         ..LatencyFeatures::default()
//!     };
//!     model.learn(&f, Some(10.0 + 0.05 * f.uncached_tokens), Some(6.0 + 0.1 * f.running));
//! }
//! let f = LatencyFeatures { uncached_tokens: 2000.0, running: 4.0, ..LatencyFeatures::default() };
//! let p = model.predict(&f);
//! assert!((p.ttft_ms.unwrap() - 110.0).abs() < 1.0);
//! assert!((p.tpot_ms.unwrap() - 6.4).abs() < 0.1);
//! ```

use std::collections::VecDeque;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::drain;
use super::features::{DESIGN, LatencyFeatures};
use super::request_predictor::RequestPredictor;

/// The model's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyModelParameters {
    /// Finished requests kept for fitting.
    pub window: usize,
    /// Samples between refits.
    pub refit_every: usize,
    /// Samples a target needs before it is used.
    pub min_samples: usize,
    /// Largest recent MAPE at which a target is used.
    pub max_error: f64,
    /// Ridge strength (relative to the samples' count).
    pub lambda: f64,
}

impl Default for LatencyModelParameters {
    fn default() -> Self {
        LatencyModelParameters {
            window: 4096,
            refit_every: 64,
            min_samples: 200,
            max_error: 0.3,
            lambda: 1e-6,
        }
    }
}

/// Predicted latencies of one candidate; `None` for a target that is not ready.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Prediction {
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Time per output token, ms.
    pub tpot_ms: Option<f64>,
}

/// The targets' fitted coefficients, each if it is ready.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Fitted {
    pub(super) ttft: Option<[f64; DESIGN]>,
    pub(super) tpot: Option<[f64; DESIGN]>,
    /// Both, entry by entry (TTFT, TPOT; a TPOT not ready as 0): two lanes of one dot
    /// product, paired once per refit rather than per prediction.
    pub(super) lanes: [[f64; 2]; DESIGN],
    /// The drain rate the coefficients were fitted with ([`drain`]).
    pub(super) rate: f64,
}

impl Fitted {
    pub(super) fn new(ttft: Option<[f64; DESIGN]>, tpot: Option<[f64; DESIGN]>, rate: f64) -> Self {
        let (a, b) = (ttft.unwrap_or_default(), tpot.unwrap_or_default());
        Fitted {
            ttft,
            tpot,
            lanes: std::array::from_fn(|j| [a[j], b[j]]),
            rate,
        }
    }
}

/// Upper bounds of the load levels errors are tallied by: the candidate's running requests
/// at pick time (the last level is everything above).
pub const LOAD_LEVELS: [f64; 3] = [8.0, 32.0, 128.0];

/// Prediction errors of one target, tallied by load level ([`LOAD_LEVELS`]): each finished
/// request predicted before it was learned, once the target had a model.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ErrorTally {
    /// Σ absolute percentage error per level.
    pub sum: [f64; LOAD_LEVELS.len() + 1],
    /// Requests per level.
    pub count: [u64; LOAD_LEVELS.len() + 1],
}

impl ErrorTally {
    /// The mean absolute percentage error of level `i` (0 = the lightest), if it has samples.
    pub fn mape(&self, i: usize) -> Option<f64> {
        let n = *self.count.get(i)?;
        (n > 0).then(|| self.sum[i] / n as f64)
    }

    /// The mean absolute percentage error over every level.
    pub fn overall(&self) -> Option<f64> {
        let n: u64 = self.count.iter().sum();
        (n > 0).then(|| self.sum.iter().sum::<f64>() / n as f64)
    }

    fn add(&mut self, running: f64, error: f64) {
        let level = LOAD_LEVELS
            .iter()
            .position(|&bound| running < bound)
            .unwrap_or(LOAD_LEVELS.len());
        self.sum[level] += error;
        self.count[level] += 1;
    }
}

/// One target's learning state.
#[derive(Debug, Default)]
struct Target {
    samples: VecDeque<([f64; DESIGN], f64)>,
    coefficients: Option<[f64; DESIGN]>,
    /// Smoothed absolute percentage error of new samples, predicted before learning them.
    recent_error: Option<f64>,
    tally: ErrorTally,
}

impl Target {
    fn learn(&mut self, x: [f64; DESIGN], y: f64, params: &LatencyModelParameters, rate: f64) {
        if !(y.is_finite() && y >= 0.0) {
            return;
        }
        if let Some(c) = &self.coefficients {
            let error = (dot(c, &drain::with_left(&x, rate)).max(0.0) - y).abs() / y.max(1e-3);
            // x[5] is the running requests (see `LatencyFeatures::design`).
            self.tally.add(x[5], error);
            let alpha = 1.0 / params.min_samples.max(1) as f64;
            self.recent_error = Some(match self.recent_error {
                Some(e) => e + alpha * (error.min(10.0) - e),
                None => error.min(10.0),
            });
        }
        self.samples.push_back((x, y));
        while self.samples.len() > params.window.max(1) {
            self.samples.pop_front();
        }
    }

    fn refit(&mut self, params: &LatencyModelParameters, rate: f64) {
        if let Some((c, _)) = drain::fit(self.samples.iter().copied(), rate, params.lambda) {
            self.coefficients = Some(c);
        }
    }

    fn ready(&self, params: &LatencyModelParameters) -> Option<[f64; DESIGN]> {
        let enough = self.samples.len() >= params.min_samples;
        let accurate = self.recent_error.is_some_and(|e| e <= params.max_error);
        self.coefficients.filter(|_| enough && accurate)
    }
}

#[derive(Debug)]
struct Training {
    ttft: Target,
    tpot: Target,
    since_refit: usize,
    /// Refits so far; every [`SEARCH_EVERY`]th searches the drain rate afresh.
    refits: usize,
    /// The drain rate in force ([`drain`]), thousand tokens per second.
    rate: f64,
    /// Whether `rate` was searched (rather than the initial guess).
    rate_searched: bool,
}

impl Default for Training {
    fn default() -> Self {
        Training {
            ttft: Target::default(),
            tpot: Target::default(),
            since_refit: 0,
            refits: 0,
            rate: INITIAL_RATE,
            rate_searched: false,
        }
    }
}

/// Refits between two searches of the drain rate: a search fits the window fourteen times,
/// so it runs on every eighth refit (every 512 samples by default) and the refits between
/// reuse its rate.
const SEARCH_EVERY: usize = 8;

/// The drain rate before the first search, thousand tokens per second.
const INITIAL_RATE: f64 = 32.0;

/// TTFT and TPOT predicted per candidate (see the module docs).
#[derive(Debug)]
pub struct LatencyModel {
    params: LatencyModelParameters,
    fitted: ArcSwap<Fitted>,
    training: Mutex<Training>,
}

impl LatencyModel {
    /// An untrained model.
    pub fn new(params: LatencyModelParameters) -> Self {
        LatencyModel {
            params,
            fitted: ArcSwap::from_pointee(Fitted::default()),
            training: Mutex::new(Training::default()),
        }
    }

    /// Learns one finished request: the features it was picked with and the latencies it
    /// saw (`None` for one it did not report, e.g. no TPOT for a one-token answer).
    pub fn learn(&self, features: &LatencyFeatures, ttft_ms: Option<f64>, tpot_ms: Option<f64>) {
        let x = features.design();
        let mut t = self.training.lock();
        let rate = t.rate;
        if let Some(y) = ttft_ms {
            t.ttft.learn(x, y, &self.params, rate);
        }
        if let Some(y) = tpot_ms {
            t.tpot.learn(x, y, &self.params, rate);
        }
        t.since_refit += 1;
        let first = t.ttft.coefficients.is_none() || t.tpot.coefficients.is_none();
        if t.since_refit >= self.params.refit_every.max(1) || first {
            t.since_refit = 0;
            if t.refits.is_multiple_of(SEARCH_EVERY) || first {
                let samples = t.ttft.samples.iter().copied();
                if let Some(rate) = drain::best_rate(samples, self.params.lambda) {
                    t.rate = rate;
                    t.rate_searched = true;
                }
            }
            t.refits += 1;
            let rate = t.rate;
            t.ttft.refit(&self.params, rate);
            t.tpot.refit(&self.params, rate);
        }
        let fitted = Fitted::new(
            t.ttft.ready(&self.params),
            t.tpot.ready(&self.params),
            t.rate,
        );
        if **self.fitted.load() != fitted {
            self.fitted.store(Arc::new(fitted));
        }
    }

    /// The predictions for a candidate with `features` (lock-free).
    pub fn predict(&self, features: &LatencyFeatures) -> Prediction {
        self.predictor().predict(features)
    }

    /// The coefficients in force, to predict many candidates with one load.
    pub fn predictor(&self) -> Predictor {
        Predictor(self.fitted.load_full())
    }

    /// The drain rate the model learned for the pending prefill left, thousand prefill tokens
    /// per second, once it has searched one: how fast the pool's endpoints work off the
    /// prefills sent to them, as the latencies show it.
    pub fn drain_rate(&self) -> Option<f64> {
        let t = self.training.lock();
        t.rate_searched.then_some(t.rate)
    }

    /// The recent error of each target (TTFT, TPOT), once it has a model.
    pub fn recent_errors(&self) -> (Option<f64>, Option<f64>) {
        let t = self.training.lock();
        (t.ttft.recent_error, t.tpot.recent_error)
    }

    /// Every prediction error so far of each target (TTFT, TPOT), by load level.
    pub fn error_tallies(&self) -> (ErrorTally, ErrorTally) {
        let t = self.training.lock();
        (t.ttft.tally, t.tpot.tally)
    }
}

impl Default for LatencyModel {
    fn default() -> Self {
        LatencyModel::new(LatencyModelParameters::default())
    }
}

/// The model's coefficients at one moment ([`LatencyModel::predictor`]).
#[derive(Debug, Clone)]
pub struct Predictor(Arc<Fitted>);

impl Predictor {
    /// Both targets' predictions for `features` (`None` for one not ready).
    #[inline]
    pub fn predict(&self, features: &LatencyFeatures) -> Prediction {
        self.predict_design(&features.design(), true)
    }

    /// The predictions for the design vector `x` ([`LatencyFeatures::design`]); the TPOT
    /// only `with_tpot`.
    #[inline(always)]
    pub fn predict_design(&self, x: &[f64; DESIGN], with_tpot: bool) -> Prediction {
        let x = &drain::with_left(x, self.0.rate);
        if with_tpot && self.0.ttft.is_some() && self.0.tpot.is_some() {
            let [ttft, tpot] = dot_pair(&self.0.lanes, x);
            return Prediction {
                ttft_ms: Some(finite_or_zero(ttft)),
                tpot_ms: Some(finite_or_zero(tpot)),
            };
        }
        let at = |c: &Option<[f64; DESIGN]>| c.as_ref().map(|c| finite_or_zero(dot(c, x)));
        Prediction {
            ttft_ms: at(&self.0.ttft),
            tpot_ms: if with_tpot { at(&self.0.tpot) } else { None },
        }
    }

    /// The predictor of one request's candidates, its prompt `prompt_tokens` long (see
    /// [`RequestPredictor`]); `None` while the TTFT target is not ready.
    pub fn for_request(&self, prompt_tokens: u64) -> Option<RequestPredictor> {
        RequestPredictor::new(&self.0, prompt_tokens)
    }

    /// Whether the TTFT target is ready.
    pub fn ttft_ready(&self) -> bool {
        self.0.ttft.is_some()
    }

    /// Whether the TPOT target is ready.
    pub fn tpot_ready(&self) -> bool {
        self.0.tpot.is_some()
    }
}

/// `c · x`, summed in order (the constant first), as each lane of [`dot_pair`] sums.
#[inline]
pub(super) fn dot(c: &[f64; DESIGN], x: &[f64; DESIGN]) -> f64 {
    let mut acc = c[0];
    for j in 1..DESIGN {
        acc += c[j] * x[j];
    }
    acc
}

/// Two dot products with `x` at once, coefficients paired entry by entry: each lane sums as
/// [`dot`] does (so a pair gives the bits of two single products), and the pair is one
/// two-lane multiply and add per entry.
#[inline]
fn dot_pair(c: &[[f64; 2]; DESIGN], x: &[f64; DESIGN]) -> [f64; 2] {
    let mut acc = c[0];
    for j in 1..DESIGN {
        acc[0] += c[j][0] * x[j];
        acc[1] += c[j][1] * x[j];
    }
    acc
}

#[inline]
pub(super) fn finite_or_zero(v: f64) -> f64 {
    if v.is_finite() { v.max(0.0) } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A deterministic stream of varied features.
    fn features(i: u64) -> LatencyFeatures {
        let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let pick = |shift: u32, n: u64| ((h >> shift) % n) as f64;
        let prompt = 200.0 + pick(0, 16_000);
        LatencyFeatures {
            prompt_tokens: prompt,
            uncached_tokens: prompt * pick(14, 100) / 100.0,
            pending_prefill_tokens: pick(21, 20_000),
            pending_prefill_age_ms: pick(28, 2_000),
            waiting: pick(35, 10),
            running: pick(40, 128),
            in_flight: pick(47, 140),
            kv_utilization: pick(54, 100) / 100.0,
            metrics_age_ms: pick(8, 200),
        }
    }

    /// A known latency function of the shape an engine has, with ±5 % deterministic noise.
    fn truth(f: &LatencyFeatures, i: u64) -> (f64, f64) {
        let noise = 1.0 + 0.05 * (((i * 7919) % 201) as f64 / 100.0 - 1.0);
        let u = f.uncached_tokens / 1000.0;
        let ttft = 15.0 + 23.0 * u + 0.9 * u * u + 25.0 * f.pending_prefill_tokens / 1000.0
            - 4.0 * f.pending_prefill_age_ms / 1000.0
            + 8.0 * f.waiting;
        let tpot = 6.4 + 0.06 * f.running + 2.0 * f.kv_utilization;
        (ttft * noise, tpot * noise)
    }

    #[test]
    fn the_model_learns_a_known_latency_function_within_ten_percent() {
        let model = LatencyModel::default();
        for i in 0..3000 {
            let f = features(i);
            let (ttft, tpot) = truth(&f, i);
            model.learn(&f, Some(ttft), Some(tpot));
        }
        let mut errors = (0.0, 0.0);
        let n = 1000;
        for i in 10_000..10_000 + n {
            let f = features(i);
            let (ttft, tpot) = truth(&f, i);
            let p = model.predict(&f);
            errors.0 += (p.ttft_ms.unwrap() - ttft).abs() / ttft;
            errors.1 += (p.tpot_ms.unwrap() - tpot).abs() / tpot;
        }
        let (ttft_mape, tpot_mape) = (errors.0 / n as f64, errors.1 / n as f64);
        assert!(ttft_mape < 0.10, "TTFT MAPE {ttft_mape}");
        assert!(tpot_mape < 0.10, "TPOT MAPE {tpot_mape}");
        // The model's own tally of what it predicted before learning each sample agrees.
        let (ttft, tpot) = model.error_tallies();
        assert!(ttft.overall().unwrap() < 0.10, "{ttft:?}");
        assert!(tpot.overall().unwrap() < 0.10, "{tpot:?}");
        // Features drawn from 0..128 running requests fill the three lower levels.
        assert!((0..3).all(|i| ttft.mape(i).is_some()), "{ttft:?}");
    }

    #[test]
    fn a_cold_model_predicts_nothing() {
        let model = LatencyModel::default();
        assert_eq!(model.predict(&features(1)), Prediction::default());
        for i in 0..100 {
            let f = features(i);
            let (ttft, tpot) = truth(&f, i);
            model.learn(&f, Some(ttft), Some(tpot));
        }
        // 100 of the 200 samples it needs.
        assert_eq!(model.predict(&features(1)), Prediction::default());
    }

    #[test]
    fn a_target_it_cannot_learn_stays_unused() {
        let model = LatencyModel::default();
        for i in 0..2000 {
            let f = features(i);
            // TTFT pure noise (no relation to the features), TPOT learnable.
            let noise = ((i * 2_654_435_761) % 1000) as f64 + 1.0;
            model.learn(&f, Some(noise), Some(truth(&f, i).1));
        }
        let p = model.predict(&features(5));
        assert_eq!(p.ttft_ms, None, "errors {:?}", model.recent_errors());
        assert!(p.tpot_ms.is_some());
    }

    proptest! {
        /// Each lane of the paired product has the bits of the single product.
        #[test]
        fn a_paired_product_is_two_single_ones(
            a in proptest::array::uniform10(-1e4..1e4f64),
            b in proptest::array::uniform10(-1e4..1e4f64),
            x in proptest::array::uniform10(0.0..1e3f64),
        ) {
            let pair: [[f64; 2]; DESIGN] = std::array::from_fn(|j| [a[j], b[j]]);
            let [ta, tb] = dot_pair(&pair, &x);
            prop_assert_eq!(ta.to_bits(), dot(&a, &x).to_bits());
            prop_assert_eq!(tb.to_bits(), dot(&b, &x).to_bits());
        }

        /// Whatever garbage the metrics hold, a prediction is finite and never negative.
        #[test]
        fn predictions_are_finite_and_never_negative(
            raw in proptest::array::uniform9(proptest::num::f64::ANY),
        ) {
            let model = LatencyModel::new(LatencyModelParameters { min_samples: 10, ..Default::default() });
            for i in 0..300 {
                let f = features(i);
                let (ttft, tpot) = truth(&f, i);
                model.learn(&f, Some(ttft), Some(tpot));
            }
            let f = LatencyFeatures {
                prompt_tokens: raw[0],
                uncached_tokens: raw[1],
                pending_prefill_tokens: raw[2],
                waiting: raw[3],
                running: raw[4],
                in_flight: raw[5],
                kv_utilization: raw[6],
                metrics_age_ms: raw[7],
                pending_prefill_age_ms: raw[8],
            };
            let p = model.predict(&f);
            for v in [p.ttft_ms, p.tpot_ms].into_iter().flatten() {
                prop_assert!(v.is_finite() && v >= 0.0, "{v}");
            }
            // Garbage targets are not learned.
            model.learn(&f, Some(raw[0]), Some(raw[1]));
            let p = model.predict(&features(3));
            for v in [p.ttft_ms, p.tpot_ms].into_iter().flatten() {
                prop_assert!(v.is_finite() && v >= 0.0, "{v}");
            }
        }
    }
}
