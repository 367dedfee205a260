//! The LoRA affinity scorer and filter.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::endpoint::LoraState;
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::filters::{LoraAffinityFilter, LoraAffinityFilterParameters};
use shepherd_scorers::scorers::LoraAffinityScorer;

use common::{STALENESS, endpoint, fresh, request, score};

fn with_lora(running: &[&str], waiting: &[&str], max_loras: u32) -> EndpointMetrics {
    EndpointMetrics {
        lora: LoraState {
            running: running.iter().map(|s| s.to_string()).collect(),
            waiting: waiting.iter().map(|s| s.to_string()).collect(),
            max_loras,
        },
        ..fresh(0, 0, 0.0)
    }
}

fn lora_request(adapter: Option<&str>) -> InferenceRequest {
    let mut req = request("r");
    req.lora = adapter.map(str::to_string);
    req
}

/// Endpoints: 0 runs `sql`; 1 has room; 2 waits for `sql` and is full; 3 is full of others.
fn endpoints() -> Vec<Arc<Endpoint>> {
    vec![
        endpoint(0, with_lora(&["sql", "chat"], &[], 2)),
        endpoint(1, with_lora(&["chat"], &[], 4)),
        endpoint(2, with_lora(&["chat"], &["sql"], 1)),
        endpoint(3, with_lora(&["chat", "code"], &[], 2)),
    ]
}

#[test]
fn scorer_tiers() {
    let scores = score(
        &LoraAffinityScorer,
        &lora_request(Some("sql")),
        &endpoints(),
    );
    let values: Vec<f64> = scores.iter().map(|s| s.value).collect();
    assert_eq!(values, vec![1.0, 0.8, 0.6, 0.0]);
    assert!(scores.iter().all(|s| !s.neutral));
}

#[test]
fn scorer_without_adapter_has_no_preference() {
    let scores = score(&LoraAffinityScorer, &lora_request(None), &endpoints());
    assert!(scores.iter().all(|s| *s == Score::new(1.0)));
}

#[test]
fn scorer_unknown_max_loras_means_no_room() {
    let eps = vec![endpoint(0, with_lora(&[], &[], 0))];
    let scores = score(&LoraAffinityScorer, &lora_request(Some("sql")), &eps);
    assert_eq!(scores, vec![Score::new(0.0)]);
}

#[test]
fn scorer_is_neutral_on_stale_metrics() {
    let eps = vec![shepherd_test_util::endpoint_scraped_at(
        0,
        with_lora(&["sql"], &[], 2),
        None,
    )];
    assert_eq!(
        score(&LoraAffinityScorer, &lora_request(Some("sql")), &eps),
        vec![Score::NEUTRAL]
    );
}

fn filtered(
    filter: &LoraAffinityFilter,
    req: &InferenceRequest,
    eps: &[Arc<Endpoint>],
) -> Vec<u32> {
    let mut candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
    let mut cycle = CycleState::new(req, Timestamp::ZERO, STALENESS);
    filter.filter(&mut cycle, &mut candidates);
    candidates.iter().map(|e| e.id().0).collect()
}

#[test]
fn filter_keeps_running_else_room_else_all() {
    let filter = LoraAffinityFilter::default();
    let eps = endpoints();
    assert_eq!(filtered(&filter, &lora_request(Some("sql")), &eps), vec![0]);
    // Nobody runs `code-v2`: those with room.
    assert_eq!(
        filtered(&filter, &lora_request(Some("code-v2")), &eps),
        vec![1]
    );
    // Nobody runs it and nobody has room: everyone stays.
    let full = vec![
        endpoint(0, with_lora(&["a"], &[], 1)),
        endpoint(1, with_lora(&["b"], &[], 1)),
    ];
    assert_eq!(
        filtered(&filter, &lora_request(Some("sql")), &full),
        vec![0, 1]
    );
    // No adapter: untouched.
    assert_eq!(
        filtered(&filter, &lora_request(None), &eps),
        vec![0, 1, 2, 3]
    );
}

#[test]
fn filter_does_not_trust_stale_metrics() {
    // At t = 1 s the first endpoint's scrape (at 0) is stale; the second is fresh.
    let eps = [
        shepherd_test_util::endpoint_scraped_at(
            0,
            with_lora(&["sql"], &[], 2),
            Some(Timestamp::ZERO),
        ),
        shepherd_test_util::endpoint_scraped_at(
            1,
            with_lora(&[], &[], 2),
            Some(Timestamp::from_millis(1_000)),
        ),
    ];
    let req = lora_request(Some("sql"));
    let mut candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
    let mut cycle = CycleState::new(
        &req,
        Timestamp::from_millis(1_000),
        Duration::from_millis(200),
    );
    LoraAffinityFilter::default().filter(&mut cycle, &mut candidates);
    let kept: Vec<u32> = candidates.iter().map(|e| e.id().0).collect();
    assert_eq!(kept, vec![1]);
}

#[test]
fn filter_threshold_sends_a_share_to_endpoints_with_room() {
    let filter =
        LoraAffinityFilter::new(LoraAffinityFilterParameters { threshold: 0.75 }, 7).unwrap();
    let eps = endpoints();
    let mut to_running = 0;
    for i in 0..2_000 {
        let mut req = lora_request(Some("sql"));
        req.id = format!("req-{i}");
        let kept = filtered(&filter, &req, &eps);
        assert!(kept == vec![0] || kept == vec![1], "{kept:?}");
        // Deterministic: the same request gets the same answer.
        assert_eq!(kept, filtered(&filter, &req, &eps));
        to_running += usize::from(kept == vec![0]);
    }
    assert!(
        (1_400..=1_600).contains(&to_running),
        "{to_running} of 2000"
    );
}

#[test]
fn filter_through_the_scheduler() {
    let config = EndpointPickerConfig::from_yaml(
        "
plugins:
- type: lora-affinity-filter
- type: lora-affinity-scorer
- type: queue-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: lora-affinity-filter
  - pluginRef: lora-affinity-scorer
  - pluginRef: queue-scorer",
    )
    .unwrap();
    let (pool, members) = common::pool(3);
    members[0].set_metrics(with_lora(&["chat"], &[], 1));
    members[1].set_metrics(EndpointMetrics {
        waiting: 50,
        ..with_lora(&["sql"], &[], 1)
    });
    members[2].set_metrics(with_lora(&["sql"], &[], 1));
    let scheduler = build_scheduler(&config, &shepherd_scorers::builtin_registry(), pool).unwrap();
    let decision = scheduler.schedule(&lora_request(Some("sql"))).unwrap();
    assert_eq!(decision.primary().address(), "127.0.0.1:8002");
    assert_eq!(
        decision.breakdown.rows().len(),
        2,
        "the chat-only endpoint was filtered out"
    );
}
