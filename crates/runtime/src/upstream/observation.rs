//! What an adapter records about one request, from its parsed body to its last byte.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use shepherd_scheduler_core::completion::Usage;
use tokio::time::Instant;

use super::UpstreamMetrics;
use super::series::{FLOW_OUTCOMES, RequestSeries};

/// Upstream's error codes (`pkg/common/error`), for [`RequestObservation::error`].
pub mod error_code {
    /// The body could not be read or parsed.
    pub const BAD_REQUEST: &str = "BadRequest";
    /// The client's key was refused.
    pub const UNAUTHORIZED: &str = "Unauthorized";
    /// The model is not served.
    pub const NOT_FOUND: &str = "NotFound";
    /// Shed, rate-limited, a full queue or buffer.
    pub const RESOURCE_EXHAUSTED: &str = "ResourceExhausted";
    /// No endpoint could take the request.
    pub const SERVICE_UNAVAILABLE: &str = "ServiceUnavailable";
    /// Anything else the picker failed at.
    pub const INTERNAL: &str = "Internal";

    /// The code of an answer the picker or gateway made itself with HTTP `status`.
    pub fn for_status(status: u16) -> &'static str {
        match status {
            400 | 408 | 413 => BAD_REQUEST,
            401 | 403 => UNAUTHORIZED,
            404 => NOT_FOUND,
            429 => RESOURCE_EXHAUSTED,
            502..=504 => SERVICE_UNAVAILABLE,
            _ => INTERNAL,
        }
    }
}

/// How a request left flow control, mapped to upstream's outcome names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowOutcome {
    /// Let through (at once or after waiting).
    Dispatched,
    /// Shed or refused by a full band.
    RejectedCapacity,
    /// Refused for another reason (shutting down).
    RejectedOther,
    /// Waited its whole TTL.
    EvictedTtl,
    /// Its client went away while it waited.
    EvictedContextCancelled,
}

impl FlowOutcome {
    /// The outcome of a request flow control dropped for `reason`.
    pub fn dropped(reason: shepherd_scheduler_core::flow::DropReason) -> Self {
        use shepherd_scheduler_core::flow::DropReason;
        match reason {
            DropReason::Shed | DropReason::QueueFull => FlowOutcome::RejectedCapacity,
            DropReason::TtlExpired => FlowOutcome::EvictedTtl,
            _ => FlowOutcome::RejectedOther,
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Upstream's name of the outcome.
    pub fn as_str(self) -> &'static str {
        FLOW_OUTCOMES[self.index()]
    }
}

/// One request's upstream figures, recorded as it goes: created by
/// [`UpstreamMetrics::observe`] once the body is parsed (which counts it in
/// `llm_d_epp_request_total` and its size in `llm_d_epp_request_size_bytes`), told about the
/// pick, the first response byte and the response's bytes, and finished with the response's
/// usage. Dropped unfinished (the client went away), it still leaves the running gauge.
#[derive(Debug)]
pub struct RequestObservation {
    metrics: Arc<UpstreamMetrics>,
    series: Arc<RequestSeries>,
    target: Arc<str>,
    received: Instant,
    first_byte: Option<Instant>,
    response_bytes: u64,
    streaming: bool,
    running: bool,
    errored: bool,
    flow: Option<(Instant, u64)>,
}

impl RequestObservation {
    pub(super) fn new(
        metrics: Arc<UpstreamMetrics>,
        series: Arc<RequestSeries>,
        target: Arc<str>,
        request_bytes: usize,
        streaming: bool,
        received: Instant,
    ) -> Self {
        series.requests.fetch_add(1, Ordering::Relaxed);
        series.request_size.observe(request_bytes as f64);
        RequestObservation {
            metrics,
            series,
            target,
            received,
            first_byte: None,
            response_bytes: 0,
            streaming,
            running: false,
            errored: false,
            flow: None,
        }
    }

    /// The request enters flow control with a body of `bytes` (counted in the queue gauges
    /// until [`RequestObservation::flow_done`]).
    pub fn flow_enter(&mut self, bytes: usize) {
        if self.flow.is_some() {
            return;
        }
        let bytes = bytes as u64;
        self.series.flow_queued.fetch_add(1, Ordering::Relaxed);
        self.series
            .flow_bytes
            .fetch_add(bytes as i64, Ordering::Relaxed);
        self.flow = Some((Instant::now(), bytes));
    }

    /// The request left flow control with `outcome`.
    pub fn flow_done(&mut self, outcome: FlowOutcome) {
        let Some((entered, bytes)) = self.flow.take() else {
            return;
        };
        self.leave_flow(bytes);
        self.series.flow_waits[outcome.index()].observe(entered.elapsed().as_secs_f64());
    }

    fn leave_flow(&self, bytes: u64) {
        self.series.flow_queued.fetch_sub(1, Ordering::Relaxed);
        self.series
            .flow_bytes
            .fetch_sub(bytes as i64, Ordering::Relaxed);
    }

    /// The scheduler answered after `elapsed`: with the endpoint picked (`Some(ip:port)`),
    /// which starts the request running, or with nothing (`None`: a failed attempt).
    pub fn scheduled(&mut self, elapsed: Duration, endpoint: Option<&str>) {
        self.metrics.scheduled(elapsed, endpoint, &self.target);
        if endpoint.is_some() && !self.running {
            self.running = true;
            self.series.running.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The request failed with `code` (one of [`error_code`], or a model server's non-2xx
    /// status as text); counted once per request.
    pub fn error(&mut self, code: &str) {
        if self.errored {
            return;
        }
        self.errored = true;
        self.series.count_error(code);
        self.stop_running();
    }

    /// The first response byte arrived.
    pub fn first_byte(&mut self) {
        if self.first_byte.is_none() {
            self.first_byte = Some(Instant::now());
        }
    }

    /// `n` more response body bytes went to the client.
    pub fn response_bytes(&mut self, n: usize) {
        self.response_bytes = self.response_bytes.saturating_add(n as u64);
    }

    /// The response ended with `usage` (when the model server reported it): records the
    /// latency, size, token and per-token families.
    pub fn finish(mut self, usage: Option<&Usage>) {
        let now = Instant::now();
        let series = &self.series;
        let e2e = now.saturating_duration_since(self.received).as_secs_f64();
        series.duration.observe(e2e);
        series.response_size.observe(self.response_bytes as f64);
        if let Some(first) = self.first_byte {
            let ttft = first.saturating_duration_since(self.received).as_secs_f64();
            series.ttft[usize::from(self.streaming)].observe(ttft);
            if let Some(usage) = usage
                && self.streaming
                && usage.completion_tokens > 1
            {
                let tpot = (e2e - ttft) / (usage.completion_tokens - 1) as f64;
                series.tpot.observe(tpot.max(0.0));
            }
        }
        if let Some(usage) = usage {
            if usage.prompt_tokens > 0 {
                series.input_tokens.observe(usage.prompt_tokens as f64);
            }
            if usage.completion_tokens > 0 {
                series.output_tokens.observe(usage.completion_tokens as f64);
                series.ntpot.observe(e2e / usage.completion_tokens as f64);
            }
            if let Some(cached) = usage.cached_tokens {
                series.cached_tokens.observe(cached as f64);
            }
        }
        self.stop_running();
    }

    fn stop_running(&mut self) {
        if self.running {
            self.running = false;
            self.series.running.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for RequestObservation {
    fn drop(&mut self) {
        if self.flow.is_some() {
            // Dropped while waiting: the client went away.
            self.flow_done(FlowOutcome::EvictedContextCancelled);
        }
        self.stop_running();
    }
}
