//! Seeded interleavings of inserts, lookups, evictions and removals on one endpoint and one
//! shard, each run checked against the invariants of the locking protocol (see the `locking`
//! module): no endpoint over its capacity, a removed endpoint leaves no trace, the counts
//! agree with the tables, and lookups agree with a block-by-block oracle.

use super::*;
use crate::endpoint::EndpointId;
use crate::prefix::locking::schedule;

/// Interleavings tried; each seed is one reproducible schedule.
const SEEDS: u64 = 1000;
/// The endpoint removed during each run.
const GONE: u32 = 1;
/// An endpoint sharing the same blocks that stays.
const KEPT: u32 = 2;
/// Both endpoints' capacity until a run changes it: small, so the clock runs all the time.
const CAPACITY: usize = 6;

/// One call a scheduled thread makes.
#[derive(Debug, Clone)]
enum Op {
    Insert(u32, Vec<u8>),
    InsertBlocks(u32, Vec<u8>, Option<usize>),
    Lookup(Vec<u8>),
    RemoveBlocks(u32, Vec<u8>),
    SetCapacity(u32, usize),
    RemoveEndpoint(u32),
}

/// xorshift64, seeded.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// A prompt of 2 to 9 blocks whose first block is always the same, so that every chain of a
/// run lives in one shard and they share prefixes.
fn symbols(rng: &mut Rng) -> Vec<u8> {
    let len = 2 + rng.below(8) as usize;
    std::iter::once(0)
        .chain((1..len).map(|_| rng.below(3) as u8))
        .collect()
}

/// Three threads of four calls; one of them removes [`GONE`] somewhere.
fn plan(seed: u64) -> Vec<Vec<Op>> {
    let mut rng = Rng::new(seed);
    let mut threads: Vec<Vec<Op>> = (0..3)
        .map(|_| {
            (0..4)
                .map(|_| {
                    let endpoint = if rng.below(2) == 0 { GONE } else { KEPT };
                    match rng.below(20) {
                        0..=6 => Op::Insert(endpoint, symbols(&mut rng)),
                        7..=9 => {
                            let capacity = (rng.below(2) == 0).then(|| 3 + rng.below(6) as usize);
                            Op::InsertBlocks(endpoint, symbols(&mut rng), capacity)
                        }
                        10..=13 => Op::Lookup(symbols(&mut rng)),
                        14..=16 => Op::RemoveBlocks(endpoint, symbols(&mut rng)),
                        _ => Op::SetCapacity(endpoint, 2 + rng.below(8) as usize),
                    }
                })
                .collect()
        })
        .collect();
    let thread = rng.below(3) as usize;
    let at = rng.below(5) as usize;
    threads[thread].insert(at, Op::RemoveEndpoint(GONE));
    threads
}

fn apply(index: &PrefixIndex, op: &Op) {
    match op {
        Op::Insert(endpoint, symbols) => insert(index, *endpoint, symbols),
        Op::InsertBlocks(endpoint, symbols, capacity) => {
            index.insert_blocks(EndpointId(*endpoint), &keys_of(index, symbols), *capacity);
        }
        Op::Lookup(symbols) => {
            let found = lookup(index, symbols);
            assert!(found.longest() <= symbols.len());
        }
        Op::RemoveBlocks(endpoint, symbols) => {
            let keys = keys_of(index, symbols);
            index.remove_blocks(EndpointId(*endpoint), &keys[keys.len() / 2..]);
        }
        Op::SetCapacity(endpoint, capacity) => index.set_capacity(EndpointId(*endpoint), *capacity),
        Op::RemoveEndpoint(endpoint) => index.remove_endpoint(EndpointId(*endpoint)),
    }
}

/// Runs `plan` under the schedule of `seed` on a fresh index, and returns the index.
fn run_plan(seed: u64, plan: &[Vec<Op>]) -> PrefixIndex {
    let index = tiny_index(CAPACITY);
    let bodies: Vec<Box<dyn FnOnce() + Send + '_>> = plan
        .iter()
        .map(|ops| {
            let index = &index;
            Box::new(move || ops.iter().for_each(|op| apply(index, op)))
                as Box<dyn FnOnce() + Send + '_>
        })
        .collect();
    schedule::run(seed, bodies);
    index
}

/// The invariants that hold once every call of a run has returned.
fn check(index: &PrefixIndex, plan: &[Vec<Op>], seed: u64) {
    let audit = index.audit();
    let gone = EndpointId(GONE);
    assert!(!index.endpoints().contains(&gone), "seed {seed}");
    assert_eq!(index.endpoint_entries(gone), 0, "seed {seed}");
    assert_eq!(index.capacity_of(gone), None, "seed {seed}");
    assert!(
        audit.iter().all(|(_, e)| *e != gone),
        "seed {seed}: trace left"
    );
    let kept = EndpointId(KEPT);
    if let Some(capacity) = index.capacity_of(kept) {
        let held = index.endpoint_entries(kept);
        assert!(held <= capacity, "seed {seed}: {held} > {capacity}");
    }
    assert_eq!(index.entries(), audit.len(), "seed {seed}");
    let stats = index.stats();
    assert_eq!(stats.entries as usize, audit.len(), "seed {seed}");
    assert_eq!(
        stats.endpoints as usize,
        index.endpoints().len(),
        "seed {seed}"
    );
    if let Err(e) = index.check_settled() {
        panic!("seed {seed}: {e}");
    }
    // Lookups agree with `holds`, block by block, for every prompt of the run.
    let prompts = plan.iter().flatten().filter_map(|op| match op {
        Op::Insert(_, s) | Op::InsertBlocks(_, s, _) | Op::Lookup(s) | Op::RemoveBlocks(_, s) => {
            Some(s)
        }
        _ => None,
    });
    for symbols in prompts {
        let found = lookup(index, symbols);
        let keys = keys_of(index, symbols);
        for endpoint in [gone, kept] {
            let expected = keys
                .iter()
                .take_while(|k| index.holds(endpoint, **k))
                .count();
            assert_eq!(found.matched_blocks(endpoint), expected, "seed {seed}");
        }
    }
    // A late insert for the removed endpoint is dropped.
    insert(index, GONE, &[0, 1, 2]);
    assert_eq!(index.endpoint_entries(gone), 0, "seed {seed}");
    assert!(index.audit().iter().all(|(_, e)| *e != gone), "seed {seed}");
}

#[test]
fn seeded_interleavings_keep_the_protocol_invariants() {
    for seed in 0..SEEDS {
        let plan = plan(seed);
        let index = run_plan(seed, &plan);
        check(&index, &plan, seed);
    }
}

#[test]
fn a_seed_replays_the_same_run() {
    for seed in [3, 17, 42] {
        let plan = plan(seed);
        let (a, b) = (run_plan(seed, &plan), run_plan(seed, &plan));
        assert_eq!(a.audit(), b.audit(), "seed {seed}");
    }
}
