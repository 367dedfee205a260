#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use proptest::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use super::*;
use crate::kv_events::EngineBlockHash;
use crate::request::Prompt;

const BLOCK: usize = 4;

/// Documents: token sequences of whole blocks; the first two share their first two blocks.
fn documents() -> Vec<Vec<u32>> {
    let shared: Vec<u32> = (0..2 * BLOCK as u32).collect();
    let mut docs = Vec::new();
    for d in 0..4u32 {
        let mut tokens = if d < 2 { shared.clone() } else { Vec::new() };
        while tokens.len() < 6 * BLOCK {
            tokens.push(1000 * (d + 1) + tokens.len() as u32);
        }
        docs.push(tokens);
    }
    docs
}

/// The engine's hash of block `i` of `tokens`: a hash of the whole prefix up to its end.
fn engine_hash(tokens: &[u32], i: usize) -> u64 {
    let bytes: Vec<u8> = tokens[..(i + 1) * BLOCK]
        .iter()
        .flat_map(|t| t.to_le_bytes())
        .collect();
    xxh3_64(&bytes)
}

fn config() -> PreciseIndexConfig {
    PreciseIndexConfig {
        block_tokens: BLOCK,
        max_blocks: 64,
        default_capacity: 1000,
    }
}

fn stored(tokens: &[u32], from: usize, to: usize) -> KvEvent {
    KvEvent::BlockStored(BlockStored {
        block_hashes: (from..to)
            .map(|i| EngineBlockHash(engine_hash(tokens, i)))
            .collect(),
        parent_block_hash: from
            .checked_sub(1)
            .map(|p| EngineBlockHash(engine_hash(tokens, p))),
        token_ids: tokens[from * BLOCK..to * BLOCK].to_vec(),
        block_size: BLOCK as u32,
        ..BlockStored::default()
    })
}

fn removed(hashes: &[u64]) -> KvEvent {
    KvEvent::BlockRemoved(BlockRemoved {
        block_hashes: hashes.iter().map(|&h| EngineBlockHash(h)).collect(),
        ..BlockRemoved::default()
    })
}

fn batch(events: Vec<KvEvent>) -> KvEventBatch {
    KvEventBatch {
        events,
        ..KvEventBatch::default()
    }
}

fn matched(
    precise: &PreciseIndex,
    endpoint: EndpointId,
    tokens: &[u32],
    lora: Option<&str>,
) -> usize {
    let prompt = Prompt::Tokens(tokens.to_vec());
    let mut chain = precise.index().chain(precise_seed(lora), &prompt);
    precise
        .index()
        .match_prefix(&mut chain, &prompt)
        .matched_blocks(endpoint)
}

#[derive(Debug, Clone)]
enum Op {
    /// Endpoint, document, blocks to have cached from the start.
    Store(u32, usize, usize),
    /// Endpoint, document, block.
    Remove(u32, usize, usize),
    Clear(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2u32, 0..4usize, 1..=6usize).prop_map(|(e, d, n)| Op::Store(e, d, n)),
        3 => (0..2u32, 0..4usize, 0..6usize).prop_map(|(e, d, b)| Op::Remove(e, d, b)),
        1 => (0..2u32).prop_map(Op::Clear),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the engine stores and evicts, a lookup matches exactly the leading blocks the
    /// engine holds (what vLLM's own longest-cache-hit search would find).
    #[test]
    fn lookups_match_what_the_engine_holds(ops in proptest::collection::vec(op(), 1..60)) {
        let docs = documents();
        let precise = PreciseIndex::new(config());
        let mut cached: [BTreeSet<u64>; 2] = [BTreeSet::new(), BTreeSet::new()];
        for op in ops {
            match op {
                Op::Store(e, d, n) => {
                    let tokens = &docs[d];
                    let held = &mut cached[e as usize];
                    // The engine caches a request's new blocks after its cached prefix: the
                    // blocks before the first missing one are in use, so cached.
                    let first = (0..n).find(|&i| !held.contains(&engine_hash(tokens, i))).unwrap_or(n);
                    let new: Vec<usize> = (first..n).collect();
                    if new.is_empty() { continue; }
                    // Later blocks of the run may already be cached (a removal in the middle):
                    // vLLM stores only the ones not cached; split into runs accordingly.
                    let mut events = Vec::new();
                    let mut run_start = None;
                    for i in first..=n {
                        let fresh = i < n && !held.contains(&engine_hash(tokens, i));
                        match (fresh, run_start) {
                            (true, None) => run_start = Some(i),
                            (false, Some(s)) => { events.push(stored(tokens, s, i)); run_start = None; }
                            _ => {}
                        }
                    }
                    for i in first..n { held.insert(engine_hash(tokens, i)); }
                    precise.apply(EndpointId(e), &batch(events));
                }
                Op::Remove(e, d, b) => {
                    let h = engine_hash(&docs[d], b);
                    if cached[e as usize].remove(&h) {
                        precise.apply(EndpointId(e), &batch(vec![removed(&[h])]));
                    }
                }
                Op::Clear(e) => {
                    cached[e as usize].clear();
                    precise.apply(EndpointId(e), &batch(vec![KvEvent::AllBlocksCleared]));
                }
            }
            for e in 0..2u32 {
                prop_assert_eq!(precise.blocks_of(EndpointId(e)), cached[e as usize].len());
                for tokens in &docs {
                    let truth = (0..6).take_while(|&i| cached[e as usize].contains(&engine_hash(tokens, i))).count();
                    prop_assert_eq!(matched(&precise, EndpointId(e), tokens, None), truth);
                }
            }
        }
        let total: usize = cached.iter().map(BTreeSet::len).sum();
        prop_assert_eq!(precise.index().entries(), total);
    }
}

#[test]
fn what_cannot_be_keyed_is_skipped_and_counted() {
    let docs = documents();
    let tokens = &docs[2];
    let precise = PreciseIndex::new(config());
    let e = EndpointId(1);
    // An orphan: its parent was never reported.
    precise.apply(e, &batch(vec![stored(tokens, 2, 4)]));
    assert_eq!(precise.blocks_of(e), 0);
    assert_eq!(precise.stats().orphan_blocks, 2);
    // Another block size, another tier, another group.
    let mut other = BlockStored {
        block_hashes: vec![EngineBlockHash(1)],
        token_ids: tokens[..8].to_vec(),
        block_size: 8,
        ..BlockStored::default()
    };
    precise.apply(e, &batch(vec![KvEvent::BlockStored(other.clone())]));
    assert_eq!(precise.stats().block_size_mismatches, 1);
    other.block_size = BLOCK as u32;
    other.token_ids.truncate(BLOCK);
    other.medium = Some("CPU".into());
    precise.apply(e, &batch(vec![KvEvent::BlockStored(other.clone())]));
    other.medium = Some("gpu".into());
    other.group_idx = Some(1);
    precise.apply(e, &batch(vec![KvEvent::BlockStored(other.clone())]));
    assert_eq!(precise.stats().skipped_blocks, 2);
    assert_eq!(precise.blocks_of(e), 0);
    // Tokens that do not fill the blocks exactly are malformed.
    other.group_idx = Some(0);
    other.token_ids.pop();
    precise.apply(e, &batch(vec![KvEvent::BlockStored(other)]));
    assert_eq!(precise.stats().skipped_blocks, 3);
    precise.apply(e, &batch(vec![KvEvent::Unknown("Future".into())]));
    assert_eq!(precise.stats().unknown_events, 1);
}

#[test]
fn a_cache_salt_breaks_the_chain_and_adapters_have_their_own_keys() {
    let docs = documents();
    let tokens = &docs[3];
    let precise = PreciseIndex::new(config());
    let e = EndpointId(1);
    let KvEvent::BlockStored(mut event) = stored(tokens, 0, 3) else {
        unreachable!()
    };
    event.lora_name = Some("sql".into());
    event.extra_keys = vec![
        Some(vec![ExtraKey::Text("sql".into())]),
        None,
        Some(vec![
            ExtraKey::Text("sql".into()),
            ExtraKey::Text("tenant-salt".into()),
        ]),
    ];
    precise.apply(e, &batch(vec![KvEvent::BlockStored(event)]));
    assert_eq!(precise.blocks_of(e), 2);
    assert_eq!(precise.stats().skipped_blocks, 1);
    assert_eq!(matched(&precise, e, tokens, Some("sql")), 2);
    assert_eq!(matched(&precise, e, tokens, None), 0);
    assert_eq!(matched(&precise, e, tokens, Some("other")), 0);
}

#[test]
fn resets_drop_everything_and_overflow_resets() {
    let docs = documents();
    let precise = PreciseIndex::new(config());
    let e = EndpointId(3);
    precise.apply(
        e,
        &batch(vec![stored(&docs[2], 0, 6), stored(&docs[3], 0, 6)]),
    );
    assert_eq!(precise.blocks_of(e), 12);
    assert_eq!(precise.reset(e, ResetReason::Gap), 12);
    assert_eq!(matched(&precise, e, &docs[2], None), 0);
    assert_eq!(precise.index().entries(), 0);
    // After the reset, blocks extending a dropped prefix are orphans.
    precise.apply(e, &batch(vec![stored(&docs[2], 3, 5)]));
    assert_eq!(precise.blocks_of(e), 0);
    // A capacity of 4 blocks allows 4 + 0 + 16 = 20; 24 blocks is an overflow.
    precise.set_capacity(e, 4);
    let applied = precise.apply(
        e,
        &batch(vec![
            stored(&docs[0], 0, 6),
            stored(&docs[2], 0, 6),
            stored(&docs[3], 0, 6),
            stored(&docs[1], 2, 6),
        ]),
    );
    assert_eq!(applied.reset, Some(ResetReason::Overflow));
    assert_eq!(precise.stats().resets_for(ResetReason::Overflow), 1);
    assert_eq!(precise.stats().resets_for(ResetReason::Gap), 1);
    let sync = precise.endpoints();
    assert_eq!(sync[0].1.resets, 2);
    assert_eq!(sync[0].1.last_reset, Some(ResetReason::Overflow));
    assert!(precise.blocks_of(e) <= 20);
}

#[test]
fn an_endpoint_that_left_is_never_recorded_again() {
    let docs = documents();
    let precise = PreciseIndex::new(config());
    let e = EndpointId(5);
    precise.apply(e, &batch(vec![stored(&docs[0], 0, 6)]));
    precise.on_removed(&[e]);
    assert_eq!(precise.index().entries(), 0);
    precise.apply(e, &batch(vec![stored(&docs[1], 0, 6)]));
    assert_eq!(precise.blocks_of(e), 0);
    assert_eq!(precise.index().entries(), 0);
    assert!(precise.endpoints().is_empty());
}

fn keys_of(tokens: &[u32]) -> Vec<BlockKey> {
    let mut links = Vec::new();
    crate::prefix::ChainLink::extend(precise_seed(None), None, tokens, BLOCK, &mut links);
    links.iter().map(|l| l.key()).collect()
}

#[test]
fn speculations_hold_until_confirmed_or_expired() {
    use crate::clock::Timestamp;
    use std::time::Duration;
    let docs = documents();
    let precise = PreciseIndex::new(config());
    let e = EndpointId(1);
    let ttl = Duration::from_secs(2);
    let at = Timestamp::from_millis;

    // Picked at t = 0: the request's blocks are matched at once.
    precise.speculate(e, &keys_of(&docs[2]), at(0), ttl);
    assert_eq!(matched(&precise, e, &docs[2], None), 6);
    assert_eq!(precise.blocks_of(e), 0, "nothing confirmed yet");
    // The engine confirms the first 4 blocks; at t = 2 s the rest expires, the 4 stay.
    precise.apply(e, &batch(vec![stored(&docs[2], 0, 4)]));
    precise.speculate(e, &keys_of(&docs[3][..BLOCK]), at(2_000), ttl);
    assert_eq!(matched(&precise, e, &docs[2], None), 4);
    assert_eq!(precise.stats().speculative_expired, 2);

    // Two picks of the same prefix: the first's expiry leaves the second's.
    precise.speculate(e, &keys_of(&docs[0]), at(3_000), ttl);
    precise.speculate(e, &keys_of(&docs[0]), at(4_000), ttl);
    precise.speculate(e, &[], at(5_100), ttl);
    precise.speculate(e, &keys_of(&docs[3][..BLOCK]), at(5_100), ttl);
    assert_eq!(matched(&precise, e, &docs[0], None), 6);
    precise.speculate(e, &keys_of(&docs[3][..BLOCK]), at(6_100), ttl);
    assert_eq!(matched(&precise, e, &docs[0], None), 0);

    // The engine's word wins: a removal takes a block out even while speculated.
    precise.speculate(e, &keys_of(&docs[2]), at(7_000), ttl);
    let h = engine_hash(&docs[2], 1);
    precise.apply(e, &batch(vec![removed(&[h])]));
    assert_eq!(matched(&precise, e, &docs[2], None), 1);
    // A reset drops speculations too.
    precise.reset(e, ResetReason::Gap);
    assert_eq!(precise.index().audit(), vec![]);
}

#[test]
fn speculations_are_bounded_by_capacity_and_swept_on_other_endpoints() {
    use crate::clock::Timestamp;
    use std::time::Duration;
    let docs = documents();
    let precise = PreciseIndex::new(config());
    let ttl = Duration::from_secs(1);
    precise.set_capacity(EndpointId(1), 8);
    precise.speculate(
        EndpointId(1),
        &keys_of(&docs[0]),
        Timestamp::from_millis(0),
        ttl,
    );
    // 6 held, 6 more would pass the capacity of 8: nothing recorded.
    precise.speculate(
        EndpointId(1),
        &keys_of(&docs[2]),
        Timestamp::from_millis(1),
        ttl,
    );
    assert_eq!(matched(&precise, EndpointId(1), &docs[2], None), 0);
    // A pick on another endpoint after the TTL sweeps endpoint 1 as well.
    precise.speculate(
        EndpointId(2),
        &keys_of(&docs[3]),
        Timestamp::from_millis(1_500),
        ttl,
    );
    assert_eq!(matched(&precise, EndpointId(1), &docs[0], None), 0);
    assert_eq!(matched(&precise, EndpointId(2), &docs[3], None), 6);
}
