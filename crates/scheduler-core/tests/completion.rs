//! Completion through the decision: hooks run exactly once however a request ends, fallbacks
//! move the in-flight count, ids are assigned, and the core's counters match what happened.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use parking_lot::Mutex;
use shepherd_scheduler_core::completion::{CompletedRequest, CompletionHook, Outcome};
use shepherd_scheduler_core::metrics::render_prometheus;
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::scheduler::ScheduleOptions;

#[derive(Default)]
struct Recorder(Mutex<Vec<(String, String, Outcome, bool)>>);

impl CompletionHook for Recorder {
    fn on_complete(&self, r: &CompletedRequest<'_>, c: &Completion) {
        self.0.lock().push((
            r.id.to_string(),
            r.endpoint.address().to_string(),
            c.outcome,
            r.used_fallback,
        ));
    }
}

fn setup(n: usize) -> (Arc<Pool>, Scheduler, Arc<Recorder>) {
    let pool = Arc::new(Pool::with_clock(Arc::new(ManualClock::default())));
    pool.set_members((0..n).map(|i| format!("10.0.0.{i}:8000")));
    let recorder = Arc::new(Recorder::default());
    let scheduler = Scheduler::builder(Arc::clone(&pool))
        .profile(Profile::builder("default").build())
        .completion_hook(recorder.clone())
        .build()
        .unwrap();
    (pool, scheduler, recorder)
}

fn request(id: &str) -> InferenceRequest {
    InferenceRequest::new(id, "llama", Prompt::Text("hello".into()))
}

fn in_flight(pool: &Pool) -> u64 {
    pool.snapshot().in_flight_requests()
}

#[test]
fn hooks_run_exactly_once_whether_finished_failed_or_dropped() {
    let (pool, s, rec) = setup(3);
    s.schedule(&request("ok"))
        .unwrap()
        .finish(Completion::success(None));
    s.schedule(&request("bad"))
        .unwrap()
        .finish(Completion::failed());
    drop(s.schedule(&request("gone")).unwrap());
    let handle = s.schedule(&request("handle")).unwrap().into_handle();
    drop(handle);
    let outcomes: Vec<(String, Outcome)> = rec
        .0
        .lock()
        .iter()
        .map(|(id, _, o, _)| (id.clone(), *o))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("ok".to_string(), Outcome::Success),
            ("bad".to_string(), Outcome::Failed),
            ("gone".to_string(), Outcome::Cancelled),
            ("handle".to_string(), Outcome::Cancelled),
        ]
    );
    assert_eq!(in_flight(&pool), 0);
    assert_eq!(s.metrics().completions(Outcome::Success), 1);
    assert_eq!(s.metrics().completions(Outcome::Failed), 1);
    assert_eq!(s.metrics().completions(Outcome::Cancelled), 2);
}

#[test]
fn a_dry_run_runs_no_completion_hook() {
    let (pool, s, rec) = setup(2);
    let dry = ScheduleOptions {
        dry_run: true,
        ..Default::default()
    };
    drop(s.schedule_with(&request("dry"), dry).unwrap());
    assert!(rec.0.lock().is_empty());
    assert_eq!(in_flight(&pool), 0);
}

#[test]
fn the_request_is_not_needed_after_scheduling() {
    let (pool, s, rec) = setup(2);
    let big = InferenceRequest::new("big", "llama", Prompt::Text("x".repeat(1 << 20)));
    let decision = s.schedule(&big).unwrap();
    drop(big); // the decision borrows nothing from the request
    let handle = decision.into_handle();
    assert_eq!(handle.id(), "big");
    assert_eq!(handle.model(), "llama");
    assert_eq!(in_flight(&pool), 1);
    handle.finish(Completion::success(None));
    assert_eq!(rec.0.lock().len(), 1);
    assert_eq!(in_flight(&pool), 0);
}

#[test]
fn requests_without_an_id_get_a_generated_one() {
    let (_pool, s, rec) = setup(1);
    let d = s.schedule(&request("")).unwrap();
    let id = d.request_id().to_string();
    assert_eq!(id.len(), 32);
    d.finish(Completion::success(None));
    assert_eq!(rec.0.lock()[0].0, id, "hooks see the generated id");
    let d2 = s.schedule(&request("")).unwrap();
    assert_ne!(d2.request_id(), id);
}

#[test]
fn moving_to_a_fallback_moves_the_in_flight_count_and_is_counted() {
    let (_pool, s, rec) = setup(3);
    let mut d = s.schedule(&request("r")).unwrap();
    let primary = Arc::clone(d.primary());
    let fallbacks = d.fallbacks().to_vec();
    assert_eq!(fallbacks.len(), 2);
    let first = Arc::clone(d.handle_mut().move_to_fallback().unwrap());
    assert!(Arc::ptr_eq(&first, &fallbacks[0]));
    assert_eq!(primary.in_flight_requests(), 0);
    assert_eq!(first.in_flight_requests(), 1);
    let second = Arc::clone(d.handle_mut().move_to_fallback().unwrap());
    assert!(Arc::ptr_eq(&second, &fallbacks[1]));
    assert!(d.handle_mut().move_to_fallback().is_none(), "none left");
    assert_eq!(second.in_flight_requests(), 1);
    d.finish(Completion::success(None));
    let log = rec.0.lock();
    assert_eq!(log[0].1, second.address());
    assert!(log[0].3, "the hook is told a fallback was used");
    assert_eq!(s.metrics().fallbacks_used(), 2);
    assert_eq!(second.in_flight_requests(), 0);
}

#[test]
fn counters_match_a_replayed_sequence_of_picks() {
    let (pool, s, _rec) = setup(4);
    // Deterministic replay: every request pinned to one endpoint by the subset hint.
    let plan: Vec<usize> = (0..200).map(|i| (i * 7 + i / 3) % 4).collect();
    let mut expected = [0u64; 4];
    for (i, &e) in plan.iter().enumerate() {
        let subset = vec![format!("10.0.0.{e}:8000")];
        let opts = ScheduleOptions {
            subset: Some(&subset),
            ..Default::default()
        };
        let d = s.schedule_with(&request(&format!("r{i}")), opts).unwrap();
        assert_eq!(d.primary().address(), subset[0]);
        expected[e] += 1;
        if i.is_multiple_of(2) {
            d.finish(Completion::success(None));
        } else {
            d.finish(Completion::failed());
        }
    }
    // Errors: an empty subset, and an unknown profile.
    let none = vec!["10.9.9.9:1".to_string()];
    for _ in 0..3 {
        let opts = ScheduleOptions {
            subset: Some(&none),
            ..Default::default()
        };
        assert!(s.schedule_with(&request("x"), opts).is_err());
    }
    let opts = ScheduleOptions {
        profile: Some("nope"),
        ..Default::default()
    };
    assert!(s.schedule_with(&request("x"), opts).is_err());

    let m = s.metrics();
    assert_eq!(m.picks("default"), 200);
    assert_eq!(m.errors("empty_subset"), 3);
    assert_eq!(m.errors("unknown_profile"), 1);
    assert_eq!(m.completions(Outcome::Success), 100);
    assert_eq!(m.completions(Outcome::Failed), 100);
    for (ep, want) in pool.snapshot().endpoints().iter().zip(expected) {
        assert_eq!(ep.picks_total(), want, "{}", ep.address());
    }
    let text = render_prometheus(&[&s]);
    assert!(
        text.contains("shepherd_picks_total{profile=\"default\"} 200"),
        "{text}"
    );
    assert!(text.contains("shepherd_schedule_errors_total{reason=\"empty_subset\"} 3"));
    assert!(text.contains("shepherd_schedule_duration_seconds_count{profile=\"default\"} 200"));
    for (i, want) in expected.iter().enumerate() {
        let line = format!("shepherd_endpoint_picks_total{{endpoint=\"10.0.0.{i}:8000\"}} {want}");
        assert!(text.contains(&line), "{line}\n{text}");
    }
}

#[test]
fn draining_and_disabled_endpoints_are_never_picked() {
    let (pool, s, _rec) = setup(3);
    let eps = pool.snapshot().endpoints().to_vec();
    pool.set_health(eps[0].address(), EndpointHealth::Draining);
    pool.set_health(eps[1].address(), EndpointHealth::Disabled);
    for i in 0..50 {
        let d = s.schedule(&request(&format!("r{i}"))).unwrap();
        assert_eq!(d.endpoints().len(), 1);
        assert_eq!(d.primary().address(), eps[2].address());
    }
    pool.set_health(eps[2].address(), EndpointHealth::Draining);
    let err = s.schedule(&request("none")).unwrap_err();
    assert_eq!(err.reason(), "no_healthy_endpoint");
    assert_eq!(err.http_status(), 503);
    pool.set_health(eps[0].address(), EndpointHealth::Enabled);
    assert_eq!(
        s.schedule(&request("back")).unwrap().primary().address(),
        eps[0].address()
    );
}

#[test]
fn stale_endpoints_are_avoided_while_fresh_ones_exist() {
    let clock = Arc::new(ManualClock::default());
    let pool = Arc::new(Pool::with_clock(clock.clone()));
    pool.set_members(["10.0.0.0:8000", "10.0.0.1:8000", "10.0.0.2:8000"]);
    let eps = pool.snapshot().endpoints().to_vec();
    let build = |avoid: bool| {
        Scheduler::builder(Arc::clone(&pool))
            .profile(Profile::builder("default").build())
            .avoid_stale_endpoints(avoid)
            .build()
            .unwrap()
    };
    let avoiding = build(true);
    // Nobody scraped yet: nobody is avoided.
    assert_eq!(
        avoiding.schedule(&request("a")).unwrap().endpoints().len(),
        3
    );
    eps[1].set_metrics(EndpointMetrics::default());
    // The pool's freshness is rechecked at most every staleness/8 (25 ms here).
    clock.advance(std::time::Duration::from_millis(25));
    let d = avoiding.schedule(&request("b")).unwrap();
    assert_eq!(
        d.endpoints().len(),
        1,
        "only the fresh endpoint is a candidate"
    );
    assert_eq!(d.primary().address(), eps[1].address());
    drop(d);
    // Once its metrics age past the bound, everyone is stale again: no one is avoided.
    clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(
        avoiding.schedule(&request("c")).unwrap().endpoints().len(),
        3
    );
    // Switched off: stale endpoints stay candidates.
    clock.set(Timestamp::ZERO);
    eps[1].set_metrics(EndpointMetrics::default());
    assert_eq!(
        build(false)
            .schedule(&request("d"))
            .unwrap()
            .endpoints()
            .len(),
        3
    );
}

#[test]
fn a_huge_subset_hint_is_indexed_once() {
    let (_pool, s, _rec) = setup(8);
    // 100k entries naming other hosts, plus one bare host that matches: indexed in one pass.
    let mut subset: Vec<String> = (0..100_000)
        .map(|i| format!("10.1.{}.{}:8000", i / 256 % 256, i % 256))
        .collect();
    subset.push("10.0.0.5".into());
    let opts = ScheduleOptions {
        subset: Some(&subset),
        ..Default::default()
    };
    let d = s.schedule_with(&request("r"), opts).unwrap();
    assert_eq!(d.primary().address(), "10.0.0.5:8000");
    assert_eq!(d.endpoints().len(), 1);
}
