//! What a parsed page holds: samples, their labels, metadata, and the lines that were skipped.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use super::error::LineError;

/// One `name="value"` pair of a sample.
///
/// The name borrows from the page; the value does too unless it contained an escape sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label<'a> {
    /// Label name (`[a-zA-Z_][a-zA-Z0-9_]*`).
    pub name: &'a str,
    /// Label value, unescaped.
    pub value: Cow<'a, str>,
}

/// One sample line: a metric name, its labels, a value and an optional timestamp.
///
/// `Display` renders it back as one exposition-format line (without the line break), escaping
/// label values and writing `NaN`, `+Inf` and `-Inf` as the format spells them; parsing that
/// line gives the same sample back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample<'s> {
    /// Metric name as written, suffix included (`vllm:e2e_request_latency_seconds_bucket`).
    pub name: &'s str,
    /// Labels in the order written.
    pub labels: &'s [Label<'s>],
    /// The value (may be `NaN` or infinite).
    pub value: f64,
    /// Timestamp in milliseconds since the Unix epoch, when the line has one.
    pub timestamp_ms: Option<i64>,
}

impl<'s> Sample<'s> {
    /// The value of the label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&'s str> {
        self.labels
            .iter()
            .find(|label| label.name == name)
            .map(|label| label.value.as_ref())
    }
}

impl fmt::Display for Sample<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)?;
        if !self.labels.is_empty() {
            f.write_str("{")?;
            for (i, label) in self.labels.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{}=\"", label.name)?;
                write_escaped(f, &label.value)?;
                f.write_str("\"")?;
            }
            f.write_str("}")?;
        }
        f.write_str(" ")?;
        write_value(f, self.value)?;
        if let Some(ts) = self.timestamp_ms {
            write!(f, " {ts}")?;
        }
        Ok(())
    }
}

/// Writes a label value with `\`, `"` and line feeds escaped.
fn write_escaped(f: &mut fmt::Formatter<'_>, value: &str) -> fmt::Result {
    let mut rest = value;
    while let Some(at) = rest.find(['\\', '"', '\n']) {
        let (plain, tail) = rest.split_at(at);
        f.write_str(plain)?;
        let mut chars = tail.chars();
        match chars.next() {
            Some('\\') => f.write_str("\\\\")?,
            Some('"') => f.write_str("\\\"")?,
            Some(_) => f.write_str("\\n")?,
            None => {}
        }
        rest = chars.as_str();
    }
    f.write_str(rest)
}

/// Writes a value as the format spells it: `NaN`, `+Inf`, `-Inf`, or the shortest decimal
/// that reads back as the same `f64`.
fn write_value(f: &mut fmt::Formatter<'_>, value: f64) -> fmt::Result {
    if value.is_nan() {
        f.write_str("NaN")
    } else if value == f64::INFINITY {
        f.write_str("+Inf")
    } else if value == f64::NEG_INFINITY {
        f.write_str("-Inf")
    } else {
        // `Debug` is the shortest round-tripping form, with an exponent for large and small
        // magnitudes (`1e300`, not 301 digits).
        write!(f, "{value:?}")
    }
}

/// The type a `# TYPE` line declares for a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricType {
    /// `counter`.
    Counter,
    /// `gauge`.
    Gauge,
    /// `histogram`: samples `<name>_bucket{le=...}`, `<name>_sum`, `<name>_count`.
    Histogram,
    /// `summary`: samples `<name>{quantile=...}`, `<name>_sum`, `<name>_count`.
    Summary,
    /// `untyped` (or OpenMetrics' `unknown`).
    Untyped,
    /// OpenMetrics `info`.
    Info,
    /// OpenMetrics `stateset`.
    StateSet,
    /// OpenMetrics `gaugehistogram`: samples like a histogram's.
    GaugeHistogram,
}

impl MetricType {
    /// Reads a type as `# TYPE` spells it (ASCII case ignored, as the reference parser does).
    pub fn from_name(name: &str) -> Option<MetricType> {
        const TYPES: [(&str, MetricType); 9] = [
            ("counter", MetricType::Counter),
            ("gauge", MetricType::Gauge),
            ("histogram", MetricType::Histogram),
            ("summary", MetricType::Summary),
            ("untyped", MetricType::Untyped),
            ("unknown", MetricType::Untyped),
            ("info", MetricType::Info),
            ("stateset", MetricType::StateSet),
            ("gaugehistogram", MetricType::GaugeHistogram),
        ];
        TYPES
            .iter()
            .find(|(spelling, _)| spelling.eq_ignore_ascii_case(name))
            .map(|&(_, kind)| kind)
    }

    /// The type's name as `# TYPE` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::Summary => "summary",
            MetricType::Untyped => "untyped",
            MetricType::Info => "info",
            MetricType::StateSet => "stateset",
            MetricType::GaugeHistogram => "gaugehistogram",
        }
    }

    /// The sample-name suffixes this type's families use besides the bare name.
    fn suffixes(self) -> &'static [&'static str] {
        match self {
            MetricType::Histogram | MetricType::GaugeHistogram => &["_bucket", "_sum", "_count"],
            MetricType::Summary => &["_sum", "_count"],
            _ => &[],
        }
    }
}

impl fmt::Display for MetricType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `# HELP` or `# TYPE` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Metadata<'a> {
    /// `# HELP <name> <text>`.
    Help {
        /// Metric family name.
        name: &'a str,
        /// Help text, with `\\` and `\n` unescaped.
        text: Cow<'a, str>,
    },
    /// `# TYPE <name> <type>`.
    Type {
        /// Metric family name.
        name: &'a str,
        /// Declared type.
        kind: MetricType,
    },
}

/// A sample as stored: its labels are a range of the page's shared label list, so parsing
/// allocates per page, not per sample.
#[derive(Debug, Clone)]
pub(super) struct StoredSample<'a> {
    pub(super) name: &'a str,
    pub(super) labels: Range<usize>,
    pub(super) value: f64,
    pub(super) timestamp_ms: Option<i64>,
}

/// A parsed metrics page: the samples read, the `# HELP` / `# TYPE` metadata, and the lines
/// that were skipped.
///
/// Built by [`parse`](super::parse). Names and most label values borrow from the page.
#[derive(Debug, Clone, Default)]
pub struct Scrape<'a> {
    pub(super) samples: Vec<StoredSample<'a>>,
    pub(super) labels: Vec<Label<'a>>,
    pub(super) metadata: Vec<Metadata<'a>>,
    pub(super) errors: Vec<LineError>,
    pub(super) bad_lines: usize,
    pub(super) lines: usize,
}

impl<'a> Scrape<'a> {
    /// The samples, in page order.
    pub fn samples(&self) -> impl ExactSizeIterator<Item = Sample<'_>> + Clone + '_ {
        self.samples.iter().map(|stored| self.view(stored))
    }

    /// The sample at `index` in page order.
    pub fn get(&self, index: usize) -> Option<Sample<'_>> {
        self.samples.get(index).map(|stored| self.view(stored))
    }

    /// The samples whose metric name is exactly `name` (suffix included), in page order.
    pub fn samples_named<'s>(&'s self, name: &'s str) -> impl Iterator<Item = Sample<'s>> + 's {
        self.samples
            .iter()
            .filter(move |stored| stored.name == name)
            .map(|stored| self.view(stored))
    }

    /// Number of samples read.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample was read.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The `# HELP` and `# TYPE` lines, in page order.
    pub fn metadata(&self) -> &[Metadata<'a>] {
        &self.metadata
    }

    /// The type declared for the family `name` by a `# TYPE` line (the last one, if several).
    pub fn metric_type(&self, family: &str) -> Option<MetricType> {
        self.metadata.iter().rev().find_map(|meta| match meta {
            Metadata::Type { name, kind } if *name == family => Some(*kind),
            _ => None,
        })
    }

    /// The family a sample name belongs to, and that family's declared type: the name itself
    /// when a `# TYPE` line declares it, else the name without a `_bucket`, `_sum` or `_count`
    /// suffix when the rest is declared a histogram or summary that uses that suffix.
    ///
    /// ```
    /// use shepherd_runtime::prom::{MetricType, parse};
    ///
    /// let page = "# TYPE ttft histogram\nttft_bucket{le=\"+Inf\"} 3\nttft_sum 0.6\nttft_count 3\n";
    /// let scrape = parse(page.as_bytes()).unwrap();
    /// assert_eq!(scrape.family_of("ttft_sum"), Some(("ttft", MetricType::Histogram)));
    /// assert_eq!(scrape.family_of("other"), None);
    /// ```
    pub fn family_of<'n>(&self, sample_name: &'n str) -> Option<(&'n str, MetricType)> {
        if let Some(kind) = self.metric_type(sample_name) {
            return Some((sample_name, kind));
        }
        ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
            let base = sample_name.strip_suffix(suffix)?;
            let kind = self.metric_type(base)?;
            kind.suffixes().contains(suffix).then_some((base, kind))
        })
    }

    /// The first skipped lines and why (at most [`MAX_REPORTED_ERRORS`](super::MAX_REPORTED_ERRORS));
    /// [`Scrape::bad_lines`] counts them all.
    pub fn errors(&self) -> &[LineError] {
        &self.errors
    }

    /// How many lines were skipped as malformed.
    pub fn bad_lines(&self) -> usize {
        self.bad_lines
    }

    /// How many lines the page has (a final line break does not start another).
    pub fn lines(&self) -> usize {
        self.lines
    }

    fn view<'s>(&'s self, stored: &'s StoredSample<'a>) -> Sample<'s> {
        Sample {
            name: stored.name,
            labels: self.labels.get(stored.labels.clone()).unwrap_or_default(),
            value: stored.value,
            timestamp_ms: stored.timestamp_ms,
        }
    }
}
