//! Prefill/decode disaggregation in the simulator: a disaggregated request prefills on its
//! prefill server and decodes on its decode server, with the TTFT the cost model says; a pool
//! without roles serves as before; a lost prefill falls back to aggregated serving; the
//! `pd` study runs its matrix deterministically.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use shepherd_sim::engine::{BatchShape, EngineConfig};
use shepherd_sim::pd::{ARMS, PdOptions, pd};
use shepherd_sim::policy::{builtin_policy, sim_registry};
use shepherd_sim::runner::{Outcome, RunOptions, RunResult, run};
use shepherd_sim::workload::{Scenario, builtin_scenario};

/// Two servers (`roles`, if any, e.g. `[decode, prefill]`), fresh metrics at every pick,
/// `extra` YAML at the top level, one stream of unique prompts.
fn scenario(
    roles: &str,
    extra: &str,
    prompt: u32,
    output: u32,
    load: &str,
    end_s: f64,
) -> Scenario {
    let roles = if roles.is_empty() {
        String::new()
    } else {
        format!("roles: {roles}\n")
    };
    Scenario::from_yaml(
        &format!(
            "
name: pd-test
servers: 2
scrapeIntervalMs: 0
{roles}{extra}
streams:
  - kind: shared-prefix
    groups: 1
    promptsPerGroup: 1000000
    questionTokens: {prompt}
    outputTokens: {output}
    load: {load}
    endS: {end_s}
"
        ),
        "pd-test.yaml",
    )
    .unwrap()
}

fn go(s: &Scenario, policy: &str) -> RunResult {
    let opts = RunOptions {
        check_invariants: true,
        ..RunOptions::default()
    };
    run(s, &builtin_policy(policy).unwrap(), &sim_registry(), opts).unwrap()
}

#[test]
fn a_disaggregated_request_prefills_on_the_prefill_server_and_decodes_on_the_decode_server() {
    let s = scenario("[decode, prefill]", "", 3000, 20, "{ closed: 3 }", 2.0);
    let r = go(&s, "pd-always");
    assert!(r.records.len() > 10, "{}", r.records.len());
    assert_eq!(r.disaggregated, r.records.len() as u64);
    assert_eq!(r.prefill_fallbacks, 0);
    for rec in &r.records {
        assert_eq!(rec.outcome, Outcome::Completed, "{rec:?}");
        assert_eq!((rec.server, rec.prefill_server), (0, Some(1)), "{rec:?}");
        // Unique prompts: the decode server caches none of it, the whole prompt moves.
        assert_eq!(rec.transferred_tokens, 3000);
    }
    let n = r.records.len() as u64;
    let (decode, prefill) = (r.server_stats[0], r.server_stats[1]);
    // The prefill server computed every prompt and sampled one token per request only.
    assert_eq!(prefill.prompt_tokens, 3000 * n);
    assert_eq!(prefill.generated_tokens, n);
    assert_eq!(prefill.transferred_tokens, 0);
    // The decode server got every prompt's KV but its last token, and generated the answers.
    assert_eq!(decode.transferred_tokens, 2999 * n);
    assert_eq!(decode.generated_tokens, 20 * n);
    assert!(r.replicas.iter().all(|c| c.in_flight_at_end == 0));
}

#[test]
fn a_lone_disaggregated_request_has_the_ttft_of_the_cost_model() {
    let prompt = 4000;
    let s = scenario("[decode, prefill]", "", prompt, 10, "{ closed: 1 }", 0.001);
    let r = go(&s, "pd-always");
    assert_eq!(r.records.len(), 1);
    let rec = r.records[0];
    let cost = EngineConfig::h100_llama8b().cost;
    let p = u64::from(prompt);
    let prefill = cost.step_nanos(&BatchShape {
        requests: 1,
        prefill_tokens: p,
        prefill_pairs: p as f64 * (p as f64 / 2.0),
        ..Default::default()
    });
    let first_decode_step = cost.step_nanos(&BatchShape {
        requests: 1,
        prefill_tokens: 1,
        prefill_pairs: (p - 1) as f64 + 0.5,
        ..Default::default()
    });
    let transfer = s.kv_transfer.transfer_nanos(prompt);
    // Prefill server's frontend, the prefill, the decode server's frontend, the transfer,
    // the one-token step that samples the first token.
    let expected = cost.frontend_nanos(prompt)
        + prefill
        + cost.frontend_nanos(prompt)
        + transfer
        + first_decode_step;
    let ttft = rec.first_token.unwrap() - rec.arrival;
    assert_eq!(ttft, expected, "prefill {prefill}, transfer {transfer}");
    // 4000 tokens × 128 KiB at 25 GB/s, plus 1 ms.
    assert!((21_900_000..22_000_000).contains(&transfer), "{transfer}");
    // Aggregated, the same request skips the second frontend and the transfer, and samples
    // its first token at the end of its prefill.
    let agg = go(
        &scenario("", "", prompt, 10, "{ closed: 1 }", 0.001),
        "pd-always",
    );
    let agg_ttft = agg.records[0].first_token.unwrap() - agg.records[0].arrival;
    assert_eq!(agg.disaggregated, 0);
    assert_eq!(agg_ttft, cost.frontend_nanos(prompt) + prefill);
}

#[test]
fn without_roles_the_pd_policies_serve_exactly_as_the_aggregated_one() {
    let s = scenario("", "", 700, 30, "{ rate: 20 }", 2.0);
    let never = go(&s, "pd-never");
    assert!(never.records.len() > 20);
    for policy in ["pd-always", "pd-decider"] {
        let r = go(&s, policy);
        assert_eq!(r.disaggregated, 0, "{policy}");
        assert_eq!(r.records, never.records, "{policy}");
    }
    // On `both` servers the aggregated baseline uses every server, as on an unlabelled pool.
    let both = go(
        &scenario("[both, both]", "", 700, 30, "{ rate: 20 }", 2.0),
        "pd-never",
    );
    assert_eq!(both.records, never.records);
}

#[test]
fn the_decider_disaggregates_long_prompts_and_short_ones_while_the_prefill_server_is_free() {
    // Two 500-token prompts at a time never queue a step's budget (8192 tokens) on the
    // prefill server: every one is prefilled there (the busy case is the decider's unit
    // tests, crates/scorers/src/disagg/load_decider.rs).
    let short = go(
        &scenario("[decode, prefill]", "", 500, 20, "{ closed: 2 }", 1.0),
        "pd-decider",
    );
    assert!(!short.records.is_empty());
    assert_eq!(short.disaggregated, short.records.len() as u64);
    assert!(short.records.iter().all(|r| r.server == 0));
    let long = go(
        &scenario("[decode, prefill]", "", 3000, 20, "{ closed: 2 }", 1.0),
        "pd-decider",
    );
    assert_eq!(long.disaggregated, long.records.len() as u64);
}

#[test]
fn a_prefill_that_outlives_its_timeout_falls_back_to_aggregated_serving() {
    // An 8000-token prefill takes about 0.2 s on an H100: past a 50 ms prefill timeout.
    let s = scenario(
        "[decode, prefill]",
        "kvTransfer: { prefillTimeoutS: 0.05 }",
        8000,
        20,
        "{ closed: 2 }",
        2.0,
    );
    let r = go(&s, "pd-always");
    assert!(r.records.len() >= 4, "{}", r.records.len());
    assert_eq!(r.prefill_fallbacks, r.disaggregated);
    assert_eq!(r.disaggregated, r.records.len() as u64);
    for rec in &r.records {
        assert_eq!(rec.outcome, Outcome::Completed, "{rec:?}");
        assert_eq!((rec.server, rec.prefill_server), (0, None), "{rec:?}");
    }
    // The decode server computed every prompt itself; the prefill server finished none.
    assert_eq!(r.server_stats[0].transferred_tokens, 0);
    assert_eq!(
        r.server_stats[0].prompt_tokens,
        8000 * r.records.len() as u64
    );
    assert_eq!(r.server_stats[1].generated_tokens, 0);
    assert!(r.replicas.iter().all(|c| c.in_flight_at_end == 0));
}

#[test]
fn a_request_timing_out_during_its_prefill_leaves_nothing_behind() {
    let s = scenario(
        "[decode, prefill]",
        "requestTimeoutS: 0.1",
        8000,
        20,
        "{ closed: 1 }",
        0.5,
    );
    let r = go(&s, "pd-always");
    assert!(!r.records.is_empty());
    assert!(r.records.iter().all(|rec| rec.outcome == Outcome::TimedOut));
    assert!(r.replicas.iter().all(|c| c.in_flight_at_end == 0));
}

#[test]
fn roles_and_the_transfer_model_are_validated_with_their_line() {
    let bad_roles = Scenario::from_yaml(
        "name: x\nservers: 2\nroles: { prefill: 1 }\nstreams: []\n",
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        bad_roles.contains("s.yaml:3") && bad_roles.contains("1 roles for 2 servers"),
        "{bad_roles}"
    );
    let bad_link = Scenario::from_yaml(
        "name: x\nservers: 2\nkvTransfer: { bandwidthGBps: -1 }\nstreams: []\n",
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        bad_link.contains("s.yaml:3") && bad_link.contains("kvTransfer.bandwidthGBps"),
        "{bad_link}"
    );
    let s = builtin_scenario("pd-mixed").unwrap();
    assert!(s.roles.is_empty());
    assert_eq!(s.kv_transfer.bytes_per_token, 131_072);
}

#[test]
fn the_pd_study_runs_every_arm_and_is_deterministic() {
    let mut s = builtin_scenario("pd-mixed").unwrap();
    for stream in &mut s.streams {
        stream.end_s = 3.0;
    }
    let opts = PdOptions::default();
    let a = pd(std::slice::from_ref(&s), &sim_registry(), &opts).unwrap();
    assert_eq!(a.run_count, ARMS.len());
    let rows = &a.report.scenarios[0].rows;
    assert_eq!(rows.len(), ARMS.len());
    assert_eq!(rows[0].roles, ["both"; 4]);
    assert_eq!(rows[1].roles, ["decode", "decode", "decode", "prefill"]);
    assert_eq!(rows[0].disaggregated_share, 0.0);
    // Every request but those arriving before the prefill server's first scrape (the first
    // scrapes are staggered over the 50 ms interval: a server never scraped is no candidate).
    assert!(
        rows[1].disaggregated_share > 0.9,
        "{}",
        rows[1].disaggregated_share
    );
    // The decider disaggregates the 8k prompts, not the 500-token ones.
    assert!(rows[3].disaggregated_share > 0.0 && rows[3].disaggregated_share < 1.0);
    // The dual-role arm's prefill server is `prefill-decode`.
    assert_eq!(
        rows[5].roles,
        ["decode", "decode", "decode", "prefill-decode"]
    );
    assert_eq!(a.report.scenarios[0].decider.len(), 4);
    let b = pd(std::slice::from_ref(&s), &sim_registry(), &opts).unwrap();
    assert_eq!(
        serde_json::to_string(&a.report).unwrap(),
        serde_json::to_string(&b.report).unwrap()
    );
}

#[test]
fn a_prefill_the_engine_refuses_falls_back_and_the_request_is_not_lost() {
    // 100 blocks of 16 tokens: a 3000-token prompt can never fit, on either server. The
    // prefill server refuses the job, the request falls back to its decode server, which
    // refuses it too: every request ends dropped, none lost or left in flight.
    let s = scenario(
        "[decode, prefill]",
        "engine: { blockSize: 16, numGpuBlocks: 100 }",
        3000,
        20,
        "{ rate: 20 }",
        1.0,
    );
    let r = go(&s, "pd-always");
    assert!(r.records.len() >= 10, "{}", r.records.len());
    assert_eq!(r.disaggregated, r.records.len() as u64);
    assert_eq!(r.prefill_fallbacks, r.disaggregated);
    for rec in &r.records {
        assert_eq!(rec.outcome, Outcome::Dropped, "{rec:?}");
        assert_eq!(rec.prefill_server, None, "{rec:?}");
    }
    assert_eq!(r.server_stats[1].prompt_tokens, 0);
    assert!(r.replicas.iter().all(|c| c.in_flight_at_end == 0));
}

#[test]
fn on_dual_role_servers_decodes_keep_off_the_servers_prefilling_for_others() {
    // pd-mixed on 2PD:2D (the `decider 2PD:2D` arm), seed 42: the two prefill-decode servers
    // prefill the 8k prompts for the decode servers; with `prefill-duty-scorer` in the decode
    // profile the chat requests decode on the two decode servers, so their time per token is
    // that of the fixed 2P:2D split, not the stalls of the servers prefilling.
    let mixed = builtin_scenario("pd-mixed").unwrap();
    let opts = PdOptions::default();
    let study = pd(std::slice::from_ref(&mixed), &sim_registry(), &opts).unwrap();
    let rows = &study.report.scenarios[0].rows;
    let (always, dual) = (&rows[2], &rows[6]);
    assert_eq!(always.label, "always 2P:2D");
    assert_eq!(dual.label, "decider 2PD:2D");
    assert!(
        dual.tpot_p99_ms <= 1.05 * always.tpot_p99_ms,
        "{} vs {}",
        dual.tpot_p99_ms,
        always.tpot_p99_ms
    );
    // On decode-heavy traffic (short prompts only) the decider sends prompts to a dual-role
    // server while one has its prefill queue free, and the time per token stays that of
    // aggregated serving.
    let heavy = builtin_scenario("pd-decode-heavy").unwrap();
    let study = pd(std::slice::from_ref(&heavy), &sim_registry(), &opts).unwrap();
    let rows = &study.report.scenarios[0].rows;
    assert!(rows[6].disaggregated_share > 0.0);
    assert!(rows[6].tpot_p99_ms <= 1.05 * rows[0].tpot_p99_ms);
    assert!(rows[6].slo_attainment >= rows[0].slo_attainment - 0.02);
}

#[test]
fn with_one_prefill_server_behind_long_prompts_stay_where_they_decode() {
    // pd-long-prompt on 1P:3D, seed 42: 3.5 long prompts a second are more than one prefill
    // server prefills, so "always" queues them there (under half meet TTFT <= 1.5 s). The
    // decider disaggregates a long prompt only while the prefill server has at most
    // `longQueueTokens` pending beyond its decode server: the rest are prefilled where they
    // decode, and its attainment is within 2 points of aggregated serving's.
    let long = builtin_scenario("pd-long-prompt").unwrap();
    let study = pd(
        std::slice::from_ref(&long),
        &sim_registry(),
        &PdOptions::default(),
    )
    .unwrap();
    let rows = &study.report.scenarios[0].rows;
    let (never, always, decider) = (&rows[0], &rows[1], &rows[3]);
    assert_eq!(always.label, "always 1P:3D");
    assert_eq!(decider.label, "decider 1P:3D");
    assert!(always.slo_attainment < 0.6, "{}", always.slo_attainment);
    assert!(
        decider.disaggregated_share > 0.3 && decider.disaggregated_share < 1.0,
        "{}",
        decider.disaggregated_share
    );
    assert!(
        decider.slo_attainment >= never.slo_attainment - 0.02,
        "{} vs {}",
        decider.slo_attainment,
        never.slo_attainment
    );
}
