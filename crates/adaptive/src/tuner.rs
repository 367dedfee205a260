//! The adaptive loop as a pure function: (previous state, inputs, time) → (new state, weights,
//! record).
//!
//! A [`Tuner`] holds what never changes between ticks (the validated config, the profile's
//! [`ScorerLayout`], the two mode curves). [`Tuner::step`] reads per-endpoint samples, runs the
//! detector, smooths the signal, applies the hysteresis and maps the smoothed signal to
//! weights. It touches nothing else, so the same sequence of inputs always gives the same
//! outputs.
//!
//! ```
//! use shepherd_adaptive::{AdaptiveConfig, Mode, ScorerLayout, Tuner};
//! use shepherd_adaptive::sample::EndpointSample;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::plugin::Category::{Affinity, Distribution};
//!
//! let layout = ScorerLayout::new(vec![Affinity, Distribution, Distribution], vec![3.0, 2.0, 2.0]);
//! let tuner = Tuner::new(AdaptiveConfig::default(), layout).unwrap();
//! let mut state = tuner.initial_state();
//!
//! // One endpoint carries almost all the load.
//! let hot: Vec<EndpointSample> = (0..4)
//!     .map(|i| EndpointSample::new(format!("10.0.0.{i}:8000"), if i == 0 { 40 } else { 1 }, 0, 0, 0.3, false))
//!     .collect();
//! for t in 0..tuner.config().settle_bound_ticks() {
//!     state = tuner.step(&state, &hot, Timestamp::from_millis(200 * t)).state;
//! }
//! assert_eq!(state.mode, Mode::Burst);
//! assert!(state.weights[1] > 2.0 && state.weights[0] < 3.0);
//! ```

use std::fmt::Write as _;

use shepherd_scheduler_core::clock::Timestamp;

use crate::config::{AdaptiveConfig, ModeCurve};
use crate::detector::{Reading, detect};
use crate::error::AdaptiveError;
use crate::layout::ScorerLayout;
use crate::mode::{AdaptiveState, Mode, ModeEntry};
use crate::record::TickRecord;
use crate::richards::RichardsCurve;
use crate::sample::EndpointSample;

/// One mode's resolved share range and curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareCurve {
    /// Share at r = 0.
    pub min: f64,
    /// Share at r = 1 (≥ `min`).
    pub max: f64,
    /// The curve between them.
    pub curve: RichardsCurve,
}

/// `x` clamped into `[0, 1]`, NaN counting as 0 (`f64::clamp` keeps NaN).
fn unit_interval(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

impl ShareCurve {
    fn resolve(spec: &ModeCurve, configured_share: f64) -> Self {
        let min = unit_interval(spec.min_share.resolve(configured_share));
        let max = unit_interval(spec.max_share.resolve(configured_share)).max(min);
        ShareCurve {
            min,
            max,
            curve: RichardsCurve::new(spec.midpoint, spec.steepness, spec.q, spec.nu),
        }
    }

    /// The Distribution share at smoothed signal `r`: exactly `min` at r ≤ 0 (and for a NaN
    /// `r`), exactly `max` at r ≥ 1, non-decreasing in between. Always in `[0, 1]`, even for
    /// a hand-built curve whose `min` and `max` are out of range, NaN or crossed (they are
    /// clamped into `[0, 1]`, NaN read as 0, and `max` raised to `min`).
    pub fn share(&self, r: f64) -> f64 {
        let min = unit_interval(self.min);
        let max = unit_interval(self.max).max(min);
        let u = self.curve.unit(r);
        if u >= 1.0 {
            max
        } else if u > 0.0 {
            // f64::max/min rather than clamp: they cannot panic, and they drop a NaN.
            (min + (max - min) * u).max(min).min(max)
        } else {
            min
        }
    }
}

/// The result of one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct TickOutcome {
    /// The state to pass to the next tick.
    pub state: AdaptiveState,
    /// The weights to publish, in the profile's scorer order.
    pub weights: Vec<f64>,
    /// The explanation of this tick.
    pub record: TickRecord,
}

/// The adaptive loop for one profile: validated config, scorer layout and mode curves.
#[derive(Debug, Clone)]
pub struct Tuner {
    config: AdaptiveConfig,
    layout: ScorerLayout,
    steady: ShareCurve,
    burst: ShareCurve,
}

impl Tuner {
    /// A loop for `layout` under `config` (validated here).
    pub fn new(config: AdaptiveConfig, layout: ScorerLayout) -> Result<Self, AdaptiveError> {
        config.validate()?;
        let configured_share = layout.configured_share().unwrap_or(0.0);
        Ok(Tuner {
            steady: ShareCurve::resolve(&config.steady, configured_share),
            burst: ShareCurve::resolve(&config.burst, configured_share),
            config,
            layout,
        })
    }

    /// The config.
    pub fn config(&self) -> &AdaptiveConfig {
        &self.config
    }

    /// The scorer layout.
    pub fn layout(&self) -> &ScorerLayout {
        &self.layout
    }

    /// The resolved curve of `mode`.
    pub fn curve(&self, mode: Mode) -> &ShareCurve {
        match mode {
            Mode::Steady => &self.steady,
            Mode::Burst => &self.burst,
        }
    }

    /// The Distribution share `mode` gives at smoothed signal `r` (the configured share when
    /// the layout has nothing to trade).
    pub fn share(&self, mode: Mode, r: f64) -> f64 {
        match self.layout.configured_share() {
            Some(_) => self.curve(mode).share(r),
            None => self.static_share(),
        }
    }

    fn static_share(&self) -> f64 {
        let budget = self.layout.budget();
        if budget > 0.0 {
            self.layout
                .configured_total(shepherd_scheduler_core::plugin::Category::Distribution)
                / budget
        } else {
            0.0
        }
    }

    /// The state before the first tick: steady, r = 0, configured weights.
    pub fn initial_state(&self) -> AdaptiveState {
        AdaptiveState {
            ticks: 0,
            smoothed: 0.0,
            mode: Mode::Steady,
            mode_entered: None,
            distribution_share: self.share(Mode::Steady, 0.0),
            weights: self.layout.configured().to_vec(),
        }
    }

    /// One tick over `samples` (per-endpoint inputs) at `now`.
    pub fn step(
        &self,
        prev: &AdaptiveState,
        samples: &[EndpointSample],
        now: Timestamp,
    ) -> TickOutcome {
        let reading = detect(samples, &self.config);
        self.advance(prev, reading, samples.to_vec(), now)
    }

    /// One tick on a reading already made (the configurator half of [`Tuner::step`]);
    /// `samples` are only recorded.
    pub fn advance(
        &self,
        prev: &AdaptiveState,
        reading: Reading,
        samples: Vec<EndpointSample>,
        now: Timestamp,
    ) -> TickOutcome {
        let tick = prev.ticks;
        let Some(signal) = reading.signal.filter(|s| !s.is_nan()) else {
            let reason = format!(
                "held: all {} endpoints have stale metrics; signal, mode and weights kept",
                reading.endpoints
            );
            let state = AdaptiveState {
                ticks: tick + 1,
                smoothed: unit_interval(prev.smoothed),
                distribution_share: unit_interval(prev.distribution_share),
                ..prev.clone()
            };
            return self.outcome(prev, state, reading, samples, now, true, reason);
        };
        let signal = signal.clamp(0.0, 1.0);

        let alpha = self.config.smoothing.alpha;
        let mut r = alpha * unit_interval(prev.smoothed) + (1.0 - alpha) * signal;
        if (r - signal).abs() < self.config.smoothing.snap_epsilon {
            r = signal;
        }
        let r = unit_interval(r);

        let mut reason = String::new();
        let (mode, entered) = if !self.config.enabled || !self.layout.can_trade() {
            (Mode::Steady, prev.mode_entered)
        } else {
            self.next_mode(prev, r, tick, now, &mut reason)
        };
        let share = self.share(mode, r);
        let weights = if self.config.enabled {
            self.layout.weights_for_share(share)
        } else {
            self.layout.configured().to_vec()
        };
        let share = if self.config.enabled {
            share
        } else {
            self.static_share()
        };

        let weights_changed = weights != prev.weights;
        let mut text = String::new();
        if !self.config.enabled {
            text.push_str("adaptive weights disabled: configured weights");
        } else if !self.layout.can_trade() {
            text.push_str(
                "profile has no Affinity or no Distribution weight to trade: configured weights",
            );
        } else if mode != prev.mode {
            let _ = match mode {
                Mode::Burst => write!(
                    text,
                    "entered burst: smoothed signal {r:.3} > enter {}",
                    self.config.hysteresis.enter
                ),
                Mode::Steady => write!(
                    text,
                    "left burst: smoothed signal {r:.3} < exit {}",
                    self.config.hysteresis.exit
                ),
            };
            let _ = write!(
                text,
                "; distribution share {:.3} → {share:.3}",
                prev.distribution_share
            );
        } else if weights_changed {
            let _ = write!(
                text,
                "{mode}: distribution share {:.3} → {share:.3} as smoothed signal moved {:.3} → {r:.3}",
                prev.distribution_share, prev.smoothed
            );
        } else {
            let _ = write!(
                text,
                "unchanged: {mode}, distribution share {share:.3}, smoothed signal {r:.3}"
            );
        }
        text.push_str(&reason);
        self.annotate(&reading, &mut text);

        let state = AdaptiveState {
            ticks: tick + 1,
            smoothed: r,
            mode,
            mode_entered: entered,
            distribution_share: share,
            weights,
        };
        self.outcome(prev, state, reading, samples, now, false, text)
    }

    /// Applies the hysteresis: the mode after a tick whose smoothed signal is `r`.
    fn next_mode(
        &self,
        prev: &AdaptiveState,
        r: f64,
        tick: u64,
        now: Timestamp,
        reason: &mut String,
    ) -> (Mode, Option<ModeEntry>) {
        let h = &self.config.hysteresis;
        let wants = match prev.mode {
            Mode::Steady if r > h.enter => Some(Mode::Burst),
            Mode::Burst if r < h.exit => Some(Mode::Steady),
            _ => None,
        };
        let Some(next) = wants else {
            return (prev.mode, prev.mode_entered);
        };
        if let Some(entry) = prev.mode_entered {
            let ticks_in = tick.saturating_sub(entry.tick);
            let time_in = now.saturating_since(Timestamp::from_nanos(entry.at_nanos));
            let need_time = std::time::Duration::from_millis(h.min_dwell_ms);
            if ticks_in < h.min_dwell_ticks || time_in < need_time {
                let _ = write!(
                    reason,
                    "; would switch to {next} but {} has lasted only {ticks_in} of {} ticks / {} of {} ms",
                    prev.mode,
                    h.min_dwell_ticks,
                    time_in.as_millis(),
                    h.min_dwell_ms
                );
                return (prev.mode, prev.mode_entered);
            }
        }
        (
            next,
            Some(ModeEntry {
                tick,
                at_nanos: now.as_nanos(),
            }),
        )
    }

    fn annotate(&self, reading: &Reading, text: &mut String) {
        let stale = reading.endpoints - reading.fresh;
        if stale > 0 {
            let _ = write!(text, " [{stale} stale endpoint(s) left out]");
        }
        if reading.fresh <= 1 {
            let _ = write!(text, " [fewer than 2 fresh endpoints: no imbalance]");
        } else if reading.idle {
            let _ = write!(
                text,
                " [pool nearly idle: total load {} < {} per endpoint]",
                reading.total_load, self.config.idle_load_per_endpoint
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn outcome(
        &self,
        prev: &AdaptiveState,
        state: AdaptiveState,
        reading: Reading,
        samples: Vec<EndpointSample>,
        now: Timestamp,
        held: bool,
        reason: String,
    ) -> TickOutcome {
        let record = TickRecord {
            tick: prev.ticks,
            at_nanos: now.as_nanos(),
            endpoints: samples,
            reading,
            held,
            smoothed: state.smoothed,
            previous_mode: prev.mode,
            mode: state.mode,
            distribution_share: state.distribution_share,
            weights: state.weights.clone(),
            weights_changed: state.weights != prev.weights,
            reason,
        };
        TickOutcome {
            weights: state.weights.clone(),
            state,
            record,
        }
    }
}
