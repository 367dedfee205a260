//! What one scorer costs a pick at 64 endpoints: `Scorer::score` over every candidate, for the
//! upstream scorers added with the upstream-config work (`token-load-scorer`,
//! `context-length-aware`, `endpoint-attribute-scorer` with either normalization,
//! `header-label-affinity-scorer`), Shepherd's `rendezvous-affinity` (it hashes the prompt's
//! first blocks once, then each candidate), beside the `queue-scorer` and
//! `prefill-load-scorer` as references.
//!
//! `cargo bench -p shepherd-benches --bench scorer_cost` prints criterion's figures, then a
//! table of medians in ns per pick measured in this run (the goal is ≤ 150 ns at 64 endpoints).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::PluginArgs;
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointAttributes, InFlightGuard, Pool};
use shepherd_scheduler_core::plugin::{CachedPrefix, CycleState, Score, Scorer};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::producers::inflight_load::InFlightLoad;
use shepherd_scorers::scorers::endpoint_attribute::Normalization;
use shepherd_scorers::scorers::{
    EndpointAttributeScorer, HeaderLabelAffinityScorer, PrefillLoadScorer, QueueScorer,
    RendezvousAffinityScorer, TokenLoadScorer,
};

const ENDPOINTS: usize = 64;

fn scorers(table: &Arc<EndpointAttributes>) -> Vec<(&'static str, Box<dyn Scorer>)> {
    let column = table.column("custom.queue_depth").expect("a column");
    vec![
        (
            "endpoint-attribute/adaptive",
            Box::new(EndpointAttributeScorer::new(
                Arc::clone(table),
                column,
                true,
                Normalization::Adaptive,
            )),
        ),
        (
            "endpoint-attribute/fixed",
            Box::new(EndpointAttributeScorer::new(
                Arc::clone(table),
                column,
                true,
                Normalization::Fixed(0.0, 100.0),
            )),
        ),
        (
            "header-label-affinity",
            Box::new(HeaderLabelAffinityScorer::new(
                "x-preferred-zone",
                "topology.kubernetes.io/zone",
            )),
        ),
        (
            "token-load-scorer",
            Box::new(TokenLoadScorer::new(0, InFlightLoad::default())),
        ),
        ("context-length-aware", context_length()),
        ("queue-scorer", Box::new(QueueScorer)),
        (
            "rendezvous-affinity",
            Box::new(RendezvousAffinityScorer::default()),
        ),
        (
            "prefill-load-scorer",
            Box::new(PrefillLoadScorer::default()),
        ),
    ]
}

/// A `context-length-aware` scorer built as a config builds it.
fn context_length() -> Box<dyn Scorer> {
    struct Facet(Arc<dyn Scorer>);
    impl Scorer for Facet {
        fn category(&self) -> shepherd_scheduler_core::plugin::Category {
            self.0.category()
        }
        fn score(&self, cycle: &mut CycleState<'_>, c: &[&Arc<Endpoint>], out: &mut [Score]) {
            self.0.score(cycle, c, out)
        }
    }
    let shared = SharedState::new(Arc::new(Pool::new()));
    let args = PluginArgs::new(
        "context-length-aware",
        "context-length-aware",
        &serde_json::Value::Null,
        &shared,
        0,
    );
    let instance = shepherd_scorers::builtin_registry()
        .get("context-length-aware")
        .map(|factory| factory(&args))
        .and_then(Result::ok)
        .and_then(|i| i.as_scorer().cloned())
        .expect("context-length-aware builds");
    Box::new(Facet(instance))
}

fn median_ns(samples: usize, batch: usize, mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let pool = Pool::new();
    pool.set_members((0..ENDPOINTS).map(|i| format!("10.0.{}.{}:8000", i / 250, i % 250)));
    let snapshot = pool.snapshot();
    let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
    // Context ranges on every endpoint.
    for (i, e) in candidates.iter().enumerate() {
        let range = if i % 2 == 0 { "0-8192" } else { "8193-131072" };
        let zone = if i % 3 == 0 { "a" } else { "b" };
        e.set_labels(
            [
                (
                    "llm-d.ai/context-length-range".to_string(),
                    range.to_string(),
                ),
                ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
            ]
            .into_iter()
            .collect(),
        );
    }
    // A custom metric on every endpoint but one.
    let table = Arc::new(EndpointAttributes::default());
    for (i, e) in candidates.iter().enumerate().skip(1) {
        table.set(
            e.id(),
            &[("custom.queue_depth".to_string(), (i % 17) as f64)],
        );
    }
    // Some load in flight, and a prefix cached on a quarter of the endpoints.
    let _held: Vec<InFlightGuard> = candidates
        .iter()
        .enumerate()
        .map(|(i, e)| e.start_request_uncached(4_000, (i as u64 * 97) % 4_000))
        .collect();
    let mut request = InferenceRequest::new("r", "m", Prompt::Text("x".repeat(16 * 1024)));
    request
        .headers
        .push(("x-preferred-zone".into(), "b".into()));
    let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_millis(200));
    CachedPrefix::publish(
        &mut cycle.extensions,
        candidates
            .iter()
            .step_by(4)
            .map(|e| (e.id(), 2_048))
            .collect::<Vec<_>>(),
    );
    let mut out = vec![Score::NEUTRAL; ENDPOINTS];

    let mut criterion = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    let mut group = criterion.benchmark_group("scorer_cost");
    for (name, scorer) in scorers(&table) {
        group.bench_function(BenchmarkId::new(name, ENDPOINTS), |b| {
            b.iter(|| scorer.score(black_box(&mut cycle), &candidates, black_box(&mut out)))
        });
    }
    group.finish();

    println!("\n== one scorer, one pick, {ENDPOINTS} endpoints (medians, this run) ==");
    for (name, scorer) in scorers(&table) {
        let ns = median_ns(41, 2_000, || {
            scorer.score(black_box(&mut cycle), &candidates, black_box(&mut out))
        });
        println!("{name:<28} {ns:>8.1} ns");
    }
}
