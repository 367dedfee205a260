//! `p2p-source-producer` in a scheduler, on upstream's PreRequest cases
//! (producer_test.go @ ebab68792): the KV-source server is named when a server other than the
//! computing one holds at least `minCachedTokenDelta` more of the prompt; never the computing
//! server itself; under P/D the computing server is the prefill pick, so a source equal to it
//! names nothing and a third server holding the prompt is named.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use shepherd_scheduler_core::config::build_scheduler_in;
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;

const NAME: &str = "test/name";

/// Plugins and one `seed-<name>` profile per server, which records a prompt on it.
fn config(handler: &str, profiles: &str, delta: u64, names: &[&str]) -> String {
    let mut yaml = format!(
        "plugins:
- type: approx-prefix-cache-producer
- type: p2p-source-producer
  parameters: {{minCachedTokenDelta: {delta}}}
- type: prefix-cache-scorer
- type: max-score-picker
{handler}"
    );
    for name in names {
        yaml.push_str(&format!(
            "- type: by-label\n  name: only-{name}\n  parameters: {{label: {NAME}, validValues: [{name}]}}\n"
        ));
    }
    yaml.push_str("schedulingProfiles:\n");
    yaml.push_str(profiles);
    for name in names {
        yaml.push_str(&format!(
            "- name: seed-{name}\n  plugins: [{{pluginRef: only-{name}}}, {{pluginRef: prefix-cache-scorer}}, {{pluginRef: max-score-picker}}]\n"
        ));
    }
    yaml
}

fn rig(yaml: &str, names: &[&str]) -> Scheduler {
    let shared = SharedState::new(Arc::new(Pool::new()));
    for (i, name) in names.iter().enumerate() {
        let ep = shared.pool.add(&format!("127.0.0.1:{}", 8000 + i));
        ep.set_labels([(NAME.to_string(), name.to_string())].into_iter().collect());
    }
    let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
    build_scheduler_in(&config, &builtin_registry(), &shared).unwrap()
}

/// 4096 bytes: 1024 pseudo tokens, 16 blocks of 64.
fn prompt(tag: &str) -> Prompt {
    Prompt::Text(format!("{tag}:").repeat(1024 / (tag.len() + 1) * 4 + 4))
}

/// Records `tag`'s prompt on the server `name` (through its seed profile).
fn seed(scheduler: &Scheduler, name: &str, tag: &str) {
    let options = ScheduleOptions {
        profile: Some(&format!("seed-{name}")),
        ..ScheduleOptions::default()
    };
    let d = scheduler
        .schedule_with(&InferenceRequest::new("seed", "m", prompt(tag)), options)
        .unwrap();
    d.finish(Completion::success(None));
}

const DECODE_ONLY: &str = "- name: default
  plugins: [{pluginRef: only-b}, {pluginRef: prefix-cache-scorer}, {pluginRef: max-score-picker}]
";

#[test]
fn a_server_holding_the_prompt_is_named_to_the_one_computing_it() {
    // TestPreRequest_SetsKVCacheSourceHeader: the request goes to b (its filter); a holds it.
    let names = ["a", "b"];
    let scheduler = rig(&config("", DECODE_ONLY, 1, &names), &names);
    seed(&scheduler, "a", "shared");
    let d = scheduler
        .schedule(&InferenceRequest::new("r1", "m", prompt("shared")))
        .unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:8001");
    assert_eq!(d.kv_cache_source(), Some("127.0.0.1:8000"));
    d.finish(Completion::success(None));
    // Now b holds it too (the pick recorded it): nothing to pull.
    let d = scheduler
        .schedule(&InferenceRequest::new("r2", "m", prompt("shared")))
        .unwrap();
    assert_eq!(d.kv_cache_source(), None);
    d.finish(Completion::success(None));
    // A prompt nobody holds: nothing to pull.
    let d = scheduler
        .schedule(&InferenceRequest::new("r3", "m", prompt("cold")))
        .unwrap();
    assert_eq!(d.kv_cache_source(), None);
    d.finish(Completion::success(None));
}

#[test]
fn a_delta_below_the_threshold_names_nothing() {
    // TestPreRequest_DeltaBelowThreshold_NoHeader: a holds 1024 tokens more than b; the
    // threshold asks for more.
    let names = ["a", "b"];
    let scheduler = rig(&config("", DECODE_ONLY, 2048, &names), &names);
    seed(&scheduler, "a", "shared");
    let d = scheduler
        .schedule(&InferenceRequest::new("r", "m", prompt("shared")))
        .unwrap();
    assert_eq!(d.kv_cache_source(), None);
    d.finish(Completion::success(None));
}

#[test]
fn the_computing_server_itself_is_never_named() {
    // TestPreRequest_BestIsChosen_NoHeader: b holds the prompt and computes it.
    let names = ["a", "b"];
    let scheduler = rig(&config("", DECODE_ONLY, 1, &names), &names);
    seed(&scheduler, "b", "shared");
    let d = scheduler
        .schedule(&InferenceRequest::new("r", "m", prompt("shared")))
        .unwrap();
    assert_eq!(d.kv_cache_source(), None);
    d.finish(Completion::success(None));
}

const PD_HANDLER: &str = "- type: always-disagg-pd-decider
- type: disagg-profile-handler
  parameters: {deciders: {prefill: always-disagg-pd-decider}}
";

/// Prefill on p, decode on d.
const PD: &str = "- name: prefill
  plugins: [{pluginRef: only-p}, {pluginRef: max-score-picker}]
- name: decode
  plugins: [{pluginRef: only-d}, {pluginRef: max-score-picker}]
";

#[test]
fn under_pd_the_prefill_pick_computes_the_prompt() {
    let names = ["p", "d", "third"];
    let scheduler = rig(&config(PD_HANDLER, PD, 1, &names), &names);
    // TestPreRequest_PrefillProfile_BestIsPrefill_NoHeader: the prefill server holds it.
    seed(&scheduler, "p", "held-by-prefill");
    let d = scheduler
        .schedule(&InferenceRequest::new("r1", "m", prompt("held-by-prefill")))
        .unwrap();
    assert_eq!(d.primary().address(), "127.0.0.1:8001");
    assert_eq!(
        d.prefill().map(|p| p.endpoint().address()),
        Some("127.0.0.1:8000")
    );
    assert_eq!(
        d.kv_cache_source(),
        None,
        "the decode server holds nothing, but prefill computes"
    );
    d.finish(Completion::success(None));

    // TestPreRequest_PrefillProfile_HeaderFromThirdPod: a third server holds it.
    seed(&scheduler, "third", "held-by-third");
    let d = scheduler
        .schedule(&InferenceRequest::new("r2", "m", prompt("held-by-third")))
        .unwrap();
    assert!(d.prefill().is_some());
    assert_eq!(d.kv_cache_source(), Some("127.0.0.1:8002"));
    d.finish(Completion::success(None));
}

#[test]
fn listed_in_a_profile_it_runs_once_and_loads() {
    // Upstream configs do not list producers in profiles; one that does still loads.
    let names = ["a", "b"];
    let listed = DECODE_ONLY.replace(
        "{pluginRef: only-b},",
        "{pluginRef: only-b}, {pluginRef: p2p-source-producer},",
    );
    let scheduler = rig(&config("", &listed, 1, &names), &names);
    seed(&scheduler, "a", "shared");
    let d = scheduler
        .schedule(&InferenceRequest::new("r", "m", prompt("shared")))
        .unwrap();
    assert_eq!(d.kv_cache_source(), Some("127.0.0.1:8000"));
    d.finish(Completion::success(None));
}
