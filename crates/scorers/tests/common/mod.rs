//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::prelude::*;

/// The staleness bound the tests use.
pub const STALENESS: Duration = Duration::from_millis(200);

/// An endpoint at `127.0.0.1:(8000 + i)` with `metrics`.
pub fn endpoint(i: u32, metrics: EndpointMetrics) -> Arc<Endpoint> {
    let ep = Arc::new(Endpoint::new(
        EndpointId(i),
        format!("127.0.0.1:{}", 8000 + i),
    ));
    ep.set_metrics(metrics);
    ep
}

/// Fresh metrics (scraped at time zero) with `waiting`, `running` and `kv`.
pub fn fresh(waiting: u32, running: u32, kv: f64) -> EndpointMetrics {
    EndpointMetrics {
        waiting,
        running,
        kv_utilization: kv,
        scraped_at: Some(Timestamp::ZERO),
        ..Default::default()
    }
}

/// A text request.
pub fn request(id: &str) -> InferenceRequest {
    InferenceRequest::new(id, "llama", Prompt::Text(format!("prompt of {id}")))
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

/// Runs `scorer` at time zero (metrics scraped at zero are fresh).
pub fn score(
    scorer: &dyn Scorer,
    request: &InferenceRequest,
    endpoints: &[Arc<Endpoint>],
) -> Vec<Score> {
    score_at(scorer, request, endpoints, Timestamp::ZERO)
}

/// A pool of `n` loopback endpoints `127.0.0.1:8000..`, with its members.
pub fn pool(n: u16) -> (Arc<Pool>, Vec<Arc<Endpoint>>) {
    let pool = Arc::new(Pool::new());
    pool.set_members((0..n).map(|i| format!("127.0.0.1:{}", 8000 + i)));
    let members = pool.snapshot().endpoints().to_vec();
    (pool, members)
}
