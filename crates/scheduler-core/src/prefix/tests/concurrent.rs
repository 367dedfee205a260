//! Threads sharing one index.

use super::*;
use crate::endpoint::EndpointId;

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
    assert_eq!(index.stats().entries as usize, index.entries());
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
    assert_eq!(index.stats().entries as usize, index.entries());
}
