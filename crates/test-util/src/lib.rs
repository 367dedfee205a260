//! # shepherd-test-util
//!
//! The pool, endpoint, metrics and request helpers that Shepherd's tests and benchmarks share,
//! so each test file does not write its own; a real `redis-server` ([`redis`]) and relays a
//! test cuts to make a network partition ([`tcp_relay`], [`udp_relay`]). Everything runs on a [`ManualClock`] standing at
//! time zero unless a test moves it: metrics stored through these helpers are fresh at time
//! zero and age only when the test says so.
//!
//! ```
//! use shepherd_test_util::{TestPool, fresh, text_request};
//!
//! let t = TestPool::loopback(3);
//! t.set(0, fresh(5, 1, 0.5));
//! assert_eq!(t.endpoints[0].load_metrics().waiting, 5);
//! assert_eq!(t.endpoints[2].address(), "127.0.0.1:8002");
//! let r = text_request("r1");
//! assert_eq!(r.id, "r1");
//! ```
#![forbid(unsafe_code)]

mod completion;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod redis;
pub mod tcp_relay;
pub mod udp_relay;

pub use completion::{CompletionRecorder, Ended};

use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId, EndpointMetrics, Pool};
use shepherd_scheduler_core::plugin::{CycleState, Score, Scorer};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

/// The staleness bound tests use (the default, 200 ms).
pub const STALENESS: Duration = Duration::from_millis(200);

/// A pool of loopback endpoints on a manual clock.
#[derive(Debug, Clone)]
pub struct TestPool {
    /// The pool.
    pub pool: Arc<Pool>,
    /// Its clock (at time zero until moved).
    pub clock: Arc<ManualClock>,
    /// Its members, sorted by address.
    pub endpoints: Vec<Arc<Endpoint>>,
}

impl TestPool {
    /// `n` endpoints at `127.0.0.1:8000..`, on a manual clock at zero.
    pub fn loopback(n: u16) -> Self {
        Self::with_addresses((0..n).map(|i| format!("127.0.0.1:{}", 8000 + u32::from(i))))
    }

    /// Endpoints at `addresses`, on a manual clock at zero.
    pub fn with_addresses<I: IntoIterator<Item = String>>(addresses: I) -> Self {
        let clock = Arc::new(ManualClock::default());
        let pool = Arc::new(Pool::with_clock(clock.clone()));
        pool.set_members(addresses);
        let endpoints = pool.snapshot().endpoints().to_vec();
        TestPool {
            pool,
            clock,
            endpoints,
        }
    }

    /// Stores `metrics` on member `i`, stamped at the clock's current time.
    pub fn set(&self, i: usize, metrics: EndpointMetrics) {
        if let Some(e) = self.endpoints.get(i) {
            e.set_metrics(metrics);
        }
    }

    /// Stores `fresh(waiting, running, kv)` on every member, in order.
    pub fn set_loads(&self, loads: &[(u32, u32, f64)]) {
        for (i, &(w, r, kv)) in loads.iter().enumerate() {
            self.set(i, fresh(w, r, kv));
        }
    }
}

/// A standalone endpoint at `127.0.0.1:(8000 + i)` whose metrics, `metrics`, were stored at time
/// zero.
pub fn endpoint(i: u32, metrics: EndpointMetrics) -> Arc<Endpoint> {
    let clock = Arc::new(ManualClock::default());
    let ep = Arc::new(Endpoint::new(
        EndpointId(i),
        format!("127.0.0.1:{}", 8000 + i),
        clock,
    ));
    ep.set_metrics(metrics);
    ep
}

/// A standalone endpoint at `127.0.0.1:(8000 + i)` holding `metrics` stored at `scraped`, or
/// never scraped (`None`: the values are kept but read as stale).
pub fn endpoint_scraped_at(
    i: u32,
    metrics: EndpointMetrics,
    scraped: Option<Timestamp>,
) -> Arc<Endpoint> {
    let clock = Arc::new(ManualClock::at(scraped.unwrap_or(Timestamp::ZERO)));
    let ep = Arc::new(Endpoint::new(
        EndpointId(i),
        format!("127.0.0.1:{}", 8000 + i),
        clock,
    ));
    ep.set_metrics(metrics);
    if scraped.is_none() {
        ep.clear_metrics();
    }
    ep
}

/// Metrics with `waiting`, `running` and KV utilization `kv`.
pub fn fresh(waiting: u32, running: u32, kv: f64) -> EndpointMetrics {
    EndpointMetrics {
        waiting,
        running,
        kv_utilization: kv,
        ..Default::default()
    }
}

/// A text request for model `llama` whose prompt names it.
pub fn text_request(id: &str) -> InferenceRequest {
    InferenceRequest::new(id, "llama", Prompt::Text(format!("prompt of {id}")))
}

/// A request for model `llama` with `n` prompt token ids.
pub fn tokens_request(id: &str, n: u32) -> InferenceRequest {
    InferenceRequest::new(id, "llama", Prompt::Tokens((0..n).collect()))
}

/// Runs `scorer` at time `now` over `endpoints` for `request`.
pub fn score_at(
    scorer: &dyn Scorer,
    request: &InferenceRequest,
    endpoints: &[Arc<Endpoint>],
    now: Timestamp,
) -> Vec<Score> {
    let candidates: Vec<&Arc<Endpoint>> = endpoints.iter().collect();
    let mut cycle = CycleState::new(request, now, STALENESS);
    let mut out = vec![Score::NEUTRAL; candidates.len()];
    scorer.score(&mut cycle, &candidates, &mut out);
    out
}

/// Runs `scorer` at time zero.
pub fn score(
    scorer: &dyn Scorer,
    request: &InferenceRequest,
    endpoints: &[Arc<Endpoint>],
) -> Vec<Score> {
    score_at(scorer, request, endpoints, Timestamp::ZERO)
}
