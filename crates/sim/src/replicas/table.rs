//! The replica study as Markdown tables: per scenario, one line per (policy, spread, R), with
//! the hit rate and TTFT p90 relative to R = 1 without coordination.

use super::{ReplicaReport, ReplicaRow};

/// The report as Markdown tables, one per scenario.
pub fn table(report: &ReplicaReport) -> String {
    let mut out = String::new();
    for (i, scenario) in report.scenarios.iter().enumerate() {
        let ceiling = report.ceilings.get(i).copied().unwrap_or(0.0);
        out.push_str(&format!(
            "\n## {scenario} (infinite-cache hit ceiling {:.1}%)\n\n",
            ceiling * 100.0
        ));
        out.push_str("| policy | coordination | spread | R | cache hit | hit vs R=1 | TTFT p90 (ms) | TTFT p90 vs R=1 | out tok/s | load CV | requests/server CV | dropped/timed out |\n");
        out.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in report.rows.iter().filter(|r| &r.scenario == scenario) {
            out.push_str(&line(r));
        }
    }
    out
}

fn line(r: &ReplicaRow) -> String {
    format!(
        "| {} | {} | {} | {} | {:.1}% | {:.3} | {:.0} | {:.2}× | {:.0} | {:.3} | {:.3} | {} |\n",
        r.policy,
        r.coordination,
        r.spread,
        r.replicas,
        r.cache_hit_rate * 100.0,
        r.hit_rate_vs_r1,
        r.ttft_p90_ms,
        r.ttft_p90_vs_r1,
        r.output_tokens_per_s,
        r.load_imbalance_cv,
        r.server_requests_cv,
        r.dropped_or_timed_out,
    )
}
