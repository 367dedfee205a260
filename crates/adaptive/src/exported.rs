//! The controller's figures for export: the signal, the mode, the Distribution share and the
//! weights in force, as of the latest tick.

use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};

use crate::{AdaptiveController, Mode};

const TICKS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_adaptive_ticks_total",
    "Adaptive controller ticks.",
);
const SIGNAL: MetricDesc<'static> = MetricDesc::new(
    "shepherd_adaptive_signal",
    "Raw imbalance signal of the latest tick (0..1; NaN when every endpoint was stale).",
);
const SMOOTHED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_adaptive_smoothed_signal",
    "Smoothed imbalance signal after the latest tick (0..1).",
);
const MODE: MetricDesc<'static> = MetricDesc::new(
    "shepherd_adaptive_mode",
    "1 for the mode the controller is in, 0 for the other.",
);
const SHARE: MetricDesc<'static> = MetricDesc::new(
    "shepherd_adaptive_distribution_share",
    "Share of the weight budget given to Distribution scorers.",
);
const WEIGHT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_adaptive_weight",
    "Weight in force per scorer of the controlled profile.",
);

impl MetricsSource for AdaptiveController {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let profile = self.profile().name();
        let Some(record) = self.latest() else {
            v.counter(TICKS, &[("profile", profile)], 0);
            return;
        };
        v.counter(TICKS, &[("profile", profile)], record.tick + 1);
        v.gauge(
            SIGNAL,
            &[("profile", profile)],
            record.signal().unwrap_or(f64::NAN),
        );
        v.gauge(SMOOTHED, &[("profile", profile)], record.smoothed);
        for mode in [Mode::Steady, Mode::Burst] {
            let name = mode.to_string();
            let on = f64::from(u8::from(record.mode == mode));
            v.gauge(MODE, &[("profile", profile), ("mode", &name)], on);
        }
        v.gauge(SHARE, &[("profile", profile)], record.distribution_share);
        let weights = self.profile().weights().load();
        for (entry, w) in self.profile().scorers().iter().zip(weights.as_slice()) {
            v.gauge(WEIGHT, &[("profile", profile), ("scorer", &entry.name)], *w);
        }
    }
}
