//! Why requests missed their latency objectives in one run: each request of a stream with
//! objectives (`slo:` in the scenario), classified by what most likely cost it.
//!
//! - `cold`: less than half its prompt was served from the server's prefix cache;
//! - `behind another stream`: a request of another stream was on the same server between
//!   this one's dispatch and its first step (sent earlier, first token later): typically a
//!   long prefill it waited for;
//! - `queued`: more than 20 ms from dispatch to its first step for another reason;
//! - `TPOT only`: the first token was in time, the later ones were not.
//!
//! ```text
//! cargo run --release -p shepherd-sim --example slo_misses -- slo-classes predicted-latency [seed]
//! cargo run --release -p shepherd-sim --example slo_misses -- slo-classes my-policy.yaml 43
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::process::ExitCode;

use shepherd_sim::SimError;
use shepherd_sim::policy::{policy_by_name_or_path, sim_registry};
use shepherd_sim::report::attainment::meets;
use shepherd_sim::runner::{Outcome, RequestRecord, RunOptions, run};
use shepherd_sim::workload::scenario_by_name_or_path;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenario = args.first().map_or("slo-classes", String::as_str);
    let policy = args.get(1).map_or("predicted-latency", String::as_str);
    let seed = match args.get(2).map(|s| s.parse::<u64>()) {
        None => 42,
        Some(Ok(seed)) => seed,
        Some(Err(e)) => {
            eprintln!("slo_misses: the seed must be a number: {e}");
            return ExitCode::from(2);
        }
    };
    match report(scenario, policy, seed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slo_misses: {e}");
            ExitCode::from(2)
        }
    }
}

/// Milliseconds from `from` to `to`, both in ns.
fn ms(from: u64, to: u64) -> f64 {
    to.saturating_sub(from) as f64 / 1e6
}

fn report(scenario: &str, policy: &str, seed: u64) -> Result<(), SimError> {
    let scenario = scenario_by_name_or_path(scenario)?;
    let policy = policy_by_name_or_path(policy)?;
    let opts = RunOptions {
        seed,
        ..RunOptions::default()
    };
    let result = run(&scenario, &policy, &sim_registry(), opts)?;
    let mut by_server: BTreeMap<u32, Vec<&RequestRecord>> = BTreeMap::new();
    for r in &result.records {
        by_server.entry(r.server).or_default().push(r);
    }
    println!("{} under {}, seed {seed}", scenario.name, policy.name);
    for (s, stream) in scenario.streams.iter().enumerate() {
        let Some(slo) = stream.spec.slo else { continue };
        let mut counts = BTreeMap::<&str, u32>::new();
        let mut total = 0u32;
        for r in result.records.iter().filter(|r| r.stream as usize == s) {
            total += 1;
            let class = if meets(r, &slo) {
                "met"
            } else {
                miss_reason(
                    r,
                    &slo,
                    by_server.get(&r.server).map_or(&[][..], Vec::as_slice),
                )
            };
            *counts.entry(class).or_default() += 1;
        }
        println!("  {} ({total} requests)", stream.name);
        for (class, n) in counts {
            let share = 100.0 * f64::from(n) / f64::from(total.max(1));
            println!("    {class:<40} {n:>6}  {share:5.1} %");
        }
    }
    Ok(())
}

/// What most likely made `r` miss `slo` (see the module docs); `same_server` holds every
/// request of `r`'s server.
fn miss_reason(
    r: &RequestRecord,
    slo: &shepherd_sim::workload::SloSpec,
    same_server: &[&RequestRecord],
) -> &'static str {
    let (Outcome::Completed, Some(first_token), Some(scheduled), Some(dispatched)) =
        (r.outcome, r.first_token, r.first_scheduled, r.dispatched)
    else {
        return "not completed";
    };
    let ttft_late = slo
        .ttft_ms
        .is_some_and(|limit| ms(r.arrival, first_token) > limit);
    if !ttft_late {
        return "TPOT only";
    }
    let cold = u64::from(r.cached_tokens) * 2 < u64::from(r.prompt_tokens);
    let behind = same_server.iter().any(|o| {
        o.stream != r.stream
            && o.dispatched.is_some_and(|d| d < scheduled)
            && o.first_token.is_some_and(|f| f > dispatched)
    });
    match (cold, behind) {
        (true, true) => "TTFT: cold, behind another stream",
        (true, false) => "TTFT: cold",
        (false, true) => "TTFT: cached, behind another stream",
        (false, false) if ms(dispatched, scheduled) > 20.0 => "TTFT: cached, queued",
        (false, false) => "TTFT: cached, other",
    }
}
