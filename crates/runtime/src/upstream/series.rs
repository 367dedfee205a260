//! One label set's request figures.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use parking_lot::Mutex;
use shepherd_scheduler_core::metrics::BucketHistogram;

use super::names::{
    FLOW_QUEUE_DURATION_BUCKETS, GENERAL_LATENCY, INPUT_TOKEN_BUCKETS, NTPOT_BUCKETS,
    OUTPUT_TOKEN_BUCKETS, REQUEST_BYTES, RESPONSE_BYTES, SECONDS, TPOT_BUCKETS, TTFT_BUCKETS,
    UNITS,
};

/// The request labels upstream puts on every request family.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SeriesKey {
    pub(crate) model: Arc<str>,
    pub(crate) target: Arc<str>,
    pub(crate) fairness: Arc<str>,
    pub(crate) priority: i32,
}

/// Flow-control outcomes, upstream's names, in the order of [`RequestSeries::flow_waits`].
pub(crate) const FLOW_OUTCOMES: [&str; 5] = [
    "Dispatched",
    "RejectedCapacity",
    "RejectedOther",
    "EvictedTTL",
    "EvictedContextCancelled",
];

/// Most distinct error codes one series keeps (the named codes and model-server statuses).
const MAX_ERROR_CODES: usize = 64;

/// What upstream records per label set.
#[derive(Debug)]
pub(crate) struct RequestSeries {
    pub(crate) requests: AtomicU64,
    pub(crate) running: AtomicI64,
    /// `(error_code, count)`; errors are rare, so a short per-series lock.
    pub(crate) errors: Mutex<Vec<(Arc<str>, u64)>>,
    pub(crate) duration: BucketHistogram,
    pub(crate) request_size: BucketHistogram,
    pub(crate) response_size: BucketHistogram,
    pub(crate) input_tokens: BucketHistogram,
    pub(crate) output_tokens: BucketHistogram,
    pub(crate) cached_tokens: BucketHistogram,
    pub(crate) ntpot: BucketHistogram,
    /// `[non-streaming, streaming]`.
    pub(crate) ttft: [BucketHistogram; 2],
    pub(crate) tpot: BucketHistogram,
    pub(crate) flow_queued: AtomicI64,
    pub(crate) flow_bytes: AtomicI64,
    pub(crate) flow_waits: [BucketHistogram; FLOW_OUTCOMES.len()],
}

impl Default for RequestSeries {
    fn default() -> Self {
        let shared = BucketHistogram::shared;
        RequestSeries {
            requests: AtomicU64::new(0),
            running: AtomicI64::new(0),
            errors: Mutex::new(Vec::new()),
            duration: shared(&GENERAL_LATENCY, SECONDS),
            request_size: shared(&REQUEST_BYTES, UNITS),
            response_size: shared(&RESPONSE_BYTES, UNITS),
            input_tokens: shared(&INPUT_TOKEN_BUCKETS, UNITS),
            output_tokens: shared(&OUTPUT_TOKEN_BUCKETS, UNITS),
            cached_tokens: shared(&INPUT_TOKEN_BUCKETS, UNITS),
            ntpot: shared(&NTPOT_BUCKETS, SECONDS),
            ttft: [
                shared(&TTFT_BUCKETS, SECONDS),
                shared(&TTFT_BUCKETS, SECONDS),
            ],
            tpot: shared(&TPOT_BUCKETS, SECONDS),
            flow_queued: AtomicI64::new(0),
            flow_bytes: AtomicI64::new(0),
            flow_waits: std::array::from_fn(|_| shared(&FLOW_QUEUE_DURATION_BUCKETS, SECONDS)),
        }
    }
}

impl RequestSeries {
    pub(crate) fn count_error(&self, code: &str) {
        let mut errors = self.errors.lock();
        if let Some(entry) = errors.iter_mut().find(|(c, _)| &**c == code) {
            entry.1 += 1;
        } else if errors.len() < MAX_ERROR_CODES {
            errors.push((Arc::from(code), 1));
        } else if let Some(entry) = errors.iter_mut().find(|(c, _)| &**c == "Unknown") {
            entry.1 += 1;
        } else {
            errors.push((Arc::from("Unknown"), 1));
        }
    }

    pub(crate) fn running(&self) -> i64 {
        self.running.load(Ordering::Relaxed)
    }
}
