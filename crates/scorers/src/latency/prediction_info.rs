//! [`LatencyPredictionInfo`]: one candidate's predicted latencies and their headroom against
//! the request's objectives, as upstream's `LatencyPredictionInfo` attribute carries them; and
//! [`LatencyPredictions`], every candidate's for the current cycle.
//!
//! Headroom is `objective − predicted` (positive: predicted to meet it). Without an objective
//! the objective counts as 0, so the headroom is `−predicted`: still an order (lower predicted
//! latency, less negative headroom), as upstream. A TPOT the producer does not judge (not in
//! streaming mode, a prefill-only endpoint, or a TPOT model not ready yet) is *neutral*: valid,
//! with headroom 0.

use std::sync::Arc;

use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId};
use shepherd_scheduler_core::plugin::AnnotationTable;

/// One candidate's predictions and their headroom against the request's objectives
/// (`objective − predicted`; without any objective, `−predicted`; a TPOT not judged is valid with
/// headroom 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyPredictionInfo {
    /// Predicted time to first token, ms.
    pub ttft_ms: f64,
    /// Predicted time per output token, ms (0 when not judged).
    pub tpot_ms: f64,
    /// Whether the predicted TTFT is under the TTFT objective.
    pub ttft_valid: bool,
    /// Whether the predicted TPOT is under the (buffered) TPOT objective, or not judged.
    pub tpot_valid: bool,
    /// TTFT objective − predicted TTFT, ms.
    pub ttft_headroom_ms: f64,
    /// Buffered TPOT objective − predicted TPOT, ms (0 when not judged).
    pub tpot_headroom_ms: f64,
    /// Requests this scheduler has in flight on the candidate.
    pub dispatched: u64,
}

impl LatencyPredictionInfo {
    /// Both objectives predicted to be met.
    pub fn is_valid(&self) -> bool {
        self.ttft_valid && self.tpot_valid
    }

    /// Both headrooms non-negative (upstream's positive tier).
    pub fn has_headroom(&self) -> bool {
        self.ttft_headroom_ms >= 0.0 && self.tpot_headroom_ms >= 0.0
    }
}

/// Every candidate's predictions from one producer for the current request (a cycle
/// extension, read through [`LatencyProducer::produce`](super::LatencyProducer::produce)).
///
/// They are kept in the order of the candidates they were made for. A consumer reads them
/// for its own candidates with [`LatencyPredictions::for_candidates`]: a walk in step with
/// that order, so one pass when the consumer's candidates are those (or a filtered subset of
/// them, in the same order), as they are when a filter ran first.
#[derive(Debug, Default)]
pub struct LatencyPredictions {
    pub(super) key: usize,
    /// In the order predicted; the same table the breakdown's annotations read.
    pub(super) table: Arc<PredictionTable>,
}

/// The predictions of one producer for the current request, kept in one allocation and
/// shared between the cycle (its consumers) and the breakdown: the predicted TTFT (and TPOT)
/// of each candidate are the breakdown's columns, read when it is shown.
#[derive(Debug, Clone, Default)]
pub(super) struct PredictionTable {
    /// `[ttft column]` or `[ttft column, tpot column]`.
    pub(super) columns: Arc<[Arc<str>]>,
    pub(super) by_endpoint: Vec<(EndpointId, LatencyPredictionInfo)>,
}

impl AnnotationTable for PredictionTable {
    fn columns(&self) -> &[Arc<str>] {
        &self.columns
    }

    fn value(&self, column: usize, endpoint: EndpointId) -> Option<f64> {
        let (_, info) = self.by_endpoint.iter().find(|(e, _)| *e == endpoint)?;
        match column {
            0 => Some(info.ttft_ms),
            1 => Some(info.tpot_ms),
            _ => None,
        }
    }
}

impl LatencyPredictions {
    /// The predictions for `endpoint`, if it was a candidate (a linear search: for several
    /// candidates, [`LatencyPredictions::for_candidates`]).
    pub fn get(&self, endpoint: EndpointId) -> Option<&LatencyPredictionInfo> {
        self.table
            .by_endpoint
            .iter()
            .find(|(id, _)| *id == endpoint)
            .map(|(_, info)| info)
    }

    /// The predictions for each of `candidates`, in their order (`None` for one that was not
    /// predicted).
    pub fn for_candidates(
        &self,
        candidates: &[&Arc<Endpoint>],
    ) -> Vec<Option<&LatencyPredictionInfo>> {
        self.by_candidate(candidates).collect()
    }

    /// The predictions for each of `candidates`, in their order, as
    /// [`LatencyPredictions::for_candidates`] gives them, without collecting them.
    pub fn by_candidate<'s, 'c>(
        &'s self,
        candidates: &'c [&Arc<Endpoint>],
    ) -> impl ExactSizeIterator<Item = Option<&'s LatencyPredictionInfo>> + use<'s, 'c> {
        let by_endpoint = &self.table.by_endpoint[..];
        let mut cursor = 0;
        candidates.iter().map(move |e| {
            let i = position_from(by_endpoint, &mut cursor, e.id());
            i.and_then(|i| by_endpoint.get(i)).map(|(_, info)| info)
        })
    }

    /// The candidates among `candidates` not predicted yet, in their order.
    pub(super) fn missing<'e>(&self, candidates: &[&'e Arc<Endpoint>]) -> Vec<&'e Arc<Endpoint>> {
        let by_endpoint = &self.table.by_endpoint[..];
        let mut cursor = 0;
        candidates
            .iter()
            .copied()
            .filter(|e| position_from(by_endpoint, &mut cursor, e.id()).is_none())
            .collect()
    }

    /// Adds predictions for endpoints not predicted yet, the breakdown showing `columns`.
    pub(super) fn extend(
        &mut self,
        judged: Vec<(EndpointId, LatencyPredictionInfo)>,
        columns: Arc<[Arc<str>]>,
    ) {
        let table = Arc::make_mut(&mut self.table);
        table.by_endpoint.extend(judged);
        table.columns = columns;
    }

    /// Number of candidates predicted.
    pub fn len(&self) -> usize {
        self.table.by_endpoint.len()
    }

    /// Whether no candidate was predicted.
    pub fn is_empty(&self) -> bool {
        self.table.by_endpoint.is_empty()
    }
}

/// Where `endpoint` is in `by_endpoint`, searched from `cursor` on (the next candidate is
/// most often there), then before it; `cursor` moves past a hit.
#[inline]
fn position_from(
    by_endpoint: &[(EndpointId, LatencyPredictionInfo)],
    cursor: &mut usize,
    endpoint: EndpointId,
) -> Option<usize> {
    // The common case, checked first: the candidates are those predicted, in order.
    if by_endpoint
        .get(*cursor)
        .is_some_and(|(id, _)| *id == endpoint)
    {
        *cursor += 1;
        return Some(*cursor - 1);
    }
    let start = (*cursor).min(by_endpoint.len());
    let (before, after) = by_endpoint.split_at(start);
    let i = match after.iter().position(|(id, _)| *id == endpoint) {
        Some(i) => start + i,
        None => before.iter().position(|(id, _)| *id == endpoint)?,
    };
    *cursor = i + 1;
    Some(i)
}

/// Every producer's predictions for the current request: the first inline (a config has one
/// producer, and its cycle then allocates no list), any others after it.
#[derive(Debug, Default)]
pub(super) struct Produced {
    first: Option<LatencyPredictions>,
    more: Vec<LatencyPredictions>,
}

impl Produced {
    /// The predictions of the producer `key`.
    pub(super) fn find(&self, key: usize) -> Option<&LatencyPredictions> {
        self.first.iter().chain(&self.more).find(|m| m.key == key)
    }

    /// The predictions of the producer `key`, to extend.
    pub(super) fn find_mut(&mut self, key: usize) -> Option<&mut LatencyPredictions> {
        self.first
            .iter_mut()
            .chain(&mut self.more)
            .find(|m| m.key == key)
    }

    /// Adds a producer's predictions.
    pub(super) fn push(&mut self, predictions: LatencyPredictions) {
        match self.first {
            None => self.first = Some(predictions),
            Some(_) => self.more.push(predictions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shepherd_scheduler_core::clock::ManualClock;

    fn endpoints(n: u32) -> Vec<Arc<Endpoint>> {
        let clock = Arc::new(ManualClock::default());
        (0..n)
            .map(|i| {
                Arc::new(Endpoint::new(
                    EndpointId(i),
                    format!("10.0.0.{i}:8000"),
                    clock.clone(),
                ))
            })
            .collect()
    }

    fn info(ms: f64) -> LatencyPredictionInfo {
        LatencyPredictionInfo {
            ttft_ms: ms,
            tpot_ms: 0.0,
            ttft_valid: true,
            tpot_valid: true,
            ttft_headroom_ms: -ms,
            tpot_headroom_ms: 0.0,
            dispatched: 0,
        }
    }

    /// Predictions for `order` (endpoint i predicted at i ms).
    fn predicted(all: &[Arc<Endpoint>], order: &[usize]) -> LatencyPredictions {
        LatencyPredictions {
            key: 0,
            table: Arc::new(PredictionTable {
                columns: Arc::from([]),
                by_endpoint: order
                    .iter()
                    .map(|&i| (all[i].id(), info(i as f64)))
                    .collect(),
            }),
        }
    }

    fn ttfts(p: &LatencyPredictions, all: &[Arc<Endpoint>], asked: &[usize]) -> Vec<Option<f64>> {
        let candidates: Vec<&Arc<Endpoint>> = asked.iter().map(|&i| &all[i]).collect();
        p.for_candidates(&candidates)
            .into_iter()
            .map(|i| i.map(|i| i.ttft_ms))
            .collect()
    }

    #[test]
    fn candidates_find_their_predictions_in_any_order() {
        let all = endpoints(6);
        // Predicted in an order that is not the ids' (as a pool sorted by address gives).
        let p = predicted(&all, &[3, 0, 5, 1, 4]);
        // The same order, a subset of it in order, another order, and one not predicted.
        assert_eq!(
            ttfts(&p, &all, &[3, 0, 5, 1, 4]),
            [3.0, 0.0, 5.0, 1.0, 4.0].map(Some)
        );
        assert_eq!(ttfts(&p, &all, &[0, 1]), [Some(0.0), Some(1.0)]);
        assert_eq!(
            ttfts(&p, &all, &[4, 2, 3, 4, 0]),
            [Some(4.0), None, Some(3.0), Some(4.0), Some(0.0)]
        );
        assert_eq!(p.get(EndpointId(5)).map(|i| i.ttft_ms), Some(5.0));
        assert_eq!(p.get(EndpointId(2)), None);
        let asked: Vec<&Arc<Endpoint>> = [2, 5, 2, 9].iter().filter_map(|&i| all.get(i)).collect();
        let missing: Vec<EndpointId> = p.missing(&asked).iter().map(|e| e.id()).collect();
        assert_eq!(missing, [EndpointId(2), EndpointId(2)]);
        assert_eq!(ttfts(&LatencyPredictions::default(), &all, &[1]), [None]);
    }
}
