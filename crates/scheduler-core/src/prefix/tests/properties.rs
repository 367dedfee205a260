//! Properties of the index against plain models.

use proptest::prelude::*;

use super::*;
use crate::endpoint::{EndpointId, MembershipListener};

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
            prop_assert_eq!(index.stats().entries as usize, sum);
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
