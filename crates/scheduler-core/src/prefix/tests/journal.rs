//! The insert journal against a plain model: per endpoint, each key once, in the order first
//! recorded, up to the bound; past it, keys not yet recorded are dropped and counted.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;
use crate::endpoint::EndpointId;
use crate::prefix::Journal;

/// What the journal must hold after `inserts` under `limit`.
fn model(index: &PrefixIndex, inserts: &[(u32, Vec<u8>)], limit: usize) -> Journal {
    let mut journal = Journal::default();
    let mut seen = HashSet::new();
    let mut count = 0;
    for (endpoint, symbols) in inserts {
        let id = EndpointId(*endpoint);
        for key in keys_of(index, symbols) {
            if seen.contains(&(id, key)) {
                continue;
            }
            if count >= limit {
                journal.dropped += 1;
                continue;
            }
            seen.insert((id, key));
            count += 1;
            match journal.inserts.iter_mut().find(|(e, _)| *e == id) {
                Some((_, keys)) => keys.push(key),
                None => journal.inserts.push((id, vec![key])),
            }
        }
    }
    journal
}

proptest! {
    #![proptest_config(ProptestConfig { rng_seed: proptest::test_runner::RngSeed::Fixed(31), ..ProptestConfig::default() })]

    /// Prompts that share prefixes, picked again and again on a few endpoints, over two takes.
    #[test]
    fn the_journal_keeps_each_key_once_in_order_within_its_bound(
        inserts in prop::collection::vec((0u32..3, prompts()), 1..40),
        later in prop::collection::vec((0u32..3, prompts()), 0..20),
        limit in prop_oneof![1usize..30, Just(10_000)],
    ) {
        let index = tiny_index(10_000);
        index.journal_inserts(limit);
        for (endpoint, symbols) in &inserts {
            insert(&index, *endpoint, symbols);
        }
        prop_assert_eq!(index.take_journal(), model(&index, &inserts, limit));
        // A take starts the next interval afresh.
        for (endpoint, symbols) in &later {
            insert(&index, *endpoint, symbols);
        }
        prop_assert_eq!(index.take_journal(), model(&index, &later, limit));
    }
}
