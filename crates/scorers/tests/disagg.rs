//! Prefill/decode disaggregation in a scheduler: the `disagg-profile-handler` runs the decode
//! profile, then the prefill profile when its decider says so; the role filters keep each stage
//! on its own servers; the prefix-based decider switches at its threshold and leaves a request
//! whose prefix the decode server caches aggregated; the prefill stage is counted in flight on
//! its server until the first token.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use proptest::prelude::*;
use shepherd_scheduler_core::config::build_scheduler_in;
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;

const ROLE: &str = "llm-d.ai/role";

fn config(decider: &str) -> String {
    format!(
        "
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- type: decode-filter
- type: prefill-filter
- {decider}
- type: disagg-profile-handler
  parameters:
    deciders: {{prefill: decider}}
- type: max-score-picker
schedulingProfiles:
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
"
    )
}

fn prefix_based(non_cached: u64) -> String {
    format!(
        "type: prefix-based-pd-decider\n  name: decider\n  parameters: {{nonCachedTokens: {non_cached}}}"
    )
}

/// A scheduler over servers with `roles` (`None`: no role label).
fn rig(yaml: &str, roles: &[Option<&str>]) -> (Scheduler, SharedState) {
    let shared = SharedState::new(Arc::new(Pool::new()));
    for (i, role) in roles.iter().enumerate() {
        let ep = shared.pool.add(&format!("127.0.0.1:{}", 8000 + i));
        if let Some(role) = role {
            ep.set_labels([(ROLE.to_string(), role.to_string())].into_iter().collect());
        }
    }
    let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
    let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
    (scheduler, shared)
}

fn role_of(shared: &SharedState, ep: &Endpoint) -> Option<String> {
    shared
        .pool
        .snapshot()
        .endpoints()
        .iter()
        .find(|e| e.id() == ep.id())
        .and_then(|e| e.labels().get(ROLE).cloned())
}

fn request(id: &str, tokens: usize, token: u32) -> InferenceRequest {
    InferenceRequest::new(id, "m", Prompt::Tokens(vec![token; tokens]))
}

#[test]
fn the_handler_runs_decode_always_and_prefill_only_when_the_decider_says_so() {
    let (scheduler, _) = rig(
        &config(&prefix_based(512)),
        &[Some("prefill"), Some("decode")],
    );
    let long = scheduler.schedule(&request("long", 2048, 1)).unwrap();
    assert_eq!(long.profile(), "decode");
    assert_eq!(long.primary().address(), "127.0.0.1:8001");
    let stage = long
        .prefill()
        .expect("a long uncached prompt is disaggregated");
    assert_eq!(stage.endpoint().address(), "127.0.0.1:8000");
    assert_eq!(stage.breakdown.profile(), "prefill");
    long.finish(Completion::success(None));

    let short = scheduler.schedule(&request("short", 256, 2)).unwrap();
    assert_eq!(short.primary().address(), "127.0.0.1:8001");
    assert!(short.prefill().is_none());
    short.finish(Completion::success(None));

    // Naming a profile runs that profile alone.
    let options = ScheduleOptions {
        profile: Some("prefill"),
        ..ScheduleOptions::default()
    };
    let only = scheduler
        .schedule_with(&request("only", 2048, 3), options)
        .unwrap();
    assert_eq!(only.primary().address(), "127.0.0.1:8000");
    assert!(only.prefill().is_none());
    only.finish(Completion::success(None));
}

#[test]
fn the_decider_switches_at_its_threshold() {
    for (tokens, disaggregated) in [(511, false), (512, true), (4096, true)] {
        let (scheduler, _) = rig(
            &config(&prefix_based(512)),
            &[Some("prefill"), Some("decode")],
        );
        let d = scheduler.schedule(&request("r", tokens, 9)).unwrap();
        assert_eq!(d.prefill().is_some(), disaggregated, "{tokens} tokens");
        d.finish(Completion::success(None));
    }
    // 0 disables the decider.
    let (scheduler, _) = rig(
        &config(&prefix_based(0)),
        &[Some("prefill"), Some("decode")],
    );
    let d = scheduler.schedule(&request("r", 8192, 9)).unwrap();
    assert!(d.prefill().is_none());
    d.finish(Completion::success(None));
}

#[test]
fn a_prefix_the_decode_server_caches_is_not_disaggregated() {
    let (scheduler, _) = rig(
        &config(&prefix_based(512)),
        &[Some("prefill"), Some("decode")],
    );
    // The first request of a 2048-token prompt is prefilled remotely; its blocks are then
    // believed cached on the decode server (it received the KV cache).
    let first = scheduler.schedule(&request("a", 2048, 5)).unwrap();
    assert!(first.prefill().is_some());
    first.finish(Completion::success(None));
    // The same prompt plus 256 new tokens: 256 uncached on the decode server < 512.
    let mut tokens = vec![5u32; 2048];
    tokens.extend(std::iter::repeat_n(6u32, 256));
    let next = scheduler
        .schedule(&InferenceRequest::new("b", "m", Prompt::Tokens(tokens)))
        .unwrap();
    assert!(
        next.prefill().is_none(),
        "the decode server holds the prefix"
    );
    next.finish(Completion::success(None));
}

#[test]
fn the_prefill_stage_is_in_flight_on_its_server_until_the_first_token() {
    let always = "type: always-disagg-pd-decider\n  name: decider";
    let (scheduler, shared) = rig(&config(always), &[Some("prefill"), Some("decode")]);
    let snapshot = shared.pool.snapshot();
    let prefill_server = &snapshot.endpoints()[0];
    let mut d = scheduler.schedule(&request("r", 1000, 4)).unwrap();
    assert_eq!(d.prefill().unwrap().endpoint().id(), prefill_server.id());
    assert_eq!(prefill_server.in_flight_requests(), 1);
    assert_eq!(d.handle().prefill().unwrap().id(), "r:prefill");
    d.handle_mut().first_token();
    assert_eq!(prefill_server.in_flight_requests(), 0);
    assert!(d.handle().prefill().is_none());
    d.finish(Completion::success(None));
    // A request that ends before its first token ends its prefill stage too.
    let d = scheduler.schedule(&request("s", 1000, 4)).unwrap();
    assert_eq!(prefill_server.in_flight_requests(), 1);
    d.finish(Completion::failed());
    assert_eq!(prefill_server.in_flight_requests(), 0);
}

#[test]
fn the_prompt_is_pending_prefill_on_the_prefill_server_only() {
    let always = "type: always-disagg-pd-decider\n  name: decider";
    let (scheduler, shared) = rig(&config(always), &[Some("prefill"), Some("decode")]);
    let snapshot = shared.pool.snapshot();
    let (prefill_server, decode_server) = (&snapshot.endpoints()[0], &snapshot.endpoints()[1]);
    let mut d = scheduler.schedule(&request("r", 1000, 4)).unwrap();
    assert_eq!(d.primary().id(), decode_server.id());
    // The prompt is prefilled on the prefill server: pending there, not on the decode server.
    assert_eq!(prefill_server.pending_prefill_tokens(), 1000);
    assert_eq!(decode_server.pending_prefill_tokens(), 0);
    assert_eq!(decode_server.in_flight_requests(), 1);
    d.handle_mut().first_token();
    assert_eq!(prefill_server.pending_prefill_tokens(), 0);
    d.finish(Completion::success(None));
    assert_eq!(decode_server.in_flight_requests(), 0);
    // Served aggregated (no prefill server), the decode server prefills it.
    let (scheduler, shared) = rig(&config(always), &[Some("decode")]);
    let d = scheduler.schedule(&request("s", 1000, 4)).unwrap();
    assert!(d.prefill().is_none());
    assert_eq!(
        shared.pool.snapshot().endpoints()[0].pending_prefill_tokens(),
        1000
    );
    d.finish(Completion::success(None));
}

#[test]
fn without_a_prefill_server_the_request_is_served_aggregated() {
    let always = "type: always-disagg-pd-decider\n  name: decider";
    let (scheduler, _) = rig(&config(always), &[Some("decode"), Some("decode")]);
    let d = scheduler.schedule(&request("r", 1000, 4)).unwrap();
    assert!(d.prefill().is_none());
    d.finish(Completion::success(None));
}

#[test]
fn a_handler_naming_a_missing_decider_or_profile_is_refused() {
    let yaml = config(&prefix_based(512)).replace("prefill: decider", "prefill: nobody");
    let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
    let err = build_scheduler(&config, &builtin_registry(), Arc::new(Pool::new())).unwrap_err();
    assert!(err.to_string().contains("nobody"), "{err}");
    let yaml = config_text_without_prefill_profile();
    let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
    let err = build_scheduler(&config, &builtin_registry(), Arc::new(Pool::new())).unwrap_err();
    assert!(err.to_string().contains("prefill"), "{err}");
}

fn config_text_without_prefill_profile() -> String {
    let full = config(&prefix_based(512));
    let cut = full.find("- name: prefill").unwrap();
    full[..cut].to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the roles, a decode never lands on a prefill-only server and a prefill never on
    /// a decode-only (or unlabelled) one.
    #[test]
    fn role_filters_keep_each_stage_on_its_servers(
        roles in proptest::collection::vec(
            proptest::option::of(proptest::sample::select(vec!["prefill", "decode", "both", "prefill-decode"])),
            1..8,
        ),
        tokens in 1usize..4096,
    ) {
        let always = "type: always-disagg-pd-decider\n  name: decider";
        let (scheduler, shared) = rig(&config(always), &roles);
        match scheduler.schedule(&request("r", tokens, 8)) {
            Ok(d) => {
                let decode_role = role_of(&shared, d.primary());
                prop_assert_ne!(decode_role.as_deref(), Some("prefill"));
                if let Some(stage) = d.prefill() {
                    let role = role_of(&shared, stage.endpoint());
                    prop_assert!(matches!(role.as_deref(), Some("prefill" | "both" | "prefill-decode")), "{role:?}");
                }
                d.finish(Completion::success(None));
            }
            // Only prefill-only servers: no decode candidate at all.
            Err(e) => prop_assert!(roles.iter().all(|r| *r == Some("prefill")), "{e}"),
        }
    }
}
