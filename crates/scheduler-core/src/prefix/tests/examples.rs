//! Worked examples of lookups, evictions and KV events.

use super::*;
use crate::endpoint::EndpointId;
use crate::request::Prompt;

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
