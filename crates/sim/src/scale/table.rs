//! The scale study as a text table: per scenario, one line per (policy, pool size), with the
//! pick cost's growth over the smallest pool.

use super::{ScaleReport, ScaleRow};

/// The report as Markdown tables, one per scenario.
pub fn table(report: &ScaleReport) -> String {
    let mut out = String::new();
    let mut policies: Vec<&str> = Vec::new();
    for r in &report.rows {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let smallest = report.sizes.iter().copied().min().unwrap_or(1);
    for scenario in &report.scenarios {
        let ceilings: Vec<String> = report
            .sizes
            .iter()
            .filter_map(|&n| {
                let r = report
                    .rows
                    .iter()
                    .find(|r| &r.scenario == scenario && r.servers == n)?;
                Some(format!("{:.1}%", r.cache_hit_ceiling * 100.0))
            })
            .collect();
        out.push_str(&format!(
            "\n## {scenario} at {} servers (infinite-cache hit ceiling {})\n\n",
            join(&report.sizes),
            ceilings.join(" / ")
        ));
        out.push_str("| policy | servers | TTFT p90 (ms) | out tok/s per server | cache hit | pick mean (µs) | pick p50 | pick p99 | pick mean vs smallest | dropped/timed out |\n");
        out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for policy in &policies {
            let base = report.row(scenario, smallest, policy);
            for &size in &report.sizes {
                let Some(r) = report.row(scenario, size, policy) else {
                    continue;
                };
                out.push_str(&line(r, base));
            }
        }
    }
    out
}

fn line(r: &ScaleRow, base: Option<&ScaleRow>) -> String {
    let growth = base.filter(|b| b.pick.mean_us > 0.0).map_or_else(
        || "-".into(),
        |b| format!("{:.1}×", r.pick.mean_us / b.pick.mean_us),
    );
    format!(
        "| {} | {} | {:.0} | {:.0} | {:.1}% | {:.1} | {:.1} | {:.1} | {growth} | {}/{} |\n",
        r.policy,
        r.servers,
        r.ttft_p90_ms,
        r.output_tokens_per_s_per_server,
        r.cache_hit_rate * 100.0,
        r.pick.mean_us,
        r.pick.p50_us,
        r.pick.p99_us,
        r.dropped,
        r.timed_out,
    )
}

fn join(sizes: &[u32]) -> String {
    let names: Vec<String> = sizes.iter().map(u32::to_string).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_a_list() {
        assert_eq!(super::join(&[8, 32, 128]), "8, 32 and 128");
        assert_eq!(super::join(&[8]), "8");
    }
}
