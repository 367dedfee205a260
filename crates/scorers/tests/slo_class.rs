//! `slo-class-scorer` in a profile: tolerant requests (a TTFT objective of a second or more)
//! collect on the servers already serving tolerant requests, critical ones are steered off
//! them, requests without objectives are left to the other scorers, and finished requests stop
//! counting.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::builtin_registry;

fn yaml(parameters: &str) -> String {
    format!(
        "
plugins:
- type: slo-class-scorer
  parameters: {{{parameters}}}
- type: active-request-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: slo-class-scorer
    weight: 2
  - pluginRef: active-request-scorer
    weight: 1
  - pluginRef: max-score-picker
"
    )
}

fn scheduler(parameters: &str) -> Result<Scheduler, ConfigError> {
    let config = EndpointPickerConfig::from_yaml(&yaml(parameters))?;
    let pool = Arc::new(Pool::new());
    pool.set_members((0..4).map(|i| format!("127.0.0.1:{}", 8000 + i)));
    build_scheduler(&config, &builtin_registry(), pool)
}

fn request(id: &str, ttft_ms: Option<&str>) -> InferenceRequest {
    let mut r = InferenceRequest::new(id, "m", Prompt::Text("a prompt".into()));
    if let Some(ttft) = ttft_ms {
        r.headers.push(("x-slo-ttft-ms".into(), ttft.into()));
    }
    r
}

fn address(d: &Decision) -> String {
    d.primary().address().to_string()
}

#[test]
fn tolerant_requests_collect_and_critical_ones_keep_off_them() {
    let s = scheduler("").unwrap();
    let first = s.schedule(&request("doc-1", Some("5000"))).unwrap();
    // The in-flight count alone would send the next one elsewhere; the class keeps it here.
    let second = s.schedule(&request("doc-2", Some("1000"))).unwrap();
    assert_eq!(address(&first), address(&second));
    // Critical requests (below 1 s) go anywhere but there, even as they pile up.
    let chats: Vec<Decision> = (0..6)
        .map(|i| {
            s.schedule(&request(&format!("chat-{i}"), Some("200")))
                .unwrap()
        })
        .collect();
    assert!(chats.iter().all(|c| address(c) != address(&first)));
}

/// The class scorer's score (the profile's first scorer) on every candidate of `d`.
fn class_scores(d: &Decision) -> Vec<Score> {
    (0..d.breakdown.len())
        .map(|i| d.breakdown.score(0, i).unwrap())
        .collect()
}

#[test]
fn requests_without_a_ttft_objective_are_left_to_the_other_scorers() {
    let s = scheduler("").unwrap();
    let _doc = s.schedule(&request("doc", Some("5000"))).unwrap();
    let mut tpot_only = request("t", None);
    tpot_only
        .headers
        .push(("x-slo-tpot-ms".into(), "20".into()));
    for r in [
        request("plain", None),
        tpot_only,
        request("bad", Some("soon")),
    ] {
        let d = s.schedule(&r).unwrap();
        assert!(class_scores(&d).iter().all(|c| c.neutral), "{}", r.id);
    }
    // A critical request is judged.
    let d = s.schedule(&request("chat", Some("200"))).unwrap();
    assert!(class_scores(&d).iter().all(|c| !c.neutral));
}

#[test]
fn finished_tolerant_requests_stop_counting() {
    let s = scheduler("").unwrap();
    let doc = s.schedule(&request("doc", Some("2000"))).unwrap();
    let judged = s.schedule(&request("chat-1", Some("200"))).unwrap();
    assert!(class_scores(&judged).iter().all(|c| !c.neutral));
    drop(doc); // cancelled: its completion hooks run
    let d = s.schedule(&request("chat-2", Some("200"))).unwrap();
    assert!(class_scores(&d).iter().all(|c| c.neutral));
    // Finished normally, the same.
    let doc = s.schedule(&request("doc-2", Some("2000"))).unwrap();
    doc.finish(Completion::success(None));
    let d = s.schedule(&request("chat-3", Some("200"))).unwrap();
    assert!(class_scores(&d).iter().all(|c| c.neutral));
}

#[test]
fn the_threshold_is_a_parameter() {
    let s = scheduler("tolerantTtftMs: 150").unwrap();
    let first = s.schedule(&request("a", Some("200"))).unwrap();
    let second = s.schedule(&request("b", Some("200"))).unwrap();
    // 200 ms is tolerant at a 150 ms threshold: the two collect.
    assert_eq!(address(&first), address(&second));
}

#[test]
fn bad_parameters_are_refused_with_their_name() {
    for (parameters, field) in [
        ("tolerantTtftMs: 0", "tolerantTtftMs"),
        ("tolerantTtftMs: -5", "tolerantTtftMs"),
        ("maxTracked: 0", "maxTracked"),
        ("tolerantTTFT: 5", "tolerantTTFT"),
    ] {
        let Err(e) = scheduler(parameters) else {
            panic!("{parameters} was accepted");
        };
        let e = e.to_string();
        assert!(e.contains(field), "{parameters}: {e}");
    }
}
