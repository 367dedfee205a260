//! Properties of the whole index.

use proptest::prelude::*;

use super::*;
use crate::endpoint::{EndpointId, MembershipListener};
use crate::request::Prompt;

/// One pseudo token per block (4 bytes), so prompts are short strings of block symbols.
fn tiny_index(capacity: usize) -> PrefixIndex {
    PrefixIndex::new(PrefixIndexConfig {
        layout: BlockLayout::new(1, 64),
        default_capacity: capacity,
    })
}

fn prompt_of(symbols: &[u8]) -> Prompt {
    Prompt::Text(
        symbols
            .iter()
            .map(|s| char::from(b'a' + s).to_string().repeat(4))
            .collect(),
    )
}

fn lookup(index: &PrefixIndex, symbols: &[u8]) -> PrefixMatch {
    let prompt = prompt_of(symbols);
    let mut chain = index.chain(chain_seed("m", None, ""), &prompt);
    index.match_prefix(&mut chain, &prompt)
}

fn insert(index: &PrefixIndex, endpoint: u32, symbols: &[u8]) {
    let prompt = prompt_of(symbols);
    let mut chain = index.chain(chain_seed("m", None, ""), &prompt);
    index.insert_chain(EndpointId(endpoint), &mut chain, &prompt, None);
}

fn prompts() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..3, 1..24)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

proptest! {
    #[test]
    fn capacity_is_never_exceeded(
        capacity in 1usize..40,
        ops in prop::collection::vec((0u32..5, prompts(), 0u8..10), 1..80),
    ) {
        let index = tiny_index(capacity);
        let mut capacities = std::collections::BTreeMap::new();
        for (endpoint, symbols, op) in ops {
            let id = EndpointId(endpoint);
            match op {
                0 => {
                    let c = capacity / 2 + 1;
                    index.set_capacity(id, c);
                    capacities.insert(endpoint, c);
                }
                1 => {
                    let prompt = prompt_of(&symbols);
                    let mut chain = index.chain(1, &prompt);
                    index.complete_then_remove(id, &mut chain, &prompt);
                }
                _ => {
                    insert(&index, endpoint, &symbols);
                    capacities.entry(endpoint).or_insert(capacity);
                }
            }
            let mut sum = 0;
            for (&e, &c) in &capacities {
                let held = index.endpoint_entries(EndpointId(e));
                prop_assert!(held <= c, "endpoint {} holds {} > {}", e, held, c);
                sum += held;
            }
            let audit = index.audit();
            prop_assert_eq!(audit.len(), sum);
            prop_assert_eq!(index.entries(), sum);
            prop_assert!(sum <= capacities.values().sum::<usize>());
            for (_, e) in &audit {
                prop_assert!(capacities.contains_key(&e.0));
            }
        }
    }

    #[test]
    fn lookups_find_the_matched_length_exactly(
        inserted in prop::collection::vec((0u32..4, prompts()), 1..30),
        query in prompts(),
    ) {
        let index = tiny_index(100_000);
        for (endpoint, symbols) in &inserted {
            insert(&index, *endpoint, symbols);
        }
        let found = lookup(&index, &query);
        prop_assert_eq!(found.total_blocks(), query.len());
        for endpoint in 0u32..4 {
            let expected = inserted
                .iter()
                .filter(|(e, _)| *e == endpoint)
                .map(|(_, s)| common_prefix(s, &query))
                .max()
                .unwrap_or(0);
            prop_assert_eq!(found.matched_blocks(EndpointId(endpoint)), expected);
            let score = found.score(EndpointId(endpoint));
            prop_assert!((0.0..=1.0).contains(&score));
        }
    }

    #[test]
    fn a_longer_shared_prefix_never_scores_lower(
        base in prop::collection::vec(0u8..3, 2..40),
        cut in 0usize..40,
        tail in prop::collection::vec(0u8..3, 0..20),
    ) {
        let index = tiny_index(100_000);
        insert(&index, 7, &base);
        let cut = cut.min(base.len() - 1);
        // Two queries of the same length: one shares `cut` blocks, the other `cut + 1`.
        let diverge = |shared: usize| -> Vec<u8> {
            let mut q = base[..shared].to_vec();
            if shared < base.len() {
                q.push((base[shared] + 1) % 3);
            }
            q.extend(tail.iter().copied());
            q.resize(base.len() + tail.len() + 1, 0);
            q
        };
        let shorter = lookup(&index, &diverge(cut)).score(EndpointId(7));
        let longer = lookup(&index, &diverge(cut + 1)).score(EndpointId(7));
        prop_assert!(longer >= shorter, "{} < {}", longer, shorter);
    }

    #[test]
    fn removing_an_endpoint_leaves_no_trace(
        inserted in prop::collection::vec((0u32..4, prompts()), 1..30),
        gone in 0u32..4,
        capacity in 1usize..60,
    ) {
        let index = tiny_index(capacity);
        for (endpoint, symbols) in &inserted {
            insert(&index, *endpoint, symbols);
        }
        index.on_removed(&[EndpointId(gone)]);
        prop_assert!(index.audit().iter().all(|(_, e)| e.0 != gone));
        prop_assert_eq!(index.endpoint_entries(EndpointId(gone)), 0);
        prop_assert!(!index.endpoints().contains(&EndpointId(gone)));
        // A late insert for the departed endpoint is ignored.
        for (_, symbols) in &inserted {
            insert(&index, gone, symbols);
            prop_assert_eq!(lookup(&index, symbols).matched_blocks(EndpointId(gone)), 0);
        }
        prop_assert!(index.audit().iter().all(|(_, e)| e.0 != gone));
    }

    #[test]
    fn lazy_hashes_equal_eager_ones(
        text in "[a-z]{0,3000}",
        steps in prop::collection::vec(0usize..40, 1..10),
        block_tokens in 1usize..80,
    ) {
        let layout = BlockLayout::new(block_tokens, 1000);
        let prompt = Prompt::Text(text);
        let mut eager = BlockChain::new(&layout, 42, &prompt);
        let all = eager.complete(&prompt).to_vec();
        let mut lazy = BlockChain::new(&layout, 42, &prompt);
        let mut n = 0;
        for step in steps {
            n += step;
            let got = lazy.extend_to(&prompt, n).to_vec();
            prop_assert_eq!(&got[..], &all[..got.len()]);
            prop_assert!(got.len() >= n.min(all.len()));
        }
        prop_assert_eq!(lazy.complete(&prompt), &all[..]);
    }

    #[test]
    fn the_index_is_deterministic(
        ops in prop::collection::vec((0u32..4, prompts()), 1..40),
        capacity in 1usize..50,
        query in prompts(),
    ) {
        let run = || {
            let index = tiny_index(capacity);
            for (endpoint, symbols) in &ops {
                insert(&index, *endpoint, symbols);
            }
            (index.audit(), lookup(&index, &query))
        };
        prop_assert_eq!(run(), run());
    }
}

proptest! {
    // Interleavings that break a recorded run are rare: look at more of them.
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Lookups agree with a block-by-block oracle (`holds` on every key of the query's chain)
    /// after inserts, evictions and out-of-band removals, with many endpoints sharing
    /// prefixes (interned sets and recorded runs).
    #[test]
    fn lookups_agree_with_block_by_block_holds(
        ops in prop::collection::vec((0u32..7, prop::collection::vec(0u8..2, 1..40), 0u8..12, 0usize..40, 0usize..40), 1..60),
        capacity in 8usize..120,
        queries in prop::collection::vec(prop::collection::vec(0u8..2, 1..40), 1..6),
    ) {
        let index = tiny_index(capacity);
        let mut all = Vec::new();
        for (endpoint, symbols, op, from, len) in ops {
            let prompt = prompt_of(&symbols);
            let mut chain = index.chain(chain_seed("m", None, ""), &prompt);
            let keys = chain.complete(&prompt).to_vec();
            match op {
                0 => {
                    let from = from.min(keys.len());
                    let to = (from + len).min(keys.len());
                    index.remove_blocks(EndpointId(endpoint), &keys[from..to]);
                }
                1 => {
                    let from = from.min(keys.len());
                    index.insert_blocks(EndpointId(endpoint), &keys[from..], None);
                }
                _ => index.insert_chain(EndpointId(endpoint), &mut chain, &prompt, None),
            }
            all.push(symbols);
        }
        for query in queries.iter().chain(&all) {
            let prompt = prompt_of(query);
            let mut chain = index.chain(chain_seed("m", None, ""), &prompt);
            let found = index.match_prefix(&mut chain, &prompt);
            let keys = chain.complete(&prompt).to_vec();
            for endpoint in 0u32..7 {
                let expected = keys
                    .iter()
                    .take_while(|k| index.holds(EndpointId(endpoint), **k))
                    .count();
                prop_assert_eq!(found.matched_blocks(EndpointId(endpoint)), expected);
            }
        }
    }

}

impl PrefixIndex {
    /// Test helper: removes every block of `chain` from `endpoint`.
    fn complete_then_remove(&self, endpoint: EndpointId, chain: &mut BlockChain, prompt: &Prompt) {
        let keys = chain.complete(prompt).to_vec();
        self.remove_blocks(endpoint, &keys);
    }
}

#[test]
fn a_shared_prefix_is_found_and_a_divergent_suffix_is_not() {
    let index = tiny_index(1000);
    insert(&index, 1, &[0, 1, 2, 0, 1]);
    insert(&index, 2, &[0, 1, 1]);
    insert(&index, 3, &[0, 1, 2, 0, 1]);
    let found = lookup(&index, &[0, 1, 2, 0, 2, 2]);
    assert_eq!(
        found.matches(),
        &[(EndpointId(1), 4), (EndpointId(2), 2), (EndpointId(3), 4)]
    );
    assert_eq!(found.longest(), 4);
    assert!((found.score(EndpointId(2)) - 2.0 / 6.0).abs() < 1e-12);
}

#[test]
fn models_and_adapters_do_not_share_blocks() {
    let index = tiny_index(1000);
    let prompt = prompt_of(&[0, 1, 2]);
    let mut chain = index.chain(chain_seed("m", Some("a"), ""), &prompt);
    index.insert_chain(EndpointId(1), &mut chain, &prompt, None);
    let mut other = index.chain(chain_seed("m", None, ""), &prompt);
    assert_eq!(index.match_prefix(&mut other, &prompt).longest(), 0);
    let mut same = index.chain(chain_seed("m", Some("a"), ""), &prompt);
    assert_eq!(index.match_prefix(&mut same, &prompt).longest(), 3);
}

#[test]
fn hot_blocks_survive_eviction_and_tails_go_first() {
    let index = tiny_index(6);
    insert(&index, 1, &[0, 0, 0]);
    insert(&index, 1, &[1, 1, 1]);
    // Touch the first prompt again, then add a third: the untouched one loses its tail first.
    insert(&index, 1, &[0, 0, 0]);
    insert(&index, 1, &[2, 2]);
    assert_eq!(index.endpoint_entries(EndpointId(1)), 6);
    assert_eq!(lookup(&index, &[0, 0, 0]).matched_blocks(EndpointId(1)), 3);
    assert_eq!(lookup(&index, &[1, 1, 1]).matched_blocks(EndpointId(1)), 1);
    assert_eq!(lookup(&index, &[2, 2]).matched_blocks(EndpointId(1)), 2);
}

#[test]
fn kv_events_feed_the_same_structure() {
    let index = tiny_index(1000);
    let prompt = prompt_of(&[0, 1, 2, 0]);
    let mut chain = index.chain(9, &prompt);
    let keys = chain.complete(&prompt).to_vec();
    index.insert_blocks(EndpointId(4), &keys, Some(500));
    assert_eq!(index.capacity_of(EndpointId(4)), Some(500));
    assert!(keys.iter().all(|k| index.holds(EndpointId(4), *k)));
    index.remove_blocks(EndpointId(4), &keys[2..]);
    let mut again = index.chain(9, &prompt);
    assert_eq!(
        index
            .match_prefix(&mut again, &prompt)
            .matched_blocks(EndpointId(4)),
        2
    );
    assert_eq!(index.entries(), 2);
}

#[test]
fn prompts_without_a_full_block_match_nothing() {
    let index = PrefixIndex::default();
    let prompt = Prompt::Text("short".into());
    let mut chain = index.chain(1, &prompt);
    index.insert_chain(EndpointId(1), &mut chain, &prompt, None);
    let found = index.match_prefix(&mut chain, &prompt);
    assert_eq!(found.total_blocks(), 0);
    assert_eq!(found.score(EndpointId(1)), 0.0);
    assert_eq!(index.entries(), 0);
}

#[test]
fn many_holders_spill_and_still_match() {
    let index = tiny_index(1000);
    for endpoint in 0..20 {
        insert(&index, endpoint, &[0, 1, 2, endpoint as u8 % 3]);
    }
    let found = lookup(&index, &[0, 1, 2, 1]);
    for endpoint in 0..20u32 {
        let expected = if endpoint % 3 == 1 { 4 } else { 3 };
        assert_eq!(
            found.matched_blocks(EndpointId(endpoint)),
            expected,
            "endpoint {endpoint}"
        );
    }
    for endpoint in 0..19 {
        index.remove_endpoint(EndpointId(endpoint));
    }
    assert_eq!(
        lookup(&index, &[0, 1, 2, 1]).matches(),
        &[(EndpointId(19), 4)]
    );
    assert_eq!(index.entries(), 4);
    assert_eq!(index.blocks(), 4);
}

#[test]
fn lookups_stay_exact_when_blocks_of_a_run_change_sets() {
    let index = tiny_index(1000);
    // Keeps the set {1, 2, 3} alive, so the sets made below get fresh ids.
    for endpoint in 1..=3 {
        insert(&index, endpoint, &[2, 2]);
    }
    let symbols = [0, 1, 2, 0, 1, 2];
    for endpoint in 1..=4 {
        insert(&index, endpoint, &symbols);
    }
    let prompt = prompt_of(&symbols);
    let keys = index
        .chain(chain_seed("m", None, ""), &prompt)
        .complete(&prompt)
        .to_vec();
    // Block 0 moves to another set, then endpoint 2 loses block 2: the run recorded on
    // block 0 no longer describes its blocks.
    index.remove_blocks(EndpointId(1), &keys[..1]);
    index.remove_blocks(EndpointId(2), &keys[2..3]);
    let found = lookup(&index, &symbols);
    assert_eq!(found.matched_blocks(EndpointId(1)), 0);
    assert_eq!(found.matched_blocks(EndpointId(2)), 2);
    assert_eq!(found.matched_blocks(EndpointId(3)), 6);
    assert_eq!(found.matched_blocks(EndpointId(4)), 6);
}

#[test]
fn concurrent_inserts_for_one_endpoint_end_within_capacity() {
    let index = tiny_index(50);
    std::thread::scope(|s| {
        for t in 0..2u8 {
            let index = &index;
            s.spawn(move || {
                for i in 0..300u16 {
                    let symbols: Vec<u8> = (0..12).map(|j| ((i * 7) as u8 ^ j ^ t) % 3).collect();
                    insert(index, 1, &symbols);
                    insert(index, 2 + u32::from(t), &symbols);
                }
            });
        }
    });
    for endpoint in 1..=3 {
        assert!(index.endpoint_entries(EndpointId(endpoint)) <= 50);
    }
    assert_eq!(index.audit().len(), index.entries());
    // Evictions in flight count as held, so nobody evicted below what fits.
    assert!(index.endpoint_entries(EndpointId(1)) > 0);
}

#[test]
fn concurrent_inserts_and_removals_keep_the_count_exact() {
    let index = tiny_index(40);
    std::thread::scope(|s| {
        for t in 0..2u8 {
            let index = &index;
            s.spawn(move || {
                for i in 0..400u16 {
                    let symbols: Vec<u8> = (0..10).map(|j| ((i * 5) as u8 ^ j ^ t) % 3).collect();
                    let prompt = prompt_of(&symbols);
                    let mut chain = index.chain(chain_seed("m", None, ""), &prompt);
                    let keys = chain.complete(&prompt).to_vec();
                    if (i + u16::from(t)) % 3 == 0 {
                        index.remove_blocks(EndpointId(1), &keys[keys.len() / 2..]);
                    } else {
                        index.insert_blocks(EndpointId(1), &keys, None);
                    }
                }
            });
        }
    });
    assert!(index.endpoint_entries(EndpointId(1)) <= 40);
    assert_eq!(index.audit().len(), index.entries());
}
