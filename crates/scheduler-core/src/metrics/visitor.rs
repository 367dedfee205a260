use super::HistogramSnapshot;

/// A metric's name and help text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricDesc<'a> {
    /// Prometheus metric name (`shepherd_…`; counters end in `_total`).
    pub name: &'a str,
    /// One line of help.
    pub help: &'a str,
}

impl<'a> MetricDesc<'a> {
    /// A description.
    pub const fn new(name: &'a str, help: &'a str) -> Self {
        MetricDesc { name, help }
    }
}

/// Receives metric values from a [`MetricsSource`]. One metric may be reported several times
/// with different labels.
pub trait MetricsVisitor {
    /// A monotonically increasing count.
    fn counter(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: u64);
    /// A value that goes up and down.
    fn gauge(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: f64);
    /// A histogram of observations, in seconds.
    fn histogram(
        &mut self,
        desc: MetricDesc<'_>,
        labels: &[(&str, &str)],
        value: &HistogramSnapshot,
    );
}

/// Something with figures to export: reports them to a visitor when asked.
///
/// Reading must be cheap and must not block the request path (atomics, or a short lock that
/// pick paths do not take).
pub trait MetricsSource: Send + Sync {
    /// Reports every metric this source has.
    fn visit_metrics(&self, visitor: &mut dyn MetricsVisitor);
}
