use proptest::prelude::*;

use super::*;

fn small(blocks: u32) -> EngineConfig {
    EngineConfig {
        num_gpu_blocks: blocks,
        max_num_seqs: 8,
        max_num_batched_tokens: 256,
        ..EngineConfig::h100_llama8b()
    }
}

fn request(id: u64, prompt_len: u32, output_len: u32, prefix: u64) -> EngineRequest {
    let blocks = (prompt_len + output_len) / 16;
    // Blocks of the prompt share `prefix`; output blocks are unique to the request.
    let prompt_blocks = prompt_len / 16;
    let block_hashes = (0..blocks)
        .map(|b| {
            if b < prompt_blocks {
                prefix.wrapping_mul(1_000_003) + u64::from(b)
            } else {
                (id << 32) + u64::from(b)
            }
        })
        .collect();
    EngineRequest {
        id,
        prompt_len,
        output_len,
        block_hashes,
    }
}

fn run_to_idle(engine: &mut Engine, mut now: u64) -> u64 {
    while let Some(d) = engine.begin_step(now) {
        now += d;
        engine.finish_step(now);
    }
    now
}

#[test]
fn lone_request_ttft_equals_the_cost_model() {
    let config = EngineConfig::h100_llama8b();
    let mut engine = Engine::new(config);
    engine.add_request(request(1, 3000, 5, 9), 0).unwrap();
    let d = engine.begin_step(0).unwrap();
    let expected = config.cost.step_nanos(&BatchShape {
        requests: 1,
        prefill_tokens: 3000,
        prefill_pairs: 3000.0 * 1500.0,
        ..Default::default()
    });
    assert_eq!(d, expected);
    engine.finish_step(d);
    assert_eq!(
        engine.drain_events(),
        vec![
            EngineEvent::Scheduled { id: 1 },
            EngineEvent::FirstToken { id: 1 }
        ]
    );
}

#[test]
fn long_prompt_is_prefilled_in_chunks() {
    let config = EngineConfig::h100_llama8b();
    let mut engine = Engine::new(config);
    engine.add_request(request(1, 10_000, 2, 9), 0).unwrap();
    let first = engine.begin_step(0).unwrap();
    engine.finish_step(first);
    assert!(
        !engine
            .drain_events()
            .contains(&EngineEvent::FirstToken { id: 1 })
    );
    let second = engine.begin_step(first).unwrap();
    engine.finish_step(first + second);
    assert!(
        engine
            .drain_events()
            .contains(&EngineEvent::FirstToken { id: 1 })
    );
}

#[test]
fn repeated_identical_prompt_hits_the_cache() {
    let mut engine = Engine::new(small(1000));
    engine.add_request(request(1, 800, 4, 7), 0).unwrap();
    let now = run_to_idle(&mut engine, 0);
    engine.add_request(request(2, 800, 4, 7), now).unwrap();
    run_to_idle(&mut engine, now);
    let finished: Vec<_> = engine
        .drain_events()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::Finished {
                id, cached_tokens, ..
            } => Some((id, cached_tokens)),
            _ => None,
        })
        .collect();
    // The whole prompt but the last block (at least one token is recomputed).
    assert_eq!(finished, vec![(1, 0), (2, 784)]);
}

#[test]
fn prompt_that_can_never_fit_is_refused() {
    let mut engine = Engine::new(small(10));
    let err = engine.add_request(request(1, 400, 4, 1), 0).unwrap_err();
    assert!(matches!(err, EngineError::TooLong { .. }));
}

#[test]
fn kv_pressure_preempts_and_everything_still_finishes() {
    let mut engine = Engine::new(small(40));
    for id in 0..6 {
        engine.add_request(request(id, 200, 200, id), 0).unwrap();
    }
    run_to_idle(&mut engine, 0);
    let done = engine
        .drain_events()
        .iter()
        .filter(|e| matches!(e, EngineEvent::Finished { .. }))
        .count();
    assert_eq!(done, 6);
    assert!(engine.stats().preemptions > 0);
    assert_eq!(engine.block_pool().free_blocks(), 40);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Allocated + free = total after every step, whatever the mix of requests and aborts.
    #[test]
    fn kv_blocks_are_conserved(
        reqs in proptest::collection::vec((1u32..300, 1u32..60, 0u64..4, 0u32..5), 1..30),
        blocks in 30u32..120,
    ) {
        let mut engine = Engine::new(small(blocks));
        let mut now = 0;
        for (i, &(p, o, prefix, _)) in reqs.iter().enumerate() {
            let _ = engine.add_request(request(i as u64, p, o, prefix), now);
        }
        let mut step = 0;
        while let Some(d) = engine.begin_step(now) {
            now += d;
            engine.finish_step(now);
            step += 1;
            if let Some(&(_, _, _, abort)) = reqs.get(step % reqs.len()) && abort == 0 {
                engine.abort((step % reqs.len()) as u64);
            }
            let (used, queued) = engine.block_pool().audit();
            prop_assert_eq!(used + queued, blocks as usize);
            prop_assert_eq!(queued, engine.block_pool().free_blocks());
            prop_assert!(step < 100_000);
        }
        prop_assert!(!engine.has_work());
        prop_assert_eq!(engine.block_pool().free_blocks(), blocks as usize);
    }
}
