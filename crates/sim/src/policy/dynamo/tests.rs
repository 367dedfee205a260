#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Dynamo's cost and bookkeeping on hand-built states, against numbers worked out from
//! upstream's formulas.

use std::sync::Arc;

use shepherd_scheduler_core::clock::ManualClock;
use shepherd_scheduler_core::completion::Completion;
use shepherd_scheduler_core::config::{EndpointPickerConfig, build_scheduler_in};
use shepherd_scheduler_core::endpoint::{EndpointId, Pool};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scheduler_core::shared::SharedState;

use super::cost::{Weights, WorkerInputs, effective_prefill_tokens, worker_logit};
use super::sequences::ActiveSequences;
use crate::policy::{EngineFeed, FEED_NAME, sim_registry};

const W: EndpointId = EndpointId(1);

#[test]
fn a_prompt_block_shared_by_active_requests_counts_once() {
    let mut seq = ActiveSequences::default();
    // Chained hashes: B shares A's first two blocks, then differs.
    seq.add("a", W, vec![1, 2, 3], 0);
    seq.add("b", W, vec![1, 2, 5], 0);
    assert_eq!(seq.active_blocks(W), 4); // 1, 2, 3, 5
    // C = [1, 2, 3, 6, 7]: three blocks already active, two new: 4 + 2.
    let p = seq.project(W, &[1, 2, 3, 6, 7]);
    assert_eq!(p.potential_decode_blocks, 6);
    assert_eq!(p.active_requests, 2);
    // A worker with nothing active: the whole prompt.
    assert_eq!(
        seq.project(EndpointId(9), &[1, 2, 3])
            .potential_decode_blocks,
        3
    );
    seq.free("a");
    assert_eq!(seq.active_blocks(W), 3); // 1, 2, 5 still held by B
    seq.free("b");
    assert_eq!(seq.active_blocks(W), 0);
}

#[test]
fn pending_prefill_leaves_at_the_first_token() {
    let mut seq = ActiveSequences::default();
    // 1000 prompt tokens, 10 blocks of 16 cached on the worker: 840 left to prefill.
    let pending = effective_prefill_tokens(1000, 10, 16);
    assert_eq!(pending, 840);
    seq.add("r", W, vec![1, 2], pending);
    seq.add("s", W, vec![9], 100);
    assert_eq!(seq.project(W, &[]).active_prefill_tokens, 940);
    seq.prefill_done("r");
    assert_eq!(seq.project(W, &[]).active_prefill_tokens, 100);
    seq.prefill_done("r"); // twice: nothing more
    assert_eq!(seq.project(W, &[]).active_prefill_tokens, 100);
    // The blocks stay until the request ends.
    assert_eq!(seq.active_blocks(W), 3);
    // A request that ends before its first token releases its prefill too.
    seq.free("s");
    assert_eq!(seq.project(W, &[]).active_prefill_tokens, 0);
    // More cached than the prompt: nothing to prefill.
    assert_eq!(effective_prefill_tokens(100, 10, 16), 0);
}

#[test]
fn the_logit_is_prefill_blocks_after_credit_plus_potential_decode_blocks() {
    let w = Weights::default();
    let worker = WorkerInputs {
        active_prefill_tokens: 840,
        potential_decode_blocks: 100,
        active_requests: 3,
        overlap_blocks: 15,
    };
    // (840 + 320) / 16 = 72.5 prefill blocks, 15 credited, + 100 decode blocks.
    assert_eq!(worker_logit(&w, 320, 0, &worker), 157.5);
    // prefillLoadScale scales the prefill term only.
    let scaled = Weights {
        prefill_load_scale: 2.0,
        ..w
    };
    assert_eq!(worker_logit(&scaled, 320, 0, &worker), 215.0);
    // The active-request term (weight 0 by default).
    let per_request = Weights {
        decode_active_request_weight: 2.0,
        ..w
    };
    assert_eq!(worker_logit(&per_request, 320, 0, &worker), 163.5);
    // Credit beyond the prefill work clamps the prefill term at 0.
    let cached = WorkerInputs {
        active_prefill_tokens: 0,
        overlap_blocks: 40,
        ..worker
    };
    assert_eq!(worker_logit(&w, 320, 0, &cached), 100.0);
    // overlapScoreCredit 0 ignores the cache.
    let blind = Weights {
        overlap_score_credit: 0.0,
        ..w
    };
    assert_eq!(worker_logit(&blind, 320, 0, &worker), 172.5);
}

#[test]
fn the_credit_decays_with_excess_pending_prefill() {
    let w = Weights {
        overlap_score_credit_decay: 1.0,
        ..Weights::default()
    };
    let worker = WorkerInputs {
        active_prefill_tokens: 840,
        potential_decode_blocks: 100,
        active_requests: 0,
        overlap_blocks: 15,
    };
    // Excess 840 / 16 = 52.5 blocks over a 20-block request: decay 1 / (1 + 2.625).
    let credit = 15.0 / 3.625;
    let expected = 72.5 - credit + 100.0;
    assert!((worker_logit(&w, 320, 0, &worker) - expected).abs() < 1e-9);
    // At the least-loaded worker's level, the full credit.
    assert_eq!(worker_logit(&w, 320, 840, &worker), 157.5);
}

const DYNAMO: &str = "
plugins:
  - type: dynamo-kv-cost-scorer
  - type: max-score-picker
schedulingProfiles:
  - name: default
    plugins:
      - pluginRef: dynamo-kv-cost-scorer
      - pluginRef: max-score-picker
";

#[test]
fn the_scheduler_routes_by_engine_cache_and_releases_prefill_at_first_token() {
    let clock = Arc::new(ManualClock::default());
    let pool = Arc::new(Pool::with_clock(clock));
    let a = pool.add("10.0.0.1:8000");
    let b = pool.add("10.0.0.2:8000");
    let shared = SharedState::new(Arc::clone(&pool));
    let feed = Arc::new(EngineFeed::default());
    shared.resources.insert(FEED_NAME, Arc::clone(&feed));
    let config = EndpointPickerConfig::from_yaml(DYNAMO).unwrap();
    let scheduler = build_scheduler_in(&config, &sim_registry(), &shared).unwrap();
    assert!(feed.wants_cached_blocks() && feed.wants_first_tokens());

    let prompt = |seed: u32| Prompt::Tokens((0..320).map(|i| i * 7 + seed).collect());
    // B's engine caches 10 of the 20 prompt blocks: cost 20 − 10 + 20 = 30 vs A's 40.
    let r1 = InferenceRequest::new("r1", "m", prompt(1));
    feed.publish_cached_blocks("r1", [(b.id(), 10)]);
    let mut d1 = scheduler.schedule(&r1).unwrap();
    assert_eq!(d1.primary().id(), b.id());

    // A different prompt, nothing cached: B now carries 320 − 160 = 160 pending tokens and
    // 20 active blocks, so A (20 + 20 = 40) beats B ((160 + 320)/16 + 40 = 70).
    let r2 = InferenceRequest::new("r2", "m", prompt(2));
    let d2 = scheduler.schedule(&r2).unwrap();
    assert_eq!(d2.primary().id(), a.id());

    // B's first token: its pending prefill leaves, its 20 blocks stay. A third prompt: A,
    // whose r2 is still pending (320 tokens), costs (320 + 320)/16 + 40 = 80; B costs
    // 320/16 + 40 = 60.
    d1.handle_mut().first_token();
    feed.first_token("r1");
    let r3 = InferenceRequest::new("r3", "m", prompt(3));
    let d3 = scheduler.schedule(&r3).unwrap();
    assert_eq!(d3.primary().id(), b.id());

    // Once r2 and r3 end, B still holds r1 (20 blocks) and A nothing: A wins.
    d2.finish(Completion::success(None));
    d3.finish(Completion::success(None));
    let r4 = InferenceRequest::new("r4", "m", prompt(4));
    let d4 = scheduler.schedule(&r4).unwrap();
    assert_eq!(d4.primary().id(), a.id());
    d1.finish(Completion::success(None));
    d4.finish(Completion::success(None));
}
