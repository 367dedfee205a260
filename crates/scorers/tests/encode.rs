//! Encode disaggregation (E/P/D and E/PD) in a scheduler: the `disagg-profile-handler` runs the
//! decode profile, then the encode profile for a request carrying media
//! (`always-disagg-multimodal-decider`), picking as many encode servers as its picker's
//! `maxNumOfEndpoints`, then the prefill profile when the prefill decider says so; a text
//! request is never encoded; the encode servers are counted in flight until the first token;
//! an encode stage whose profile is missing or finds no server is left out.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use shepherd_scheduler_core::config::build_scheduler_in;
use shepherd_scheduler_core::disagg::ENCODE_ID_SUFFIX;
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;

const ROLE: &str = "llm-d.ai/role";

/// The E/P/D policy the adapters' end-to-end tests run (two encode servers a request).
const EPD: &str = include_str!("../../../examples/disagg/encode-policy.yaml");

/// E/PD, upstream's `sim-e-pd-epp-config.yaml` shape: an encode decider only, the encode
/// profile's default picker (one server).
const EPD_NO_PREFILL: &str = "
plugins:
- type: encode-filter
- type: decode-filter
- type: max-score-picker
- type: always-disagg-multimodal-decider
- type: disagg-profile-handler
  parameters:
    deciders:
      encode: always-disagg-multimodal-decider
schedulingProfiles:
- name: encode
  plugins:
  - pluginRef: encode-filter
- name: decode
  plugins:
  - pluginRef: decode-filter
";

/// A scheduler over servers with `roles`, at `127.0.0.1:8000 + i`.
fn rig(yaml: &str, roles: &[&str]) -> (Scheduler, SharedState) {
    let shared = SharedState::new(Arc::new(Pool::new()));
    for (i, role) in roles.iter().enumerate() {
        let ep = shared.pool.add(&format!("127.0.0.1:{}", 8000 + i));
        ep.set_labels([(ROLE.to_string(), role.to_string())].into_iter().collect());
    }
    let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
    let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
    (scheduler, shared)
}

/// A chat request of about `words` × 3 tokens, with an image part when `image`.
fn chat(id: &str, words: usize, image: bool) -> InferenceRequest {
    let text = serde_json::json!({"type": "text", "text": format!("{id} ").repeat(words)});
    let mut parts = vec![text];
    if image {
        parts.push(serde_json::json!({
            "type": "image_url", "image_url": {"url": "https://example.com/cat.png"}
        }));
    }
    let body = serde_json::json!({
        "model": "m", "messages": [{"role": "user", "content": parts}]
    });
    let mut request = parse_openai_request(
        "/v1/chat/completions",
        body.to_string().as_bytes(),
        &ParseLimits::default(),
    )
    .unwrap();
    request.id = id.to_string();
    request
}

fn addresses(endpoints: &[Arc<Endpoint>]) -> Vec<&str> {
    let mut out: Vec<&str> = endpoints.iter().map(|e| e.address()).collect();
    out.sort_unstable();
    out
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
fn e_p_d_encodes_a_media_request_on_several_servers_then_prefills_it() {
    let (scheduler, shared) = rig(EPD, &["encode", "encode", "encode", "prefill", "decode"]);
    // Long and uncached: prefilled apart too.
    let d = scheduler.schedule(&chat("img", 1000, true)).unwrap();
    assert_eq!(d.profile(), "decode");
    assert_eq!(d.primary().address(), "127.0.0.1:8004");
    let encode = d.encode().expect("a media request is encoded apart");
    assert_eq!(
        encode.endpoints().len(),
        2,
        "the picker's maxNumOfEndpoints"
    );
    for e in encode.endpoints() {
        let role = e.labels().get(ROLE).cloned();
        assert_eq!(role.as_deref(), Some("encode"), "{}", e.address());
    }
    assert_eq!(encode.breakdown.profile(), "encode");
    let header = encode.header_value();
    assert_eq!(header.split(',').count(), 2, "{header}");
    assert_eq!(
        d.prefill().map(|p| p.endpoint().address()),
        Some("127.0.0.1:8003")
    );
    assert_eq!(
        d.handle().encode().map(|h| h.id().to_string()),
        Some(format!("img{ENCODE_ID_SUFFIX}"))
    );
    d.finish(Completion::success(None));

    // A short media request: encoded, not prefilled apart.
    let d = scheduler.schedule(&chat("short", 3, true)).unwrap();
    assert!(d.encode().is_some());
    assert!(d.prefill().is_none());
    d.finish(Completion::success(None));

    // A long text request: prefilled apart, never encoded.
    let d = scheduler.schedule(&chat("text", 1000, false)).unwrap();
    assert!(d.encode().is_none());
    assert!(d.prefill().is_some());
    d.finish(Completion::success(None));
    assert_eq!(in_flight(&shared), [0; 5]);
}

#[test]
fn e_pd_encodes_a_media_request_on_one_server_by_default_and_serves_it_on_the_decode_server() {
    let (scheduler, _) = rig(EPD_NO_PREFILL, &["encode", "encode", "decode"]);
    let d = scheduler.schedule(&chat("img", 1000, true)).unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:8002");
    let encode = d.encode().expect("encoded");
    assert_eq!(
        encode.endpoints().len(),
        1,
        "upstream's default picker count"
    );
    assert!(
        ["127.0.0.1:8000", "127.0.0.1:8001"].contains(&encode.header_value().as_str()),
        "{}",
        encode.header_value()
    );
    assert!(d.prefill().is_none(), "no prefill decider: E/PD");
    d.finish(Completion::success(None));

    let d = scheduler.schedule(&chat("text", 1000, false)).unwrap();
    assert!(d.encode().is_none());
    d.finish(Completion::success(None));
}

#[test]
fn the_encode_servers_are_counted_in_flight_until_the_first_token() {
    let (scheduler, shared) = rig(EPD, &["encode", "encode", "prefill", "decode"]);
    let mut d = scheduler.schedule(&chat("img", 3, true)).unwrap();
    assert_eq!(
        addresses(d.encode().unwrap().endpoints()),
        ["127.0.0.1:8000", "127.0.0.1:8001"]
    );
    assert_eq!(in_flight(&shared), [1, 1, 0, 1]);
    // Encoders do not prefill the prompt.
    let pending: Vec<u64> = shared
        .pool
        .snapshot()
        .endpoints()
        .iter()
        .map(|e| e.pending_prefill_tokens())
        .collect();
    assert_eq!(&pending[..2], [0, 0]);
    d.handle_mut().first_token();
    assert_eq!(in_flight(&shared), [0, 0, 0, 1]);
    d.finish(Completion::success(None));
    assert_eq!(in_flight(&shared), [0; 4]);

    // Dropped unfinished (cancelled): every count is released too.
    let d = scheduler.schedule(&chat("img2", 3, true)).unwrap();
    assert_eq!(in_flight(&shared), [1, 1, 0, 1]);
    drop(d);
    assert_eq!(in_flight(&shared), [0; 4]);

    // A dry run counts nothing.
    let options = ScheduleOptions {
        dry_run: true,
        ..ScheduleOptions::default()
    };
    let d = scheduler
        .schedule_with(&chat("img3", 3, true), options)
        .unwrap();
    assert_eq!(d.encode().unwrap().endpoints().len(), 2);
    assert_eq!(in_flight(&shared), [0; 4]);
    drop(d);
}

#[test]
fn an_encode_stage_without_a_server_or_a_profile_is_left_out() {
    // No encode server: the encode profile's filter leaves nothing; the request is served.
    let (scheduler, _) = rig(EPD_NO_PREFILL, &["decode"]);
    let d = scheduler.schedule(&chat("img", 3, true)).unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:8000");
    assert!(d.encode().is_none());
    d.finish(Completion::success(None));

    // No profile named `encode`: the stage never runs, as upstream skips it.
    let without = EPD_NO_PREFILL.replace("- name: encode\n", "- name: unused\n");
    let (scheduler, _) = rig(&without, &["encode", "decode"]);
    let d = scheduler.schedule(&chat("img", 3, true)).unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:8001");
    assert!(d.encode().is_none());
    d.finish(Completion::success(None));
}

#[test]
fn an_encode_decider_that_is_not_a_decider_is_refused_by_name() {
    let yaml = EPD_NO_PREFILL.replace(
        "encode: always-disagg-multimodal-decider",
        "encode: encode-filter",
    );
    let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
    let err = build_scheduler(&config, &builtin_registry(), Arc::new(Pool::new()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("deciders.encode"), "{err}");
}
