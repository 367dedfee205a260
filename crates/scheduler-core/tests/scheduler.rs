//! The scheduler with small local plugins: filters, weights, breakdown, subsets, hooks,
//! determinism.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use shepherd_scheduler_core::completion::CompletedRequest;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{
    CachedPrefix, Category, Completion, CompletionHook, CycleState, Filter, PickHook, Picker,
    Score, Scorer,
};
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::rng::PickRng;
use shepherd_scheduler_core::weights::WeightTable;

fn port(e: &Endpoint) -> f64 {
    e.address().rsplit(':').next().unwrap().parse().unwrap()
}

/// Higher port, higher score.
struct PortScorer;
impl Scorer for PortScorer {
    fn category(&self) -> Category {
        Category::Distribution
    }
    fn score(&self, _: &mut CycleState<'_>, c: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (o, e) in out.iter_mut().zip(c) {
            *o = Score::new(port(e) / 10.0);
        }
    }
}

/// Lower port, higher score.
struct LowPortScorer;
impl Scorer for LowPortScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }
    fn score(&self, _: &mut CycleState<'_>, c: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (o, e) in out.iter_mut().zip(c) {
            *o = Score::new(1.0 - port(e) / 10.0);
        }
    }
}

/// Returns garbage: NaN and out-of-range values.
struct GarbageScorer;
impl Scorer for GarbageScorer {
    fn category(&self) -> Category {
        Category::Balance
    }
    fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = Score {
                value: [f64::NAN, -3.0, 7.0][i % 3],
                neutral: false,
            };
        }
    }
}

/// Uniform random order, for determinism tests.
struct Shuffle;
impl Picker for Shuffle {
    fn pick(&self, totals: &[f64], count: usize, rng: &mut PickRng) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..totals.len()).collect();
        for i in (1..idx.len()).rev() {
            idx.swap(i, rng.below(i + 1));
        }
        idx.truncate(count);
        idx
    }
}

/// A buggy picker returning out-of-range and duplicate indexes.
struct Buggy;
impl Picker for Buggy {
    fn pick(&self, _: &[f64], _: usize, _: &mut PickRng) -> Vec<usize> {
        vec![99, 1, 1, 0]
    }
}

struct DropOddPorts;
impl Filter for DropOddPorts {
    fn filter(&self, _: &mut CycleState<'_>, c: &mut Vec<&Arc<Endpoint>>) {
        c.retain(|e| (port(e) as u64).is_multiple_of(2));
    }
}

#[derive(Default)]
struct Counter(AtomicUsize);
impl PickHook for Counter {
    fn on_pick(&self, _: &mut CycleState<'_>, _: &Arc<Endpoint>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}
impl CompletionHook for Counter {
    fn on_complete(&self, _: &CompletedRequest<'_>, _: &Completion) {
        self.0.fetch_add(100, Ordering::Relaxed);
    }
}

fn pool(n: usize) -> Arc<Pool> {
    let pool = Arc::new(Pool::new());
    pool.set_members((1..=n).map(|i| format!("127.0.0.1:{i}")));
    pool
}

fn request() -> InferenceRequest {
    InferenceRequest::new("r", "m", Prompt::Text("hello".into()))
}

fn opts<'a>(subset: Option<&'a [String]>, profile: Option<&'a str>) -> ScheduleOptions<'a> {
    ScheduleOptions {
        subset,
        profile,
        dry_run: false,
    }
}

#[test]
fn weighted_sum_decides_and_breakdown_explains() {
    let profile = Profile::builder("p")
        .scorer("port", Arc::new(PortScorer), 1.0)
        .scorer("low", Arc::new(LowPortScorer), 3.0)
        .build();
    let s = Scheduler::builder(pool(5))
        .profile(profile)
        .max_endpoints(3)
        .build()
        .unwrap();
    let d = s.schedule(&request()).unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:1");
    assert_eq!(d.fallbacks().len(), 2);
    assert_eq!(
        d.destination_header(),
        "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"
    );
    assert_eq!(d.breakdown.scorers().len(), 2);
    assert_eq!(d.breakdown.rows().len(), 5);
    let row = &d.breakdown.rows()[0];
    assert!((row.total - (1.0 * 0.1 + 3.0 * 0.9)).abs() < 1e-9);
    assert_eq!(row.rank, Some(0));
    let text = d.breakdown.to_string();
    assert!(
        text.contains("port×1.00") && text.contains("127.0.0.1:5"),
        "{text}"
    );
}

#[test]
fn live_weights_change_the_pick_without_rebuilding() {
    let profile = Profile::builder("p")
        .scorer("port", Arc::new(PortScorer), 1.0)
        .scorer("low", Arc::new(LowPortScorer), 3.0)
        .build();
    let s = Scheduler::builder(pool(5))
        .profile(profile)
        .build()
        .unwrap();
    assert_eq!(
        s.schedule(&request()).unwrap().primary().address(),
        "127.0.0.1:1"
    );
    let weights = Arc::clone(s.profiles()[0].weights());
    assert!(weights.store(WeightTable::new(vec![3.0, 1.0]).with_reason("test")));
    assert!(
        !weights.store(WeightTable::new(vec![1.0])),
        "wrong length is refused"
    );
    let d = s.schedule(&request()).unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:5");
    assert_eq!(d.breakdown.scorers()[0].weight, 3.0);
    weights.reset();
    assert_eq!(
        s.schedule(&request()).unwrap().primary().address(),
        "127.0.0.1:1"
    );
}

#[test]
fn garbage_scores_are_clamped() {
    let profile = Profile::builder("p")
        .scorer("g", Arc::new(GarbageScorer), 1.0)
        .build();
    let s = Scheduler::builder(pool(3))
        .profile(profile)
        .build()
        .unwrap();
    let d = s.schedule(&request()).unwrap();
    for row in &d.breakdown.rows() {
        assert!(row.total.is_finite() && (0.0..=1.0).contains(&row.total));
    }
    assert_eq!(
        d.primary().address(),
        "127.0.0.1:3",
        "the 7.0 clamps to 1.0 and wins"
    );
}

#[test]
fn buggy_picker_output_is_sanitized() {
    let profile = Profile::builder("p").picker(Arc::new(Buggy)).build();
    let s = Scheduler::builder(pool(3))
        .profile(profile)
        .build()
        .unwrap();
    let d = s.schedule(&request()).unwrap();
    let ids: Vec<&str> = d.endpoints().iter().map(|e| e.address()).collect();
    assert_eq!(ids, ["127.0.0.1:2", "127.0.0.1:1"]);
}

#[test]
fn filters_subsets_and_errors() {
    let profile = Profile::builder("p")
        .filter("even", Arc::new(DropOddPorts))
        .scorer("port", Arc::new(PortScorer), 1.0)
        .build();
    let s = Scheduler::builder(pool(5))
        .profile(profile)
        .build()
        .unwrap();
    let d = s.schedule(&request()).unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:4");
    assert_eq!(d.breakdown.candidates_before_filters(), 5);
    assert_eq!(d.breakdown.rows().len(), 2);

    let subset = vec!["127.0.0.1:2".to_string(), "127.0.0.1:3".to_string()];
    let d = s
        .schedule_with(&request(), opts(Some(&subset), None))
        .unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:2");

    let bare_ip = vec!["127.0.0.1".to_string()];
    let d = s
        .schedule_with(&request(), opts(Some(&bare_ip), None))
        .unwrap();
    assert_eq!(
        d.primary().address(),
        "127.0.0.1:4",
        "a bare ip names every port"
    );

    let odd = vec!["127.0.0.1:3".to_string()];
    let err = s
        .schedule_with(&request(), opts(Some(&odd), None))
        .unwrap_err();
    assert!(matches!(err, ScheduleError::NoCandidates { ref filter, .. } if filter == "even"));
    assert_eq!(err.http_status(), 503);

    let none: Vec<String> = vec![];
    let err = s
        .schedule_with(&request(), opts(Some(&none), None))
        .unwrap_err();
    assert_eq!(err, ScheduleError::EmptySubset);

    let err = s
        .schedule_with(&request(), opts(None, Some("nope")))
        .unwrap_err();
    assert_eq!(err, ScheduleError::UnknownProfile("nope".into()));

    let empty = Scheduler::builder(Arc::new(Pool::new()))
        .profile(Profile::builder("p").build())
        .build()
        .unwrap();
    assert_eq!(
        empty.schedule(&request()).unwrap_err(),
        ScheduleError::NoEndpoints
    );
}

#[test]
fn hooks_run_and_guard_counts_in_flight() {
    let hook = Arc::new(Counter::default());
    let profile = Profile::builder("p").pick_hook(hook.clone()).build();
    let s = Scheduler::builder(pool(2))
        .profile(profile)
        .completion_hook(hook.clone())
        .build()
        .unwrap();
    let req = InferenceRequest::new("r", "m", Prompt::Tokens(vec![1; 40]));
    let dry = ScheduleOptions {
        dry_run: true,
        ..Default::default()
    };
    drop(s.schedule_with(&req, dry).unwrap());
    assert_eq!(
        hook.0.load(Ordering::Relaxed),
        0,
        "a dry run runs no pick hook"
    );
    let d = s.schedule(&req).unwrap();
    assert_eq!(hook.0.load(Ordering::Relaxed), 1);
    let ep = Arc::clone(d.primary());
    assert_eq!(ep.in_flight_requests(), 1);
    assert_eq!(ep.in_flight_prompt_tokens(), 40);
    d.finish(Completion::success(None));
    assert_eq!(hook.0.load(Ordering::Relaxed), 101);
    assert_eq!(ep.in_flight_requests(), 0);
}

fn picks(seed: u64, n: usize, rounds: usize) -> Vec<String> {
    let s = Scheduler::builder(pool(n))
        .profile(Profile::builder("p").picker(Arc::new(Shuffle)).build())
        .seed(seed)
        .build()
        .unwrap();
    (0..rounds)
        .map(|_| s.schedule(&request()).unwrap().destination_header())
        .collect()
}

proptest! {
    #[test]
    fn scheduling_is_deterministic_for_a_fixed_seed(seed in any::<u64>(), n in 1usize..20) {
        let a = picks(seed, n, 20);
        prop_assert_eq!(&a, &picks(seed, n, 20));
    }
}

#[test]
fn different_seeds_give_different_sequences() {
    assert_ne!(picks(1, 10, 20), picks(2, 10, 20));
}

/// Publishes a cached-prefix estimate: 300 tokens on port 1, 5000 (more than the prompt) on
/// port 2, nothing elsewhere; scores port 1 highest.
struct CachingScorer;
impl Scorer for CachingScorer {
    fn category(&self) -> Category {
        Category::Affinity
    }
    fn score(&self, cycle: &mut CycleState<'_>, c: &[&Arc<Endpoint>], out: &mut [Score]) {
        let estimates = c.iter().filter_map(|e| match port(e) as u32 {
            1 => Some((e.id(), 300)),
            2 => Some((e.id(), 5000)),
            _ => None,
        });
        CachedPrefix::publish(&mut cycle.extensions, estimates);
        for (o, e) in out.iter_mut().zip(c) {
            *o = Score::new(if port(e) as u32 == 1 { 1.0 } else { 0.0 });
        }
    }
}

fn tokens_request(n: u32) -> InferenceRequest {
    InferenceRequest::new("r", "m", Prompt::Tokens((0..n).collect()))
}

#[test]
fn the_guard_counts_the_uncached_part_of_the_prompt_as_pending_prefill() {
    let profile = Profile::builder("p")
        .scorer("cache", Arc::new(CachingScorer), 1.0)
        .build();
    let s = Scheduler::builder(pool(3))
        .profile(profile)
        .build()
        .unwrap();
    let mut d = s.schedule(&tokens_request(1000)).unwrap();
    assert_eq!(port(d.primary()), 1.0);
    assert_eq!(d.primary().in_flight_prompt_tokens(), 1000);
    assert_eq!(d.primary().pending_prefill_tokens(), 700);
    assert_eq!(d.handle().pending_prefill_tokens(), 700);
    d.handle_mut().first_token();
    assert_eq!(d.primary().pending_prefill_tokens(), 0);
    assert_eq!(
        d.primary().in_flight_requests(),
        1,
        "still in flight until the end"
    );
    d.handle_mut().first_token();
    assert_eq!(
        d.primary().pending_prefill_tokens(),
        0,
        "a second call does nothing"
    );
    let ep = Arc::clone(d.primary());
    drop(d);
    assert_eq!(ep.in_flight_requests(), 0);
    assert_eq!(ep.in_flight_prompt_tokens(), 0);
}

#[test]
fn without_an_estimate_the_whole_prompt_is_pending_prefill_until_drop() {
    let profile = Profile::builder("p")
        .scorer("port", Arc::new(PortScorer), 1.0)
        .build();
    let s = Scheduler::builder(pool(3))
        .profile(profile)
        .build()
        .unwrap();
    let d = s.schedule(&tokens_request(400)).unwrap();
    let ep = Arc::clone(d.primary());
    assert_eq!(ep.pending_prefill_tokens(), 400);
    drop(d);
    assert_eq!(ep.pending_prefill_tokens(), 0);
}

/// Picks the candidate at a fixed index.
struct PickIndex(usize);
impl Picker for PickIndex {
    fn pick(&self, _totals: &[f64], _max: usize, _rng: &mut PickRng) -> Vec<usize> {
        vec![self.0]
    }
}

#[test]
fn an_estimate_above_the_prompt_leaves_nothing_pending() {
    // pool(3) has ports 1..=3; candidate 1 is port 2, estimated to cache 5000 tokens.
    let profile = Profile::builder("p")
        .scorer("cache", Arc::new(CachingScorer), 1.0)
        .picker(Arc::new(PickIndex(1)))
        .build();
    let s = Scheduler::builder(pool(3))
        .profile(profile)
        .build()
        .unwrap();
    let d = s.schedule(&tokens_request(1000)).unwrap();
    assert_eq!(port(d.primary()), 2.0);
    assert_eq!(d.primary().pending_prefill_tokens(), 0);
    assert_eq!(d.primary().in_flight_prompt_tokens(), 1000);
}

proptest! {
    /// However guards start, finish their prefill and drop, the counters return to zero and
    /// pending prefill never exceeds the prompt tokens in flight.
    #[test]
    fn pending_prefill_is_conserved(
        ops in proptest::collection::vec((0u64..5000, 0u64..6000, proptest::bool::ANY), 1..30),
    ) {
        let pool = Pool::new();
        let ep = pool.add("a:1");
        let mut guards = Vec::new();
        for (prompt, uncached, done) in ops {
            let mut g = ep.start_request_uncached(prompt, uncached);
            if done {
                g.prefill_done();
            }
            guards.push(g);
            prop_assert!(ep.pending_prefill_tokens() <= ep.in_flight_prompt_tokens());
        }
        let expected: u64 = guards.iter().map(|g| g.pending_prefill_tokens()).sum();
        prop_assert_eq!(ep.pending_prefill_tokens(), expected);
        drop(guards);
        prop_assert_eq!(ep.pending_prefill_tokens(), 0);
        prop_assert_eq!(ep.in_flight_prompt_tokens(), 0);
        prop_assert_eq!(ep.in_flight_requests(), 0);
    }
}
