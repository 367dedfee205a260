#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::producers::PrefixProducer;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use std::time::Duration;

fn parse(json: serde_json::Value) -> Result<PrefixCacheParameters, String> {
    serde_json::from_value(json).map_err(|e| e.to_string())
}

fn scorer(block_size: usize) -> PrefixCacheScorer {
    PrefixCacheScorer::new(&PrefixCacheParameters {
        block_size: Some(block_size),
        ..Default::default()
    })
    .unwrap()
}

fn request(prompt: &str, lora: Option<&str>) -> InferenceRequest {
    let mut r = InferenceRequest::new("r", "model", Prompt::Text(prompt.into()));
    r.lora = lora.map(str::to_string);
    r
}

/// Scores `request` over the pool, then picks `pick` (when given); returns the scores.
fn schedule(
    scorer: &PrefixCacheScorer,
    pool: &Pool,
    request: &InferenceRequest,
    pick: Option<usize>,
) -> Vec<f64> {
    let snapshot = pool.snapshot();
    let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
    let mut out = vec![Score::NEUTRAL; candidates.len()];
    let mut cycle = CycleState::new(request, Timestamp::ZERO, Duration::from_millis(200));
    scorer.score(&mut cycle, &candidates, &mut out);
    if let Some(i) = pick {
        scorer.on_pick(&mut cycle, candidates[i]);
    }
    out.iter().map(|s| s.value).collect()
}

fn pool(n: usize) -> Pool {
    let pool = Pool::new();
    pool.set_members((0..n).map(|i| format!("10.0.0.{i}:8000")));
    pool
}

#[test]
fn the_picked_endpoint_scores_its_prefix_next_time() {
    let scorer = scorer(4); // 16-byte blocks
    let pool = pool(2);
    let first = request(&"a".repeat(64), None);
    assert_eq!(schedule(&scorer, &pool, &first, Some(1)), vec![0.0, 0.0]);
    let second = request(&format!("{}{}", "a".repeat(64), "b".repeat(64)), None);
    assert_eq!(schedule(&scorer, &pool, &second, None), vec![0.0, 0.5]);
    assert_eq!(schedule(&scorer, &pool, &first, None), vec![0.0, 1.0]);
}

#[test]
fn adapters_do_not_share_prefixes() {
    let scorer = scorer(4);
    let pool = pool(1);
    schedule(
        &scorer,
        &pool,
        &request(&"a".repeat(64), Some("x")),
        Some(0),
    );
    assert_eq!(
        schedule(&scorer, &pool, &request(&"a".repeat(64), None), None),
        vec![0.0]
    );
    assert_eq!(
        schedule(&scorer, &pool, &request(&"a".repeat(64), Some("x")), None),
        vec![1.0]
    );
}

#[test]
fn the_pick_hook_sizes_memory_from_metrics() {
    let scorer = scorer(4);
    let pool = pool(1);
    let endpoint = Arc::clone(&pool.snapshot().endpoints()[0]);
    endpoint.set_metrics(EndpointMetrics {
        num_gpu_blocks: Some(3),
        block_size: Some(8),
        ..Default::default()
    });
    schedule(&scorer, &pool, &request(&"c".repeat(200), None), Some(0));
    // 3 server blocks of 8 tokens = 24 tokens = 6 index blocks of 4 tokens.
    assert_eq!(scorer.index().capacity_of(endpoint.id()), Some(6));
    assert_eq!(scorer.index().endpoint_entries(endpoint.id()), 6);
}

#[test]
fn endpoints_leaving_the_pool_are_forgotten() {
    let pool = Arc::new(pool(2));
    let shared = shepherd_scheduler_core::shared::SharedState::new(Arc::clone(&pool));
    let parameters = serde_json::json!({"blockSize": 4});
    let args = PluginArgs::new("p", TYPE_NAME, &parameters, &shared, 0);
    let plugin = factory(&args).unwrap();
    pool.add_listener(plugin.as_membership_listener().unwrap());
    let scorer = plugin.as_scorer().unwrap();
    let hook = plugin.as_pick_hook().unwrap();
    let snapshot = pool.snapshot();
    let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
    let req = request(&"d".repeat(64), None);
    for picked in &candidates {
        let mut cycle = CycleState::new(&req, Timestamp::ZERO, Duration::ZERO);
        let mut out = vec![Score::NEUTRAL; 2];
        scorer.score(&mut cycle, &candidates, &mut out);
        hook.on_pick(&mut cycle, picked);
    }
    let mut cycle = CycleState::new(&req, Timestamp::ZERO, Duration::ZERO);
    let mut out = vec![Score::NEUTRAL; 2];
    scorer.score(&mut cycle, &candidates, &mut out);
    assert_eq!(
        out.iter().map(|s| s.value).collect::<Vec<_>>(),
        vec![1.0, 1.0]
    );
    assert!(pool.remove("10.0.0.0:8000"));
    let mut cycle = CycleState::new(&req, Timestamp::ZERO, Duration::ZERO);
    let mut out = vec![Score::NEUTRAL; 2];
    scorer.score(&mut cycle, &candidates, &mut out);
    assert_eq!(out[0].value, 0.0);
    assert_eq!(out[1].value, 1.0);
}

proptest::proptest! {
    #[test]
    fn scores_stay_in_range(
        prompts in proptest::collection::vec(("[ab]{0,200}", 0usize..3), 1..20),
    ) {
        let scorer = scorer(2);
        let pool = pool(3);
        for (text, pick) in prompts {
            let scores = schedule(&scorer, &pool, &request(&text, None), Some(pick));
            proptest::prop_assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)));
        }
    }
}

#[test]
fn gateway_parameter_names_are_accepted() {
    let p = parse(serde_json::json!({
        "blockSize": 16, "maxPrefixBlocksToMatch": 10, "lruCapacityPerServer": 5, "autoTune": false
    }))
    .unwrap();
    assert_eq!(p.block_size, Some(16));
    assert_eq!(p.max_prefix_blocks_to_match, Some(10));
    assert_eq!(p.lru_capacity_per_server, Some(5));
    assert_eq!(p.auto_tune, Some(false));
    assert!(p.is_all_in_one());
    assert_eq!(
        parse(serde_json::json!({"hashBlockSize": 8}))
            .unwrap()
            .block_size,
        Some(8)
    );
    assert_eq!(
        parse(serde_json::json!({"blockSizeTokens": 32}))
            .unwrap()
            .block_size,
        Some(32)
    );
    assert_eq!(
        parse(serde_json::json!({})).unwrap(),
        PrefixCacheParameters::default()
    );
}

#[test]
fn bad_parameters_are_errors() {
    assert!(parse(serde_json::json!({"blockSise": 16})).is_err());
    assert!(parse(serde_json::json!({"blockSize": -1})).is_err());
    let zero = parse(serde_json::json!({"blockSize": 0})).unwrap();
    assert!(PrefixCacheScorer::new(&zero).is_err());
    let zero = parse(serde_json::json!({"lruCapacityPerServer": 0})).unwrap();
    assert!(PrefixCacheScorer::new(&zero).is_err());
}

#[test]
fn the_formula_mixes_ratio_and_squared_length_as_upstream() {
    let ratio_only = MatchFormula::default();
    assert_eq!(ratio_only.score(3, 4, 64), 0.75);
    assert_eq!(ratio_only.score(0, 0, 64), 0.0);
    let mixed = MatchFormula {
        match_length_weight: 0.5,
        match_length_scale_tokens: 16384.0,
    };
    // 64 blocks × 64 tokens = 4096 of 16384 tokens: length term (1/4)² = 1/16.
    let expected = 0.5 * (1.0 / 16.0) + 0.5 * (64.0 / 128.0);
    assert!((mixed.score(64, 128, 64) - expected).abs() < 1e-12);
    // Longer than the scale: the length term saturates at 1.
    assert!((mixed.score(512, 512, 64) - 1.0).abs() < 1e-12);
}

#[test]
fn the_formula_parameters_are_checked() {
    let p = parse(serde_json::json!({"matchLengthWeight": 1.5})).unwrap();
    assert!(p.formula().is_err());
    let p =
        parse(serde_json::json!({"matchLengthWeight": 0.5, "matchLengthScaleTokens": 0})).unwrap();
    assert!(p.formula().is_err());
    let p = parse(serde_json::json!({"matchLengthScaleTokens": 0})).unwrap();
    assert!(
        p.formula().is_ok(),
        "unused when the weight is 0, as upstream"
    );
    let p =
        parse(serde_json::json!({"prefixMatchInfoProducerName": "p", "blockSize": 16})).unwrap();
    let shared = shepherd_scheduler_core::shared::SharedState::new(Arc::new(Pool::new()));
    let json = serde_json::to_value(serde_json::json!({"prefixMatchInfoProducerName": p.prefix_match_info_producer_name, "blockSize": 16})).unwrap();
    assert!(factory(&PluginArgs::new("s", TYPE_NAME, &json, &shared, 0)).is_err());
}

fn build(
    yaml: &str,
) -> (
    shepherd_scheduler_core::shared::SharedState,
    shepherd_scheduler_core::scheduler::Scheduler,
) {
    use shepherd_scheduler_core::config::{EndpointPickerConfig, build_scheduler_in};
    let shared = shepherd_scheduler_core::shared::SharedState::new(Arc::new(pool(3)));
    let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
    let scheduler = build_scheduler_in(&config, &crate::builtin_registry(), &shared).unwrap();
    (shared, scheduler)
}

#[test]
fn a_scorer_listed_before_its_producer_reads_the_producer() {
    let (shared, scheduler) = build(
        "
plugins:
- type: prefix-cache-scorer
  parameters:
    prefixMatchInfoProducerName: big
- name: big
  type: approx-prefix-cache-producer
  parameters:
    blockSizeTokens: 128
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
",
    );
    let prompt = Prompt::Text("z".repeat(4 * 128 * 4)); // 4 blocks of 128 tokens
    let first = scheduler
        .schedule(&InferenceRequest::new("a", "m", prompt.clone()))
        .unwrap();
    let producer = shared.resources.get::<PrefixProducer>("big").unwrap();
    assert_eq!(producer.index().config().layout.block_tokens(), 128);
    assert_eq!(producer.index().entries(), 4, "recorded once");
    let again = scheduler
        .schedule(&InferenceRequest::new("b", "m", prompt))
        .unwrap();
    assert_eq!(again.primary().address(), first.primary().address());
    assert!(
        shared
            .resources
            .get::<PrefixIndex>("prefix-cache-scorer")
            .is_none()
    );
}

#[test]
fn a_bare_scorer_uses_a_declared_default_producer_else_its_own_index() {
    let with_producer = "
plugins:
- type: approx-prefix-cache-producer
- type: prefix-cache-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
";
    let (shared, scheduler) = build(with_producer);
    let prompt = Prompt::Text("q".repeat(64 * 4 * 3));
    drop(
        scheduler
            .schedule(&InferenceRequest::new("a", "m", prompt.clone()))
            .unwrap(),
    );
    let producer = shared
        .resources
        .get::<PrefixProducer>(approx_prefix::TYPE_NAME)
        .unwrap();
    assert_eq!(producer.index().entries(), 3);
    let own = shared.resources.get::<PrefixIndex>(TYPE_NAME).unwrap();
    assert_eq!(own.entries(), 0);

    let (shared, scheduler) =
        build(&with_producer.replace("- type: approx-prefix-cache-producer\n", ""));
    drop(
        scheduler
            .schedule(&InferenceRequest::new("a", "m", prompt))
            .unwrap(),
    );
    let own = shared.resources.get::<PrefixIndex>(TYPE_NAME).unwrap();
    assert_eq!(own.entries(), 3);
}
