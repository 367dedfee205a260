//! The window on upstream's cases (assign_test.go, plugin_test.go @ ebab68792), as they play
//! out when requests arrive one by one: a request the window steers nowhere is placed by
//! "the other scorers" (here: the server with the fewest requests so far, then the lowest
//! address, as an in-flight scorer would) and anchors its prompt there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use shepherd_scheduler_core::prefix::BlockChain;
use shepherd_scheduler_core::request::Prompt;

use super::*;

/// A window over `n` servers `127.0.0.1:8001..`, with `params`.
fn rig(n: usize, params: serde_json::Value) -> (BurstWindow, Vec<Arc<Endpoint>>) {
    let pool = Arc::new(Pool::new());
    let servers: Vec<Arc<Endpoint>> = (1..=n)
        .map(|i| pool.add(&format!("127.0.0.1:{}", 8000 + i)))
        .collect();
    let params: BurstPrefixParameters = serde_json::from_value(params).unwrap();
    (BurstWindow::new(params.settings().unwrap(), pool), servers)
}

/// The block keys of a prompt made of `blocks` (each a distinct 4-token block, 4 tokens per
/// block).
fn keys(blocks: &[u32]) -> Vec<BlockKey> {
    let layout = BlockLayout::new(4, 2048);
    let tokens: Vec<u32> = blocks.iter().flat_map(|b| [*b; 4]).collect();
    let prompt = Prompt::Tokens(tokens);
    let mut chain = BlockChain::new(&layout, 7, &prompt);
    chain.complete(&prompt).to_vec()
}

/// Runs requests with `prompts` through the window at time `now`; returns where each went and
/// whether the window steered it.
fn run(
    window: &BurstWindow,
    servers: &[Arc<Endpoint>],
    prompts: &[&[u32]],
    now: Timestamp,
    placed: &mut BTreeMap<String, usize>,
) -> Vec<(String, bool)> {
    prompts
        .iter()
        .map(|p| {
            let k = keys(p);
            let (on, steered) = match window.assign(&k, now) {
                Some(id) => (servers.iter().find(|e| e.id() == id).unwrap(), true),
                None => {
                    let least = servers
                        .iter()
                        .min_by_key(|e| {
                            (
                                placed.get(e.address()).copied().unwrap_or(0),
                                e.address().to_string(),
                            )
                        })
                        .unwrap();
                    window.anchor(&k, least.id());
                    (least, false)
                }
            };
            *placed.entry(on.address().to_string()).or_default() += 1;
            (on.address().to_string(), steered)
        })
        .collect()
}

fn counts(outcome: &[(String, bool)]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (on, _) in outcome {
        *out.entry(on.clone()).or_default() += 1;
    }
    out
}

fn map(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs
        .iter()
        .map(|(a, n)| (format!("127.0.0.1:{a}"), *n))
        .collect()
}

const T0: Timestamp = Timestamp::from_millis(1_000);

#[test]
fn upstreams_configuration_checks() {
    // TestNew_RejectsInvalidConfig, and the README's ranges.
    let check = |json: serde_json::Value| {
        serde_json::from_value::<BurstPrefixParameters>(json)
            .map_err(|e| e.to_string())
            .and_then(|p| p.settings().map_err(|e| e.to_string()))
    };
    for (json, words) in [
        (
            serde_json::json!({"windowDurationMs": 0}),
            "windowDurationMs must be > 0",
        ),
        (
            serde_json::json!({"windowDurationMs": 10001}),
            "must be <= 10000",
        ),
        (
            serde_json::json!({"maxPerReplica": 0}),
            "maxPerReplica must be -1",
        ),
        (
            serde_json::json!({"blockSizeTokens": 0}),
            "blockSizeTokens must be > 0",
        ),
        (
            serde_json::json!({"balanceBy": "bogus"}),
            "balanceBy must be",
        ),
        (
            serde_json::json!({"maxPrefixTokensToMatch": -1}),
            "must be >= 0",
        ),
        (
            serde_json::json!({"maxPrefixTokensToMatch": 32}),
            "must be 0 or >= blockSizeTokens",
        ),
        (
            serde_json::json!({"minColocateBlocks": -1}),
            "minColocateBlocks must be >= 0",
        ),
        (
            serde_json::json!({"maxBatchSize": 0}),
            "maxBatchSize must be -1",
        ),
        (serde_json::json!({"windowMs": 5}), "windowMs"),
    ] {
        let err = check(json.clone()).unwrap_err();
        assert!(err.contains(words), "{json}: {err}");
    }
    let defaults = check(serde_json::json!({})).unwrap();
    assert_eq!(defaults.window, Duration::from_millis(100));
    assert_eq!(defaults.max_per_replica, None);
    assert_eq!(defaults.layout.block_tokens(), 64);
    assert_eq!(defaults.layout.max_blocks(), 2048);
    assert_eq!(defaults.max_batch_size, Some(1000));
    assert!(!defaults.by_tokens);
    // deploy/config/epp-burst-prefix-cache-config.yaml.
    let deploy = check(serde_json::json!({
        "windowDurationMs": 100, "maxPerReplica": -1, "minColocateBlocks": 0
    }))
    .unwrap();
    assert_eq!(deploy, defaults);
    let tokens =
        check(serde_json::json!({"balanceBy": "tokens", "maxPrefixTokensToMatch": 640})).unwrap();
    assert!(tokens.by_tokens);
    assert_eq!(tokens.layout.max_blocks(), 10);
}

#[test]
fn unlimited_colocates_the_whole_group() {
    // TestAssign_UnlimitedColocatesWholeGroup / TestProduce_ColocatesIdenticalPromptBurst.
    let (w, servers) = rig(4, serde_json::json!({}));
    let out = run(&w, &servers, &[&[1, 2, 3][..]; 8], T0, &mut BTreeMap::new());
    assert!(
        !out[0].1,
        "the first of the group is placed by the other scorers"
    );
    assert!(out[1..].iter().all(|(_, steered)| *steered));
    assert_eq!(counts(&out), map(&[("8001", 8)]));
}

#[test]
fn a_cap_spreads_evenly() {
    // TestAssign_CapSpreadsEvenly: k=2, 8 samples, 4 servers.
    let (w, servers) = rig(4, serde_json::json!({"maxPerReplica": 2}));
    let out = run(&w, &servers, &[&[1, 2, 3][..]; 8], T0, &mut BTreeMap::new());
    assert_eq!(
        counts(&out),
        map(&[("8001", 2), ("8002", 2), ("8003", 2), ("8004", 2)])
    );
}

#[test]
fn a_cap_fills_before_spilling() {
    // TestAssign_CapFillsBeforeSpilling: k=4 fills one server before the next.
    let (w, servers) = rig(4, serde_json::json!({"maxPerReplica": 4}));
    let out = run(&w, &servers, &[&[1, 2, 3][..]; 8], T0, &mut BTreeMap::new());
    assert_eq!(counts(&out), map(&[("8001", 4), ("8002", 4)]));
}

#[test]
fn the_overflow_guard_balances_beyond_the_cap() {
    // TestAssign_OverflowGuardBalancesBeyondCap: k=2, 8 samples, 2 servers.
    let (w, servers) = rig(2, serde_json::json!({"maxPerReplica": 2}));
    let out = run(&w, &servers, &[&[1, 2, 3][..]; 8], T0, &mut BTreeMap::new());
    assert_eq!(counts(&out), map(&[("8001", 4), ("8002", 4)]));
}

#[test]
fn singletons_and_empty_prompts_get_no_affinity() {
    // TestAssign_SingletonGetsNoAffinity, TestAssign_EmptyPrefixGetsNoAffinity,
    // TestAssign_LoneSingletonGetsNoAffinity.
    let (w, servers) = rig(2, serde_json::json!({"minColocateBlocks": 2}));
    let out = run(
        &w,
        &servers,
        &[&[1, 2, 3], &[1, 2, 3], &[5, 5, 5]],
        T0,
        &mut BTreeMap::new(),
    );
    assert!(out[1].1, "the identical group still co-locates");
    assert_eq!(out[0].0, out[1].0);
    assert!(
        !out[2].1,
        "a request overlapping no other keeps no affinity"
    );
    assert_eq!(w.assign(&[], T0), None);
}

#[test]
fn distinct_groups_spread_across_servers() {
    // TestAssign_DistinctGroupsSpreadAcrossReplicas.
    let (w, servers) = rig(4, serde_json::json!({}));
    let mut placed = BTreeMap::new();
    let a = run(&w, &servers, &[&[1, 2, 3][..]; 8], T0, &mut placed);
    let b = run(&w, &servers, &[&[9, 9, 9][..]; 8], T0, &mut placed);
    assert_eq!(counts(&a), map(&[("8001", 8)]));
    assert_eq!(counts(&b), map(&[("8002", 8)]));
}

#[test]
fn the_fair_share_spreads_prefix_sharing_groups() {
    // TestAssign_FairShareSpreadsPrefixSharingGroups: four groups sharing {1, 2}.
    let (w, servers) = rig(4, serde_json::json!({"minColocateBlocks": 2}));
    let prompts: Vec<&[u32]> = vec![
        &[1, 2, 3],
        &[1, 2, 3],
        &[1, 2, 4],
        &[1, 2, 4],
        &[1, 2, 5],
        &[1, 2, 5],
        &[1, 2, 6],
        &[1, 2, 6],
    ];
    let out = run(&w, &servers, &prompts, T0, &mut BTreeMap::new());
    assert_eq!(
        counts(&out),
        map(&[("8001", 2), ("8002", 2), ("8003", 2), ("8004", 2)])
    );
}

#[test]
fn overlapping_singletons_colocate_within_the_fair_share() {
    // TestAssign_OverlappingSingletonsColocateWithoutGroups: four distinct prompts sharing
    // {1, 2}; those after the first two are steered, and the servers stay balanced.
    let (w, servers) = rig(2, serde_json::json!({"minColocateBlocks": 2}));
    let prompts: Vec<&[u32]> = vec![&[1, 2, 3], &[1, 2, 4], &[1, 2, 5], &[1, 2, 6]];
    let out = run(&w, &servers, &prompts, T0, &mut BTreeMap::new());
    assert!(out[2].1 && out[3].1, "{out:?}");
    assert_eq!(counts(&out), map(&[("8001", 2), ("8002", 2)]));
}

#[test]
fn a_shared_prefix_below_the_threshold_does_not_colocate() {
    // TestAssign_SharedPrefixBelowThresholdDoesNotColocate: 2 shared blocks, threshold 3.
    let (w, servers) = rig(2, serde_json::json!({"minColocateBlocks": 3}));
    let prompts: Vec<&[u32]> = vec![&[1, 2, 3], &[1, 2, 3], &[1, 2, 4], &[1, 2, 4]];
    let out = run(&w, &servers, &prompts, T0, &mut BTreeMap::new());
    assert!(!out[2].1, "{out:?}");
    assert_ne!(out[0].0, out[2].0);
}

#[test]
fn a_single_server_takes_everything() {
    // TestAssign_SingleReplicaPlacesEverything.
    let (w, servers) = rig(1, serde_json::json!({"minColocateBlocks": 2}));
    let prompts: Vec<&[u32]> = vec![&[1, 2, 3][..]; 4];
    let out = run(&w, &servers, &prompts, T0, &mut BTreeMap::new());
    assert_eq!(counts(&out), map(&[("8001", 4)]));
}

/// Where the second member of a group spills (cap 1) when server 8001 holds one 10-block
/// prompt, 8002 two 1-block prompts, and the group's first went to 8003.
fn spill(balance_by: &str) -> String {
    let (w, servers) = rig(
        3,
        serde_json::json!({"balanceBy": balance_by, "maxPerReplica": 1}),
    );
    let place = |blocks: &[u32], on: usize| {
        let k = keys(blocks);
        assert_eq!(w.assign(&k, T0), None);
        w.anchor(&k, servers[on].id());
    };
    place(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0);
    place(&[20], 1);
    place(&[21], 1);
    place(&[77, 78], 2);
    let id = w.assign(&keys(&[77, 78]), T0).unwrap();
    servers
        .iter()
        .find(|e| e.id() == id)
        .unwrap()
        .address()
        .to_string()
}

#[test]
fn balancing_by_tokens_charges_a_prompt_its_blocks() {
    // TestAssign_BalanceByTokensSpreadsLargePrefix: by requests the spill goes to the server
    // with one (long) request; by tokens to the one with fewer blocks to prefill.
    assert_eq!(spill("requests"), "127.0.0.1:8001");
    assert_eq!(spill("tokens"), "127.0.0.1:8002");
}

#[test]
fn balancing_by_tokens_discounts_a_prefix_already_held() {
    // TestAssign_BalanceByTokensDiscountsSharedPrefix: a prompt sharing 9 leading blocks with
    // one already on a server is charged there only its one new block.
    let (w, servers) = rig(2, serde_json::json!({"balanceBy": "tokens"}));
    let a = servers[0].id();
    for (i, last) in [10, 11, 12].into_iter().enumerate() {
        let k = keys(&[1, 2, 3, 4, 5, 6, 7, 8, 9, last]);
        assert_eq!(w.assign(&k, T0), None);
        w.anchor(&k, a);
        let load = w.window.lock().load.get(&a).copied();
        assert_eq!(load, Some(10 + i), "unit {i}");
    }
    // The same prompt again on the same server costs nothing more.
    let k = keys(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 12]);
    assert_eq!(w.assign(&k, T0), Some(a));
    assert_eq!(w.window.lock().load.get(&a).copied(), Some(12));
}

#[test]
fn a_new_window_forgets_the_last() {
    // TestProduce_SecondWindowAfterSeal: a request after the window is a first again.
    let (w, servers) = rig(2, serde_json::json!({"windowDurationMs": 100}));
    let mut placed = BTreeMap::new();
    run(&w, &servers, &[&[1, 2, 3][..]; 2], T0, &mut placed);
    let later = T0.saturating_add(Duration::from_millis(100));
    let out = run(&w, &servers, &[&[1, 2, 3]], later, &mut placed);
    assert!(!out[0].1, "{out:?}");
}

#[test]
fn a_full_window_gives_no_affinity_and_counts_it() {
    let (w, servers) = rig(2, serde_json::json!({"maxBatchSize": 3}));
    let out = run(&w, &servers, &[&[1, 2, 3][..]; 5], T0, &mut BTreeMap::new());
    assert!(out[1].1 && out[2].1);
    assert!(!out[3].1 && !out[4].1);
    assert_eq!(w.overflowed(), 2);
}
