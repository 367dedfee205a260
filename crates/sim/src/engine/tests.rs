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
        tokens: None,
    }
}

/// (id, cached prompt tokens) of every request that finished since the last drain.
fn cached_tokens_of_finished(engine: &mut Engine) -> Vec<(u64, u32)> {
    engine
        .drain_events()
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::Finished {
                id, cached_tokens, ..
            } => Some((id, cached_tokens)),
            _ => None,
        })
        .collect()
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
    let finished = cached_tokens_of_finished(&mut engine);
    // The whole prompt but the last block (at least one token is recomputed).
    assert_eq!(finished, vec![(1, 0), (2, 784)]);
}

#[test]
fn a_prefix_scheduled_in_a_step_is_reused_by_a_request_admitted_in_the_same_step() {
    let mut engine = Engine::new(EngineConfig {
        max_num_batched_tokens: 8192,
        ..small(1000)
    });
    engine.add_request(request(1, 800, 4, 7), 0).unwrap();
    engine.add_request(request(2, 800, 4, 7), 0).unwrap();
    let d = engine.begin_step(0).unwrap();
    // One step prefills request 1's 800 tokens and only the last block of request 2.
    let expected = engine.config().cost.step_nanos(&BatchShape {
        requests: 2,
        prefill_tokens: 800 + 16,
        prefill_pairs: 800.0 * 400.0 + 16.0 * (784.0 + 8.0),
        ..Default::default()
    });
    assert_eq!(d, expected);
    engine.finish_step(d);
    run_to_idle(&mut engine, d);
    let cached = cached_tokens_of_finished(&mut engine);
    assert_eq!(cached, vec![(1, 0), (2, 784)]);
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

mod kv_events {
    use std::collections::HashSet;
    use std::sync::Arc;

    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;
    use shepherd_scheduler_core::kv_events::{BlockStored, KvEvent};
    use xxhash_rust::xxh3::xxh3_64_with_seed;

    use super::{run_to_idle, small};
    use crate::engine::{Engine, EngineEvent, EngineRequest};
    use crate::workload::block_hashes;

    /// A request over `tokens` (prompt then output), hashed as the serve mode and the runner
    /// hash them.
    fn with_tokens(id: u64, tokens: Vec<u32>, output_len: u32) -> EngineRequest {
        EngineRequest {
            id,
            prompt_len: tokens.len() as u32 - output_len,
            output_len,
            block_hashes: block_hashes(&tokens, 16),
            tokens: Some(Arc::from(tokens)),
        }
    }

    /// `len` tokens of a prefix family, then tokens unique to `id`.
    fn tokens(family: u32, shared: usize, id: u64, len: usize) -> Vec<u32> {
        (0..len)
            .map(|i| {
                if i < shared {
                    family * 1_000_000 + i as u32
                } else {
                    (id as u32 + 1) * 10_000_000 + i as u32
                }
            })
            .collect()
    }

    fn drain(engine: &mut Engine) -> Vec<KvEvent> {
        let mut out = Vec::new();
        engine.drain_kv_events(&mut out);
        out
    }

    /// Checks what a `BlockStored` says of itself: its tokens rebuild its hashes from its
    /// parent, `block_size` tokens per block.
    fn assert_chained(stored: &BlockStored) {
        assert_eq!(stored.block_size, 16);
        assert_eq!(stored.medium.as_deref(), Some("GPU"));
        assert_eq!(stored.token_ids.len(), stored.block_hashes.len() * 16);
        let mut parent = stored.parent_block_hash.map_or(0, |h| h.0);
        for (block, hash) in stored.token_ids.chunks_exact(16).zip(&stored.block_hashes) {
            let bytes: Vec<u8> = block.iter().flat_map(|t| t.to_le_bytes()).collect();
            parent = xxh3_64_with_seed(&bytes, parent);
            assert_eq!(hash.0, parent);
        }
    }

    /// Applies `events` to `cached` as a subscriber would, checking that each store is of a
    /// hash not yet cached and each removal of a cached one.
    fn replay(cached: &mut HashSet<u64>, events: &[KvEvent]) -> Result<(), String> {
        for event in events {
            match event {
                KvEvent::BlockStored(stored) => {
                    assert_chained(stored);
                    for h in &stored.block_hashes {
                        if !cached.insert(h.0) {
                            return Err(format!("{h:?} stored twice"));
                        }
                    }
                }
                KvEvent::BlockRemoved(removed) => {
                    for h in &removed.block_hashes {
                        if !cached.remove(&h.0) {
                            return Err(format!("{h:?} removed but not cached"));
                        }
                    }
                }
                KvEvent::AllBlocksCleared => cached.clear(),
                KvEvent::Unknown(tag) => return Err(format!("unknown event {tag}")),
            }
        }
        Ok(())
    }

    fn assert_mirrors(engine: &Engine, cached: &HashSet<u64>) -> Result<(), String> {
        let pool = engine.block_pool();
        if cached.len() != pool.cached_blocks() {
            return Err(format!(
                "events say {} hashes are cached, the pool has {}",
                cached.len(),
                pool.cached_blocks()
            ));
        }
        match cached.iter().find(|&&h| pool.lookup(h).is_none()) {
            Some(h) => Err(format!("{h:#x} announced but not cached")),
            None => Ok(()),
        }
    }

    #[test]
    fn first_request_stores_its_blocks_and_a_sharer_only_its_own() {
        let mut engine = Engine::new(small(1000));
        engine.enable_kv_events();
        assert!(engine.kv_events_enabled());
        // 64 shared prompt tokens (4 blocks), 16 own, 4 output tokens.
        let a = with_tokens(1, tokens(7, 64, 1, 84), 4);
        let a_hashes = a.block_hashes.clone();
        engine.add_request(a, 0).unwrap();
        let now = run_to_idle(&mut engine, 0);
        let events = drain(&mut engine);
        // The prefill caches the prompt's 5 blocks in one event; the output never fills one.
        let [KvEvent::BlockStored(stored)] = events.as_slice() else {
            panic!("{events:?}");
        };
        assert_eq!(stored.parent_block_hash, None);
        let hashes: Vec<u64> = stored.block_hashes.iter().map(|h| h.0).collect();
        assert_eq!(hashes, a_hashes[..5]);
        assert_eq!(stored.token_ids, tokens(7, 64, 1, 80));
        assert_chained(stored);

        let b = with_tokens(2, tokens(7, 64, 2, 100), 4);
        let b_hashes = b.block_hashes.clone();
        assert_eq!(engine.cached_prefix_blocks(&b_hashes), 4);
        engine.add_request(b, now).unwrap();
        run_to_idle(&mut engine, now);
        let events = drain(&mut engine);
        let [KvEvent::BlockStored(stored)] = events.as_slice() else {
            panic!("{events:?}");
        };
        // Blocks 4 and 5 are new; their parent is the last shared block.
        assert_eq!(stored.parent_block_hash.map(|h| h.0), Some(a_hashes[3]));
        let hashes: Vec<u64> = stored.block_hashes.iter().map(|h| h.0).collect();
        assert_eq!(hashes, b_hashes[4..6]);
        assert_eq!(stored.token_ids, tokens(7, 64, 2, 96)[64..]);
        assert_eq!(engine.cached_prefix_blocks(&b_hashes), 6);
    }

    #[test]
    fn eviction_publishes_block_removed() {
        // Room for one request at a time: the second one evicts the first one's blocks.
        let mut engine = Engine::new(small(8));
        engine.enable_kv_events();
        let mut cached = HashSet::new();
        let a = with_tokens(1, tokens(1, 0, 1, 100), 4);
        let a_hashes = a.block_hashes.clone();
        engine.add_request(a, 0).unwrap();
        let now = run_to_idle(&mut engine, 0);
        replay(&mut cached, &drain(&mut engine)).unwrap();
        engine
            .add_request(with_tokens(2, tokens(2, 0, 2, 100), 4), now)
            .unwrap();
        run_to_idle(&mut engine, now);
        let events = drain(&mut engine);
        let removed: Vec<u64> = events
            .iter()
            .filter_map(|e| match e {
                KvEvent::BlockRemoved(r) => Some(r.block_hashes.iter().map(|h| h.0)),
                _ => None,
            })
            .flatten()
            .collect();
        // The second request takes 7 of the 8 blocks: the one never used, the first request's
        // partial tail block, then its cached blocks tail first (freed tail first), all but
        // the first.
        let expected: Vec<u64> = a_hashes[1..].iter().rev().copied().collect();
        assert_eq!(removed, expected);
        replay(&mut cached, &events).unwrap();
        assert_mirrors(&engine, &cached).unwrap();
        assert_eq!(engine.cached_prefix_blocks(&a_hashes), 1);
    }

    #[test]
    fn nothing_is_recorded_when_disabled() {
        let mut engine = Engine::new(small(8));
        assert!(!engine.kv_events_enabled());
        for id in 0..3 {
            engine
                .add_request(with_tokens(id, tokens(1, 0, id, 100), 4), 0)
                .unwrap();
        }
        run_to_idle(&mut engine, 0);
        assert!(engine.block_pool().evictions() > 0);
        assert!(engine.reset_prefix_cache());
        assert!(drain(&mut engine).is_empty());
    }

    #[test]
    fn a_request_without_tokens_is_cached_but_not_announced() {
        let mut engine = Engine::new(small(100));
        engine.enable_kv_events();
        let mut request = with_tokens(1, tokens(1, 0, 1, 100), 4);
        request.tokens = None;
        let hashes = request.block_hashes.clone();
        engine.add_request(request, 0).unwrap();
        run_to_idle(&mut engine, 0);
        assert!(drain(&mut engine).is_empty());
        assert_eq!(engine.cached_prefix_blocks(&hashes), 6);
    }

    #[test]
    fn reset_succeeds_only_when_no_block_is_in_use() {
        let mut engine = Engine::new(small(100));
        engine.enable_kv_events();
        let request = with_tokens(1, tokens(1, 0, 1, 100), 4);
        let hashes = request.block_hashes.clone();
        engine.add_request(request.clone(), 0).unwrap();
        let d = engine.begin_step(0).unwrap();
        assert!(
            !engine.reset_prefix_cache(),
            "a running request holds blocks"
        );
        engine.finish_step(d);
        assert!(!engine.reset_prefix_cache());
        assert!(!drain(&mut engine).contains(&KvEvent::AllBlocksCleared));
        let now = run_to_idle(&mut engine, d);
        assert_eq!(engine.cached_prefix_blocks(&hashes), 6);
        assert!(engine.reset_prefix_cache());
        assert_eq!(drain(&mut engine), vec![KvEvent::AllBlocksCleared]);
        assert_eq!(engine.cached_prefix_blocks(&hashes), 0);
        assert_eq!(engine.block_pool().cached_blocks(), 0);
        // The same prompt again: no hit, and its blocks are stored anew.
        engine.drain_events();
        engine
            .add_request(EngineRequest { id: 2, ..request }, now)
            .unwrap();
        run_to_idle(&mut engine, now);
        assert!(engine.drain_events().contains(&EngineEvent::Finished {
            id: 2,
            cached_tokens: 0,
            preemptions: 0
        }));
        let mut cached = HashSet::new();
        replay(&mut cached, &drain(&mut engine)).unwrap();
        assert_eq!(cached.len(), 6);
        assert_mirrors(&engine, &cached).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            rng_seed: RngSeed::Fixed(0x6b76_6576),
            ..ProptestConfig::default()
        })]

        /// Replaying the events into a set gives the pool's cached hashes after every step,
        /// whatever the mix of shared prefixes, KV pressure, aborts and resets.
        #[test]
        fn events_mirror_the_cache(
            reqs in proptest::collection::vec(
                (0u32..4, 0usize..200, 1usize..300, 1u32..40, 0u32..6),
                1..30,
            ),
            blocks in 20u32..120,
        ) {
            let mut engine = Engine::new(small(blocks));
            engine.enable_kv_events();
            let mut cached = HashSet::new();
            let mut now = 0;
            for (i, &(family, shared, own, output, _)) in reqs.iter().enumerate() {
                let len = shared + own + output as usize;
                let request = with_tokens(i as u64, tokens(family, shared, i as u64, len), output);
                let _ = engine.add_request(request, now);
            }
            let mut step = 0;
            while let Some(d) = engine.begin_step(now) {
                now += d;
                engine.finish_step(now);
                step += 1;
                let (_, _, _, _, action) = reqs[step % reqs.len()];
                if action == 0 {
                    engine.abort((step % reqs.len()) as u64);
                }
                if action == 1 {
                    let idle = engine.block_pool().used_blocks() == 0;
                    prop_assert_eq!(engine.reset_prefix_cache(), idle);
                }
                replay(&mut cached, &drain(&mut engine)).map_err(TestCaseError::fail)?;
                assert_mirrors(&engine, &cached).map_err(TestCaseError::fail)?;
                prop_assert!(step < 100_000);
            }
            prop_assert!(engine.reset_prefix_cache());
            replay(&mut cached, &drain(&mut engine)).map_err(TestCaseError::fail)?;
            prop_assert!(cached.is_empty());
            assert_mirrors(&engine, &cached).map_err(TestCaseError::fail)?;
        }
    }
}
