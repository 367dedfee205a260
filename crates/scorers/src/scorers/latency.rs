//! `latency-scorer`: scores candidates by the headroom between the request's latency
//! objectives and the latencies a `predicted-latency-producer` predicts for it on each of them,
//! with upstream's rules.
//!
//! Headroom is `objective − predicted` for TTFT and TPOT (see
//! [`LatencyPredictionInfo`]); without objectives it is `−predicted`, so the scorer prefers the
//! lowest predicted latency. For each request:
//!
//! 1. **positive tier**: if some candidates have both headrooms ≥ 0, only they are scored
//!    (the others score 0), with `headroomSelectionStrategy`: `least` prefers the candidate
//!    closest to its objectives (packing, so the others keep room for later requests), `most`
//!    the one with the most headroom;
//! 2. otherwise (every candidate predicted to miss), **idle first**: if some candidates have no
//!    request of this scheduler in flight, only they are scored;
//! 3. otherwise **the least severe deficit**: the candidates missing only the TPOT objective,
//!    else only the TTFT one, else both; always with `least` (the smallest deficit wins).
//!
//! Within the scored group each headroom's magnitude is normalized to [0, 1] over the group and
//! blended `ttftWeight : tpotWeight` (a dimension with no spread gives its weight to the other);
//! scores are in hundredths, as upstream's. Before the model is ready (no predictions), the
//! **composite fallback** scores `compositeKVWeight × free KV + compositeQueueWeight × relative
//! queue + compositePrefixWeight × cached share of the prompt`.
//!
//! It is a [`Category::Balance`] scorer, as upstream: the adaptive weights leave it alone.
//! Its pick and completion hooks feed the producer (which learns once per request however many
//! consumers forward). A config that does not declare the producer gets one with the defaults
//! under `predicted-latency-producer` (see [`crate::latency::link`]).
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `ttftWeight` | 0.8 | weight of the TTFT headroom (≥ 0) |
//! | `tpotWeight` | 0.2 | weight of the TPOT headroom (≥ 0) |
//! | `headroomSelectionStrategy` | `least` | `least` or `most` (positive tier only) |
//! | `compositeKVWeight`, `compositeQueueWeight`, `compositePrefixWeight` | 1, 1, 1 | the fallback's weights (≥ 0) |
//! | `latencyPredictionInfoProducerName` | `predicted-latency-producer` | the producer read |
//! | `prefixMatchInfoProducerName` | — | the prefix producer the fallback reads (default: the declared `approx-prefix-cache-producer`, else an all-in-one `prefix-cache-scorer`'s index) |

use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, CycleState, PluginInstance, Score, Scorer,
};

use crate::error::ParameterError;
use crate::latency::link::default_prefix_link;
use crate::latency::{LatencyLink, LatencyPredictionInfo};
use crate::producers::PrefixProducer;
use crate::producers::link::ProducerLink;

/// Registry type name.
pub const TYPE_NAME: &str = "latency-scorer";

/// How headroom maps to scores in the positive tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeadroomStrategy {
    /// Prefer the candidate closest to its objectives.
    #[default]
    Least,
    /// Prefer the candidate with the most headroom.
    Most,
}

/// The `latency-scorer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LatencyScorerParameters {
    /// Weight of the TTFT headroom.
    pub ttft_weight: f64,
    /// Weight of the TPOT headroom.
    pub tpot_weight: f64,
    /// Positive-tier strategy.
    pub headroom_selection_strategy: HeadroomStrategy,
    /// Fallback weight of free KV cache.
    #[serde(rename = "compositeKVWeight")]
    pub composite_kv_weight: f64,
    /// Fallback weight of the relative queue.
    pub composite_queue_weight: f64,
    /// Fallback weight of the cached share of the prompt.
    pub composite_prefix_weight: f64,
    /// The latency producer read.
    pub latency_prediction_info_producer_name: Option<String>,
    /// The prefix producer the fallback reads.
    pub prefix_match_info_producer_name: Option<String>,
}

impl Default for LatencyScorerParameters {
    fn default() -> Self {
        LatencyScorerParameters {
            ttft_weight: 0.8,
            tpot_weight: 0.2,
            headroom_selection_strategy: HeadroomStrategy::Least,
            composite_kv_weight: 1.0,
            composite_queue_weight: 1.0,
            composite_prefix_weight: 1.0,
            latency_prediction_info_producer_name: None,
            prefix_match_info_producer_name: None,
        }
    }
}

impl LatencyScorerParameters {
    fn validate(&self) -> Result<(), ParameterError> {
        for (field, v) in [
            ("ttftWeight", self.ttft_weight),
            ("tpotWeight", self.tpot_weight),
            ("compositeKVWeight", self.composite_kv_weight),
            ("compositeQueueWeight", self.composite_queue_weight),
            ("compositePrefixWeight", self.composite_prefix_weight),
        ] {
            ParameterError::require_range(field, v, 0.0, 1e9)?;
        }
        Ok(())
    }
}

/// Scores candidates by predicted latency headroom (see the module docs).
#[derive(Debug)]
pub struct LatencyScorer {
    params: LatencyScorerParameters,
    link: Arc<LatencyLink>,
    prefix: ProducerLink,
    prefix_resolved: OnceLock<Option<Arc<PrefixProducer>>>,
}

/// Scores are in hundredths, as upstream's (`wMax`).
const STEPS: f64 = 100.0;

/// The score of each step `k` of a headroom in [0, 1] floored to hundredths:
/// `min((k + 1) / STEPS, 1)`, looked up rather than divided and clamped per candidate.
const LEVELS: [f64; STEPS as usize + 1] = {
    let mut levels = [0.0; STEPS as usize + 1];
    let mut k = 0;
    while k < levels.len() {
        let v = (k as f64 + 1.0) / STEPS;
        levels[k] = if v > 1.0 { 1.0 } else { v };
        k += 1;
    }
    levels
};
const EPS: f64 = 1e-9;

/// Upstream's groups, best first: within the predicted-to-meet tier; idle among the late;
/// late on TPOT only; late on TTFT only; late on both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    Positive,
    Idle,
    TpotLate,
    TtftLate,
    BothLate,
}

/// One candidate's group and headroom magnitudes (TTFT, TPOT).
type Row = (Group, f64, f64);

thread_local! {
    /// The rows of the pick this thread is scoring, kept between picks (as long as the
    /// largest candidate list seen) so that scoring allocates nothing.
    static ROWS: std::cell::RefCell<Vec<Row>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The [`Row`] of a candidate predicted as `info` (see the module docs); one without
/// predictions is in the positive tier with no headroom.
#[inline]
fn row_of(info: Option<&LatencyPredictionInfo>) -> Row {
    let Some(p) = info else {
        return (Group::Positive, 0.0, 0.0);
    };
    let group = match (p.ttft_headroom_ms < 0.0, p.tpot_headroom_ms < 0.0) {
        (false, false) => Group::Positive,
        _ if p.dispatched == 0 => Group::Idle,
        (false, true) => Group::TpotLate,
        (true, false) => Group::TtftLate,
        (true, true) => Group::BothLate,
    };
    (group, p.ttft_headroom_ms.abs(), p.tpot_headroom_ms.abs())
}

/// The best group among the rows seen, and the range of each headroom magnitude within it:
/// gathered as the rows are built, so scoring takes one more pass, not three.
#[derive(Debug, Clone, Copy)]
struct BestGroup {
    group: Group,
    t_lo: f64,
    t_hi: f64,
    p_lo: f64,
    p_hi: f64,
}

impl Default for BestGroup {
    /// No row yet: the worst group, with empty ranges (a first row of that group widens
    /// them; one of a better group replaces them).
    fn default() -> Self {
        BestGroup {
            group: Group::BothLate,
            t_lo: f64::MAX,
            t_hi: f64::MIN,
            p_lo: f64::MAX,
            p_hi: f64::MIN,
        }
    }
}

impl BestGroup {
    /// Counts `row`. Plain comparisons, not `f64::min`/`max` (whose NaN handling costs a few
    /// instructions per candidate): the magnitudes are absolute values of finite predictions
    /// and objectives, and a NaN one is skipped either way.
    #[inline]
    fn add(&mut self, (group, t, p): Row) {
        if group < self.group {
            *self = BestGroup {
                group,
                ..BestGroup::default()
            };
        }
        if group == self.group {
            if t < self.t_lo {
                self.t_lo = t;
            }
            if t > self.t_hi {
                self.t_hi = t;
            }
            if p < self.p_lo {
                self.p_lo = p;
            }
            if p > self.p_hi {
                self.p_hi = p;
            }
        }
    }
}

impl LatencyScorer {
    fn prefix_producer(&self) -> Option<&Arc<PrefixProducer>> {
        self.prefix_resolved
            .get_or_init(|| self.prefix.find_existing())
            .as_ref()
    }

    /// Upstream's fallback without predictions.
    fn score_composite(
        &self,
        cycle: &CycleState<'_>,
        candidates: &[&Arc<Endpoint>],
        out: &mut [Score],
    ) {
        let p = &self.params;
        let (mut kv_w, mut queue_w, mut prefix_w) = (
            p.composite_kv_weight,
            p.composite_queue_weight,
            p.composite_prefix_weight,
        );
        let sum = kv_w + queue_w + prefix_w;
        if sum <= 0.0 {
            (kv_w, queue_w, prefix_w) = (1.0, 0.0, 0.0);
        } else {
            (kv_w, queue_w, prefix_w) = (kv_w / sum, queue_w / sum, prefix_w / sum);
        }
        let max_queue = candidates
            .iter()
            .map(|e| e.load_metrics().waiting)
            .max()
            .unwrap_or(0);
        let prompt = cycle.request.prompt.estimated_tokens() as u64;
        for (slot, ep) in out.iter_mut().zip(candidates) {
            let metrics = ep.load_metrics();
            let queue = if max_queue > 0 {
                f64::from(max_queue - metrics.waiting.min(max_queue)) / f64::from(max_queue)
            } else {
                1.0
            };
            let kv_free = 1.0 - metrics.kv_utilization_clamped();
            let cached = if prompt > 0 {
                let uncached = CachedPrefix::uncached_tokens_in(&cycle.extensions, ep.id(), prompt);
                (prompt - uncached.min(prompt)) as f64 / prompt as f64
            } else {
                0.0
            };
            let composite = kv_w * kv_free + queue_w * queue + prefix_w * cached;
            *slot = Score::new((composite * STEPS).round() / STEPS);
        }
    }
}

/// Upstream's headroom scoring (see the module docs) of the candidates' rows ([`row_of`])
/// into `out`, `best` being their best group and its ranges.
fn score_rows(params: &LatencyScorerParameters, rows: &[Row], best: &BestGroup, out: &mut [Score]) {
    if rows.is_empty() {
        return;
    }
    let most = best.group == Group::Positive
        && params.headroom_selection_strategy == HeadroomStrategy::Most;
    let (t_range, p_range) = (best.t_hi - best.t_lo, best.p_hi - best.p_lo);
    let (mut alpha, mut beta) = normalized(params.ttft_weight, params.tpot_weight);
    if t_range <= EPS && p_range > EPS {
        (alpha, beta) = (0.0, 1.0);
    } else if p_range <= EPS && t_range > EPS {
        (alpha, beta) = (1.0, 0.0);
    }
    // Each magnitude normalized to [0, 1] over the group as `(v − lo) × scale + offset`:
    // `scale` is 1 / range, or 0 (with the offset 0.5) for a dimension with no spread.
    let axis = |lo: f64, range: f64| {
        if range > EPS {
            (lo, 1.0 / range, 0.0)
        } else {
            (lo, 0.0, 0.5)
        }
    };
    let ((t_lo, t_scale, t_offset), (p_lo, p_scale, p_offset)) =
        (axis(best.t_lo, t_range), axis(best.p_lo, p_range));
    for (slot, &(group, t, p)) in out.iter_mut().zip(rows) {
        *slot = if group == best.group {
            let combined = alpha * ((t - t_lo) * t_scale + t_offset)
                + beta * ((p - p_lo) * p_scale + p_offset);
            let toward = if most { combined } else { 1.0 - combined };
            // `toward` is in [0, 1] (NaN reads as 0): truncating is flooring, with no
            // libm call; to `i32` first, which x86-64 converts in far fewer instructions
            // than to `usize` (the same value in this range).
            let step = ((toward * STEPS) as i32).clamp(0, STEPS as i32) as usize;
            // Every level is in [0, 1]: no clamp needed.
            Score {
                value: LEVELS[step],
                neutral: false,
            }
        } else {
            Score::new(0.0)
        };
    }
}

fn normalized(a: f64, b: f64) -> (f64, f64) {
    let sum = a + b;
    if sum <= 0.0 {
        (1.0, 0.0)
    } else {
        (a / sum, b / sum)
    }
}

impl Scorer for LatencyScorer {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let producer = Arc::clone(self.link.get());
        if let Some(predictions) = producer.produce(cycle, candidates) {
            ROWS.with_borrow_mut(|rows| {
                rows.clear();
                let mut best = BestGroup::default();
                rows.extend(predictions.by_candidate(candidates).map(|info| {
                    let row = row_of(info);
                    best.add(row);
                    row
                }));
                score_rows(&self.params, rows, &best, out);
            });
            return;
        }
        if let Some(prefix) = self.prefix_producer() {
            prefix.produce(cycle);
        }
        self.score_composite(cycle, candidates, out);
    }
}

/// Builds a `latency-scorer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params = args.parse::<LatencyScorerParameters>()?;
    params.validate()?;
    let link = Arc::new(LatencyLink::new(
        args.resources,
        args.pool,
        params.latency_prediction_info_producer_name.as_deref(),
    ));
    let scorer = Arc::new(LatencyScorer {
        link: Arc::clone(&link),
        prefix: default_prefix_link(
            args.resources,
            args.pool,
            params.prefix_match_info_producer_name.as_deref(),
        ),
        prefix_resolved: OnceLock::new(),
        params,
    });
    Ok(PluginInstance::scorer(scorer)
        .with_pick_hook(link.clone())
        .with_completion_hook(link))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Upstream's rules written out pass by pass: the best group, its ranges, the scores.
    fn reference(params: &LatencyScorerParameters, rows: &[Row]) -> Vec<f64> {
        let Some(best) = rows.iter().map(|r| r.0).min() else {
            return Vec::new();
        };
        let most =
            best == Group::Positive && params.headroom_selection_strategy == HeadroomStrategy::Most;
        let (mut t_lo, mut t_hi, mut p_lo, mut p_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(_, t, p) in rows.iter().filter(|r| r.0 == best) {
            (t_lo, t_hi) = (t_lo.min(t), t_hi.max(t));
            (p_lo, p_hi) = (p_lo.min(p), p_hi.max(p));
        }
        let (t_range, p_range) = (t_hi - t_lo, p_hi - p_lo);
        let (mut alpha, mut beta) = normalized(params.ttft_weight, params.tpot_weight);
        if t_range <= EPS && p_range > EPS {
            (alpha, beta) = (0.0, 1.0);
        } else if p_range <= EPS && t_range > EPS {
            (alpha, beta) = (1.0, 0.0);
        }
        let norm = |v: f64, lo: f64, range: f64| if range > EPS { (v - lo) / range } else { 0.5 };
        rows.iter()
            .map(|&(group, t, p)| {
                if group != best {
                    return 0.0;
                }
                let combined = alpha * norm(t, t_lo, t_range) + beta * norm(p, p_lo, p_range);
                let toward = if most { combined } else { 1.0 - combined };
                ((toward * STEPS).floor().clamp(0.0, STEPS) + 1.0).min(STEPS) / STEPS
            })
            .collect()
    }

    fn info(ttft_headroom: f64, tpot_headroom: f64, dispatched: u64) -> LatencyPredictionInfo {
        LatencyPredictionInfo {
            ttft_ms: 10.0,
            tpot_ms: 5.0,
            ttft_valid: ttft_headroom > 0.0,
            tpot_valid: tpot_headroom > 0.0,
            ttft_headroom_ms: ttft_headroom,
            tpot_headroom_ms: tpot_headroom,
            dispatched,
        }
    }

    proptest! {
        /// The two-pass scoring (groups and ranges gathered as the rows are built) gives every
        /// candidate the score of the pass-by-pass reading, within a hundredth (the two
        /// normalize by a multiply and a divide, which may round across a step).
        #[test]
        fn two_passes_score_as_upstream_rules_read(
            headrooms in proptest::collection::vec(
                (
                    prop_oneof![-500.0..500.0f64, Just(0.0), Just(-0.0), Just(120.0)],
                    prop_oneof![-30.0..30.0f64, Just(0.0), Just(4.0)],
                    0u64..3,
                ),
                0..40,
            ),
            ttft_weight in prop_oneof![Just(0.8), 0.0..2.0f64],
            tpot_weight in prop_oneof![Just(0.2), 0.0..2.0f64],
            most in any::<bool>(),
        ) {
            let params = LatencyScorerParameters {
                ttft_weight,
                tpot_weight,
                headroom_selection_strategy: if most {
                    HeadroomStrategy::Most
                } else {
                    HeadroomStrategy::Least
                },
                ..LatencyScorerParameters::default()
            };
            let infos: Vec<LatencyPredictionInfo> =
                headrooms.iter().map(|&(t, p, d)| info(t, p, d)).collect();
            let rows: Vec<Row> = infos.iter().map(|i| row_of(Some(i))).collect();
            let mut best = BestGroup::default();
            for &row in &rows {
                best.add(row);
            }
            let mut out = vec![Score::NEUTRAL; rows.len()];
            score_rows(&params, &rows, &best, &mut out);
            let expected = reference(&params, &rows);
            for (i, (got, want)) in out.iter().zip(&expected).enumerate() {
                prop_assert!(!got.neutral);
                prop_assert!(
                    (got.value - want).abs() <= 0.0100001,
                    "candidate {i}: {} vs {want} ({:?})", got.value, rows[i]
                );
                // Out of the best group is 0 in both.
                prop_assert_eq!(got.value == 0.0, *want == 0.0);
            }
        }
    }
}
