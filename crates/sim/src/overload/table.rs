//! The `overload` report as Markdown tables.

use super::OverloadReport;

fn class_name(priority: i32) -> String {
    if priority < 0 {
        format!("{priority} (sheddable)")
    } else {
        priority.to_string()
    }
}

fn tenant_name(t: &str) -> &str {
    if t.is_empty() { "(default flow)" } else { t }
}

/// The report as Markdown: per run and priority class, per run and tenant, then the targets.
pub fn table(report: &OverloadReport) -> String {
    let steady = report.runs.first().map_or(0.0, |r| r.steady_from_s);
    let mut out = format!(
        "\n## {} — {} (unloaded = the same streams at {}x the rate; \"steady\" = arrivals from {steady} s on)\n\n",
        report.scenario, report.description, report.unloaded_scale
    );
    out.push_str("| run | priority | arrived | completed | shed (429) | expired (503) | timed out | TTFT p50 | p99 | p99 steady (ms) | E2E p99 (s) | queue wait p99 (ms) |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for run in &report.runs {
        for c in &run.classes {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} |\n",
                run.label,
                class_name(c.priority),
                c.arrived,
                c.completed,
                c.shed,
                c.expired,
                c.timed_out,
                c.ttft_p50_ms,
                c.ttft_p99_ms,
                c.ttft_p99_steady_ms,
                c.e2e_p99_ms / 1000.0,
                c.queue_wait_p99_ms,
            ));
        }
    }
    out.push_str("\n| run | tenant | arrived (share) | completed (share) | TTFT p99 (ms) | priority-0 TTFT p99 (ms) | out tok/s (run) |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|\n");
    for run in &report.runs {
        for t in &run.tenants {
            out.push_str(&format!(
                "| {} | {} | {} ({:.1}%) | {} ({:.1}%) | {:.0} | {:.0} | {:.0} |\n",
                run.label,
                tenant_name(&t.tenant),
                t.arrived,
                t.arrived_share * 100.0,
                t.completed,
                t.completed_share * 100.0,
                t.ttft_p99_ms,
                t.ttft_p99_priority0_ms,
                run.output_tokens_per_s,
            ));
        }
    }
    let t = &report.targets;
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    out.push_str(&format!(
        "\nTargets (flow control run): priority-0 TTFT p99 {:.0} ms = {:.2}x unloaded ({:.0} ms; goal <= 2x) with {} sheddable requests shed or expired: {} \
         (steady state: {:.2}x). Light tenant ({}) TTFT p99 / heavy ({}): {:.2}x all classes, {:.2}x priority 0 (goal <= 1.5x): {}.\n",
        t.priority0_ttft_p99_ms,
        t.priority0_ratio,
        t.priority0_unloaded_ttft_p99_ms,
        t.sheddable_shed,
        verdict(t.priority0_met),
        t.priority0_steady_ratio,
        tenant_name(&t.light_tenant),
        tenant_name(&t.heavy_tenant),
        t.tenant_ratio,
        t.tenant_ratio_priority0,
        verdict(t.tenant_met),
    ));
    out
}
