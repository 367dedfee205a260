//! The latency-pick setups shared by `benches/latency_pick.rs` and the profiling example
//! `examples/profile_latency_pick.rs`: 64 endpoints, one 16 KB prompt of Shepherd's docs held
//! by 8 of them, and the configurations compared (the default profile, with the
//! predicted-latency plugins added, their latency model trained). Every case's pool is
//! prepared the same way (the same 8 holders, the same 400 requests served among them, fresh
//! metrics), so the cases differ by their plugins alone.

use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::clock::Clock;

use shepherd_scheduler_core::completion::{Completion, Usage};
use shepherd_scheduler_core::config::{EndpointPickerConfig, build_scheduler_in};
use shepherd_scheduler_core::request::{InferenceRequest, SLO_TPOT_HEADER, SLO_TTFT_HEADER};
use shepherd_scheduler_core::scheduler::{ScheduleOptions, Scheduler};
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::latency::{LatencyFeatures, LatencyProducer};
use shepherd_scorers::{DEFAULT_CONFIG_YAML, builtin_registry};

use crate::docs_prompts::{completions, docs_text};
use crate::workload::{pool, scrape};

/// A dry-run `schedule` (filters, scorers, picker; no hooks).
pub const DRY: ScheduleOptions<'static> = ScheduleOptions {
    subset: None,
    profile: None,
    dry_run: true,
};
/// Endpoints in the pool.
pub const ENDPOINTS: usize = 64;
/// Endpoints holding the prompt's blocks.
pub const HOLDERS: usize = 8;

/// `yaml` with a `predicted-latency-producer` and `latency-scorer` (weight 5) added before its
/// picker, at the file's indentation; with `slo`, the tier filter and the admitter too.
pub fn with_latency(yaml: &str, slo: bool) -> String {
    let body = &yaml[yaml.find("apiVersion").unwrap_or(0)..];
    let mut out = String::new();
    for line in body.lines() {
        let indent = &line[..line.len() - line.trim_start().len()];
        match line.trim() {
            "- type: max-score-picker" => {
                out.push_str(&format!(
                    "{indent}- type: predicted-latency-producer\n\
                     {indent}  parameters: {{streamingMode: true, minSamples: 50}}\n\
                     {indent}- type: latency-scorer\n"
                ));
                if slo {
                    out.push_str(&format!(
                        "{indent}- type: slo-headroom-tier-filter\n{indent}- type: latency-slo-admitter\n"
                    ));
                }
            }
            "- pluginRef: max-score-picker" => {
                out.push_str(&format!(
                    "{indent}- pluginRef: latency-scorer\n{indent}  weight: 5\n"
                ));
                if slo {
                    out.push_str(&format!(
                        "{indent}- pluginRef: slo-headroom-tier-filter\n{indent}- pluginRef: latency-slo-admitter\n"
                    ));
                }
            }
            _ => {}
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The addresses of the [`HOLDERS`] endpoints that hold the prompt: one in every eight of
/// the pool's.
fn holders() -> Vec<String> {
    let (pool, _) = pool(ENDPOINTS);
    let snapshot = pool.snapshot();
    let all = snapshot.endpoints();
    (0..HOLDERS)
        .map(|h| all[h * ENDPOINTS / HOLDERS].address().to_owned())
        .collect()
}

/// A scheduler for `yaml` over 64 endpoints, prepared the same way whatever the profile, so
/// that the cases differ by their plugins alone: `request`'s prompt picked onto 8 of them
/// (one pick restricted to each), then 400 requests with that prompt served among those 8
/// (first token and end on the pool's clock; a latency model learns from them), then every
/// endpoint's metrics scraped afresh. With `has_model`, asserts that the config's latency
/// model is ready.
pub fn scheduler(yaml: &str, request: &InferenceRequest, has_model: bool) -> Scheduler {
    let (pool, clock) = pool(ENDPOINTS);
    let shared = SharedState::new(Arc::clone(&pool));
    let config = EndpointPickerConfig::from_yaml(yaml).expect("bench config");
    let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).expect("builds");
    let holders = holders();
    for holder in &holders {
        let only = std::slice::from_ref(holder);
        let on = ScheduleOptions {
            subset: Some(only),
            ..ScheduleOptions::default()
        };
        drop(scheduler.schedule_with(request, on));
    }
    let among_holders = ScheduleOptions {
        subset: Some(&holders),
        ..ScheduleOptions::default()
    };
    for i in 0..400u64 {
        let r = InferenceRequest::new(format!("t{i}"), "m", request.prompt.clone());
        let Ok(mut d) = scheduler.schedule_with(&r, among_holders) else {
            continue;
        };
        let waiting = u64::from(d.primary().metrics().waiting);
        let step = |ms: u64| clock.set(clock.now().saturating_add(Duration::from_millis(ms)));
        step(20 + 9 * waiting + i % 5);
        d.handle_mut().first_token();
        step(70);
        d.finish(Completion::success(Some(Usage {
            prompt_tokens: 4096,
            completion_tokens: 11,
            cached_tokens: None,
        })));
    }
    // Fresh metrics, as a scrape would leave them (the training moved the clock on).
    scrape(pool.snapshot().endpoints());
    if has_model {
        // The timed picks must use the model, not its neutral cold start.
        for (_, producer) in shared.resources.all::<LatencyProducer>() {
            let ready = producer
                .model()
                .predict(&LatencyFeatures::default())
                .ttft_ms;
            assert!(
                ready.is_some(),
                "the latency model is not ready: {:?}",
                producer.model().recent_errors()
            );
        }
    }
    scheduler
}

/// The timed request: a 16 KB prompt of the docs, carrying TTFT and TPOT objectives (read by
/// the SLO plugins only).
pub fn request() -> InferenceRequest {
    let mut request = completions(&docs_text(16 << 10));
    request.headers.push((SLO_TTFT_HEADER.into(), "200".into()));
    request.headers.push((SLO_TPOT_HEADER.into(), "50".into()));
    request
}

/// The simulator's `predicted-latency` policy file, its producer ready after 50 samples.
pub fn predicted_latency_policy() -> String {
    include_str!("../crates/sim/policies/predicted-latency.yaml").replace(
        "streamingMode: true",
        "streamingMode: true\n      minSamples: 50",
    )
}

/// `scheduler` with `count` requests whose TTFT objective is 5 s kept in flight for good on the
/// holders (their handles are forgotten, so they never complete): the tolerant work `slo-class-scorer` counts.
fn with_tolerant_in_flight(
    scheduler: Scheduler,
    request: &InferenceRequest,
    count: u64,
) -> Scheduler {
    // Among the holders, as the training was: no other endpoint gets the prompt.
    let holders = holders();
    let among_holders = ScheduleOptions {
        subset: Some(&holders),
        ..ScheduleOptions::default()
    };
    for i in 0..count {
        let mut r = InferenceRequest::new(format!("doc{i}"), "m", request.prompt.clone());
        r.headers.push((SLO_TTFT_HEADER.into(), "5000".into()));
        if let Ok(d) = scheduler.schedule_with(&r, among_holders) {
            std::mem::forget(d.into_handle());
        }
    }
    scheduler
}

/// The cases compared, by name: `default`, `default+latency`, `adaptive`,
/// `predicted-latency`, `default+slo` (see the bench's docs).
pub fn cases(request: &InferenceRequest) -> Vec<(&'static str, Scheduler)> {
    let adaptive = shepherd_adaptive::preset::ADAPTIVE_CONFIG_YAML;
    vec![
        ("default", scheduler(DEFAULT_CONFIG_YAML, request, false)),
        (
            "default+latency",
            scheduler(&with_latency(DEFAULT_CONFIG_YAML, false), request, true),
        ),
        ("adaptive", scheduler(adaptive, request, false)),
        (
            "predicted-latency",
            with_tolerant_in_flight(
                scheduler(&predicted_latency_policy(), request, true),
                request,
                8,
            ),
        ),
        (
            "default+slo",
            scheduler(&with_latency(DEFAULT_CONFIG_YAML, true), request, true),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case is timed on the same pool state, so that the cases differ by their plugins
    /// alone: the prompt held by exactly the 8 holders, and metrics fresh enough that the
    /// scorers reading them (queue, KV cache) do not fall back to neutral scores.
    #[test]
    fn every_case_is_timed_on_the_same_pool_state() {
        let request = request();
        for (name, scheduler) in cases(&request) {
            let decision = scheduler
                .schedule_with(&request, DRY)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let breakdown = &decision.breakdown;
            let scorers = breakdown.scorers();
            let prefix = scorers
                .iter()
                .position(|c| c.name.contains("prefix"))
                .unwrap_or_else(|| panic!("{name}: no prefix scorer in {scorers:?}"));
            let holding = (0..breakdown.len())
                .filter(|&i| breakdown.score(prefix, i).is_some_and(|s| s.value > 0.0))
                .count();
            assert_eq!(holding, HOLDERS, "{name}");
            let scraped = scorers
                .iter()
                .enumerate()
                .filter(|(_, c)| c.name.contains("queue") || c.name.contains("kv-cache"));
            for (s, column) in scraped {
                for i in 0..breakdown.len() {
                    let score = breakdown.score(s, i);
                    assert!(
                        score.is_some_and(|s| !s.neutral),
                        "{name}: {} neutral on candidate {i}",
                        column.name
                    );
                }
            }
        }
    }
}
