//! `endpoint-attribute-scorer` (upstream's name): scores endpoints by one numeric endpoint
//! attribute, linearly normalized. The attribute is a custom metric of the
//! `core-metrics-extractor` (`engineConfigs[].customMetrics[]`), read at every scrape into the
//! shared [`EndpointAttributes`] table.
//!
//! `score = (value − min) / (max − min)`, inverted for `linear_lower_is_better`. The range is
//! the candidates' own (`adaptiveRange`, the default: when every endpoint with the attribute
//! has the same value they all score 1) or the configured one (`fixedRange`, values clamped).
//! An endpoint without the attribute scores 0 (and does not enter the adaptive range). A
//! [`Category::Distribution`] scorer, as upstream.
//!
//! | parameter | meaning |
//! |---|---|
//! | `attributeKey` | the attribute (required) |
//! | `producer` | the plugin publishing it: omitted, the core metrics extractor; `""` or another producer's name are accepted and read the same table (Shepherd's only producer of attributes is the extractor's custom metrics); an `attributeKey` with a `/` needs it set |
//! | `algorithm.type` | `linear_lower_is_better` or `linear_higher_is_better` (required) |
//! | `algorithm.normalization` | at most one of `adaptiveRange: {}` and `fixedRange: {min, max}` (`min < max`) |
//!
//! ```
//! use shepherd_scorers::scorers::endpoint_attribute::{Normalization, normalized};
//!
//! // Adaptive range over the candidates 2, 6, 10, lower is better: 1, 0.5, 0.
//! let range = Normalization::Adaptive.range([2.0, 6.0, 10.0].into_iter());
//! assert_eq!(normalized(6.0, range, true), 0.5);
//! // Fixed [0, 1], higher is better, clamped.
//! assert_eq!(normalized(1.7, Some((0.0, 1.0)), false), 1.0);
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Column, Endpoint, EndpointAttributes};
use shepherd_scheduler_core::plugin::{Category, CycleState, PluginInstance, Score, Scorer};

/// Registry type name.
pub const TYPE_NAME: &str = "endpoint-attribute-scorer";

/// `algorithm.normalization.fixedRange`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedRange {
    /// Lower bound.
    #[serde(default)]
    pub min: f64,
    /// Upper bound.
    #[serde(default)]
    pub max: f64,
}

/// `algorithm.normalization`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct NormalizationParameters {
    /// A fixed range.
    pub fixed_range: Option<FixedRange>,
    /// The candidates' range (an empty object).
    pub adaptive_range: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `algorithm`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct AlgorithmParameters {
    /// `linear_lower_is_better` or `linear_higher_is_better`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The normalization strategy.
    pub normalization: NormalizationParameters,
}

/// The `endpoint-attribute-scorer` parameters (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct EndpointAttributeScorerParameters {
    /// The attribute read.
    pub attribute_key: String,
    /// The plugin publishing it (`None`: omitted).
    pub producer: Option<String>,
    /// How values become scores.
    pub algorithm: AlgorithmParameters,
}

/// How values are normalized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Normalization {
    /// Over the candidates' own range.
    Adaptive,
    /// Over a configured range.
    Fixed(f64, f64),
}

impl Normalization {
    /// The range the values are normalized over; `None` when no value is known.
    pub fn range(self, values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
        match self {
            Normalization::Fixed(min, max) => Some((min, max)),
            Normalization::Adaptive => values.fold(None, |range, v| match range {
                None => Some((v, v)),
                Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
            }),
        }
    }
}

/// Upstream's score of `value` over `range` (1 when the range is a single value).
#[inline]
pub fn normalized(value: f64, range: Option<(f64, f64)>, lower_is_better: bool) -> f64 {
    Linear::over(range, lower_is_better).score(value)
}

/// [`normalized`] with its range worked out once for a pick: the span's reciprocal
/// precomputed, so each candidate costs a multiplication instead of a division.
#[derive(Debug, Clone, Copy)]
struct Linear {
    min: f64,
    shape: Shape,
    lower_is_better: bool,
}

/// How a [`Linear`] maps values.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// No value known: every score 0.
    Unknown,
    /// max = min: every score 1.
    Flat,
    /// `1 / (max − min)`.
    Scaled(f64),
}

impl Linear {
    #[inline]
    fn over(range: Option<(f64, f64)>, lower_is_better: bool) -> Linear {
        let (min, shape) = match range {
            None => (0.0, Shape::Unknown),
            Some((min, max)) if max == min => (min, Shape::Flat),
            Some((min, max)) => (min, Shape::Scaled(1.0 / (max - min))),
        };
        Linear {
            min,
            shape,
            lower_is_better,
        }
    }

    /// Turns each slot's value (NaN: none, scoring 0) into its score.
    fn score_in_place(self, slots: &mut [Score]) {
        let scale = match self.shape {
            Shape::Unknown => {
                slots.fill(judged(0.0));
                return;
            }
            Shape::Flat => {
                for slot in slots {
                    *slot = judged(if slot.value.is_nan() { 0.0 } else { 1.0 });
                }
                return;
            }
            Shape::Scaled(scale) => scale,
        };
        for slot in slots {
            let value = slot.value;
            let n = ((value - self.min) * scale).clamp(0.0, 1.0);
            // A NaN value stays NaN through the arithmetic: `judged` scores it 0.
            *slot = judged(if self.lower_is_better { 1.0 - n } else { n });
        }
    }

    #[inline]
    fn score(self, value: f64) -> f64 {
        let scale = match self.shape {
            Shape::Unknown => return 0.0,
            Shape::Flat => return 1.0,
            Shape::Scaled(scale) => scale,
        };
        let n = ((value - self.min) * scale).clamp(0.0, 1.0);
        if self.lower_is_better { 1.0 - n } else { n }
    }
}

/// Checks upstream's attribute/producer rule: an attribute with a `/` needs `producer` set.
pub(crate) fn check_attribute_key(
    parameter: &str,
    key: &str,
    producer: Option<&str>,
) -> Result<(), PluginError> {
    if key.is_empty() {
        return Err(PluginError::invalid(parameter, "must be non-empty"));
    }
    if producer.is_none()
        && let Some((attribute, producer)) = key.rsplit_once('/')
    {
        return Err(PluginError::invalid(
            parameter,
            format!(
                "`{key}` contains `/` but no producer is set; if this is the combined \
                 \"Attribute/Producer\" spelling, split it into `{attribute}` and producer \
                 `{producer}`; if the name itself contains `/`, set producer explicitly"
            ),
        ));
    }
    Ok(())
}

/// The column of `key` in the shared table.
pub(crate) fn column_of(
    table: &EndpointAttributes,
    parameter: &str,
    key: &str,
) -> Result<Column, PluginError> {
    table.column(key).ok_or_else(|| {
        PluginError::invalid(
            parameter,
            format!(
                "more than {} endpoint attributes are read",
                shepherd_scheduler_core::endpoint::MAX_ATTRIBUTE_KEYS
            ),
        )
    })
}

/// A judged score of a value [`Linear::score`] returned: in `[0, 1]`, or NaN (infinite
/// values), which scores 0.
#[inline]
fn judged(value: f64) -> Score {
    Score {
        value: if value.is_nan() { 0.0 } else { value },
        neutral: false,
    }
}

/// The smallest and largest of the slots' values, NaN ones skipped; `None` when every value
/// is NaN. Four running pairs, so that the comparisons do not wait on one another.
fn range_of(slots: &[Score]) -> Option<(f64, f64)> {
    // `if v < lo { v } else { lo }` is one `minsd`; a NaN compares false: skipped.
    #[inline(always)]
    fn low(lo: f64, v: f64) -> f64 {
        if v < lo { v } else { lo }
    }
    #[inline(always)]
    fn high(hi: f64, v: f64) -> f64 {
        if v > hi { v } else { hi }
    }
    let (mut l0, mut l1, mut l2, mut l3) =
        (f64::INFINITY, f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let (mut h0, mut h1, mut h2, mut h3) = (
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    );
    let mut quads = slots.chunks_exact(4);
    for q in &mut quads {
        l0 = low(l0, q[0].value);
        h0 = high(h0, q[0].value);
        l1 = low(l1, q[1].value);
        h1 = high(h1, q[1].value);
        l2 = low(l2, q[2].value);
        h2 = high(h2, q[2].value);
        l3 = low(l3, q[3].value);
        h3 = high(h3, q[3].value);
    }
    for slot in quads.remainder() {
        l0 = low(l0, slot.value);
        h0 = high(h0, slot.value);
    }
    let lo = low(low(l0, l1), low(l2, l3));
    let hi = high(high(h0, h1), high(h2, h3));
    (lo <= hi).then_some((lo, hi))
}

/// The scorer (see the module docs).
#[derive(Debug)]
pub struct EndpointAttributeScorer {
    table: Arc<EndpointAttributes>,
    column: Column,
    lower_is_better: bool,
    normalization: Normalization,
}

impl EndpointAttributeScorer {
    /// A scorer of `key` in `table`.
    pub fn new(
        table: Arc<EndpointAttributes>,
        column: Column,
        lower_is_better: bool,
        normalization: Normalization,
    ) -> Self {
        EndpointAttributeScorer {
            table,
            column,
            lower_is_better,
            normalization,
        }
    }
}

impl Scorer for EndpointAttributeScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }

    fn score(&self, _cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let lower_is_better = self.lower_is_better;
        self.table.read(|values| {
            let column = values.column(self.column);
            match self.normalization {
                Normalization::Fixed(..) => {
                    let linear = Linear::over(
                        self.normalization.range(std::iter::empty()),
                        lower_is_better,
                    );
                    for (endpoint, slot) in candidates.iter().zip(out.iter_mut()) {
                        let value = column.get(endpoint.id()).map_or(0.0, |v| linear.score(v));
                        *slot = judged(value);
                    }
                }
                // The candidates' range needs every value before the first score: each is
                // looked up once and kept in its output slot (NaN: none) until the range is
                // known, then turned into its score in place.
                Normalization::Adaptive => {
                    let n = candidates.len().min(out.len());
                    for (endpoint, slot) in candidates.iter().zip(out.iter_mut()) {
                        slot.value = column.get(endpoint.id()).unwrap_or(f64::NAN);
                    }
                    let linear = Linear::over(range_of(&out[..n]), lower_is_better);
                    linear.score_in_place(&mut out[..n]);
                }
            }
        });
    }
}

/// Builds an `endpoint-attribute-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: EndpointAttributeScorerParameters = args.parse()?;
    if p.attribute_key.is_empty() {
        return Err(PluginError::invalid(
            "attributeKey",
            "endpoint attribute scorer requires a non-empty attributeKey",
        ));
    }
    let lower_is_better = match p.algorithm.kind.as_str() {
        "linear_lower_is_better" => true,
        "linear_higher_is_better" => false,
        other => {
            return Err(PluginError::invalid(
                "algorithm.type",
                format!(
                    "must be \"linear_lower_is_better\" or \"linear_higher_is_better\", got {other:?}"
                ),
            ));
        }
    };
    let normalization = match (
        &p.algorithm.normalization.fixed_range,
        &p.algorithm.normalization.adaptive_range,
    ) {
        (Some(_), Some(_)) => {
            return Err(PluginError::invalid(
                "algorithm.normalization",
                "at most one normalization strategy, got both fixedRange and adaptiveRange",
            ));
        }
        (Some(fixed), None) => {
            if fixed.min.is_nan() || fixed.max.is_nan() || fixed.min >= fixed.max {
                return Err(PluginError::invalid(
                    "algorithm.normalization.fixedRange",
                    format!(
                        "requires min < max, got min {}, max {}",
                        fixed.min, fixed.max
                    ),
                ));
            }
            Normalization::Fixed(fixed.min, fixed.max)
        }
        (None, _) => Normalization::Adaptive,
    };
    check_attribute_key("attributeKey", &p.attribute_key, p.producer.as_deref())?;
    let table = EndpointAttributes::of(args.resources);
    let column = column_of(&table, "attributeKey", &p.attribute_key)?;
    Ok(PluginInstance::scorer(Arc::new(
        EndpointAttributeScorer::new(table, column, lower_is_better, normalization),
    )))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_scorer_gives_each_candidate_its_normalized_value() {
        use shepherd_scheduler_core::clock::Timestamp;
        use shepherd_scheduler_core::endpoint::Pool;
        use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
        use std::time::Duration;

        let pool = Pool::new();
        pool.set_members((0..23).map(|i| format!("10.0.0.{i}:8000")));
        let snapshot = pool.snapshot();
        let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
        let table = Arc::new(EndpointAttributes::default());
        let column = table.column("q").unwrap();
        // Every third endpoint has no value (scores 0); the others spread over [-7, 40].
        let value_of = |i: usize| (!i.is_multiple_of(3)).then(|| (i * 37 % 48) as f64 - 7.0);
        for (i, e) in candidates.iter().enumerate() {
            if let Some(v) = value_of(i) {
                table.set(e.id(), &[("q".to_string(), v)]);
            }
        }
        let request = InferenceRequest::new("r", "m", Prompt::Text("x".into()));
        for lower_is_better in [true, false] {
            for normalization in [Normalization::Adaptive, Normalization::Fixed(0.0, 30.0)] {
                let scorer = EndpointAttributeScorer::new(
                    Arc::clone(&table),
                    column,
                    lower_is_better,
                    normalization,
                );
                let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_secs(1));
                let mut out = vec![Score::NEUTRAL; candidates.len()];
                scorer.score(&mut cycle, &candidates, &mut out);
                let range = normalization.range((0..candidates.len()).filter_map(value_of));
                for (i, score) in out.iter().enumerate() {
                    let expected =
                        value_of(i).map_or(0.0, |v| normalized(v, range, lower_is_better));
                    assert_eq!(score.value, expected, "endpoint {i}");
                    assert!(!score.neutral);
                }
            }
        }
    }

    #[test]
    fn upstreams_adaptive_and_fixed_examples() {
        // Adaptive, lower is better: queue depths 0, 5, 10 score 1, 0.5, 0.
        let range = Normalization::Adaptive.range([0.0, 5.0, 10.0].into_iter());
        let scores: Vec<f64> = [0.0, 5.0, 10.0]
            .iter()
            .map(|v| normalized(*v, range, true))
            .collect();
        assert_eq!(scores, [1.0, 0.5, 0.0]);
        // Every endpoint with the same value: neutral 1.
        let same = Normalization::Adaptive.range([3.0, 3.0].into_iter());
        assert_eq!(normalized(3.0, same, true), 1.0);
        // Fixed [0, 1], lower is better: 0.25 → 0.75; out of range clamped.
        let fixed = Normalization::Fixed(0.0, 1.0).range(std::iter::empty());
        assert_eq!(normalized(0.25, fixed, true), 0.75);
        assert_eq!(normalized(-3.0, fixed, true), 1.0);
        assert_eq!(normalized(3.0, fixed, false), 1.0);
        // The combined spelling is refused without a producer.
        assert!(check_attribute_key("attributeKey", "gpu_util/dcgm-extractor", None).is_err());
        assert!(check_attribute_key("attributeKey", "llm-d.ai/x", Some("")).is_ok());
    }
}
