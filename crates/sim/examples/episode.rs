//! Prints one run's timeline: per-server load (running + waiting) every second, with the
//! adaptive controller's smoothed signal, mode and weights when the policy has them.
//!
//! ```text
//! cargo run --release -p shepherd-sim --example episode -- hot-prefix adaptive
//! cargo run --release -p shepherd-sim --example episode -- hot-prefix my-config.yaml
//! ```
#![forbid(unsafe_code)]

use std::process::ExitCode;

use shepherd_sim::SimError;
use shepherd_sim::policy::{policy_by_name_or_path, sim_registry};
use shepherd_sim::report::summarize;
use shepherd_sim::runner::{RunOptions, run};
use shepherd_sim::workload::scenario_by_name_or_path;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenario = args.first().map_or("hot-prefix", String::as_str);
    let policy = args.get(1).map_or("adaptive", String::as_str);
    match print_episode(scenario, policy) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("episode: {e}");
            ExitCode::from(2)
        }
    }
}

fn print_episode(scenario: &str, policy: &str) -> Result<(), SimError> {
    let scenario = scenario_by_name_or_path(scenario)?;
    let policy = policy_by_name_or_path(policy)?;
    let result = run(&scenario, &policy, &sim_registry(), RunOptions::default())?;
    println!("scorers: {}", result.scorer_names.join(", "));
    println!(
        "  t(s)  load per server                          | nCV(p) nCV(k) smoothed mode   weights"
    );
    let mut next_second = 0u64;
    for (time, loads) in &result.load_series {
        if *time < next_second * 1_000_000_000 {
            continue;
        }
        next_second = time / 1_000_000_000 + 1;
        let loads: Vec<String> = loads.iter().map(|l| format!("{l:>4}")).collect();
        let adaptive = result
            .adaptive_series
            .iter()
            .take_while(|a| a.time <= *time)
            .last()
            .map(|a| {
                let w: Vec<String> = a.weights.iter().map(|w| format!("{w:.2}")).collect();
                format!(
                    "| {:.2} {:.2} {:.3}    {:<6} {}",
                    a.ncv_load,
                    a.ncv_kv,
                    a.smoothed,
                    a.mode,
                    w.join(" : ")
                )
            })
            .unwrap_or_default();
        println!("{:>6.1} {} {adaptive}", *time as f64 / 1e9, loads.join(""));
    }
    if std::env::var_os("EPISODE_SLOWEST").is_some() {
        let mut slow: Vec<_> = result
            .records
            .iter()
            .filter_map(|r| Some((r.first_token? - r.arrival, r)))
            .collect();
        slow.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
        for (ttft, r) in slow.iter().take(30) {
            println!(
                "slow: stream {} server {} arrival {:.3} s TTFT {:.0} ms cached {}/{}",
                r.stream,
                r.server,
                r.arrival as f64 / 1e9,
                *ttft as f64 / 1e6,
                r.cached_tokens,
                r.prompt_tokens
            );
        }
    }
    let s = summarize(&scenario, &result, false);
    println!(
        "TTFT p50/p90/p99 {:.0}/{:.0}/{:.0} ms, {:.0} output tok/s, cache hit {:.1}%",
        s.ttft_p50_ms,
        s.ttft_p90_ms,
        s.ttft_p99_ms,
        s.output_tokens_per_s,
        s.cache_hit_rate * 100.0
    );
    for st in &s.streams {
        println!(
            "  {:<12} {:>5} done, TTFT p50/p90/p99 {:.0}/{:.0}/{:.0} ms",
            st.stream, st.completed, st.ttft_p50_ms, st.ttft_p90_ms, st.ttft_p99_ms
        );
    }
    Ok(())
}
