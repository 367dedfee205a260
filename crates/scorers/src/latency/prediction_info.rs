//! [`LatencyPredictionInfo`]: one candidate's predicted latencies and their headroom against
//! the request's objectives, as upstream's `LatencyPredictionInfo` attribute carries them; and
//! [`LatencyPredictions`], every candidate's for the current cycle.
//!
//! Headroom is `objective − predicted` (positive: predicted to meet it). Without an objective
//! the objective counts as 0, so the headroom is `−predicted`: still an order (lower predicted
//! latency, less negative headroom), as upstream. A TPOT the producer does not judge (not in
//! streaming mode, a prefill-only endpoint, or a TPOT model not ready yet) is *neutral*: valid,
//! with headroom 0.

use shepherd_scheduler_core::endpoint::EndpointId;

/// One candidate's predictions (see the [module docs](self)).
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
#[derive(Debug, Default)]
pub struct LatencyPredictions {
    pub(super) key: usize,
    /// Sorted by endpoint.
    pub(super) by_endpoint: Vec<(EndpointId, LatencyPredictionInfo)>,
}

impl LatencyPredictions {
    /// The predictions for `endpoint`, if it was a candidate.
    pub fn get(&self, endpoint: EndpointId) -> Option<&LatencyPredictionInfo> {
        self.by_endpoint
            .binary_search_by_key(&endpoint, |e| e.0)
            .ok()
            .map(|i| &self.by_endpoint[i].1)
    }

    /// The predictions for `endpoint`, the `i`-th of the consumer's candidates: O(1) when the
    /// consumer asks about the candidates the predictions were made for, in the same order.
    pub fn get_at(&self, i: usize, endpoint: EndpointId) -> Option<&LatencyPredictionInfo> {
        match self.by_endpoint.get(i) {
            Some((id, info)) if *id == endpoint => Some(info),
            _ => self.get(endpoint),
        }
    }

    /// Adds predictions for endpoints not predicted yet, keeping the order.
    pub(super) fn extend(&mut self, judged: Vec<(EndpointId, LatencyPredictionInfo)>) {
        if self.by_endpoint.is_empty() {
            self.by_endpoint = judged;
        } else {
            self.by_endpoint.extend(judged);
        }
        if !self.by_endpoint.is_sorted_by_key(|e| e.0) {
            self.by_endpoint.sort_unstable_by_key(|e| e.0);
        }
    }

    /// Number of candidates predicted.
    pub fn len(&self) -> usize {
        self.by_endpoint.len()
    }

    /// Whether no candidate was predicted.
    pub fn is_empty(&self) -> bool {
        self.by_endpoint.is_empty()
    }
}

/// Every producer's predictions for the current request.
#[derive(Debug, Default)]
pub(super) struct Produced(pub(super) Vec<LatencyPredictions>);
