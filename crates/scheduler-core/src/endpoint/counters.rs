use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Endpoint;

/// Counts one request in flight on an endpoint for as long as it lives.
///
/// Created by [`Endpoint::start_request`] or [`Endpoint::start_request_uncached`]; dropping
/// it releases the request, its prompt tokens and whatever of its pending prefill is left
/// from the endpoint's live counters, however the request ended.
///
/// The pending prefill (the request's uncached prompt tokens) is released earlier, by
/// [`InFlightGuard::prefill_done`], when the first token comes back: from then on the
/// endpoint only decodes for this request.
///
/// ```
/// use shepherd_scheduler_core::endpoint::Pool;
///
/// let pool = Pool::new();
/// pool.set_members(["10.0.0.1:8000"]);
/// let ep = pool.snapshot().endpoints()[0].clone();
/// let mut guard = ep.start_request_uncached(1000, 300);
/// assert_eq!(ep.pending_prefill_tokens(), 300);
/// guard.prefill_done(); // the first token arrived
/// assert_eq!(ep.pending_prefill_tokens(), 0);
/// assert_eq!(ep.in_flight_requests(), 1);
/// drop(guard);
/// assert_eq!(ep.in_flight_requests(), 0);
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard immediately releases the in-flight count"]
pub struct InFlightGuard {
    endpoint: Arc<Endpoint>,
    prompt_tokens: u64,
    prefill_tokens: u64,
    /// When the request was sent (nanoseconds on the endpoint's clock), counted in the
    /// endpoint's pending-prefill age while `prefill_tokens > 0`.
    sent_at: u64,
    /// False for a dry run's guard, which counts nothing.
    counted: bool,
}

impl InFlightGuard {
    pub(super) fn new(endpoint: Arc<Endpoint>, prompt_tokens: u64, prefill_tokens: u64) -> Self {
        let counters = &endpoint.counters;
        counters.started.fetch_add(1, Ordering::Relaxed);
        counters
            .prompt_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        let mut sent_at = 0;
        if prefill_tokens > 0 {
            sent_at = endpoint.now().as_nanos();
            counters
                .prefill_tokens
                .fetch_add(prefill_tokens, Ordering::Relaxed);
            // The time before the count (and the count before the time at the end): a read
            // between the two comes out too small (usually below zero, read as zero).
            counters
                .prefill_sent_at_sum
                .fetch_add(sent_at, Ordering::Relaxed);
            counters.prefill_requests.fetch_add(1, Ordering::Relaxed);
        }
        InFlightGuard {
            endpoint,
            prompt_tokens,
            prefill_tokens,
            sent_at,
            counted: true,
        }
    }

    /// A guard that counts nothing: a dry run's, naming the endpoint without sending it a
    /// request.
    pub(crate) fn uncounted(endpoint: Arc<Endpoint>) -> Self {
        InFlightGuard {
            endpoint,
            prompt_tokens: 0,
            prefill_tokens: 0,
            sent_at: 0,
            counted: false,
        }
    }

    /// The endpoint this guard counts on.
    pub fn endpoint(&self) -> &Arc<Endpoint> {
        &self.endpoint
    }

    /// Uncached prompt tokens of this request still counted as pending prefill.
    pub fn pending_prefill_tokens(&self) -> u64 {
        self.prefill_tokens
    }

    /// The request's prefill is done (its first token came back): releases its pending
    /// prefill tokens from the endpoint, keeping the request itself in flight. Calling it
    /// again does nothing.
    pub fn prefill_done(&mut self) {
        let tokens = std::mem::take(&mut self.prefill_tokens);
        if tokens > 0 {
            let counters = &self.endpoint.counters;
            counters.prefill_tokens.fetch_sub(tokens, Ordering::Relaxed);
            counters.prefill_requests.fetch_sub(1, Ordering::Relaxed);
            counters
                .prefill_sent_at_sum
                .fetch_sub(self.sent_at, Ordering::Relaxed);
        }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        self.prefill_done();
        let counters = &self.endpoint.counters;
        counters.finished.fetch_add(1, Ordering::Relaxed);
        counters
            .prompt_tokens
            .fetch_sub(self.prompt_tokens, Ordering::Relaxed);
    }
}
