//! The deprecated names: every family with a deprecated twin is reported again under the old
//! name with the old labels, summed over the labels the old name does not have.

use std::collections::BTreeMap;

use shepherd_scheduler_core::metrics::{HistogramSnapshot, MetricDesc, MetricsVisitor};

use super::names::{self as n, Family, Legacy};

/// Every family with a deprecated twin.
const FAMILIES: [Family; 25] = [
    n::REQUEST_TOTAL,
    n::REQUEST_ERROR_TOTAL,
    n::REQUEST_DURATION,
    n::REQUEST_SIZE,
    n::RESPONSE_SIZE,
    n::INPUT_TOKENS,
    n::OUTPUT_TOKENS,
    n::CACHED_TOKENS,
    n::RUNNING,
    n::NTPOT,
    n::AVG_KV,
    n::AVG_QUEUE,
    n::AVG_RUNNING,
    n::READY_ENDPOINTS,
    n::PER_ENDPOINT_QUEUE,
    n::SCHEDULER_E2E,
    n::SCHEDULER_ATTEMPTS,
    n::MODEL_REWRITE_DECISIONS,
    n::PLUGIN_DURATION,
    n::PREFIX_SIZE,
    n::PREFIX_HIT_RATIO,
    n::FLOW_QUEUE_SIZE,
    n::FLOW_QUEUE_BYTES,
    n::FLOW_SATURATION,
    n::FLOW_QUEUE_DURATION,
];

fn twin(name: &str) -> Option<(Legacy, &'static str)> {
    FAMILIES
        .iter()
        .find(|f| f.desc.name == name)
        .and_then(|f| f.legacy.map(|l| (l, f.desc.name)))
}

/// A deprecated series' labels: `(old name, value)`.
type OldLabels = Vec<(&'static str, String)>;

#[derive(Debug)]
enum Value {
    Counter(u64),
    Gauge(f64),
    Histogram(HistogramSnapshot),
}

/// Forwards everything to the inner visitor and keeps the deprecated twins, summed by their
/// labels, for [`LegacyNames::flush`].
pub(super) struct LegacyNames<'a> {
    inner: &'a mut dyn MetricsVisitor,
    /// `(old name, current name)` → old labels → value.
    kept: BTreeMap<(&'static str, &'static str), BTreeMap<OldLabels, Value>>,
}

impl<'a> LegacyNames<'a> {
    pub(super) fn new(inner: &'a mut dyn MetricsVisitor) -> Self {
        LegacyNames {
            inner,
            kept: BTreeMap::new(),
        }
    }

    fn keep(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        add: impl FnOnce(Option<&mut Value>) -> Option<Value>,
    ) {
        let Some((legacy, current)) = twin(name) else {
            return;
        };
        let old: Vec<(&'static str, String)> = legacy
            .labels
            .iter()
            .map(|(new, old)| {
                let value = labels
                    .iter()
                    .find(|(k, _)| k == new)
                    .map_or("", |(_, v)| *v);
                (*old, value.to_owned())
            })
            .collect();
        let series = self.kept.entry((legacy.name, current)).or_default();
        match series.get_mut(&old) {
            Some(value) => {
                add(Some(value));
            }
            None => {
                if let Some(value) = add(None) {
                    series.insert(old, value);
                }
            }
        }
    }

    /// Reports the deprecated twins.
    pub(super) fn flush(self) {
        for ((old, current), series) in self.kept {
            let help = format!("[Deprecated: Use {current}]");
            let desc = MetricDesc::new(old, &help);
            for (labels, value) in series {
                let labels: Vec<(&str, &str)> =
                    labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                match value {
                    Value::Counter(c) => self.inner.counter(desc, &labels, c),
                    Value::Gauge(g) => self.inner.gauge(desc, &labels, g),
                    Value::Histogram(h) => self.inner.histogram(desc, &labels, &h),
                }
            }
        }
    }
}

impl MetricsVisitor for LegacyNames<'_> {
    fn counter(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: u64) {
        self.inner.counter(desc, labels, value);
        self.keep(desc.name, labels, |v| match v {
            Some(Value::Counter(c)) => {
                *c += value;
                None
            }
            Some(_) => None,
            None => Some(Value::Counter(value)),
        });
    }

    fn gauge(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: f64) {
        self.inner.gauge(desc, labels, value);
        self.keep(desc.name, labels, |v| match v {
            Some(Value::Gauge(g)) => {
                *g += value;
                None
            }
            Some(_) => None,
            None => Some(Value::Gauge(value)),
        });
    }

    fn histogram(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        self.inner.histogram(desc, labels, h);
        self.keep(desc.name, labels, |v| match v {
            Some(Value::Histogram(total)) => {
                if total.buckets.len() == h.buckets.len() {
                    for (a, b) in total.buckets.iter_mut().zip(&h.buckets) {
                        a.1 += b.1;
                    }
                    total.sum += h.sum;
                    total.count += h.count;
                }
                None
            }
            Some(_) => None,
            None => Some(Value::Histogram(h.clone())),
        });
    }
}
