//! The `prefill-first` stage order of `disagg-profile-handler` in a scheduler, on upstream's
//! cases (`TestHandler_Pick_PrefillFirst_*`, disagg_profile_handler_test.go @ ebab68792): the
//! prefill profile runs first for every request (no decider), the decode profile then runs
//! with the prefill pick as its peer (so a topology filter keeps the decode server beside
//! it), encode runs for media requests only; a prefill that finds no server leaves the request
//! aggregated and the decode stage without a peer; a decode that finds none fails the request
//! and releases the prefill pick.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use shepherd_scheduler_core::config::build_scheduler_in;
use shepherd_scheduler_core::disagg::{PREFILL_ID_SUFFIX, StageOrder};
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;

const ROLE: &str = "llm-d.ai/role";
const HOST: &str = "kubernetes.io/hostname";

/// docs/disaggregation.md's "P/D (Prefill/Decode, Prefill-First)" handler, with the decode
/// profile keeping its server on the prefill server's host.
const PREFILL_FIRST: &str = "
plugins:
- type: prefill-filter
- type: decode-filter
- type: encode-filter
- type: queue-scorer
- type: max-score-picker
- type: topology-extractor
- type: topology-affinity-filter
- type: always-disagg-multimodal-decider
- type: disagg-profile-handler
  parameters:
    stageOrder: prefill-first
    deciders:
      encode: always-disagg-multimodal-decider
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
- name: encode
  plugins:
  - pluginRef: encode-filter
  - pluginRef: max-score-picker
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: topology-affinity-filter
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
";

/// A scheduler over servers with `(role, host)`, at `127.0.0.1:8000 + i`.
fn rig(yaml: &str, servers: &[(&str, &str)]) -> (Scheduler, SharedState) {
    let shared = SharedState::new(Arc::new(Pool::new()));
    for (i, (role, host)) in servers.iter().enumerate() {
        let ep = shared.pool.add(&format!("127.0.0.1:{}", 8000 + i));
        ep.set_labels(
            [
                (ROLE.to_string(), role.to_string()),
                (HOST.to_string(), host.to_string()),
            ]
            .into_iter()
            .collect(),
        );
    }
    let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
    let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
    (scheduler, shared)
}

fn chat(id: &str, image: bool) -> InferenceRequest {
    let mut parts = vec![serde_json::json!({"type": "text", "text": "describe it"})];
    if image {
        parts.push(serde_json::json!({
            "type": "image_url", "image_url": {"url": "https://example.com/cat.png"}
        }));
    }
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": parts}]});
    let mut request = parse_openai_request(
        "/v1/chat/completions",
        body.to_string().as_bytes(),
        &ParseLimits::default(),
    )
    .unwrap();
    request.id = id.to_string();
    request
}

fn in_flight(shared: &SharedState) -> Vec<u64> {
    shared
        .pool
        .snapshot()
        .endpoints()
        .iter()
        .map(|e| e.in_flight_requests())
        .collect()
}

#[test]
fn the_order_reaches_the_scheduler() {
    let (scheduler, _) = rig(PREFILL_FIRST, &[("decode", "a")]);
    assert_eq!(
        scheduler.disaggregation().map(|d| d.stage_order()),
        Some(StageOrder::PrefillFirst)
    );
}

#[test]
fn prefill_runs_first_for_every_request_and_decode_follows_it_to_its_host() {
    // One prefill server, on host b; decode servers on hosts a and b (tied otherwise): the
    // decode stage must follow the prefill pick to host b, every time.
    let (scheduler, _) = rig(
        PREFILL_FIRST,
        &[("decode", "a"), ("prefill", "b"), ("decode", "b")],
    );
    for i in 0..16 {
        // A short prompt: no decider is asked, it is prefilled apart all the same.
        let d = scheduler.schedule(&chat(&format!("r{i}"), false)).unwrap();
        let prefill = d.prefill().expect("prefill-first always prefills");
        assert_eq!(prefill.endpoint().address(), "127.0.0.1:8001", "pick {i}");
        assert_eq!(d.primary().address(), "127.0.0.1:8002", "pick {i}");
        assert_eq!(d.profile(), "decode");
        assert!(d.encode().is_none(), "a text request is never encoded");
        assert_eq!(
            d.handle().prefill().map(|h| h.id().to_string()),
            Some(format!("r{i}{PREFILL_ID_SUFFIX}"))
        );
        d.finish(Completion::success(None));
    }
}

#[test]
fn a_media_request_is_also_encoded() {
    let (scheduler, shared) = rig(
        PREFILL_FIRST,
        &[("prefill", "a"), ("encode", "a"), ("decode", "a")],
    );
    let d = scheduler.schedule(&chat("img", true)).unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:8002");
    assert_eq!(
        d.prefill().map(|p| p.endpoint().address()),
        Some("127.0.0.1:8000")
    );
    assert_eq!(
        d.encode().map(|e| e.header_value()),
        Some("127.0.0.1:8001".to_string())
    );
    assert_eq!(in_flight(&shared), [1, 1, 1]);
    d.finish(Completion::success(None));
    assert_eq!(in_flight(&shared), [0, 0, 0]);
}

#[test]
fn a_prefill_that_finds_no_server_leaves_the_decode_stage_without_a_peer() {
    // No prefill server: upstream's "prefill failed (nil) → run decode". Without a peer the
    // topology filter passes every decode server.
    let (scheduler, _) = rig(PREFILL_FIRST, &[("decode", "a"), ("decode", "b")]);
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..32 {
        let d = scheduler.schedule(&chat(&format!("r{i}"), false)).unwrap();
        assert!(d.prefill().is_none());
        seen.insert(d.primary().address().to_string());
        d.finish(Completion::success(None));
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

#[test]
fn without_a_prefill_profile_only_decode_runs() {
    let without = PREFILL_FIRST.replace("- name: prefill\n", "- name: unused\n");
    let (scheduler, _) = rig(&without, &[("prefill", "a"), ("decode", "a")]);
    let d = scheduler.schedule(&chat("r", false)).unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:8001");
    assert!(d.prefill().is_none());
    d.finish(Completion::success(None));
}

#[test]
fn a_decode_that_finds_no_server_fails_and_releases_the_prefill_pick() {
    // Upstream's "decode failed → done": no decode server at all.
    let (scheduler, shared) = rig(PREFILL_FIRST, &[("prefill", "a"), ("encode", "a")]);
    let err = scheduler.schedule(&chat("r", false)).unwrap_err();
    assert!(matches!(err, ScheduleError::NoCandidates { .. }), "{err:?}");
    assert_eq!(in_flight(&shared), [0, 0]);
}

#[test]
fn a_prefill_decider_is_refused_in_prefill_first() {
    let yaml = PREFILL_FIRST
        .replace(
            "      encode: always-disagg-multimodal-decider",
            "      prefill: prefix-based-pd-decider",
        )
        .replace(
            "- type: always-disagg-multimodal-decider",
            "- type: prefix-based-pd-decider",
        );
    let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
    let err = shepherd_scheduler_core::config::build_scheduler(
        &config,
        &builtin_registry(),
        Arc::new(Pool::new()),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("not supported in prefill-first"), "{err}");
}
